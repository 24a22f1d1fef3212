"""Label files: CSV (lon, lat, class[, value]) and KML import and export, bounded like store metadata, hostile
content (HTML in names, oversized, deeply nested, entity declarations) refused or shown literally, one line per
bad file; the labels imported carry the store's vectors at their pixels (zarr-python reads)."""
from __future__ import annotations

import csv
import json
import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from app.tools import labelfiles, panes
from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, training_pixels, zone_vectors

HOSTILE = '<img src=x onerror="window.__pwned=1">'


async def labelled(store, world):
    state = await opened(store)
    state.centre_view(*centre_of_data(store, "utm30"), 2500)
    await state.settle()
    train = training_pixels(store, "utm30", world, 2024, per_class=4)
    for r, c, k in train:
        await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=HOSTILE if k == train[0][2] else f"{k * 2.5}")
    return state, train


@pytest.mark.parametrize("fmt", ["csv", "kml"])
def test_labels_round_trip_through_csv_and_kml(store, world, fmt):
    state, train = run_async(labelled(store, world))
    L = state.tools.labels
    before = [(p.cls, p.lon, p.lat) for p in L.points]
    text = labelfiles.to_csv(L.points) if fmt == "csv" else labelfiles.to_kml(L.classes, L.points)
    # read back by the standard library's own readers, not the code under test
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["class"] for r in rows] == [b[0] for b in before]
        np.testing.assert_allclose([(float(r["lon"]), float(r["lat"])) for r in rows], [b[1:] for b in before],
                                   atol=1e-7)
        assert all(r["value"] == ("" if r["class"] == HOSTILE else repr(float(r["class"]))) for r in rows)
    else:
        ns = {"k": labelfiles.KML_NS}
        pms = ET.fromstring(text).findall("k:Document/k:Placemark", ns)
        assert [pm.find("k:name", ns).text for pm in pms] == [b[0] for b in before]
        assert "<img" not in text  # the name is XML text, escaped
    L.clear()
    classes, pts = labelfiles.read(text.encode(), f"labels.{fmt}")
    run_async(L.load(classes, pts))
    after = [(p.cls, p.lon, p.lat) for p in L.points]
    assert [a[0] for a in after] == [b[0] for b in before]
    np.testing.assert_allclose([a[1:] for a in after], [b[1:] for b in before], atol=1e-7)
    v = zone_vectors(store, "utm30")
    for p, (r, c, _) in zip(L.points, train):
        np.testing.assert_array_equal(p.vector, v[r, c])
    assert HOSTILE in L.names() and HOSTILE not in panes.labels_html(L) and "&lt;img" in panes.labels_html(L)


def test_csv_value_column_labels_by_number():
    classes, pts = labelfiles.from_csv(b"lat,lon,class,value\n50.8,-0.05,,12.5\n50.81,-0.04,forest,\n")
    assert [c for c, _ in classes] == ["12.5", "forest"]
    assert pts == [("12.5", None, -0.05, 50.8), ("forest", None, -0.04, 50.81)]


@pytest.mark.parametrize("name,data,says", [
    ("a.csv", b"x,y,z\n1,2,3\n", "a.csv: the header has no lon, lat, class column"),
    ("b.csv", b"lon,lat,class\n-0.05,50.8,a\n-0.05,95,b\n", "b.csv: line 3: lon/lat -0.05, 95.0 are outside"),
    ("c.csv", b"lon,lat,class\n-0.05,50.8," + b"x" * 200 + b"\n", "c.csv: line 2: a class name has at most 80"),
    ("d.csv", b"lon,lat,class,value\n-0.05,50.8,,nan\n", "d.csv: line 2: value 'nan' is not a number"),
    ("e.csv", b"lon,lat,class\n" + b"0,0,a\n" * 100_001, "e.csv: more than 100000 labels"),
    ("f.csv", b"lon,lat,class\n" + b"0" * (labelfiles.FILE_MAX + 1), "f.csv: more than 16 MiB (not read)"),
    ("g.kml", b"<kml>" + b"<Folder>" * 100 + b"</Folder>" * 100 + b"</kml>", "g.kml: nested deeper than 64"),
    ("h.kml", b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">]><kml>&lol;</kml>',
     "h.kml: a DOCTYPE or ENTITY declaration"),
    ("i.kml", b"<kml><Placemark><name>a</name><LineString><coordinates>0,0 1,1</coordinates></LineString>"
              b"</Placemark></kml>", "i.kml: placemark 1 is not a Point"),
    ("j.kml", b"<kml><Placemark>", "j.kml: not KML"),
    ("k.geojson", b"[" * 100 + b"]" * 100, "k.geojson: nested deeper than 64"),
    ("l.geojson", b'{"type": "FeatureCollection", "features": [{"geometry": {"type": "Polygon"}}]}',
     "l.geojson: labels: feature 0 is not a Point"),
    ("m.csv", b"\xff\xfe\x00", "m.csv: not UTF-8 text"),
], ids=lambda x: x if isinstance(x, str) and len(x) < 8 else "")
def test_bad_label_files_are_refused_in_one_line_each(name, data, says):
    with pytest.raises(ValueError) as e:
        labelfiles.read(data, name)
    assert str(e.value).startswith(says) and "\n" not in str(e.value), str(e.value)


def test_several_files_load_the_good_ones_and_say_one_line_per_bad_one():
    out = io.StringIO()
    csv.writer(out).writerows([["lon", "lat", "class"], ["-0.05", "50.8", HOSTILE]])
    good = out.getvalue().encode()
    kml = (f'<kml xmlns="{labelfiles.KML_NS}"><Document><Placemark><name>{HOSTILE.replace("<", "&lt;")}</name>'
           "<Point><coordinates>-0.04,50.81,0</coordinates></Point></Placemark></Document></kml>").encode()
    classes, pts, problems = labelfiles.read_many([("good.csv", good), ("bad.kml", b"<kml><Folder>"),
                                                    ("good.kml", kml), ("bad.csv", b"lon\n")])
    assert [c for c, _ in classes] == [HOSTILE]
    assert pts == [(HOSTILE, None, -0.05, 50.8), (HOSTILE, None, -0.04, 50.81)]
    assert len(problems) == 2 and problems[0].startswith("bad.kml: not KML") and problems[1].startswith("bad.csv:")
    assert panes.import_problems_html(problems).count("<li>") == 2
    assert "<img" not in panes.import_problems_html(problems + [HOSTILE])


def label_file(fmt: str, n: int) -> bytes:
    """A label file of `n` labels in the Atlantic (no store's pixel there), written by the standard library."""
    lonlat = [(-30 + (i % 997) * 1e-4, -10 + (i // 997) * 1e-3) for i in range(n)]
    if fmt == "csv":
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([["lon", "lat", "class"]]
                                                       + [[f"{x:.7f}", f"{y:.7f}", f"c{i % 3}"]
                                                          for i, (x, y) in enumerate(lonlat)])
        return out.getvalue().encode()
    if fmt == "kml":
        kml = ET.Element("kml", xmlns=labelfiles.KML_NS)
        doc = ET.SubElement(kml, "Document")
        for i, (x, y) in enumerate(lonlat):
            pm = ET.SubElement(doc, "Placemark")
            ET.SubElement(pm, "name").text = f"c{i % 3}"
            ET.SubElement(ET.SubElement(pm, "Point"), "coordinates").text = f"{x:.7f},{y:.7f}"
        return ET.tostring(kml)
    return json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": [x, y]}, "properties": {"class": f"c{i % 3}"}}
        for i, (x, y) in enumerate(lonlat)]}).encode()


@pytest.mark.parametrize("fmt,n,what", [("csv", 100_000, "rows"), ("geojson", 100_000, "features"),
                                        ("kml", 12_345, "placemarks"), ("csv", 7, "rows")])
def test_reading_a_label_file_reports_the_items_read_up_to_their_total(fmt, n, what):
    """A large label file was read with no word of how far it had got (issue 38): its reader now reports its items read,
    from 0 to the file's total, every 5,000 or so (at most 22 reports for the largest file)."""
    data = label_file(fmt, n)
    told = []
    classes, pts = labelfiles.read(data, f"mine.{fmt}", lambda where: lambda *a: told.append((where, *a)))
    assert (classes, pts) == labelfiles.read(data, f"mine.{fmt}") and len(pts) == n  # the same labels, reported or not
    assert {t[0] for t in told} == {f"mine.{fmt}"} and {t[2:] for t in told} == {(n, what)}, told[:3]
    done = [t[1] for t in told]
    assert done[0] == 0 and done[-1] == n and all(a < b for a, b in zip(done, done[1:])), done
    assert len(done) == (2 if n < 5_000 else n // 5_000 + 1 + (n % 5_000 > 0)) and len(done) <= 22, done


def test_an_import_says_in_the_status_line_how_far_the_reading_of_each_file_got(store, monkeypatch):
    """The labels' import through the side bar (app/tools/ui.py): a CSV's rows and a GeoJSON's features are counted in
    the status line while the file is read, before its labels' pixels are; the file's name is escaped."""
    from bokeh.plotting import figure

    from app import page
    from app.tools.ui import ToolsUI
    monkeypatch.setattr(page, "on", lambda kind, handler: None)  # the page's messages: there is no page on CPython

    async def run():
        state = await opened(store)
        ui = ToolsUI(state, figure())
        seen = []
        state.param.watch(lambda e: seen.append(e.new), "status")
        name = HOSTILE + ".csv"
        await ui.import_labels(label_file("csv", 12_000), name)
        esc = "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;.csv"
        reading = [s for s in seen if s.startswith("Reading ")]
        assert reading == [f"Reading {esc}: {k:,} of 12,000 rows…" for k in (0, 5_000, 10_000, 12_000)], seen
        assert seen.index(reading[-1]) < min(i for i, s in enumerate(seen) if s.startswith("Loaded 12000 labels"))
        seen.clear()
        await ui.import_labels(label_file("geojson", 6_000), "mine.geojson")
        assert seen[:4] == ["Reading mine.geojson: parsing the JSON…", "Reading mine.geojson: 0 of 6,000 features…",
                            "Reading mine.geojson: 5,000 of 6,000 features…",
                            "Reading mine.geojson: 6,000 of 6,000 features…"], seen
        assert seen[-1].startswith("Loaded 6000 labels in 3 classes"), seen
        seen.clear()
        assert ui.import_labels(b"lon,lat,class\n", "empty.csv") is None  # nothing to load
        assert seen == ["Reading empty.csv: 0 of 0 rows…", "<b>Import:</b> no labels in the file."], seen
    run_async(run())
