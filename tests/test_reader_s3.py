"""builder.reader over s3:// from a real S3 API server (moto in server mode on 127.0.0.1).

The stores are uploaded as they are (a tessera: v1 year store built by the CLI, a geoemb: store from the
tests' own writer); values are checked against the tiles themselves and against zarr-python reading the
local copies.
"""
from __future__ import annotations

import numpy as np
import pytest
import zarr

from builder.reader import open_store
from geoemb_writer import YEARS, tile_points
from test_publish import S3_ENV, s3_opts, s3_server  # noqa: F401  (s3_server: the moto fixture)


@pytest.fixture(scope="module")
def bucket(s3_server, store, geoemb_store):  # noqa: F811
    import boto3
    import s3fs
    with pytest.MonkeyPatch.context() as mp:
        for k, v in S3_ENV.items():
            mp.setenv(k, v)
        boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="stores")
        fs = s3fs.S3FileSystem(**s3_opts(s3_server))
        fs.put(str(store), "stores/v1/2024.zarr", recursive=True)
        fs.put(str(geoemb_store), "stores/geoemb.zarr", recursive=True)
        yield s3_server


@pytest.mark.parametrize("layout", ["tessera:v1", "geoemb:"])
def test_probe_sample_and_region_over_s3(bucket, tiles2, store, geoemb_store, layout):
    url = "s3://stores/v1/2024.zarr" if layout == "tessera:v1" else "s3://stores/geoemb.zarr"
    s = open_store(url, **s3_opts(bucket))
    assert s.layout == layout and s.years == ([2024] if layout == "tessera:v1" else YEARS)
    pts = tile_points(tiles2, 2024, layout)
    for p in pts:
        vec, status = s.probe(p["lon"], p["lat"], 2024)
        assert status == p["status"], p
        if status == "valid":
            np.testing.assert_array_equal(vec, p["vector"])
    df = s.sample_points([(p["lon"], p["lat"]) for p in pts], 2024)
    assert list(df["status"]) == [p["status"] for p in pts]
    # a window of one zone, against zarr-python on the local copy
    local = zarr.open_group(str(store if layout == "tessera:v1" else geoemb_store), mode="r")["utm30"]
    zone = s.zones(2024)["utm30"]
    c = next(p for p in pts if p["status"] == "valid" and p["zone"] == "utm30")
    ds = s.read_region((c["lon"] - 0.002, c["lat"] - 0.0015, c["lon"] + 0.002, c["lat"] + 0.0015), 2024, zone="utm30")
    y0 = int(round((zone.grid.origin_n - float(ds.y[0]) - 5) / 10))
    x0 = int(round((float(ds.x[0]) - zone.grid.origin_e - 5) / 10))
    h, wd = ds.sizes["y"], ds.sizes["x"]
    if layout == "tessera:v1":
        q, sc = local["embeddings"][y0:y0 + h, x0:x0 + wd], local["scales"][y0:y0 + h, x0:x0 + wd]
    else:
        t = YEARS.index(2024)
        q = np.moveaxis(local["embeddings"][t, :, y0:y0 + h, x0:x0 + wd], 0, -1)
        sc = local["scales"][t, y0:y0 + h, x0:x0 + wd]
    with np.errstate(invalid="ignore"):
        want = q.astype(np.float32) * sc[..., None]
    want[~np.isfinite(sc)] = np.nan
    assert h > 10 and wd > 10 and np.isfinite(want).any()
    np.testing.assert_array_equal(ds.embeddings.values, want)
