"""`python -m builder index`: write virtual Zarr (Kerchunk) indexes.

    index tiles ROOT --year Y -o tiles.json      one group per source tile (references into the .npy files)
    index years STORE [STORE ...] -o years.json  per zone: (year, northing, easting, band), shard files referenced whole
    index pyramid STORE -o pyramid.json          global_rgb levels with their multiscales metadata
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from builder.errors import BuildError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=["tiles", "years", "pyramid"], help="what to index")
    p.add_argument("sources", nargs="+", help="tiles: the tile root; years: the year stores; pyramid: one store")
    p.add_argument("-o", "--output", required=True, help="index file: .json (Kerchunk v1) or .parquet (directory)")
    p.add_argument("--year", type=int, help="tiles: the year to index")
    p.add_argument("--zarr-format", type=int, default=3, help="2 or 3 (default 3)")
    p.add_argument("--template-base", help='write a relocatable index, e.g. "{{base}}"')
    p.add_argument("--url-override", action="append", default=[], metavar="OLD=NEW",
                   help="replace the URL prefix OLD by NEW in every reference (repeatable)")
    p.add_argument("--segments", nargs="+", help="only these top-level groups (tile names, zones, levels)")


def tiles_store(root: str, year: int):
    """One ManifestStore with a group per tile; tiles must agree on bands and dtypes."""
    from virtualizarr.manifests import ManifestGroup, ManifestStore

    from builder.tiles import discover
    from builder.virtual.parsers import TileParser
    parser = TileParser()
    groups = {}
    first = None
    for ref in discover(root, year):
        store = parser(ref.embeddings_url)
        g = store._group
        shape = g.arrays["embeddings"].metadata.shape
        if first is None:
            first = (ref.name, shape[2], str(g.arrays["embeddings"].metadata.data_type))
        elif shape[2] != first[1]:
            raise BuildError(f"has {shape[2]} bands but {first[0]} has {first[1]}", ref.embeddings_url)
        groups[ref.name] = g
    from builder.core import convention as conv
    attrs = {"zarr_conventions": [dict(conv.TESSERA)], "tessera:dataset_version": conv.DATASET_VERSION,
             "tessera:year": year, "tessera:source": "geotessera tiles (virtual index)"}
    return ManifestStore(ManifestGroup(groups=groups, attributes=attrs))


def run(a) -> int:
    from builder.virtual.parsers import PyramidParser, YearsParser
    from builder.virtual.writer import write_tile_index
    t0 = time.time()
    if a.kind == "tiles":
        if a.year is None or len(a.sources) != 1:
            raise BuildError("index tiles takes one tile root and --year")
        store = tiles_store(a.sources[0], a.year)
    elif a.kind == "years":
        store = YearsParser()([str(Path(s).resolve()) if "://" not in s else s for s in a.sources])
    else:
        if len(a.sources) != 1:
            raise BuildError("index pyramid takes one store")
        store = PyramidParser()(str(Path(a.sources[0]).resolve()) if "://" not in a.sources[0] else a.sources[0])
    overrides = {}
    for pair in a.url_override:
        if "=" not in pair:
            raise BuildError(f"--url-override {pair!r} is not OLD=NEW")
        old, new = pair.split("=", 1)
        overrides[old] = new
    from builder.hooks import kill_point
    from builder.lock import output_lock
    with output_lock(Path(a.output), "another index command is writing this index"):
        kill_point("index-locked")
        write_tile_index(store, a.output, a.segments, template_base=a.template_base,
                         url_overrides=overrides or None, zarr_format=a.zarr_format)
    out = Path(a.output)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) if out.is_dir() else out.stat().st_size
    print(f"wrote {a.output} ({size / 1e3:.1f} kB) in {time.time() - t0:.2f}s")
    return 0
