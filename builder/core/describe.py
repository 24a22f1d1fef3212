"""What a store's root metadata says: `describe(root zarr.json) -> StoreInfo` (pure core: stdlib + numpy).

The one reader of a store root's attributes and consolidated metadata.  The explorer's reader
(builder/core/reader.py, geoemb.py), the Python reader (builder/reader/), the virtual index parsers, publish and
the catalog writer all take a store's kind, years, zones, global_rgb levels and extensions from here; the rules that
differ between layouts are builder/core/layout.py's.

    import jsonschema
    info = describe(json.loads(Path("2024.zarr/zarr.json").read_text()), "2024.zarr", jsonschema=jsonschema)
    info.kind, info.years, sorted(info.zones), info.zones["utm30"].arrays["embeddings"]["shape"]

A root of no layout this project reads, an invalid v1 root or a v1 root of another dataset_version raises
`StoreError`: one line, `kind` "invalid" or "version".  A tessera: root is checked against the
convention's schema by the real jsonschema library, which the caller hands in (the core imports
stdlib + numpy only; builder/core/schemacheck.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from builder.core import chunkruns
from builder.core import convention as conv
from builder.core import extensions as ext
from builder.core.chunkruns import ChunkRuns
from builder.core import layout as lay
from builder.core.grid import ZoneGrid
from builder.core.zone import Zone

TESSERA, STACK, GEOEMB = "tessera:", "tessera-stack:", "geoemb:"
# Extensions a zone group may register beyond its layout's own conventions: uuid -> name.
EXTENSIONS = {ext.OVR["uuid"]: ext.OVR["name"]}
PROBLEMS_SHOWN = 3  # schema problems a StoreError names (one line; a hostile root can break a rule a million times)


class StoreError(ValueError):
    """A root this project cannot read: `kind` "invalid" (no known layout, or not valid) or "version"
    (a tessera: root of another dataset_version, `version`)."""

    def __init__(self, kind: str, message: str, version=None):
        super().__init__(message)
        self.kind, self.version = kind, version


@dataclass(frozen=True)
class Level:
    """One level of the global_rgb pyramid: resolution (degrees per pixel), shape and chunk edge."""

    index: int
    res: float
    height: int
    width: int
    chunk: int
    present: ChunkRuns | None = field(default=None, repr=False)  # the chunks that exist, when recorded


def _present(arr: dict, h: int, w: int, chunk: int) -> ChunkRuns | None:
    """A level array's record of its chunks (builder.core.chunkruns), or None: none, or one that is not valid
    (`validate` reports it; readers then ask for every chunk near a zone)."""
    return chunkruns.record_of(arr.get("attributes") or {}, (h, w), (chunk, chunk))


@dataclass(frozen=True)
class ZoneInfo:
    """A zone group `utmNN` from consolidated metadata: its attributes and its arrays by path inside it."""

    name: str
    attrs: dict = field(repr=False)
    arrays: dict = field(repr=False)  # "embeddings", "scales", "overviews/1/code", ... -> array metadata
    extensions: tuple[str, ...] = ()  # names of the EXTENSIONS it registers (e.g. "tessera-ovr:")

    @property
    def overviews(self) -> tuple[dict, ...]:
        """The `tessera-ovr:levels` items (level, path, spatial:shape, spatial:transform) whose arrays the
        consolidated metadata lists, by level; () when the zone registers no tessera-ovr: or lists no level."""
        if ext.OVR["name"] not in self.extensions or not isinstance(self.attrs.get("tessera-ovr:levels"), list):
            return ()
        return tuple(sorted((it for it in self.attrs["tessera-ovr:levels"] if isinstance(it, dict)
                             and all(f"{it.get('path')}/{a}" in self.arrays for a in it.get("arrays") or ["?"])),
                            key=lambda it: it["level"]))

    @property
    def shard(self) -> list[int] | None:
        """The embeddings' shard shape (the outer chunk grid), None when the zone lists no embeddings."""
        emb = self.arrays.get("embeddings")
        return None if emb is None else list(emb["chunk_grid"]["configuration"]["chunk_shape"])

    def zone(self, layout: lay.Layout, **more) -> Zone:
        """The zone these documents describe (builder/core/zone.py): its grid by `layout`'s rule (ValueError, one
        line, for attributes of no grid), its bands from the embeddings' shape (`tessera:n_bands` when it lists
        none), its tessera-ovr: level grids when they run 0, 1, .. without a gap; `more` overrides any field."""
        shard = self.shard or [conv.SHARD] * 3
        emb = self.arrays.get("embeddings")
        n_bands = emb["shape"][layout.band_axis] if emb else self.attrs["tessera:n_bands"]
        grid = layout.zone_grid(self.attrs, shard, self.name)
        ovr = self.overviews
        code = self.attrs.get("tessera-ovr:code")
        code = code if isinstance(code, dict) else {}
        levels = tuple(ZoneGrid.from_level_attrs(grid, it) for it in ovr)
        if [it["level"] for it in ovr] != list(range(len(ovr))) or code.get("method", ext.OVR_PCA) not in ext.OVR_CODE_DTYPES:
            levels = ()  # levels with a gap, or a code of a method this reader does not know: read as without them
        fields = dict(n_bands=int(n_bands), has_rgb=bool(self.attrs.get("tessera:has_rgb_preview", False)),
                      model_version=str(self.attrs.get("tessera:model_version", "")),
                      build_version=str(self.attrs.get("tessera:build_version", "")), levels=levels,
                      code_dims=int(code.get("dims", 0)) if levels else 0, code_method=str(code.get("method", "")))
        fields.update(more)
        return Zone.of_attrs(self.name, self.attrs, layout, shard, **fields)


@dataclass(frozen=True)
class StoreInfo:
    kind: str  # TESSERA (one year store), STACK (multi-year virtual index) or GEOEMB
    layout: lay.Layout  # the reading rules (a stack's are v1's with a leading year axis)
    attrs: dict = field(repr=False)
    years: tuple[int, ...]  # the year (TESSERA), the stacked years (STACK); () for GEOEMB (zones' time axes)
    zones: dict = field(repr=False)  # name -> ZoneInfo; {} when the root has no consolidated metadata
    levels: tuple[Level, ...] = ()  # global_rgb levels listed in consolidated metadata
    extensions: frozenset = frozenset()  # extension names any zone registers
    nodes: dict = field(default_factory=dict, repr=False)  # the consolidated metadata (path -> document)

    @property
    def consolidated(self) -> bool:
        return bool(self.nodes)

    @property
    def year(self) -> int | None:
        return self.years[0] if self.kind == TESSERA else None


def is_stack(attrs: dict) -> bool:
    """A multi-year virtual index root: it registers tessera-stack: exactly (name, uuid and URLs)."""
    return not conv.registered(attrs, ext.STACK_ROOT_CONVENTIONS)


def claims_tessera_root(doc: dict) -> bool:
    """A group whose attributes claim a tessera: root (tessera:dataset_version, not a zone group's): what
    publish validates before it copies anything, valid or not."""
    if not isinstance(doc, dict) or doc.get("node_type") != "group":
        return False
    attrs = doc.get("attributes")
    return isinstance(attrs, dict) and "tessera:dataset_version" in attrs and "tessera:utm_zone" not in attrs


def zones(nodes: dict) -> dict[str, ZoneInfo]:
    """The zone groups among metadata documents by node path (consolidated, or read one by one)."""
    out = {}
    for key in sorted(nodes):
        meta = nodes[key]
        if "/" in key or conv.parse_zone_group_name(key) is None or not isinstance(meta, dict) \
                or meta.get("node_type") != "group":
            continue
        attrs = meta.get("attributes") or {}
        arrays = {k.split("/", 1)[1]: v for k, v in nodes.items()
                  if k.startswith(key + "/") and isinstance(v, dict) and v.get("node_type") == "array"}
        convs = attrs.get("zarr_conventions") if isinstance(attrs.get("zarr_conventions"), list) else []
        found = tuple(EXTENSIONS[c["uuid"]] for c in convs if isinstance(c, dict) and c.get("uuid") in EXTENSIONS)
        out[key] = ZoneInfo(key, attrs, arrays, found)
    return out


def levels(nodes: dict) -> tuple[Level, ...]:
    """The global_rgb levels listed by the `multiscales` layout of the global_rgb group (consolidated metadata,
    or nodes read one by one); the shape and chunk of each level come from its own array."""
    out = []
    g = nodes.get(conv.GLOBAL_GROUP)
    for item in ((g or {}).get("attributes") or {}).get("multiscales", {}).get("layout", []):
        arr = nodes.get(f"{conv.GLOBAL_GROUP}/{item['asset']}/rgb")
        if arr is None:
            continue
        chunk = arr["chunk_grid"]["configuration"]["chunk_shape"][0]
        h, w = arr["shape"][:2]
        t = item.get("spatial:transform")
        res = float(t[0]) if t else conv.GLOBAL_RES0 * 2 ** int(item["asset"])
        out.append(Level(int(item["asset"]), res, int(h), int(w), int(chunk), _present(arr, int(h), int(w), int(chunk))))
    return tuple(out)


def _check_tessera(attrs: dict, stack: bool, where: str, jsonschema) -> None:
    problems = conv.schema_problems(jsonschema, attrs, ext.STACK_ROOT_SCHEMA if stack else conv.ROOT_SCHEMA, where)
    if not problems:
        return
    version = attrs.get("tessera:dataset_version")
    if version is not None and version != conv.DATASET_VERSION:
        raise StoreError("version", f"{where}: tessera:dataset_version {version!r:.80}; this project reads "
                                    f"{conv.DATASET_VERSION!r} stores only", version)
    known = lay.root_kind(attrs) is not None
    more = f"; and {len(problems) - PROBLEMS_SHOWN} more" if len(problems) > PROBLEMS_SHOWN else ""
    raise StoreError("invalid", "; ".join(problems[:PROBLEMS_SHOWN]) + more + ("" if known else "; " + lay.neither(attrs)))


def describe(doc, where: str = "store root", *, jsonschema) -> StoreInfo:
    """A store root's zarr.json (attributes and, when present, consolidated metadata) as a StoreInfo;
    StoreError (one line, naming `where`) for anything else.  `jsonschema`: the jsonschema module."""
    if not isinstance(doc, dict):
        raise StoreError("invalid", f"{where}: its zarr.json is not a JSON object")
    attrs = doc.get("attributes")
    if not isinstance(attrs, dict):
        raise StoreError("invalid", f"{where}: its attributes are not a JSON object")
    nodes = (doc.get("consolidated_metadata") or {}).get("metadata") or {}
    if not isinstance(nodes, dict):
        raise StoreError("invalid", f"{where}: consolidated_metadata.metadata is not a JSON object")
    kind = lay.root_kind(attrs)
    if kind == GEOEMB:
        layout, years = lay.GEOEMB, ()
    else:
        stack = is_stack(attrs)
        _check_tessera(attrs, stack, where, jsonschema)
        kind, layout = (STACK, lay.STACK) if stack else (TESSERA, lay.V1)
        years = tuple(int(y) for y in attrs[ext.STACK_YEARS]) if stack else (int(attrs["tessera:year"]),)
    zs = zones(nodes)
    return StoreInfo(kind, layout, attrs, years, zs, levels(nodes),
                     frozenset(e for z in zs.values() for e in z.extensions), nodes)
