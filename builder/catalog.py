"""The files that list stores for the explorer: catalog.json and the multi-year index years.json, each written
whole or not at all (builder/sink.py, builder/atomic.py).  A year whose ground-truth store (builder/truth.py) lies
in the directory, at truth/{year}.zarr, has it listed in its entry ("truth")."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from builder.core.describe import TESSERA, StoreError, describe
from builder.errors import BuildError
from builder.sink import LocalSink, open_sink
from builder.truth import TRUTH_DIR, made_for


def write_catalog(data_dir: Path | str) -> str:
    """catalog.json: the year stores in `data_dir`, for the app's year selector.  `data_dir` may be an object store
    prefix (s3://...): there the stores directly under it (where `build --out` puts them) are listed; a directory
    is searched to any depth."""
    sink = open_sink(data_dir)
    if isinstance(sink, LocalSink):
        from builder.publish import find_stores
        if not sink.root.is_dir():
            raise BuildError("no such directory", str(data_dir))
        found = [s.relative_to(sink.root).as_posix() for s in find_stores(sink.root)]
    else:
        found = [name for name in sink.children() if sink.exists(f"{name}/zarr.json")]
    if not found:
        raise BuildError("no tessera store (root zarr.json with tessera:dataset_version) in this directory", str(data_dir))
    stores = []
    for rel in found:
        where = str(sink / rel)
        try:
            info = describe(json.loads(sink.get(f"{rel}/zarr.json")), where, jsonschema=jsonschema)
        except (StoreError, ValueError) as e:
            raise BuildError(str(e).removeprefix(f"{where}: "), where) from None
        if info.kind != TESSERA:
            raise BuildError(f"a {info.kind} root, not a year store; catalog.json lists year stores", where)
        entry = {"year": info.year, "url": rel}
        truth = f"{TRUTH_DIR}/{info.year}.zarr"  # the year's ground truth (builder/truth.py), when there is one
        if sink.exists(f"{truth}/zarr.json") and _truth_of(sink, truth, info):
            entry["truth"] = truth
        stores.append(entry)
    stores.sort(key=lambda s: s["year"])
    doc = {"stores": stores}
    if sink.exists("years.json"):
        doc["multiyear"] = "years.json"
    sink.write("catalog.json", json.dumps(doc, indent=1).encode())
    return f"{sink}/catalog.json"


def _truth_of(sink, truth: str, info) -> bool:
    """Whether the truth store at `truth` was laid on the year store `info` describes (builder/truth.py)."""
    try:
        return made_for(json.loads(sink.get(f"{truth}/zarr.json")), info)
    except ValueError:  # not JSON: not ours to list
        return False


def write_years_index(data_dir: Path, stores: list[Path]) -> Path:
    """data_dir/years.json: a relocatable multi-year virtual index over the year stores."""
    from builder.virtual.parsers import YearsParser
    from builder.virtual.writer import write_tile_index
    out = data_dir / "years.json"
    write_tile_index(YearsParser()([str(s.resolve()) for s in stores]), str(out), template_base="{{base}}")
    return out
