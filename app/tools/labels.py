"""Labels: named classes (one colour each) and labelled points, with their pixels' vectors.

The state is `Labels`; GeoJSON (a FeatureCollection of Points with properties `class`, `year` and `color`)
and the saved form are pure functions of it. The saved form goes in the link while it is short, else in storage
(localStorage in the browser, a dict on CPython) with a reference in the link (app/tools/stored.py).
Class names are user text: they are data, escaped wherever they are shown (app/views.html).

Label files, a link's labels and saved labels are data with limits: their text is parsed within the limits of
documents from stores (app/documents.py: 16 MiB, 64 levels), at most MAX_POINTS points, each value checked for its
type and range (coordinates finite numbers within lon/lat ranges, years whole numbers from 1 to 9999, class names
text of at most MAX_NAME characters, colours CSS colours kept as #rrggbb: app/tools/colours.py). Anything else is
refused in one line naming what is wrong and where.
"""
from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass

import numpy as np
import param

from app import documents, views
from builder.core.source import SourceError
from app.tools import colours, lazy, stored
from app.tools.progress import Progress, Report, file_name

PALETTE = ["#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#a6761d", "#f781bf", "#17becf",
           "#999999", "#1b9e77", "#d95f02", "#7570b3"]
STORAGE_KEY = "tessera-explorer-labels"
MAX_NAME = 80
MAX_POINTS = 100_000


@dataclass
class Point:
    cls: str
    year: int | None
    lon: float
    lat: float
    vector: np.ndarray | None  # the pixel's dequantised vector where it was labelled (None: no data there)


class MemoryStorage(dict):
    """What localStorage is for CPython (tests): get/set of strings."""

    def get_item(self, key):
        return self.get(key)

    def set_item(self, key, value):
        self[key] = value

    def remove_item(self, key):
        self.pop(key, None)


class BrowserStorage:
    """The page's localStorage, through app/page.py (Python runs in a worker, which has none)."""

    def get_item(self, key):
        from app import page
        return page.storage_get(key)

    def set_item(self, key, value):
        from app import page
        page.storage_set(key, value)

    def remove_item(self, key):
        from app import page
        page.storage_remove(key)


def next_colour(classes) -> str:
    """The first palette colour no class has yet (the palette again, in turn, once all are taken)."""
    used = {c for _, c in classes}
    return next((c for c in PALETTE if c not in used), PALETTE[len(classes) % len(PALETTE)])


def check_name(name) -> str:
    if isinstance(name, bool) or not isinstance(name, (str, int, float)):
        raise ValueError("class is not text")
    name = str(name).strip()
    if not name:
        raise ValueError("a class name cannot be empty")
    if len(name) > MAX_NAME:
        raise ValueError(f"a class name has at most {MAX_NAME} characters")
    return name


class Labels(param.Parameterized):
    classes = param.List([], doc="[(name, colour)] in the order they were made")
    points = param.List([], item_type=Point)
    active = param.String("", label="Active class", doc="the class a label click adds to")
    mode = param.Boolean(False, label="Click to label")
    new_name = param.String("", label="New class name")

    def __init__(self, app, storage=None, **kw):
        super().__init__(**kw)
        self.app = app
        self.storage = storage if storage is not None else MemoryStorage()
        self._loads = 0  # loads started (load): the latest one applies
        self._adding = None  # the future of the last click's label (add): the next one waits for it
        self.revision = 0  # changes of the class set so far: a tool that reads it stops if it changed meanwhile
        self.link = None  # the labels= value of the link (the set's text, or stored:<id>: app/tools/stored.py)
        self.param.watch(lambda *e: self.save(), ["classes", "points"])
        self.param.watch(self._classes_changed, ["classes"])

    # ------------------------------------------------------------ classes --
    def _classes_changed(self, event) -> None:
        if [n for n, _ in event.old] != [n for n, _ in event.new]:  # a colour changed alone: the same class set
            self.revision += 1

    def names(self) -> list[str]:
        return [n for n, _ in self.classes]

    def colour(self, name: str) -> str:
        return dict(self.classes)[name]

    def add_class(self, name) -> str:
        name = check_name(name)
        if name not in self.names():
            self.classes = [*self.classes, (name, next_colour(self.classes))]
        self.active = name
        return name

    def recolour(self, name: str, colour) -> None:
        """Give class `name` the CSS colour `colour` (ValueError: no such class, or not a colour: app/tools/colours.py)."""
        c = colours.normalise(colour)
        if name not in self.names():
            raise ValueError(f"no class {name!r}")
        if c is None:
            raise ValueError("no colour given")
        self.classes = [(n, c if n == name else k) for n, k in self.classes]

    def rename(self, old: str, new) -> None:
        new = check_name(new)
        if old not in self.names():
            raise ValueError(f"no class {old!r}")
        if new != old and new in self.names():
            raise ValueError(f"there is already a class {new!r}")
        with param.parameterized.batch_call_watchers(self):
            self.classes = [(new if n == old else n, c) for n, c in self.classes]
            self.points = [Point(new if p.cls == old else p.cls, p.year, p.lon, p.lat, p.vector) for p in self.points]
            if self.active == old:
                self.active = new

    def delete(self, name: str) -> None:
        with param.parameterized.batch_call_watchers(self):
            self.classes = [(n, c) for n, c in self.classes if n != name]
            self.points = [p for p in self.points if p.cls != name]
            if self.active == name:
                self.active = self.names()[0] if self.classes else ""

    def clear(self) -> None:
        self.param.update(classes=[], points=[], active="")

    # ------------------------------------------------------------ points --
    async def add(self, lon: float, lat: float, cls=None) -> Point | None:
        """Label the pixel under lon/lat with `cls` (default: the active class; made if new). Quick clicks read their
        pixels at once, together, but are labelled in click order: each waits for the one before it."""
        app = self.app
        name = self.add_class(cls if cls is not None else (self.active or "class 1"))
        before, self._adding = self._adding, asyncio.get_running_loop().create_future()
        done = self._adding
        try:
            px = await app.model.pixel_at(float(lon), float(lat)) if app.model is not None else None
            if before is not None:
                await asyncio.shield(before)  # shielded: a cancelled click does not cancel the one before it
            return self._add_read(name, float(lon), float(lat), px)
        finally:
            if not done.done():
                done.set_result(None)

    def _add_read(self, name: str, lon: float, lat: float, px) -> Point | None:
        app = self.app
        if px is None or not px.valid:
            app.status = views.html("No data at {:.5f}, {:.5f}: not labelled.", float(lon), float(lat))
            return None
        p = Point(name, app.model.year, lon, lat, px.vector)
        self.points = [*self.points, p]
        lazy.prefetch()  # a label means a classification may follow: scikit-learn starts loading now
        app.status = views.html("Labelled {} as <b>{}</b> ({} labels).{}", px.label(), name, len(self.points),
                                stored.note(self.link, len(self.points)))
        return p

    def progress(self, done: int, total: int) -> None:
        """Say on the status line how many of the labels' pixels are read (StoreModel.vectors_of's progress)."""
        self.app.status = views.html("Reading the labels' pixels: {:,} of {:,}…", done, total)

    def add_pixels(self, name: str, zone, window, rows, cols, vectors: np.ndarray, year) -> str:
        """Label pixels of a tool's region as class `name` (made if new): rows/cols in the region's window,
        vectors (N, B) their full vectors (Region.label_vectors) in `year`. Returns the class name."""
        name = self.add_class(name)
        pts = []
        for r, c, vec in zip(rows, cols, vectors):
            lon, lat = zone.centre_lonlat(int(r) + window[0], int(c) + window[2])
            pts.append(Point(name, year, lon, lat, np.array(vec, np.float32)))
        self.points = [*self.points, *pts]
        return name

    async def load(self, classes: list[tuple[str, str | None]], pts: list[tuple[str, int | None, float, float]]):
        """Replace the labels with `classes` and points (cls, year, lon, lat), reading each point's vector (in
        batches, the status line counting them: StoreModel.vectors_at). A load started later wins: this one then
        changes nothing."""
        app, model = self.app, self.app.model
        self._loads += 1
        mine = self._loads

        def progress(done: int, total: int) -> None:
            if self._loads == mine:
                self.progress(done, total)
        try:
            vectors = await model.vectors_at([p[2] for p in pts], [p[3] for p in pts], progress) \
                if model is not None and pts else [None] * len(pts)
        except SourceError as e:
            if self._loads == mine:
                app.status = views.html("<b>Labels not loaded:</b> {}", e)
            return
        if self._loads != mine:
            return
        points = [Point(cls, year, lon, lat, vec) for (cls, year, lon, lat), vec in zip(pts, vectors)]
        names = list(dict.fromkeys([c for c, _ in classes] + [p.cls for p in points]))
        given = dict(classes)
        out = []
        for n in names:
            out.append((n, given.get(n) or next_colour(out)))
        self.param.update(classes=out, points=points, active=names[0] if names else "")
        missing = sum(p.vector is None for p in points)
        self.app.status = views.html("Loaded {} labels in {} classes{}.{}", len(points), len(names),
                                     f"; {missing} have no data in this store and are left out of training"
                                     if missing else "", stored.note(self.link, len(points)))

    def reading(self, where: str) -> Report:
        """The Report (app/tools/progress.py) that shows the reading of file `where` in the status line."""
        def report(done: int, total: int, what: str) -> None:
            self.app.status = views.html("Reading {}: {:,} of {:,} {}…", where, done, total, what)
        return report

    async def import_geojson(self, data, filename: str = "labels.geojson") -> int:
        """Replace the labels with a GeoJSON FeatureCollection's (its bytes or text, or its parsed value), the status
        line saying how far its reading got; the number of labels then. Refused: ValueError, with its one line in the
        status too."""
        where = file_name(filename)
        if isinstance(data, (str, bytes)):  # parsed in one step (json), said first
            self.app.status = views.html("Reading {}: parsing the JSON…", where)
        try:
            classes, pts = from_geojson(data, self.reading(where))
        except ValueError as e:
            self.app.status = views.html("<b>Import refused:</b> {}", e)
            raise
        await self.load(classes, pts)
        return len(self.points)

    def training(self, year: int | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """X (N, B), y (N,) class indices and the class names with at least one labelled vector (of the labels made
        in `year` when given)."""
        pts = [p for p in self.points if p.vector is not None and (year is None or p.year == year)]
        names = [n for n in self.names() if any(p.cls == n for p in pts)]
        if not pts:
            return np.zeros((0, 0), np.float32), np.zeros(0, np.int64), names
        return (np.stack([p.vector for p in pts]).astype(np.float32),
                np.array([names.index(p.cls) for p in pts]), names)

    # ------------------------------------------------------------ saving --
    def save(self) -> None:
        """Keep the labels: in the link when they fit it, else in storage (app/tools/stored.py); the latest set's
        entry holds the same labels= value (the set's text, or its stored:<id>)."""
        self.link = stored.place(self.storage, json.dumps(saved(self.classes, self.points), separators=(",", ":")))
        self.storage.set_item(STORAGE_KEY, self.link or "")

    def compact(self) -> str | None:
        """The labels= value of the URL hash (the set's text, or stored:<id> for a large set), or None."""
        return self.link if self.points else None

    async def restore(self, compact: str | None = None) -> None:
        """Labels from the URL (`compact`) if given, else the latest set from storage."""
        text = compact if compact else self.storage.get_item(STORAGE_KEY)
        if not text:
            return
        try:
            text = stored.resolve(self.storage, text)
            classes, pts = from_saved(documents.parse(text, "the labels= field of the link" if compact
                                                      else "the saved label set"))
        except (ValueError, TypeError, KeyError, IndexError) as e:
            self.app.status = views.html("<b>Saved labels ignored:</b> {}", e)
            return
        await self.load(classes, pts)


def saved(classes, points: list[Point]) -> list:
    """The compact form (storage and URL): [[name, colour, [[lon, lat, year], ...]], ...]."""
    return [[n, c, [[round(p.lon, 7), round(p.lat, 7), p.year] for p in points if p.cls == n]] for n, c in classes]


def from_saved(doc) -> tuple[list, list]:
    """Classes and points (cls, year, lon, lat) of the compact form; ValueError naming what is wrong and where."""
    if not isinstance(doc, list):
        raise ValueError("saved labels are not a list")
    classes, pts = [], []
    for k, entry in enumerate(doc):
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], list)):
            raise ValueError(f"saved class {k} is not [name, colour, points]")
        name = check_name(entry[0])
        try:
            classes.append((name, colours.normalise(entry[1])))
            if len(pts) + len(entry[2]) > MAX_POINTS:
                raise ValueError(f"more than {MAX_POINTS} points")
            for j, item in enumerate(entry[2]):
                if not (isinstance(item, list) and len(item) == 3):
                    raise ValueError(f"saved point {j} of class {name!r} is not [lon, lat, year]")
                try:
                    pts.append((name, whole_year(item[2]), *lonlat(item[0], item[1])))
                except ValueError as e:
                    raise ValueError(f"point {j}: {e}") from None
        except ValueError as e:
            raise ValueError(e if str(e).startswith("saved point") else f"saved class {name!r}, {e}") from None
    return classes, pts


def to_geojson(classes, points: list[Point]) -> dict:
    return {"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": [p.lon, p.lat]},
         "properties": {"class": p.cls, "year": p.year, "color": dict(classes).get(p.cls)}} for p in points]}


def from_geojson(doc, progress: Report | None = None) -> tuple[list, list]:
    """Classes and points (cls, year, lon, lat) of a FeatureCollection of Points: its text (bytes or str, parsed within
    the documents' limits, app/documents.py) or its parsed value; `progress` is told the features read
    (app/tools/progress.py). ValueError with one line naming what is wrong and which feature."""
    if isinstance(doc, bytes):
        try:
            doc = doc.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"the labels file is not UTF-8 text ({e.reason} at byte {e.start})") from None
    if isinstance(doc, str):
        doc = documents.parse(doc, "the labels file")
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection" or not isinstance(doc.get("features"), list):
        raise ValueError("labels: not a GeoJSON FeatureCollection")
    if len(doc["features"]) > MAX_POINTS:
        raise ValueError(f"labels: more than {MAX_POINTS} features")
    classes, pts = {}, []
    read = Progress(len(doc["features"]), "features", progress)
    for i, f in enumerate(doc["features"]):
        read.at(i)
        if not isinstance(f, dict):
            raise ValueError(f"labels: feature {i} is not a GeoJSON Feature object")
        geom, props = f.get("geometry"), f.get("properties")
        coords = geom.get("coordinates") if isinstance(geom, dict) else None
        if not isinstance(geom, dict) or geom.get("type") != "Point" or not isinstance(coords, list) or len(coords) < 2:
            raise ValueError(f"labels: feature {i} is not a Point")
        if props is not None and not isinstance(props, dict):
            raise ValueError(f"labels: feature {i}: properties are not an object")
        if not props or "class" not in props:
            raise ValueError(f"labels: feature {i} has no 'class' property")
        try:
            lon, lat = lonlat(coords[0], coords[1])
            name, year, colour = check_name(props["class"]), whole_year(props.get("year")), \
                colours.normalise(props.get("color"))
        except ValueError as e:
            raise ValueError(f"labels: feature {i}{'' if str(e).startswith('has ') else ':'} {e}") from None
        classes.setdefault(name, colour)
        pts.append((name, year, lon, lat))
    read.end()
    return list(classes.items()), pts


def lonlat(lon, lat) -> tuple[float, float]:
    """A point's lon/lat: numbers (not booleans, not text) within the lon/lat ranges; ValueError otherwise."""
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in (lon, lat)):
        raise ValueError("coordinates are not numbers")
    try:
        lon, lat = float(lon), float(lat)
    except OverflowError:  # an integer of hundreds of digits
        lon = lat = math.inf
    if not (-180 <= lon <= 180 and -90 <= lat <= 90):  # NaN and infinities fail too
        raise ValueError("has coordinates outside lon/lat ranges")
    return lon, lat


def whole_year(year) -> int | None:
    """A point's year: None, or a whole number from 1 to 9999; ValueError otherwise."""
    if year is None:
        return None
    ok = not isinstance(year, bool) and (isinstance(year, int) or isinstance(year, float) and year.is_integer())
    if not ok or not 1 <= year <= 9999:
        raise ValueError("year is not a whole number from 1 to 9999")
    return int(year)


def skipped(n: int) -> str:
    """The status note for `n` pixels of a tool's region left out of new labels (no full vector in their year)."""
    return f" ({n} left out: no data in the full vectors)" if n else ""
