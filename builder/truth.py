"""Ground-truth stores: a year store's land-cover classes as a small Zarr v3 store the explorer scores against.

    truth/{year}.zarr/                 root: "ground_truth": {"year", "classes": [{"class", "name", "color"}], "no_data",
                                       "model_version"}
      utm{NN}/                         one group per zone of the year store, with its proj:/spatial: attributes
        classes  uint8 (H, W) fill 255 the year store's zone grid and shards, each shard one chunk (Blosc + crc32c;
                                       a class is a byte, so the year store's small inner chunks would give a shard
                                       an index as large as its data, and a read thousands of chunks to decode)

"model_version" is the model version of the year store the truth was laid on (`store_version`): the catalog lists
a truth store only beside a year store of that version, so truth never scores a store it was not made for.

The classes come from class rasters (uint8 GeoTIFFs, 255 where there is no class, each on a 10 m grid of its
UTM zone, as the demo writes them beside its tiles: builder/demo.py), laid on the year store's zone grids as
its tiles are (the pixel containing a raster's corner; later rasters over earlier ones).  zarr-python writes the
metadata (builder/store.py's arrays), builder/arrayfiles.py the shards; the whole store is written beside its
place and swapped in (builder/atomic.py write_dir), so a reader sees the old store or the new one, never a mix.
A store without land in a zone's shard writes no file for it (all fill).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from builder.atomic import write_dir
from builder.core.describe import describe
from builder.core.geometry import parse_proj_code
from builder.core.grid import ZoneGrid
from builder.core.truthclasses import KEY, NO_DATA, TruthError, check_classes
from builder.errors import BuildError

ARRAY = "classes"
TRUTH_DIR = "truth"  # a data directory's ground-truth stores: truth/{year}.zarr beside {year}.zarr


def truth_path(data_dir: Path, year: int) -> Path:
    return Path(data_dir) / TRUTH_DIR / f"{year}.zarr"


def _zones(year_store: Path) -> dict[str, dict]:
    """The year store's zone groups' attributes, by group name (its consolidated root)."""
    import zarr
    root = zarr.open_group(str(year_store), mode="r")
    return {name: dict(g.attrs) for name, g in root.groups() if "proj:code" in g.attrs and "scales" in g}


def _rasters(rasters: list[Path]):
    """(zone, south, origin_e, origin_n, classes) of each class raster, in the order given."""
    import tifffile
    from builder.geotiff import read_geoinfo
    for path in rasters:
        info = read_geoinfo(str(path))
        if info.epsg is None or (info.pixel_x, abs(info.pixel_y)) != (10.0, 10.0):
            raise BuildError("not a 10 m class raster of a UTM zone", str(path))
        a = tifffile.imread(str(path))
        if a.dtype != np.uint8 or a.ndim != 2:
            raise BuildError(f"class raster is {a.dtype} {a.shape}, not uint8 (rows, cols)", str(path))
        zone, south = parse_proj_code(f"EPSG:{info.epsg}")
        yield zone, south, info.origin_x, info.origin_y, a


def zone_classes(grid: ZoneGrid, rasters) -> np.ndarray:
    """(H, W) uint8 classes on `grid` from the rasters of its zone (NO_DATA where none)."""
    out = np.full((grid.height, grid.width), NO_DATA, np.uint8)
    for zone, south, oe, on, a in rasters:
        if (zone, south) != (grid.zone, grid.south):
            continue
        r, c = grid.pixel_offset(oe, on)
        r0, c0 = max(r, 0), max(c, 0)
        r1, c1 = min(r + a.shape[0], grid.height), min(c + a.shape[1], grid.width)
        if r1 > r0 and c1 > c0:  # a no-data pixel never overwrites a class (as a tile's never overwrites data)
            part = a[r0 - r:r1 - r, c0 - c:c1 - c]
            out[r0:r1, c0:c1] = np.where(part != NO_DATA, part, out[r0:r1, c0:c1])
    return out


def store_version(info) -> str:
    """The model version(s) of a year store's zones (info: its builder.core.describe StoreInfo), as one text."""
    return ",".join(sorted({str(z.attrs["tessera:model_version"]) for z in info.zones.values()
                            if "tessera:model_version" in z.attrs}))


def made_for(truth_root_doc: dict, info) -> bool:
    """Whether the truth store whose root zarr.json is `truth_root_doc` was laid on a store like `info`'s (its
    StoreInfo)."""
    gt = ((truth_root_doc.get("attributes") or {}).get(KEY) or {}) if isinstance(truth_root_doc, dict) else {}
    return isinstance(gt, dict) and gt.get("model_version") == store_version(info)


def write_truth_store(year_store: Path, year: int, rasters: list[Path], classes: list[dict], out: Path) -> Path:
    """The ground-truth store of `year_store` at `out` from its class `rasters` (whole or not at all); `classes`
    checked by the rule the explorer reads them by (builder/core/truthclasses.py)."""
    try:
        check_classes(classes, str(out))
    except TruthError as e:
        raise BuildError(str(e)) from None
    import jsonschema
    import zarr  # imported here: builder/catalog.py imports this module's names, and every command that catalog
    from builder.arrayfiles import ShardedArrayFiles, ShardSpec
    from builder.store import Layout, _sharded
    zones = _zones(year_store)
    version = store_version(describe(json.loads((Path(year_store) / "zarr.json").read_text()), str(year_store),
                                     jsonschema=jsonschema))
    if not zones:
        raise BuildError("no zone group to lay ground truth on", str(year_store))
    found = list(_rasters(rasters))

    def fill(tmp: Path) -> None:
        root = zarr.open_group(zarr.storage.LocalStore(str(tmp)), mode="w", zarr_format=3,
                               attributes={KEY: {"year": int(year), "classes": classes, "no_data": NO_DATA,
                                                  "model_version": version}})
        for name, attrs in sorted(zones.items()):
            spec = ShardSpec.read(Path(year_store) / name / "scales")
            grid = ZoneGrid.from_attrs(attrs, spec.shard_shape[0])
            layout = Layout(spec.shard_shape[0], spec.shard_shape[0], spec.blosc["cname"], spec.blosc["clevel"])
            g = root.create_group(name, attributes={k: v for k, v in attrs.items()
                                                    if k.startswith(("proj:", "spatial:"))})
            _sharded(g, ARRAY, (grid.height, grid.width), "uint8", NO_DATA, layout, ["northing", "easting"])
            data = zone_classes(grid, found)
            files = ShardedArrayFiles(tmp / name / ARRAY)
            s = layout.shard
            for sr in range(-(-grid.height // s)):
                for sc in range(-(-grid.width // s)):
                    block = np.full((s, s), NO_DATA, np.uint8)
                    part = data[sr * s:(sr + 1) * s, sc * s:(sc + 1) * s]
                    block[:part.shape[0], :part.shape[1]] = part
                    files.write(sr, sc, block)
        zarr.consolidate_metadata(zarr.storage.LocalStore(str(tmp)))

    write_dir(Path(out), fill)
    return Path(out)


def write_demo_truth(data_dir: Path, truth_root: Path, years) -> list[Path]:
    """The ground-truth store of each demo year store in `data_dir` from the demo's class rasters and classes.json
    (truth_root: the demo's ground_truth/ directory)."""
    classes = json.loads((Path(truth_root) / "classes.json").read_text())
    out = []
    for y in years:
        rasters = sorted((Path(truth_root) / str(y)).glob("*_classes.tiff"))
        out.append(write_truth_store(Path(data_dir) / f"{y}.zarr", y, rasters, classes, truth_path(data_dir, y)))
    return out
