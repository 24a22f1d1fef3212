"""describe(root zarr.json) on real roots: written by the builder, by zarr-python (geoemb: and a v1 store
re-consolidated by zarr), and roots of no layout this project reads.  Expected values come from the files
on disk and from zarr-python, never from describe itself."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import zarr

from builder.core import layout as lay
from builder.core.describe import GEOEMB, STACK, TESSERA, StoreError, claims_tessera_root, describe


def root_doc(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text())


def zone_dirs(store: Path) -> list[str]:
    return sorted(p.name for p in store.iterdir() if p.name.startswith("utm") and (p / "zarr.json").exists())


def array_docs(zone: Path) -> dict[str, dict]:
    """Every array under a zone directory (any depth) by its path inside the zone, from its own zarr.json."""
    out = {}
    for meta in zone.rglob("zarr.json"):
        doc = json.loads(meta.read_text())
        if doc["node_type"] == "array":
            out[meta.parent.relative_to(zone).as_posix()] = doc
    return out


def test_a_year_store_written_by_the_builder(store):
    info = describe(root_doc(store), str(store), jsonschema=jsonschema)
    assert (info.kind, info.layout, info.years, info.year) == (TESSERA, lay.V1, (2024,), 2024)
    assert info.consolidated and sorted(info.zones) == zone_dirs(store)
    for name, z in info.zones.items():
        assert z.attrs == json.loads((store / name / "zarr.json").read_text())["attributes"]
        on_disk = array_docs(store / name)
        assert sorted(z.arrays) == sorted(on_disk)
        for path, doc in on_disk.items():
            assert z.arrays[path]["shape"] == doc["shape"] and z.arrays[path]["codecs"] == doc["codecs"]
        assert z.shard == on_disk["embeddings"]["chunk_grid"]["configuration"]["chunk_shape"]
        has_ovr = (store / name / "overviews" / "zarr.json").exists()
        assert ("tessera-ovr:" in z.extensions) == has_ovr
    assert info.extensions == ({"tessera-ovr:"} if any((store / n / "overviews").exists() for n in info.zones) else set())
    levels = sorted(int(p.parent.parent.name) for p in (store / "global_rgb").glob("*/rgb/zarr.json"))
    assert [lv.index for lv in info.levels] == levels and levels
    layout = {int(i["asset"]): i for i in
              json.loads((store / "global_rgb" / "zarr.json").read_text())["attributes"]["multiscales"]["layout"]}
    for lv in info.levels:
        rgb = json.loads((store / "global_rgb" / str(lv.index) / "rgb" / "zarr.json").read_text())
        assert (lv.height, lv.width) == tuple(rgb["shape"][:2])
        assert lv.chunk == rgb["chunk_grid"]["configuration"]["chunk_shape"][0]
        assert lv.res == layout[lv.index]["spatial:transform"][0] and lv.res * lv.width == pytest.approx(360.0, rel=0.01)


def test_the_same_store_consolidated_by_zarr_python(store, tmp_path):
    copy = tmp_path / "2024.zarr"
    shutil.copytree(store, copy)
    doc = root_doc(copy)
    doc.pop("consolidated_metadata")
    (copy / "zarr.json").write_text(json.dumps(doc))
    unconsolidated = describe(doc, jsonschema=jsonschema)
    assert unconsolidated.zones == {} and not unconsolidated.consolidated and unconsolidated.years == (2024,)
    zarr.consolidate_metadata(str(copy))
    ours, theirs = describe(root_doc(store), jsonschema=jsonschema), describe(root_doc(copy), jsonschema=jsonschema)
    g = zarr.open_group(str(copy), mode="r", use_consolidated=True)
    assert sorted(theirs.zones) == sorted(k for k in g.group_keys() if k.startswith("utm")) == sorted(ours.zones) \
        == zone_dirs(store)
    for name in theirs.zones:
        assert sorted(theirs.zones[name].arrays) == sorted(ours.zones[name].arrays)
        assert theirs.zones[name].shard == list(g[name]["embeddings"].shards)
        assert theirs.zones[name].extensions == ours.zones[name].extensions
    assert theirs.levels == ours.levels


def test_a_geoemb_store_written_by_zarr_python(geoemb_store):
    info = describe(root_doc(geoemb_store), jsonschema=jsonschema)
    assert (info.kind, info.layout, info.years, info.year) == (GEOEMB, lay.GEOEMB, (), None)
    g = zarr.open_group(str(geoemb_store), mode="r")
    assert sorted(info.zones) == sorted(k for k in g.group_keys() if k.startswith("utm")) == zone_dirs(geoemb_store)
    for name, z in info.zones.items():
        assert z.shard == list(g[name]["embeddings"].shards)
        assert z.arrays["embeddings"]["shape"] == list(g[name]["embeddings"].shape)
        assert "time" in z.arrays and z.extensions == ()


def test_a_multi_year_index_root():
    from builder.core import extensions as ext
    doc = {"zarr_format": 3, "node_type": "group", "attributes": {
        "zarr_conventions": [dict(c) for c in ext.STACK_ROOT_CONVENTIONS], "tessera:dataset_version": "v1",
        "tessera-stack:years": [2023, 2024]}}
    info = describe(doc, jsonschema=jsonschema)
    assert (info.kind, info.layout, info.years, info.year) == (STACK, lay.STACK, (2023, 2024), None)


def test_a_root_of_no_known_layout_is_one_line(tmp_path):
    g = zarr.open_group(str(tmp_path / "other.zarr"), mode="w", zarr_format=3)
    g.attrs["zarr_conventions"] = [{"uuid": "0123", "name": "other:"}]
    with pytest.raises(StoreError) as e:
        describe(root_doc(tmp_path / "other.zarr"), "other.zarr", jsonschema=jsonschema)
    msg = str(e.value)
    assert e.value.kind == "invalid" and "\n" not in msg
    assert "neither a tessera: v1 nor a geoemb: store (its zarr_conventions: other: (0123))" in msg
    for bad, want in (([1], "not a JSON object"), ({"attributes": "x"}, "attributes are not a JSON object")):
        with pytest.raises(StoreError, match=want):
            describe(bad, jsonschema=jsonschema)


def test_another_dataset_version_and_an_invalid_v1_root(store):
    doc = root_doc(store)
    doc["attributes"]["tessera:dataset_version"] = "v2"
    with pytest.raises(StoreError) as e:
        describe(doc, "s.zarr", jsonschema=jsonschema)
    assert (e.value.kind, e.value.version) == ("version", "v2") and str(e.value).startswith("s.zarr: ")
    doc = root_doc(store)
    del doc["attributes"]["tessera:year"]
    with pytest.raises(StoreError) as e:
        describe(doc, jsonschema=jsonschema)
    assert e.value.kind == "invalid" and str(e.value) == "store root: attributes: 'tessera:year' is a required property"
    doc = root_doc(store)
    doc["attributes"]["tessera:year"] = "2024"
    with pytest.raises(StoreError) as e:
        describe(doc, "s.zarr", jsonschema=jsonschema)
    assert e.value.kind == "invalid" and str(e.value) == "s.zarr: tessera:year: '2024' is not of type 'integer'"


def test_a_root_breaking_the_schema_many_times_is_still_one_short_line(store):
    """A hostile root: 100,000 malformed convention entries and a 1 MB value; the error names 3 problems."""
    doc = root_doc(store)
    doc["attributes"]["zarr_conventions"] = [{"name": 7}] * 100_000
    doc["attributes"]["tessera:year"] = "x" * 1_000_000
    with pytest.raises(StoreError) as e:
        describe(doc, jsonschema=jsonschema)
    msg = str(e.value)
    assert e.value.kind == "invalid" and "\n" not in msg and len(msg) < 2000, len(msg)
    assert msg.startswith("store root: tessera:year: 'xxx") and msg.count("zarr_conventions/") == 2
    # 100,000 entries x (3 missing keys + name not a string) + the year = 400,001 problems, 3 shown
    assert "; and 399998 more; neither a tessera: v1 nor a geoemb: store" in msg and msg.endswith("and 99995 more)")


def test_a_root_of_another_huge_dataset_version_is_one_short_line(store):
    doc = root_doc(store)
    doc["attributes"]["tessera:dataset_version"] = "v9-" + "y" * 1_000_000
    with pytest.raises(StoreError) as e:
        describe(doc, jsonschema=jsonschema)
    msg = str(e.value)
    assert e.value.kind == "version" and "\n" not in msg and len(msg) < 300, len(msg)
    assert msg.startswith("store root: tessera:dataset_version 'v9-yyy") and msg.endswith("stores only")


def test_claims_tessera_root_tells_a_root_from_a_zone_group(store, geoemb_store):
    assert claims_tessera_root(root_doc(store))
    assert not claims_tessera_root(json.loads((store / zone_dirs(store)[0] / "zarr.json").read_text()))
    assert not claims_tessera_root(root_doc(geoemb_store)) and not claims_tessera_root([])
