"""Publishing to a local directory and to a real S3 API server (moto in server mode on 127.0.0.1)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import requests
import zarr

from builder.validate import validate
from conftest import run_cli, tree_digest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            requests.get(url, timeout=0.5)
            break
        except requests.ConnectionError:
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait()


S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def test_publish_to_a_local_directory(store, tmp_path):
    dest = tmp_path / "site" / "data"
    p = run_cli("publish", str(store), str(dest), "-q")
    assert "published" in p.stdout
    assert tree_digest(dest) == tree_digest(store)
    assert validate(str(dest)) == []


def test_publish_to_s3(store, s3_server, monkeypatch):
    import boto3
    for k, v in S3_ENV.items():
        monkeypatch.setenv(k, v)
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="tessera")
    p = run_cli("publish", str(store), "s3://tessera/stores/2024.zarr", "-q", "-o", f"endpoint_url={s3_server}",
                env=S3_ENV)
    assert "published" in p.stdout
    opts = {"client_kwargs": {"endpoint_url": s3_server}, "key": "testing", "secret": "testing"}
    url = "s3://tessera/stores/2024.zarr"
    assert validate(url, opts) == []
    remote = zarr.open_group(url, mode="r", storage_options=opts)
    local = zarr.open_group(store, mode="r")
    np.testing.assert_array_equal(remote["utm30"]["scales"][:], local["utm30"]["scales"][:])
    np.testing.assert_array_equal(remote["utm34"]["embeddings"][40:60, 10:90], local["utm34"]["embeddings"][40:60, 10:90])
    v = run_cli("validate", url, "-o", f"endpoint_url={s3_server}", env=S3_ENV)
    assert "valid" in v.stdout
    # sparse stays sparse: no objects for empty shards
    s3 = boto3.client("s3", endpoint_url=s3_server)
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="tessera", Prefix="stores/")["Contents"]}
    local_files = {f"stores/2024.zarr/{p.relative_to(store).as_posix()}" for p in store.rglob("*") if p.is_file()}
    assert keys == local_files


def test_publish_refuses_an_invalid_store(store, tmp_path):
    import json
    import shutil
    bad = tmp_path / "bad.zarr"
    shutil.copytree(store, bad)
    meta = bad / "utm30" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["tessera:utm_zone"] = 12
    meta.write_text(json.dumps(doc))
    p = run_cli("publish", str(bad), str(tmp_path / "dest"), check=False)
    assert p.returncode == 2 and "store is invalid, not publishing" in p.stderr
    assert not (tmp_path / "dest").exists()


def test_publish_to_an_unwritable_destination(store, tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    p = run_cli("publish", str(store), str(blocker / "x"), check=False)
    assert p.returncode == 2 and "not writable" in p.stderr and "Traceback" not in p.stderr
