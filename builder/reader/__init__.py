"""Read TESSERA embeddings from Python: our tessera: v1 year stores, the maintainers' geoemb: stores (with
their nested-depth arrays) and the dClimate v1.1 plain copy, each opened as its own kind (store.py).

    from builder.reader import open_store
    s = open_store("https://host/data/2024.zarr")        # or a catalog.json, a directory, {year: url}, a geoemb: store
    s = open_store("https://host/data/catalog.json", allow=["https://other/"])  # a catalog's stores off its origin
    vector, status = s.probe(-0.05, 50.85, 2024)          # status: valid / water / nodata / outside
    df = s.sample_points([(lon, lat), ...], 2024)         # pandas: lon, lat, zone, row, col, status, scale, b0..b127
    ds = s.read_region((w, s, e, n), 2024)                # lazy dask-backed xarray.Dataset of one zone's window
    xr.open_dataset(url, engine="tessera", group="utm30") # the xarray engine (builder.reader.xarray_backend)
    xr.open_datatree(url, engine="tessera")               # one node per UTM zone
    s.view("utm30", 2024).pixels(rows, cols, depth=16)    # a geoemb: v2 store's depth-16 prefixes

Modules: layouts (which layout, zone geometry, the per-layout rules), cache (zarr stores with shard
indexes kept), store (open_store and the store kinds), points, region, xarray_backend.
"""
from builder.reader.layouts import NODATA, OUTSIDE, VALID, WATER
from builder.reader.store import EmbeddingStore, open_store

__all__ = ["open_store", "EmbeddingStore", "VALID", "WATER", "NODATA", "OUTSIDE"]
