"""The parity contract: the serial scheduler, the threads scheduler, the local worker pool and a Dask cluster
(tests/cluster_util.py: a dask-scheduler and two dask-worker processes) write byte-identical stores for the same
input and options, on a local disk and on an object store (moto in server mode on 127.0.0.1).  Every object's bytes
and the key set are compared with the serial scheduler's local build.

The options make the scheduling matter: 64-pixel shards give every zone several shard tasks and every overview
and global_rgb level several units, so tasks finish in another order on every runner."""
from __future__ import annotations

import pytest

from conftest import run_cli, tree_digest
from test_cluster import assert_same_objects, cluster, env, objects, s3, s3_tiles  # noqa: F401  (fixtures)
from test_publish import s3_server  # noqa: F401  (the moto fixture)

OPTS = ("--shard", "64")
SCHEDULERS = ["sync", "threads", "local", "cluster"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiles_root) -> dict[str, str]:
    out = tmp_path_factory.mktemp("reference")
    run_cli("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", *OPTS)
    return tree_digest(out / "2024.zarr")


@pytest.mark.parametrize("target", ["disk", "s3"])
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_every_scheduler_writes_the_same_bytes_on_disk_and_on_s3(tmp_path, tiles_root, s3, s3_tiles, cluster,  # noqa: F811
                                                                 reference, scheduler, target):
    sched = cluster if scheduler == "cluster" else scheduler
    if target == "disk":  # the cluster's workers run on this machine: a local directory is one they can write
        run_cli("build", str(tiles_root), "--year", "2024", "--out", str(tmp_path), "--scheduler", sched, "-q", *OPTS)
        assert_same_objects(tree_digest(tmp_path / "2024.zarr"), reference)
    else:
        url = f"s3://stores/parity-{scheduler}"
        run_cli("build", s3_tiles, "--year", "2024", "--out", url, "--scheduler", sched, "-q", *OPTS, env=env(s3))
        assert_same_objects(objects(s3, f"{url}/2024.zarr"), reference)
