"""A view across a UTM zone boundary (the demo's Greenwich meridian: utm30 west, utm31 east): every tool runs on
the pixels of both zones, each read on its own grid, checked against zarr-python reads + pyproj + scikit-learn;
a link re-runs the layer on both zones' windows."""
from __future__ import annotations

import numpy as np
from pyproj import Transformer

from app.state import UrlState
from app.tools import region, share
from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, training_pixels, zone_vectors

SPAN = 7000  # metres across the map, centred on the meridian: both zones' tiles (0.05 degrees either side), 10 m vectors
MARGIN = 50  # metres: pixels whose centres lie this far inside the view are in the tools' regions


def inside_view(store, zone: str, view) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, lon/lat (N, 2)) of the zone's valid pixels whose centres lie MARGIN inside the view: pyproj
    from the zone's spatial:transform, the view's Web Mercator bounds by the spherical formula."""
    import zarr
    g = zarr.open_group(store / zone, mode="r")
    t, epsg = g.attrs["spatial:transform"], int(g.attrs["proj:code"].split(":")[1])
    rows, cols = np.nonzero(np.isfinite(zone_vectors(store, zone)[..., 0]))
    lon, lat = Transformer.from_crs(epsg, 4326, always_xy=True).transform(t[2] + (cols + 0.5) * 10,
                                                                          t[5] - (rows + 0.5) * 10)
    x = np.radians(lon) * 6378137.0
    y = 6378137.0 * np.log(np.tan(np.pi / 4 + np.radians(lat) / 2))
    m = MARGIN / np.cos(np.radians(np.mean(lat)))  # ground metres -> Mercator metres
    ok = (x > view.x0 + m) & (x < view.x1 - m) & (y > view.y0 + m) & (y < view.y1 - m)
    return rows[ok], cols[ok], np.stack([lon[ok], lat[ok]], axis=1)


async def across_the_meridian(store, world):
    state = await opened(store)
    state.centre_view(0.0, centre_of_data(store, "utm30")[1], SPAN)
    await state.settle()
    train = []
    for zone in ("utm30", "utm31"):
        for r, c, k in training_pixels(store, zone, world, 2024, per_class=5):
            train.append((zone, r, c, k))
            await state.tools.labels.add(*pixel_lonlat(store, zone, r, c), cls=f"class {k}")
    return state, train


def test_every_tool_runs_on_both_zones_of_a_view_across_the_meridian(store, world):
    from sklearn.cluster import KMeans
    from sklearn.neighbors import KNeighborsClassifier

    async def run():
        state, train = await across_the_meridian(store, world)
        v = state.render_view()
        vec = {z: zone_vectors(store, z) for z in ("utm30", "utm31")}
        seen = {z: inside_view(store, z, v) for z in vec}
        assert all(len(seen[z][0]) > 1000 for z in vec)  # the view shows plenty of both zones

        # classification: k-NN from labels in both zones, every valid pixel of both zones classified
        published = []  # what the map's watcher is given (app/tools/ui.py draws it at once)
        state.tools.classify.param.watch(lambda e: published.append(e.new), "result")
        layer = await state.tools.classify.classify("k-NN", seed=0)
        assert published and all(p.rgba is not None for lay in published for p in lay.all)
        assert all(p.zone.level == 0 for p in layer.all) and "full 128-d vectors" in state.status
        assert [p.zone.name for p in layer.all] == ["utm30", "utm31"] or \
            [p.zone.name for p in layer.all] == ["utm31", "utm30"]
        names = state.tools.labels.names()
        X = np.stack([vec[z][r, c] for z, r, c, _ in train])
        y = np.array([names.index(f"class {k}") for *_, k in train])
        knn = KNeighborsClassifier(n_neighbors=5).fit(X, y)
        for part in layer.all:
            rows, cols, _ = seen[part.zone.name]
            r0, r1, c0, c1 = part.window
            assert (rows >= r0).all() and (rows < r1).all() and (cols >= c0).all() and (cols < c1).all()
            got = part.values[rows - r0, cols - c0]
            want = knn.predict(vec[part.zone.name][rows, cols])
            assert np.isfinite(got).all() and float((got.astype(int) == want).mean()) >= 0.99
        # read back at a lon/lat either side of the meridian, and the legend counts both zones
        for z in vec:
            rows, cols, ll = seen[z]
            i = len(rows) // 2
            assert layer.value_at(*ll[i]) == knn.predict(vec[z][rows[i:i + 1], cols[i:i + 1]])[0]
        n_valid = sum(int(np.isfinite(p.values).sum()) for p in layer.all)
        assert sum(k for _, _, k, _ in state.tools.classify.legend()) == n_valid
        assert "2 zones: " in state.status

        # k-means over the union of both zones' pixels (the parts' windows, read by zarr-python)
        km_layer = await state.tools.cluster.cluster(k=4, seed=3)
        union = np.concatenate([vec[p.zone.name][p.window[0]:p.window[1], p.window[2]:p.window[3]][np.isfinite(p.values)]
                                for p in km_layer.all])
        km = KMeans(n_clusters=4, random_state=3, n_init=3).fit(union)
        assert len(union) == n_valid and abs(state.tools.cluster.inertia - km.inertia_) <= 0.01 * km.inertia_
        # a cluster turned into a class labels pixels of both zones when it has pixels in both
        which = next(k for k in range(4) if all((p.values == k).any() for p in km_layer.all))
        before = len(state.tools.labels.points)
        await state.tools.cluster.to_class(which, "from k-means", count=200)
        new = [p for p in state.tools.labels.points[before:]]
        assert len(new) == 200 and {p.cls for p in new} == {"from k-means"}
        assert min(p.lon for p in new) < 0 < max(p.lon for p in new)
        for p in new[:: 40]:  # each label lies on a pixel of that cluster, in its own zone
            assert km_layer.value_at(p.lon, p.lat) == which

        # scatter: the points come from both zones; brushing every point highlights pixels in both
        sc = await state.tools.scatter.compute(max_points=100_000)
        assert sc.n_valid == n_valid == len(sc.rows) and set(sc.part.tolist()) == {0, 1}
        hl = state.tools.scatter.select(range(len(sc.rows)))
        assert all((p.values == 1).sum() == np.isfinite(p.values).sum() > 1000 for p in hl.all)
        z1 = sc.region.parts[1].zone
        i = int(np.nonzero(sc.part == 1)[0][0])
        lon, lat = z1.centre_lonlat(int(sc.rows[i]) + sc.region.parts[1].window[0],
                                    int(sc.cols[i]) + sc.region.parts[1].window[2])
        assert state.tools.scatter.hover_at(lon, lat)["index"] == i

        # similarity is computed and drawn in both halves of the screen
        await state.select(*seen["utm31"][2][0])
        state.tools.similarity.param.update(sim_from="selection", on=True)
        await state.settle()
        assert len(state.tools.similarity.result.all) == 2
        img = state.tools.similarity.result.image(v, lambda s: np.where(np.isfinite(s), 255, 0)
                                                  .astype(np.uint8)[..., None].repeat(4, axis=-1))
        x_mid = int(round((0.0 - v.x0) / (v.x1 - v.x0) * v.width))  # the meridian's screen column
        assert img[:, :x_mid - 5, 3].sum() > 0 and img[:, x_mid + 5:, 3].sum() > 0
    run_async(run())


def test_a_link_re_runs_a_layer_on_both_zones(store, world):
    async def run():
        state, _ = await across_the_meridian(store, world)
        first = await state.tools.cluster.cluster(3, 7)
        assert len(first.all) == 2
        link = UrlState.from_url("", state.url().to_hash())
        p = first.parts[0]
        assert f"also:{p.zone.name}~0~" + "_".join(map(str, p.window)) in link.tool
        other = await opened(store)  # opened on another view: the link's windows, not the view's
        other.centre_view(link.lon + 0.01, link.lat - 0.005, link.span)
        layer = await share.restore(other, link.tool)
        assert other.tool_window is None and len(layer.all) == 2
        for a, b in zip(layer.all, first.all):
            assert (a.zone.name, tuple(a.window)) == (b.zone.name, tuple(b.window))
            np.testing.assert_array_equal(a.values, b.values)
        # a bad extra window is refused with one line, nothing re-run
        bad = link.tool.replace(f"also:{p.zone.name}~0~", f"also:{p.zone.name}~0~-5_")
        assert await share.restore(other, bad) is None and "Tool layer in the URL ignored" in other.status
        # a zone given twice (its pixels would count twice) or a negative level is refused too
        twice = link.tool.replace(f"also:{p.zone.name}~0~", f"also:{first.zone.name}~0~")
        assert await share.restore(other, twice) is None and "a zone given twice" in other.status
        negative = link.tool.replace(f"also:{p.zone.name}~0~", f"also:{p.zone.name}~-1~")
        assert await share.restore(other, negative) is None and "no overview level -1" in other.status
        assert region.tool_plans(other) and other.tool_window is None
    run_async(run())


def test_a_layer_over_two_zones_exports_one_geotiff_per_zone(store, world):
    """tesseraApi.exportGeoTIFF(name, zone) gives each zone in its own CRS; the page's button saves both, zipped."""
    import io
    import zipfile

    import tifffile

    from app import layers

    def read(data):
        with tifffile.TiffFile(io.BytesIO(data)) as tif:
            geokeys = tif.pages.first.geotiff_tags
            epsg = geokeys["ProjectedCSTypeGeoKey"]
            return tif.pages.first.asarray(), int(getattr(epsg, "value", epsg))

    async def run():
        state, _ = await across_the_meridian(store, world)
        layer = await state.tools.classify.classify("k-NN")
        assert layers.zones(state, "class") == [p.zone.name for p in layer.all] and len(layer.all) == 2
        for p in layer.all:
            values, epsg = read((await layers.layer(state, "class", p.zone.name)).geotiff())
            assert epsg == {"utm30": 32630, "utm31": 32631}[p.zone.name]
            np.testing.assert_array_equal(values, np.where(np.isfinite(p.values), p.values, 255).astype(np.uint8))
        try:
            await layers.layer(state, "class", "utm99")
            raise AssertionError("an unknown zone was exported")
        except layers.ExportError as e:
            assert "no zone 'utm99'" in str(e) and "utm30" in str(e)
        # the embedding preview too: one PNG per zone the view shows
        assert layers.zones(state, "base") == [p.zone.name for p in layer.all]
        name, data, mime, _ = await layers.download(state, "base", "png")
        assert name == "tessera-2024-base-2-zones-png.zip"
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            assert sorted(z.namelist()) == ["tessera-2024-utm30-base.png", "tessera-2024-utm31-base.png"]
        name, data, mime, _ = await layers.download(state, "class", "tif")  # what the page's GeoTIFF button saves
        assert name == "tessera-2024-class-2-zones-tif.zip" and mime == "application/zip"
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            got = {n: read(z.read(n))[1] for n in z.namelist()}
        assert got == {"tessera-2024-utm30-class.tif": 32630, "tessera-2024-utm31-class.tif": 32631}
    run_async(run())


def test_turning_similarity_on_takes_the_tool_layer_off_the_map(store, world):
    """A tool layer is drawn above the similarity layer: turning similarity on hides it (the selector shows it
    again), so the search the user asked for is seen."""
    async def run():
        state, _ = await across_the_meridian(store, world)
        await state.tools.cluster.cluster(3, 1)
        assert state.tools.shown == "cluster"
        await state.select(*centre_of_data(store, "utm31"))
        state.tools.similarity.on = True
        await state.settle()
        assert state.tools.shown == "none" and state.tools.similarity.result is not None
        state.tools.shown = "cluster"  # shown again on request, similarity still on below it
        assert state.tools.layer("cluster") is not None and state.tools.similarity.on
    run_async(run())


def test_a_views_zone_windows_from_its_edges_hold_every_pixel_it_shows(store):
    """render.edge_window projects only the view's edge pixels: its window holds every view pixel that falls in
    the zone's grid (all W x H projected here), at the zone's grid and at overview levels, inside and across the
    grids' edges; equal to it for a view inside the grid. render.screen_box covers every screen pixel the window
    shows."""
    from app import render

    async def run():
        state = await opened(store)
        lon, lat = centre_of_data(store, "utm30")
        for where, span in (((lon, lat), 300), ((0.0, lat), SPAN), ((lon, lat), 60_000), ((lon, lat), 1_600_000)):
            state.centre_view(*where, span)
            v = state.render_view()
            glon, glat = v.lonlat_grid()
            for zone in state.model.zones.values():
                for z in [zone] + [zone.at_level(k) for k in range(1, len(zone.levels))][:3]:
                    full = render.zone_window(z, glon, glat, pad=0)
                    got = render.edge_window(z, v)
                    if full is None:
                        continue
                    r0, r1, c0, c1 = full[2:6]
                    assert got is not None and got[0] <= r0 and got[1] >= r1 and got[2] <= c0 and got[3] >= c1, \
                        (z.name, z.level, span, got, full[2:6])
                    row, col, inside = full[0], full[1], full[-1]
                    box = render.screen_box(z, got, v)
                    shown = inside & (row >= got[0]) & (row < got[1]) & (col >= got[2]) & (col < got[3])
                    ii, jj = np.nonzero(shown)
                    assert box[0] <= ii.min() and ii.max() < box[1] and box[2] <= jj.min() and jj.max() < box[3]
                    if span == 300:  # a view inside the grid: the same window
                        assert z.name != "utm30" or got == (r0, r1, c0, c1)
    run_async(run())


def test_a_capped_view_without_overviews_reads_one_patch_of_ground(plain_store, monkeypatch):
    """Without overviews the region is 10 m windows capped at MAX_REGION around the view's centre: the other zone
    is read only where the primary's capped square reaches it (not as a strip of its own edge, kilometres away),
    and whole when the view is not capped."""
    from app import budgets

    async def run():
        state = await opened(plain_store)
        state.centre_view(0.0, centre_of_data(plain_store, "utm30")[1], SPAN)  # 700 px across: not capped
        assert [w[0].name for w in region.plans(state.model, state.render_view())] == ["utm30", "utm31"] or \
            [w[0].name for w in region.plans(state.model, state.render_view())] == ["utm31", "utm30"]
        monkeypatch.setattr(budgets, "MAX_REGION", 40)  # 400 m around the centre of utm30's data
        state.centre_view(*centre_of_data(plain_store, "utm30"), 16_000)  # the view shows utm31's tile too
        v = state.render_view()
        assert {z.name for z, _ in region.zones_in_view(state.model, v)} >= {"utm30", "utm31"}
        (only,) = region.plans(state.model, v)
        assert only[0].name == "utm30" and max(only[1][1] - only[1][0], only[1][3] - only[1][2]) <= 40
        regions = await region.read(state.model, v)
        assert len(regions.parts) == 1 and "capped at 40 px" in region.describe(regions)
    run_async(run())
