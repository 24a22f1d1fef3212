"""`build URL`: tiles read through fsspec from a real S3 API (moto in server mode on 127.0.0.1) and from a
plain HTTP server with Range and directory listings (aiohttp's static files, in a subprocess on 127.0.0.1).

Each store must equal, file for file, the session's store built from the same tiles on local disk.
"""
from __future__ import annotations

import sys

from browser_util import free_port
from conftest import run_cli, tree_digest
from test_publish import s3_server  # noqa: F401  (the moto fixture)
from test_serve import running_server

# The standard AWS variables, which botocore (hence s3fs) reads: no option on the command line.
S3_VARS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}

# A static file server with directory listings (fsspec's HTTP file system lists a directory from its links)
# that honours Range (aiohttp's FileResponse).
HTTP_SERVER = """
import sys
from aiohttp import web
app = web.Application()
app.router.add_static("/", sys.argv[1], show_index=True)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=None)
"""


def build(tiles: str, out, env=None):
    return run_cli("build", tiles, "--year", "2024", "--out", str(out), "--scheduler", "threads", "-q", env=env)


def test_build_from_tiles_on_s3_equals_the_local_build(s3_server, tiles_root, store, tmp_path):  # noqa: F811
    import boto3
    import s3fs
    env = S3_VARS | {"AWS_ENDPOINT_URL": s3_server}
    boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket="tiles")
    s3fs.S3FileSystem(key="testing", secret="testing", client_kwargs={"endpoint_url": s3_server}).put(
        str(tiles_root), "tiles/v1", recursive=True)
    build("s3://tiles/v1", tmp_path / "out", env=env)
    assert tree_digest(tmp_path / "out" / "2024.zarr") == tree_digest(store)


def test_build_from_tiles_over_http_equals_the_local_build(tiles_root, store, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running_server([sys.executable, "-c", HTTP_SERVER, str(tiles_root), str(port)], base + "/"):
        build(base, tmp_path / "out")
    assert tree_digest(tmp_path / "out" / "2024.zarr") == tree_digest(store)
