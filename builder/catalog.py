"""The files that list stores for the explorer: catalog.json and the multi-year index years.json, each written
whole or not at all (builder/atomic.py)."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from builder.atomic import write_bytes
from builder.describe import TESSERA, StoreError, describe
from builder.errors import BuildError


def write_catalog(data_dir: Path) -> Path:
    """catalog.json: the year stores in `data_dir`, for the app's year selector."""
    from builder.publish import find_stores
    if not data_dir.is_dir():
        raise BuildError("no such directory", str(data_dir))
    found = find_stores(data_dir)
    if not found:
        raise BuildError("no tessera store (root zarr.json with tessera:dataset_version) in this directory", str(data_dir))
    stores = []
    for s in found:
        try:
            info = describe(json.loads((s / "zarr.json").read_text()), str(s), jsonschema=jsonschema)
        except (StoreError, ValueError) as e:
            raise BuildError(str(e).removeprefix(f"{s}: "), str(s)) from None
        if info.kind != TESSERA:
            raise BuildError(f"a {info.kind} root, not a year store; catalog.json lists year stores", str(s))
        stores.append({"year": info.year, "url": s.relative_to(data_dir).as_posix()})
    stores.sort(key=lambda s: s["year"])
    doc = {"stores": stores}
    if (data_dir / "years.json").exists():
        doc["multiyear"] = "years.json"
    out = data_dir / "catalog.json"
    write_bytes(out, json.dumps(doc, indent=1).encode())
    return out


def write_years_index(data_dir: Path, stores: list[Path]) -> Path:
    """data_dir/years.json: a relocatable multi-year virtual index over the year stores."""
    from builder.virtual.parsers import YearsParser
    from builder.virtual.writer import write_tile_index
    out = data_dir / "years.json"
    write_tile_index(YearsParser()([str(s.resolve()) for s in stores]), str(out), template_base="{{base}}")
    return out
