"""Label files besides GeoJSON: CSV (lon, lat, class[, value][, year]) and KML (Placemarks with a name and a Point),
read into the (classes, points) that Labels.load takes, and written from the labels.

They are files from elsewhere, so they are bounded like store metadata (builder/core/bounds.py): at most FILE_MAX bytes
(a catalog's read), at most labels.MAX_POINTS labels, KML nested at most JSON_DEPTH_MAX levels and without a
DOCTYPE (no entities to expand); a GeoJSON goes through bounds.parse_json before labels.from_geojson.  A class
name is user text: it is checked by labels.check_name (not empty, at most MAX_NAME characters) and shown escaped
wherever it appears; a value is a number (regression reads numeric class names: app/tools/regress.py), so a CSV
row with a value and no class is labelled with the value as its class.  Every problem is one line naming the file
and where in it (ValueError), and a bad file loads nothing. Each reader tells a `progress` Report how many of its
rows or placemarks it has read (app/tools/progress.py).
"""
from __future__ import annotations

import csv
import io
import math
import re
import xml.etree.ElementTree as ET

from app.tools.labels import MAX_POINTS, check_name, from_geojson
from app.tools.progress import Progress, Report, file_name
from builder.core.bounds import JSON_DEPTH_MAX, ROOT_JSON_MAX, parse_json

FILE_MAX = ROOT_JSON_MAX
KML_NS = "http://www.opengis.net/kml/2.2"
SHOWN = 40  # characters of a bad value quoted in a message
PLACEMARK_END = re.compile(r"</(?:[\w.-]+:)?Placemark\s*>")  # a placemark's closing tag, with or without a prefix


def _text(data, where: str) -> str:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > FILE_MAX:
        raise ValueError(f"{where}: more than {FILE_MAX // 2**20} MiB (not read)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _lonlat(lon, lat, where: str) -> tuple[float, float]:
    try:
        x, y = float(lon), float(lat)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: lon/lat {str(lon)[:SHOWN]!r}, {str(lat)[:SHOWN]!r} are not numbers") from None
    if not (math.isfinite(x) and math.isfinite(y) and -180 <= x <= 180 and -90 <= y <= 90):
        raise ValueError(f"{where}: lon/lat {x}, {y} are outside their ranges")
    return x, y


def _name(name, where: str) -> str:
    try:
        return check_name(name)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def from_csv(data, where: str = "labels.csv", progress: Report | None = None) -> tuple[list, list]:
    """Classes and points (cls, year, lon, lat) of a CSV with a header naming lon, lat and class (value, year
    optional); `progress` is told the rows read (app/tools/progress.py: the lines after the header)."""
    text = _text(data, where)
    rows = csv.reader(io.StringIO(text))
    try:
        head = [h.strip().lower() for h in next(rows)]
    except StopIteration:
        raise ValueError(f"{where}: empty") from None
    except csv.Error as e:
        raise ValueError(f"{where}: line 1: {e}") from None
    col = {h: i for i, h in enumerate(head)}
    missing = [h for h in ("lon", "lat") if h not in col] + ([] if "class" in col or "value" in col else ["class"])
    if missing:
        raise ValueError(f"{where}: the header has no {', '.join(missing)} column (it needs lon, lat, class[, value])")
    classes, pts = {}, []
    # the lines after the header (as io.StringIO splits them, at "\n"), which csv.reader counts in line_num
    read = Progress(text.count("\n") + (not text.endswith("\n")) - rows.line_num, "rows", progress)
    try:
        for i, row in enumerate(rows, start=2):
            read.at(rows.line_num - 1)
            if not row:
                continue
            if len(pts) >= MAX_POINTS:
                raise ValueError(f"{where}: more than {MAX_POINTS} labels")
            get = lambda h: row[col[h]].strip() if h in col and col[h] < len(row) else ""
            lon, lat = _lonlat(get("lon"), get("lat"), f"{where}: line {i}")
            value = get("value")
            if value:
                try:
                    v = float(value)
                except ValueError:
                    v = math.nan
                if not math.isfinite(v):
                    raise ValueError(f"{where}: line {i}: value {value[:SHOWN]!r} is not a number")
            name = _name(get("class") or value, f"{where}: line {i}")
            year = get("year")
            if year and not year.isdigit():
                raise ValueError(f"{where}: line {i}: year {year[:SHOWN]!r} is not a year")
            classes.setdefault(name, None)
            pts.append((name, int(year) if year else None, lon, lat))
    except csv.Error as e:
        raise ValueError(f"{where}: {e}") from None
    read.end()
    return list(classes.items()), pts


def to_csv(points) -> str:
    """lon, lat, class, value (the class as a number when it is one), year: one row per label."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["lon", "lat", "class", "value", "year"])
    for p in points:
        try:
            value = repr(float(p.cls)) if math.isfinite(float(p.cls)) else ""
        except ValueError:
            value = ""
        w.writerow([f"{p.lon:.7f}", f"{p.lat:.7f}", p.cls, value, "" if p.year is None else p.year])
    return out.getvalue()


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def from_kml(data, where: str = "labels.kml", progress: Report | None = None) -> tuple[list, list]:
    """Classes and points of a KML's Placemarks: its name is the class, its Point the place (other geometries are
    refused in one line); `progress` is told the placemarks read (app/tools/progress.py), of as many as the text has
    closing Placemark tags."""
    text = _text(data, where)
    if "<!DOCTYPE" in text.upper() or "<!ENTITY" in text.upper():
        raise ValueError(f"{where}: a DOCTYPE or ENTITY declaration (not read)")
    read = Progress(len(PLACEMARK_END.findall(text)), "placemarks", progress)
    classes, pts, depth, n = {}, [], 0, 0
    try:
        for event, el in ET.iterparse(io.StringIO(text), events=("start", "end")):
            if event == "start":
                depth += 1
                if depth > JSON_DEPTH_MAX:
                    raise ValueError(f"{where}: nested deeper than {JSON_DEPTH_MAX} levels (not read)")
                continue
            depth -= 1
            if _local(el.tag) != "Placemark":
                continue
            n += 1
            read.at(n)
            if len(pts) >= MAX_POINTS:
                raise ValueError(f"{where}: more than {MAX_POINTS} labels")
            name = next((c.text for c in el if _local(c.tag) == "name"), None)
            coords = [c for c in el.iter() if _local(c.tag) == "coordinates"]
            if not any(_local(c.tag) == "Point" for c in el.iter()) or len(coords) != 1:
                raise ValueError(f"{where}: placemark {n} is not a Point")
            parts = (coords[0].text or "").strip().split(",")
            if len(parts) < 2:
                raise ValueError(f"{where}: placemark {n} has no lon,lat coordinates")
            lon, lat = _lonlat(parts[0], parts[1], f"{where}: placemark {n}")
            name = _name(name or "", f"{where}: placemark {n}")
            classes.setdefault(name, None)
            pts.append((name, None, lon, lat))
            el.clear()
    except ET.ParseError as e:
        raise ValueError(f"{where}: not KML ({e})") from None
    read.end()
    return list(classes.items()), pts


def to_kml(classes, points) -> str:
    """A KML Document: one Placemark per label (name: its class; the class colour as its icon style)."""
    kml = ET.Element("kml", xmlns=KML_NS)
    doc = ET.SubElement(kml, "Document")
    ET.SubElement(doc, "name").text = "tessera-explorer labels"
    for p in points:
        pm = ET.SubElement(doc, "Placemark")
        ET.SubElement(pm, "name").text = p.cls
        if p.year is not None:
            ET.SubElement(pm, "description").text = f"year {p.year}"
        ET.SubElement(ET.SubElement(pm, "Point"), "coordinates").text = f"{p.lon:.7f},{p.lat:.7f}"
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(kml, encoding="unicode") + "\n"


def read(data, filename: str, progress=None) -> tuple[list, list]:
    """(classes, points) of a label file by its name's extension: .csv, .kml, else GeoJSON (.geojson, .json);
    `progress(where)`, when given, is the file's Report (app/tools/progress.py)."""
    where = file_name(filename)
    report = progress(where) if progress is not None else None
    ext = where.lower().rsplit(".", 1)[-1]
    if ext == "csv":
        return from_csv(data, where, report)
    if ext == "kml":
        return from_kml(data, where, report)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    doc = parse_json(raw, where, FILE_MAX)
    try:
        return from_geojson(doc, report)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def read_many(files, progress=None) -> tuple[list, list, list[str]]:
    """(classes, points, problems) of several label files [(filename, data)]: the good files' labels together,
    and one line per bad file (which loads nothing); `progress` as read's."""
    classes, pts, problems = {}, [], []
    for filename, data in files:
        try:
            c, p = read(data, filename, progress)
        except ValueError as e:
            problems.append(str(e).splitlines()[0][:300] if str(e) else f"{filename}: unreadable")
            continue
        for name, colour in c:
            classes.setdefault(name, colour)
        pts += p
    if len(pts) > MAX_POINTS:
        problems.append(f"more than {MAX_POINTS} labels in the files together: only the first {MAX_POINTS} loaded")
        pts = pts[:MAX_POINTS]
    return list(classes.items()), pts, problems
