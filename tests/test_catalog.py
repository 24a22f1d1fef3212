"""catalog.json: one parser in builder/core/catalog.py for the explorer and the Python reader, and the map's
preview (app/js/catalog.js, before Python loads) accepting the same catalogs and picking the same store."""
from __future__ import annotations

import base64
import json

import pytest

from builder.core.catalog import CATALOG_JSON_MAX, ORIGINS_MAX, STORES_MAX, TEXT_MAX, CatalogError, parse_catalog
from builder.reader import open_store


def doc(stores=None, **more) -> bytes:
    return json.dumps({"stores": [{"year": 2023, "url": "2023.zarr"}, {"year": 2024, "url": "2024.zarr"}]
                       if stores is None else stores, **more}).encode()


def padded(size: int) -> bytes:
    """A valid catalog of exactly `size` bytes (an unknown key's string fills it)."""
    base = doc(pad="")
    return doc(pad="x" * (size - len(base)))


def nested(depth: int) -> bytes:
    """A valid catalog whose deepest value (a number) sits at `depth` (the root object is depth 1)."""
    return doc(deep=json.loads("[" * (depth - 2) + "0" + "]" * (depth - 2)))


# (name, the catalog's bytes, the year asked for)
CASES = [
    ("two years, 2023 asked", doc(), 2023),
    ("two years, none asked", doc(), None),
    ("a year not listed", doc(), 1999),
    ("not an object", b"[1, 2]", None),
    ("null", b"null", None),
    ("no stores", b"{}", None),
    ("empty stores", doc([]), None),
    ("stores an object", doc({"2024": "x"}), None),
    ("store not an object", doc(["2024.zarr"]), None),
    ("no url", doc([{"year": 2024}]), None),
    ("url a number", doc([{"year": 2024, "url": 7}]), None),
    ("url at the limit", doc([{"year": 2024, "url": "u" * TEXT_MAX}]), None),
    ("url over the limit", doc([{"year": 2024, "url": "u" * (TEXT_MAX + 1)}]), None),
    ("url of astral characters", doc([{"year": 2024, "url": "\U0001F30D" * (TEXT_MAX * 3 // 4)}]), None),
    ("url with a newline", doc([{"year": 2024, "url": "/x\nerror: y"}]), None),
    ("year a string", doc([{"year": "2024", "url": "a"}]), None),
    ("year a bool", doc([{"year": True, "url": "a"}]), None),
    ("year 2024.0", b'{"stores": [{"year": 2024.0, "url": "a"}, {"year": 2e3, "url": "b"}]}', 2000),
    ("year 2024.5", doc([{"year": 2024.5, "url": "a"}]), None),
    ("year 0", doc([{"year": 0, "url": "a"}]), None),
    ("year 10000", doc([{"year": 10000, "url": "a"}]), None),
    ("year 1e400", b'{"stores": [{"year": 1e400, "url": "a"}]}', None),
    ("a year twice", doc([{"year": 2024, "url": "a"}, {"year": 2024, "url": "b"}]), 2024),
    ("label a number", doc([{"year": 2024, "url": "a", "label": 7}]), None),
    ("label a list", doc([{"year": 2024, "url": "a", "label": ["x"]}]), None),
    ("label null", doc([{"year": 2024, "url": "a", "label": None}]), None),
    ("label over the limit", doc([{"year": 2024, "url": "a", "label": "l" * (TEXT_MAX + 1)}]), None),
    ("truth given", doc([{"year": 2024, "url": "a", "truth": "truth/2024.zarr"}]), None),
    ("truth null", doc([{"year": 2024, "url": "a", "truth": None}]), None),
    ("truth a number", doc([{"year": 2024, "url": "a", "truth": 1}]), None),
    ("truth an object", doc([{"year": 2024, "url": "a", "truth": {"url": "x"}}]), None),
    ("truth over the limit", doc([{"year": 2024, "url": "a", "truth": "t" * (TEXT_MAX + 1)}]), None),
    ("multiyear a list", doc(multiyear=["x"]), None),
    ("multiyear null", doc(multiyear=None), None),
    ("tiles_url a number", doc(tiles_url=5), None),
    ("embed_origins a string", doc(embed_origins="https://a.example"), None),
    ("embed_origins at the limit", doc(embed_origins=["https://a.example"] * ORIGINS_MAX), None),
    ("embed_origins over the limit", doc(embed_origins=["https://a.example"] * (ORIGINS_MAX + 1)), None),
    ("stores at the limit", doc([{"year": 1 + i, "url": f"{i}.zarr"} for i in range(STORES_MAX)]), 5),
    ("stores over the limit", doc([{"year": 1 + i, "url": f"{i}.zarr"} for i in range(STORES_MAX + 1)]), None),
    ("NaN elsewhere", b'{"stores": [{"year": 2024, "url": "a"}], "x": NaN}', None),
    ("a 400-digit integer elsewhere", b'{"stores": [{"year": 2024, "url": "a"}], "x": 1' + b"0" * 400 + b"}", None),
    ("depth at the limit", nested(64), None),
    ("depth over the limit", nested(65), None),
    ("size at the limit", padded(CATALOG_JSON_MAX), None),
    ("size over the limit", padded(CATALOG_JSON_MAX + 1), None),
    ("invalid UTF-8", doc(x="\u00e9").replace("\\u00e9".encode(), b"\xff"), None),
    ("a byte order mark", b"\xef\xbb\xbf" + doc(), None),
    ("not JSON", b"{ this is not json", None),
]


def python_outcome(raw: bytes, year):
    try:
        cat = parse_catalog(raw, "catalog")
    except CatalogError:
        return {"ok": False}
    pick = cat.pick(year)
    return {"ok": True, "n": len(cat.stores), "year": pick.year, "url": pick.url, "truth": pick.truth}


JS_OUTCOMES = """async (cases) => {
    const m = await import(new URL("vendor/tessera.mjs", location.href).href);
    return cases.map(([b64, year]) => {
        const raw = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        try {
            const cat = m.readCatalog(raw, "catalog");
            const pick = m.pickStore(cat, year);
            return {ok: true, n: cat.stores.length, year: pick.year, url: pick.url, truth: pick.truth};
        } catch (e) {
            return {ok: false, kind: e.kind};
        }
    });
}"""


def test_the_preview_and_python_accept_the_same_catalogs_and_pick_the_same_store(page, server):
    page.goto(server + "app.css")  # any page of the site's origin, to import its bundle from
    got = page.evaluate(JS_OUTCOMES, [[base64.b64encode(raw).decode(), year] for _, raw, year in CASES])
    for (name, raw, year), js in zip(CASES, got):
        want = python_outcome(raw, year)
        if not js["ok"]:
            assert js["kind"] == "invalid", (name, js)  # refused as data, not by a TypeError
            del js["kind"]
        assert js == want, name
    accepted = {name for (name, _, _), js in zip(CASES, got) if js["ok"]}
    assert accepted == {"two years, 2023 asked", "two years, none asked", "a year not listed", "url at the limit",
                        "url of astral characters", "url with a newline", "year 2024.0", "label a number",
                        "truth given", "truth null",
                        "multiyear null", "embed_origins at the limit", "stores at the limit", "depth at the limit",
                        "size at the limit"}


@pytest.mark.parametrize("raw,want", [
    (b"[]", "catalog: not a JSON object"),
    (doc([]), 'catalog: expected an object with a non-empty "stores" list'),
    (doc([{"year": 2024}]), "catalog: store 0 has no url"),
    (doc([{"year": "2024", "url": "a.zarr"}]), "catalog: store 0 has no integer year in 1..9999"),
    (doc([{"year": 2024.5, "url": "a.zarr"}]), "catalog: store 0 has no integer year in 1..9999"),
    (doc([{"year": 2024, "url": "a"}, {"year": 2024.0, "url": "b"}]), "catalog: store 1: year 2024 is listed twice"),
    (doc(multiyear=["x"]), "catalog: multiyear is not a string"),
    (doc([{"year": 2024, "url": "a", "truth": 1}]), "catalog: store 0: truth is not a string"),
    (doc([{"year": 2024, "url": "/x\nerror: " + "y" * 10_000}]),
     "catalog: store 0: url '/x\\nerror: " + "y" * 68 + " is longer than 2048 characters"),
])
def test_a_bad_catalog_is_one_line_naming_it(raw, want):
    with pytest.raises(CatalogError) as e:
        parse_catalog(raw, "catalog")
    assert str(e.value) == want


def test_labels_default_to_the_year_and_the_last_store_is_the_default():
    cat = parse_catalog(doc([{"year": 2023, "url": "a.zarr"}, {"year": 2024, "url": "b", "label": 7}],
                            multiyear="years.json"))
    assert [s.label for s in cat.stores] == ["2023", "7"] and cat.multiyear == "years.json"
    assert cat.pick(None).url == "b" and cat.pick(2023).url == "a.zarr"


@pytest.mark.parametrize("stores,want", [
    ([{"year": 2024.5, "url": "2024.zarr"}], "no integer year"),  # the reader's int() had read it as 2024
    ([{"year": 2024, "url": "2024.zarr"}, {"year": 2024, "url": "other.zarr"}], "listed twice"),  # one had won
])
def test_the_python_reader_refuses_what_the_core_refuses(tmp_path, stores, want):
    (tmp_path / "catalog.json").write_text(json.dumps({"stores": stores}))
    with pytest.raises(ValueError, match=want) as e:
        open_store(str(tmp_path / "catalog.json"))
    assert str(e.value).startswith(f"{tmp_path / 'catalog.json'}: ")
