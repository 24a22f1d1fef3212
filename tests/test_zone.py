"""One zone description (builder/core/zone.py): the explorer, the Python reader and the global pyramid describe the
zones of a real store with the same class and the same grids, and no other module writes a zone class."""
from __future__ import annotations

import ast
from pathlib import Path

import jsonschema
import numpy as np
import zarr
from pyproj import Transformer

from builder.core.reader import StoreModel
from builder.reader.source import ZarrSource
from builder import pyramid
from builder.core.zone import Zone
from builder.reader import open_store
from builder.sink import open_sink
from conftest import run_async

REPO = Path(__file__).resolve().parent.parent


def test_the_explorer_the_reader_and_the_pyramid_share_one_zone_of_each_group(store):
    model = run_async(StoreModel(ZarrSource(str(store)), jsonschema=jsonschema).open())
    reader = open_store(store).zones()
    built = {z.name: z for z in pyramid._zones(open_sink(str(store)))}
    root = zarr.open_group(str(store), mode="r", use_consolidated=False)
    names = sorted(n for n in root.group_keys() if n.startswith("utm"))
    assert names and sorted(model.zones) == sorted(reader) == names and built
    for name in names:
        ours = [model.zones[name], reader[name], *([built[name]] if name in built else [])]
        assert all(type(z) is Zone for z in ours)
        attrs = dict(root[name].attrs)
        t, (h, w) = attrs["spatial:transform"], attrs["spatial:shape"]
        emb = root[name]["embeddings"]
        for z in ours:  # the grid the group's own attributes and shards state, read by zarr-python
            assert (z.origin_e, z.origin_n, z.height, z.width, z.shard) == (t[2], t[5], h, w, emb.shards[0])
            assert z.crs == attrs["proj:code"]
        assert model.zones[name].n_bands == reader[name].n_bands == emb.shape[2]
        # lon/lat bounds against pyproj's, from the grid's corners and edges
        to_ll = Transformer.from_crs(attrs["proj:code"], "EPSG:4326", always_xy=True)
        want = to_ll.transform_bounds(t[2], t[5] - 10 * h, t[2] + 10 * w, t[5], densify_pts=21)
        np.testing.assert_allclose(model.zones[name].lonlat, want, atol=1e-5)
        np.testing.assert_allclose(reader[name].lonlat, want, atol=1e-5)


def test_no_module_but_the_core_writes_a_zone_class():
    """A class holding a zone's grid (a `grid` field or attribute) is builder/core/zone.py's Zone alone."""
    found = []
    for path in [*REPO.glob("app/**/*.py"), *REPO.glob("builder/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {t.target.id for t in node.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
            if "grid" in fields and "lonlat" in fields:
                found.append(f"{path.relative_to(REPO)}:{node.name}")
    assert found == ["builder/core/zone.py:Zone"]
