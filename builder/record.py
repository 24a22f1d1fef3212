"""The build record and journals: what a later (or resumed) build needs, outside the store.

The record (`<store>.build/record.json` by default) keeps tile fingerprints per zone, the RGB and code
models, the layout and the shards whose pyramid and overviews are pending; `<zone>.done` journals the
shards a run finished, `<zone>.regrid.json` a grid move (builder/regrid.py).  Every file is written
whole or not at all.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from builder import convention as conv
from builder import overviews as ovr
from builder.atomic import write_bytes
from builder.errors import BuildError
from builder.grid import ZoneGrid
from builder.plan import zone_key

def load_record(cfg) -> dict:
    p = cfg.record_dir / "record.json"
    if p.exists():
        return json.loads(p.read_text())
    return {}


def save_text(path: Path, text: str) -> None:
    """Write whole or not at all (temporary file renamed into place)."""
    write_bytes(path, text.encode())


def save_json(path: Path, doc: dict) -> None:
    save_text(path, json.dumps(doc, indent=1))


def save_record(cfg, record: dict) -> None:
    save_json(cfg.record_dir / "record.json", record)


def check_record(cfg, record: dict, n_bands: int, by_zone: dict[int, list]) -> None:
    store = str(cfg.store)
    if record and record.get("model_version") != cfg.model_version:
        raise BuildError(f"store was built from model_version {record.get('model_version')!r}, "
                         f"refusing to mix in {cfg.model_version!r}", store)
    if record and record.get("n_bands") not in (None, n_bands):
        raise BuildError(f"store has {record['n_bands']} bands, tiles have {n_bands}", store)
    if record and record.get("layout") not in (None, cfg.layout.__dict__):
        raise BuildError(f"store was built with layout {record['layout']}, not {cfg.layout.__dict__}", store)
    have = record.get("overviews")
    if have and not cfg.overviews:
        raise BuildError("store has embedding overviews; building without them would leave them stale "
                         "(drop --no-overviews, or rebuild into a new store)", store)
    if have and cfg.overviews and (have["levels"], have["dims"]) != (ovr.LEVELS, cfg.code_dims):
        raise BuildError(f"store has overviews of {have['levels']} levels and a {have['dims']}-d code, "
                         f"not {ovr.LEVELS} and {cfg.code_dims}; rebuild into a new store", store)
    for zone_num, ztiles in by_zone.items():
        name = conv.zone_group_name(zone_num)
        zrec = zone_record(record, name)
        zone, south = zone_key(ztiles)
        if zrec and zrec["south"] != south:
            raise BuildError(f"zone {name} was built in {conv.proj_code(zone, zrec['south'])}; these tiles need "
                             f"{conv.proj_code(zone, south)}; rebuild the zone into a new store", store)


def check_zone_groups(cfg, root, record: dict) -> None:
    """A store made by another tool (or whose record is lost) must not be mixed blindly."""
    for name in root.group_keys():
        if conv.parse_zone_group_name(name) is None or record.get("zones", {}).get(name, {}).get("creating"):
            continue  # not a zone, or a zone whose creation a killed run of ours began
        attrs = dict(root[name].attrs)
        if attrs.get("tessera:model_version") != cfg.model_version:
            raise BuildError(f"zone {name} has model_version {attrs.get('tessera:model_version')!r}; "
                             f"refusing to mix in {cfg.model_version!r}", str(cfg.store))
        if name not in record.get("zones", {}):
            raise BuildError(f"zone {name} exists but has no build record in {cfg.record_dir}; "
                             "refusing to add tiles to it blindly", str(cfg.store))


def zone_record(record: dict, name: str) -> dict | None:
    """The zone's record, or None when the zone is new or a killed run was still creating its group."""
    zrec = record.get("zones", {}).get(name)
    return None if zrec is None or zrec.get("creating") else zrec


def add_overview_pending(record: dict, name: str, grid: ZoneGrid, shards) -> None:
    """Note level-0 shards (as lattice indices) whose overviews must be recomputed (kept until they are)."""
    entries = record.setdefault("overview_pending", {}).setdefault(name, [])
    entries[:] = sorted({tuple(x) for x in entries} | {tuple(x) for x in ovr.lattice_shards(grid, shards)})


def add_pending(record: dict, name: str, grid: ZoneGrid, shards: list[tuple[int, int]]) -> None:
    """Note shards whose global_rgb chunks must be redrawn (kept until the pyramid is updated)."""
    entries = record.setdefault("pyramid_pending", {}).setdefault(name, [])
    for entry in entries:
        if entry[0] == grid.__dict__:
            entry[1] = sorted({tuple(x) for x in entry[1]} | set(shards))
            return
    entries.append([grid.__dict__, sorted(shards)])


def read_done(done_file: Path, plan_id: str) -> set[tuple[int, int]]:
    """Shards journalled as done by an interrupted run of the same plan; starts a new journal otherwise.
    Only whole lines count: a line a full disk cut short ("12,3" of "12,34") has no newline."""
    lines = done_file.read_text().split("\n")[:-1] if done_file.exists() else []
    if lines and lines[0] == plan_id:
        return {tuple(map(int, x.split(","))) for x in lines[1:] if re.fullmatch(r"\d+,\d+", x)}
    save_text(done_file, plan_id + "\n")
    return set()


def journal_done(done_file: Path, shard: tuple[int, int]) -> None:
    """Journal one finished shard: one short O_APPEND write, so lines of parallel tasks never mix; a write cut
    short leaves a line without its newline, which read_done ignores."""
    with open(done_file, "a") as f:
        f.write(f"{shard[0]},{shard[1]}\n")
