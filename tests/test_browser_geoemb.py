"""The explorer in real Chromium on a geoemb: store (the official multi-year layout), served with Range on 127.0.0.1.

The store is written by tests/geoemb_writer.py (zarr-python, not the builder) from the two-year demo tiles;
expected vectors are the tiles' own int8 * scale, similarity is recomputed with numpy from zarr-python reads.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from browser_util import all_text, model_data, wait_state, wait_text
from distributions import write_geoemb_v2
from geoemb_writer import YEARS, northern, read_tiles, tile_points, write_geoemb

pytestmark = pytest.mark.browser
REL = "data/geoemb/geoemb.zarr"


@pytest.fixture(scope="module")
def served(site, geoemb_store, tiles2):
    """The geoemb: store (and the same store without consolidated metadata, and a store of neither layout)
    inside the served site."""
    root = site / "data" / "geoemb"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(geoemb_store, root / "geoemb.zarr")
    write_geoemb(tiles2, YEARS, root / "plain.zarr", consolidated=False)
    (root / "other.zarr").mkdir()
    (root / "other.zarr" / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {
        "zarr_conventions": [{"uuid": "0123", "name": "other:", "schema_url": "x", "spec_url": "y"}]}}))
    return root


def points_valid_in_both_years(tiles2, tile_name: str, n: int = 3) -> list[dict]:
    """Pixels of one tile with data in both years: lon/lat of the pixel centre, the tile's own vector per year,
    and the zone/e/n (northern CRS, as geoemb: lays zones out)."""
    tiles = {y: next(t for t in read_tiles(tiles2, y) if t["name"] == tile_name) for y in YEARS}
    ok = np.logical_and.reduce([t["land"] & np.isfinite(t["scales"]) for t in tiles.values()])
    cand = np.argwhere(ok)
    t0 = tiles[YEARS[0]]
    to_ll = Transformer.from_crs(t0["epsg"], 4326, always_xy=True)
    zone, n_north = northern(t0)
    out = []
    for i, j in cand[np.linspace(len(cand) // 4, 3 * len(cand) // 4, n).astype(int)]:
        e, nn = t0["e0"] + (j + 0.5) * 10, t0["n0"] - (i + 0.5) * 10
        lon, lat = to_ll.transform(e, nn)
        out.append({"lon": lon, "lat": lat, "zone": f"utm{zone:02d}", "e": e, "n": nn - t0["n0"] + n_north,
                    "vec": {y: t["q"][i, j].astype(np.float32) * np.float32(t["scales"][i, j]) for y, t in tiles.items()}})
    return out


def rowcol(store, p) -> tuple[int, int]:
    t = zarr.open_group(str(store / p["zone"]), mode="r").attrs["spatial:transform"]
    return int((t[5] - p["n"]) // 10), int((p["e"] - t[2]) // 10)


def select(page, lon, lat) -> dict:
    return page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])


def spectrum(page, label_part: str) -> np.ndarray:
    page.wait_for_function("""(part) => {
        const d = Bokeh.documents[0].get_model_by_name('spectrum-source').data;
        const labels = d instanceof Map ? d.get('label') : d.label;
        return labels.length === 1 && labels[0].includes(part); }""", arg=label_part, timeout=30_000)
    return np.array(model_data(page, "spectrum-source")["ys"][0])


def store_log(page, rel: str = REL) -> list[dict]:
    return [e for e in page.evaluate("window.tesseraWorker.stats().then((s) => s.log)") if (e["source"] or "").endswith(rel)]


def open_app(page, url: str) -> str:
    page.goto(url)
    return wait_state(page)


def test_pixels_no_data_years_plot_and_year_switch_from_one_store(page, server, served, tiles2):
    store = served / "geoemb.zarr"
    assert open_app(page, server + "index.html?store=" + REL) == "ready"
    wait_text(page, "geoemb: store, years 2023, 2024")
    options = page.get_by_label("Year", exact=True).evaluate("(s) => [Array.from(s.options, (o) => o.textContent), s.value]")
    assert options[0] == ["2023", "2024"] and "false colour" in all_text(page)

    # valid pixels of 2024 in every zone (the Cape: southern data at negative y of EPSG:32734)
    pts = tile_points(tiles2, 2024, "geoemb:")
    for p in [p for p in pts if p["status"] == "valid"][::3]:
        got = select(page, p["lon"], p["lat"])
        r, c = rowcol(store, p)
        assert got["valid"] is True and (got["zone"], got["row"], got["col"]) == (p["zone"], r, c)
        np.testing.assert_array_equal(spectrum(page, f"{p['zone']} r{r} c{c}"), p["vector"].astype(np.float64))
    # no data: NaN scale (water) and +inf (land without data) are shown as such, nothing plotted
    for status, scale, words in (("water", np.nan, "water (its scale is NaN)"),
                                 ("nodata", np.inf, "no data yet (its scale is +inf)")):
        p = next(p for p in pts if p["status"] == status)
        got = select(page, p["lon"], p["lat"])
        assert got["valid"] is False and (np.isnan(got["scale"]) if status == "water" else got["scale"] == scale)
        assert model_data(page, "spectrum-source")["ys"] == []
        wait_text(page, words)

    # one range request per array and year once the shard indexes are cached (the years plot reads every year)
    cands = points_valid_in_both_years(tiles2, "grid_-0.05_50.85", 12)
    p1 = cands[0]
    r1, c1 = rowcol(store, p1)
    same_shard_other_chunk = lambda rc: (rc[0] // 256, rc[1] // 256) == (r1 // 256, c1 // 256) and \
        (rc[0] // 32, rc[1] // 32) != (r1 // 32, c1 // 32)
    p2 = next(q for q in cands if same_shard_other_chunk(rowcol(store, q)))
    r2, c2 = rowcol(store, p2)
    select(page, p1["lon"], p1["lat"])
    # The worker's range cache (app/js/ranges.js), which Python's reads go through, may hold p2's chunks
    # already (the view's false-colour layer reads inner chunks): forget its bytes, so the count is that of a chunk not read before; zarrita
    # keeps the shard indexes it decoded.
    page.evaluate("Promise.all([window.tesseraWorker.forgetBytes(), window.tesseraWorker.resetStats()])")
    select(page, p2["lon"], p2["lat"])
    log = [e for e in store_log(page) if "/utm30/embeddings/" in e["url"] or "/utm30/scales/" in e["url"]]
    emb = [e for e in log if "/embeddings/" in e["url"]]
    summary = [(e["url"].split("geoemb.zarr/")[-1], e["range"], e["status"], e["bytes"]) for e in log]
    assert len(emb) == len(YEARS) and len(log) == 2 * len(YEARS), summary
    assert sorted(e["url"].split("/embeddings/c/")[1].split("/")[0] for e in emb) == ["0", "1"]  # each time index
    assert all(e["range"] and e["range"] != "bytes=0-" and e["status"] == 206 for e in log), summary
    assert all(e["bytes"] <= 32 * 32 * 128 + 64 for e in emb), summary  # at most one 32x32x128 inner chunk
    np.testing.assert_array_equal(spectrum(page, f"utm30 r{r2} c{c2}"), p2["vec"][2024].astype(np.float64))

    # the selected pixel across years, from the same store's time axis
    page.wait_for_function("""() => { const d = Bokeh.documents[0].get_model_by_name('years-source').data;
        return (d instanceof Map ? d.get('ys') : d.ys).length === 2; }""", timeout=30_000)
    years = model_data(page, "years-source")
    for got, y in zip(years["ys"], YEARS):
        np.testing.assert_array_equal(np.array(got), p2["vec"][y].astype(np.float64))
    v0, v1 = p2["vec"][2023], p2["vec"][2024]
    cos = float(np.dot(v0, v1) / (np.linalg.norm(v0) * np.linalg.norm(v1)))
    assert model_data(page, "change-source")["cosine"][0] == pytest.approx(cos, abs=1e-6)

    # the year switch: another time index of the same arrays; the pixel was read at every year already
    page.evaluate("window.tesseraWorker.resetStats()")
    page.get_by_label("Year", exact=True).select_option("2023")
    wait_text(page, "year 2023")
    np.testing.assert_array_equal(spectrum(page, f"utm30 r{r2} c{c2}"), v0.astype(np.float64))
    urls = [e["url"] for e in page.evaluate("window.tesseraWorker.stats().then((s) => s.log)")]
    assert not [u for u in urls if u.endswith("zarr.json") or "/embeddings/" in u or "/scales/" in u], urls
    page.wait_for_function("location.hash.includes('year=2023')", timeout=30_000)  # the URL follows the paint


def test_similarity_and_false_colour_preview(page, server, served, tiles2):
    store = served / "geoemb.zarr"
    p = points_valid_in_both_years(tiles2, "grid_-0.05_50.85", 3)[2]
    row, col = rowcol(store, p)
    assert open_app(page, server + "index.html?store=" + REL + "#year=2024") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 2000)", [p["lon"], p["lat"]])
    # the base map at 2.6 m per screen pixel: the centre pixel's first three dimensions in false colour
    centre_js = """() => {
        const d = Bokeh.documents[0].get_model_by_name('base-source').data;
        const img = (d instanceof Map ? d.get('image') : d.image)[0];
        const [h, w] = img.shape, v = img[(h - 1 - (h >> 1)) * w + (w >> 1)];  // its centre pixel
        return [v & 255, (v >>> 8) & 255, (v >>> 16) & 255, v >>> 24]; }"""
    page.wait_for_function(f"() => ({centre_js})()[3] === 255", timeout=60_000)  # the zoomed-in base map arrived
    centre = page.evaluate(centre_js)
    g = zarr.open_group(str(store / "utm30"), mode="r")
    q = g["embeddings"][1, :3, row, col].astype(np.float32)
    assert centre == [*np.clip(128 + 1.5 * q, 0, 255).astype(np.uint8).tolist(), 255]
    select(page, p["lon"], p["lat"])
    page.evaluate("async () => await window.tesseraApi.similarity(true)")
    wait_text(page, "Similarity to utm30")
    qq, s = g["embeddings"][1].astype(np.float32), g["scales"][1]
    with np.errstate(invalid="ignore"):
        v = np.moveaxis(qq, 0, -1) * s[..., None]
        v[~np.isfinite(s)] = np.nan
        cos = v @ v[row, col] / (np.linalg.norm(v, axis=-1) * np.linalg.norm(v[row, col]))
    to_ll = Transformer.from_crs(32630, 4326, always_xy=True)
    t = g.attrs["spatial:transform"]
    checked = 0
    for dr, dc in ((0, 0), (5, 9), (-20, 14), (30, -25), (-7, -40)):
        r, c = row + dr, col + dc
        lon, lat = to_ll.transform(t[2] + (c + 0.5) * 10, t[5] - (r + 0.5) * 10)
        got = page.evaluate("([lon, lat]) => window.tesseraApi.simAt(lon, lat)", [lon, lat])
        if np.isfinite(cos[r, c]):
            assert got == pytest.approx(float(cos[r, c]), abs=1e-5)
            checked += 1
        else:
            assert got is None
    assert checked >= 3


def test_store_without_consolidated_metadata_and_a_store_of_neither_layout(page, server, served, tiles2):
    p = points_valid_in_both_years(tiles2, "grid_18.45_-33.95", 3)[1]
    assert open_app(page, server + "index.html?store=data/geoemb/plain.zarr#year=2023") == "ready"
    r, c = rowcol(served / "plain.zarr", p)
    got = select(page, p["lon"], p["lat"])
    assert (got["zone"], got["row"], got["col"], got["valid"]) == ("utm34", r, c, True)
    np.testing.assert_array_equal(spectrum(page, f"utm34 r{r} c{c}"), p["vec"][2023].astype(np.float64))
    assert open_app(page, server + "index.html?store=data/geoemb/other.zarr") == "error"
    text = page.locator("#error").inner_text().strip()
    assert "neither a tessera: v1 nor a geoemb: store (its zarr_conventions: other: (0123))" in text
    assert len(text.splitlines()) == 2 and "Traceback" not in text  # a title and one line


def test_similarity_on_a_store_with_depth_arrays_reads_depth_16_then_the_full_vectors_when_exact(page, server, site):
    """A geoemb: v2 store (tests/distributions.py, zarr-python) with embeddings_d4 and embeddings_d16: the similarity
    map reads embeddings_d16 only (the worker's request log), says "depth 16 of 128" in its status and its API
    result, and equals numpy's cosines on the depth-16 array; "Exact (full vectors)" reads embeddings and equals the
    cosines of the full vectors."""
    rel = "data/geoemb/depth.zarr"
    store = site / rel
    if store.exists():
        shutil.rmtree(store)
    write_geoemb_v2(store)
    g = zarr.open_group(str(store / "utm30"), mode="r")
    t = g.attrs["spatial:transform"]
    to_ll = Transformer.from_crs(32630, 4326, always_xy=True)
    lonlat = lambda r, c: to_ll.transform(t[2] + (c + 0.5) * 10, t[5] - (r + 0.5) * 10)
    row, col = 256, 200

    def cosines(array: str) -> np.ndarray:
        q, s = np.moveaxis(g[array][1].astype(np.float64), 0, -1), g["scales"][1].astype(np.float64)
        with np.errstate(invalid="ignore"):
            v = q * s[..., None]
            v[~np.isfinite(s)] = np.nan
            return v @ v[row, col] / (np.linalg.norm(v, axis=-1) * np.linalg.norm(v[row, col]))

    def check(want: np.ndarray) -> None:
        for dr, dc in ((0, 0), (5, 9), (-20, 14), (30, -25), (-7, -40)):
            got = page.evaluate("([lon, lat]) => window.tesseraApi.simAt(lon, lat)", list(lonlat(row + dr, col + dc)))
            assert got == pytest.approx(float(want[row + dr, col + dc]), abs=1e-5)

    def arrays_read() -> set[str]:
        return {e["url"].split("/utm30/")[1].split("/")[0] for e in store_log(page, rel) if "/utm30/" in e["url"]
                and "/c/" in e["url"]}

    assert open_app(page, server + "index.html?store=" + rel + "#year=2024") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 2000)", list(lonlat(row, col)))
    assert select(page, *lonlat(row, col))["valid"] is True
    page.evaluate("window.tesseraWorker.resetStats()")
    got = page.evaluate("async () => await window.tesseraApi.similarity('selection', 'mean', null)")
    assert got["read"] == "depth 16 of 128"
    assert "depth 16 of 128 (the exact result reads the full vectors)" in got["status"]
    assert "embeddings_d16" in arrays_read() and "embeddings" not in arrays_read(), arrays_read()
    check(cosines("embeddings_d16"))

    page.evaluate("window.tesseraWorker.resetStats()")  # the toggle re-runs the search shown, then the API again
    page.get_by_role("button", name="Exact (full vectors)").click()
    wait_text(page, "Tools read full 128-d vectors (10 m), exact")
    got = page.evaluate("async () => await window.tesseraApi.similarity('selection', 'mean', null)")
    assert got["read"] == "full 128-d vectors" and "depth" not in got["status"]
    assert "embeddings" in arrays_read() and "embeddings_d16" not in arrays_read(), arrays_read()
    check(cosines("embeddings"))
