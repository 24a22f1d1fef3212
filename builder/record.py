"""The build record and journals: what a later (or resumed) build needs, outside the store.

The record (`record.json` in the record's sink, `<store>.build/` by default) is a `BuildRecord`: tile
fingerprints per zone, the RGB and code models, the layout and the shards whose pyramid and overviews are
pending.  Its JSON is the one earlier builders wrote (a record they left is read as it is).  A `Journal` holds the
shards a run of one zone plan finished, one empty object per shard (`<zone>.done/<plan>/<row>_<col>`: an object
store has no append); `<zone>.regrid.json` journals a grid move (builder/regrid.py).  Every object is written
whole or not at all (builder/sink.py).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from builder.core import codes
from builder.core import convention as conv
from builder import overviews as ovr
from builder.errors import BuildError
from builder.core.grid import ZoneGrid
from builder.plan import zone_key
from builder.sink import Sink

if TYPE_CHECKING:
    from builder.store import Layout

RECORD = "record.json"


@dataclass
class ZoneRecord:
    south: bool
    grid: ZoneGrid
    tiles: dict[str, str] = field(default_factory=dict)  # tile name -> fingerprint
    boxes: dict[str, list[float]] = field(default_factory=dict)  # tile name -> where its pixels went (zone CRS)
    creating: bool = False  # named before its group is made: a killed creation is recognised and redone

    def to_json(self) -> dict:
        doc = {"south": self.south, "grid": self.grid.__dict__, "tiles": self.tiles, "boxes": self.boxes}
        return {**doc, "creating": True} if self.creating else doc

    @classmethod
    def from_json(cls, d: dict) -> "ZoneRecord":
        return cls(bool(d["south"]), ZoneGrid(**d["grid"]), dict(d.get("tiles", {})), dict(d.get("boxes", {})),
                   bool(d.get("creating", False)))


@dataclass(frozen=True)
class OverviewsRecord:
    levels: int
    dims: int
    model: dict  # the compact code's to_json() (builder/core/codes.py), fitted once per store

    @property
    def code(self):
        """The store's compact code (builder/core/codes.py)."""
        return codes.from_json(self.model)

    def to_json(self) -> dict:
        return {"levels": self.levels, "dims": self.dims, "model": self.model}

    @classmethod
    def from_json(cls, d: dict) -> "OverviewsRecord":
        return cls(int(d["levels"]), int(d["dims"]), d["model"])


@dataclass
class PyramidPending:
    """Shards of one grid of a zone whose global_rgb chunks must be redrawn."""
    grid: ZoneGrid
    shards: list[tuple[int, int]]

    def to_json(self) -> list:
        return [self.grid.__dict__, [list(s) for s in self.shards]]

    @classmethod
    def from_json(cls, d: list) -> "PyramidPending":
        return cls(ZoneGrid(**d[0]), [tuple(s) for s in d[1]])


@dataclass
class BuildRecord:
    model_version: str | None = None
    n_bands: int | None = None
    layout: dict | None = None  # store.Layout's fields
    zones: dict[str, ZoneRecord] = field(default_factory=dict)
    rgb: dict | None = None  # rgb.RGBModel.to_json()
    overviews: OverviewsRecord | None = None
    pyramid_pending: dict[str, list[PyramidPending]] = field(default_factory=dict)
    overview_pending: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # level-0 lattice indices

    def zone(self, name: str) -> ZoneRecord | None:
        """The zone's record, or None when the zone is new or a killed run was still creating its group."""
        z = self.zones.get(name)
        return None if z is None or z.creating else z

    def add_pending(self, name: str, grid: ZoneGrid, shards) -> None:
        """Note shards whose global_rgb chunks must be redrawn (kept until the pyramid is updated)."""
        entries = self.pyramid_pending.setdefault(name, [])
        for entry in entries:
            if entry.grid == grid:
                entry.shards = sorted(set(entry.shards) | {tuple(s) for s in shards})
                return
        entries.append(PyramidPending(grid, sorted(tuple(s) for s in shards)))

    def add_overview_pending(self, name: str, grid: ZoneGrid, shards) -> None:
        """Note level-0 shards (as lattice indices) whose overviews must be recomputed (kept until they are)."""
        entries = self.overview_pending.setdefault(name, [])
        entries[:] = sorted(set(entries) | {tuple(x) for x in ovr.lattice_shards(grid, shards)})

    def to_json(self) -> dict:
        doc = {"model_version": self.model_version, "n_bands": self.n_bands, "layout": self.layout,
               "zones": {k: z.to_json() for k, z in self.zones.items()}, "rgb": self.rgb,
               "overviews": self.overviews.to_json() if self.overviews else None,
               "pyramid_pending": {k: [e.to_json() for e in v] for k, v in self.pyramid_pending.items()},
               "overview_pending": {k: [list(x) for x in v] for k, v in self.overview_pending.items()}}
        return {k: v for k, v in doc.items() if v is not None}

    @classmethod
    def from_json(cls, d: dict) -> "BuildRecord":
        return cls(d.get("model_version"), d.get("n_bands"), d.get("layout"),
                   {k: ZoneRecord.from_json(z) for k, z in d.get("zones", {}).items()}, d.get("rgb"),
                   OverviewsRecord.from_json(d["overviews"]) if d.get("overviews") else None,
                   {k: [PyramidPending.from_json(e) for e in v] for k, v in d.get("pyramid_pending", {}).items()},
                   {k: [tuple(x) for x in v] for k, v in d.get("overview_pending", {}).items()})


def load_record(sink: Sink) -> BuildRecord:
    raw = sink.get(RECORD)
    if raw is None:
        return BuildRecord()
    try:
        return BuildRecord.from_json(json.loads(raw))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise BuildError(f"not a build record ({type(e).__name__}: {str(e)[:120]}); remove it only with its store",
                         f"{sink}/{RECORD}") from None


def save_json(sink: Sink, key: str, doc) -> None:
    """Write a document whole or not at all."""
    sink.write(key, json.dumps(doc, indent=1).encode())


def save_record(sink: Sink, record: BuildRecord) -> None:
    save_json(sink, RECORD, record.to_json())


def check_record(cfg, record: BuildRecord, n_bands: int, by_zone: dict[int, list]) -> None:
    store = str(cfg.store)
    if record.model_version is not None and record.model_version != cfg.model_version:
        raise BuildError(f"store was built from model_version {record.model_version!r}, "
                         f"refusing to mix in {cfg.model_version!r}", store)
    if record.n_bands not in (None, n_bands):
        raise BuildError(f"store has {record.n_bands} bands, tiles have {n_bands}", store)
    if record.layout not in (None, cfg.layout.__dict__):
        raise BuildError(f"store was built with layout {record.layout}, not {cfg.layout.__dict__}", store)
    have = record.overviews
    if have and not cfg.overviews:
        raise BuildError("store has embedding overviews; building without them would leave them stale "
                         "(drop --no-overviews, or rebuild into a new store)", store)
    if have and cfg.overviews and (have.levels, have.dims) != (ovr.LEVELS, cfg.code_dims):
        raise BuildError(f"store has overviews of {have.levels} levels and a {have.dims}-d code, "
                         f"not {ovr.LEVELS} and {cfg.code_dims}; rebuild into a new store", store)
    if have and cfg.overviews and have.code.method != cfg.code_method:
        raise BuildError(f"store has the {have.code.name} compact code, not {codes.kind(cfg.code_method).name}; "
                         "rebuild into a new store", store)
    for zone_num, ztiles in by_zone.items():
        name = conv.zone_group_name(zone_num)
        zrec = record.zone(name)
        zone, south = zone_key(ztiles)
        if zrec and zrec.south != south:
            raise BuildError(f"zone {name} was built in {conv.proj_code(zone, zrec.south)}; these tiles need "
                             f"{conv.proj_code(zone, south)}; rebuild the zone into a new store", store)


def check_zone_groups(cfg, root, record: BuildRecord) -> None:
    """A store made by another tool (or whose record is lost) must not be mixed blindly."""
    for name in root.group_keys():
        if conv.parse_zone_group_name(name) is None or (name in record.zones and record.zones[name].creating):
            continue  # not a zone, or a zone whose creation a killed run of ours began
        attrs = dict(root[name].attrs)
        if attrs.get("tessera:model_version") != cfg.model_version:
            raise BuildError(f"zone {name} has model_version {attrs.get('tessera:model_version')!r}; "
                             f"refusing to mix in {cfg.model_version!r}", str(cfg.store))
        if name not in record.zones:
            raise BuildError(f"zone {name} exists but has no build record in {cfg.record_sink}; "
                             "refusing to add tiles to it blindly", str(cfg.store))


_ENTRY = re.compile(r"(\d+)_(\d+)")


@dataclass(frozen=True)
class Journal:
    """The shards a run of one zone plan finished: an empty object `<zone>.done/<plan>/<row>_<col>` per shard, written
    by the shard's task once its objects are in place.  A re-run of the same plan skips them; another plan's
    entries are removed when its journal is opened.  Travels to the tasks (a sink and two names)."""
    sink: Sink
    zone: str
    plan_id: str

    @property
    def prefix(self) -> str:
        return f"{self.zone}.done"

    def done(self) -> set[tuple[int, int]]:
        """The shards journalled by an interrupted run of this plan (the journals of other plans are removed)."""
        out, stale = set(), False
        for key in self.sink.keys(self.prefix):
            plan, _, name = key.removeprefix(self.prefix + "/").partition("/")
            m = _ENTRY.fullmatch(name)
            if plan == self.plan_id and m:
                out.add((int(m.group(1)), int(m.group(2))))
            else:
                stale = True
        if stale:
            for key in self.sink.keys(self.prefix):
                if not key.startswith(f"{self.prefix}/{self.plan_id}/"):
                    self.sink.delete(key)
        return out

    def add(self, shard: tuple[int, int]) -> None:
        self.sink.write(f"{self.prefix}/{self.plan_id}/{shard[0]}_{shard[1]}", b"")

    def clear(self) -> None:
        self.sink.delete_all(self.prefix)
