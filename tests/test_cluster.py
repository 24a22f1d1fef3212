"""Building on a real Dask cluster straight into an object store: a dask-scheduler and two dask-worker processes
(tests/cluster_util.py: separate processes, no shared temporary directory) and a moto S3 server in server mode on
127.0.0.1.  The tiles are on the object store too, so the workers read and write nothing but through it.

Every store built here is compared object for object (key set and bytes) with the local build of the same
tiles and options; the build record is left holding its record.json only (journals, quarters and lock gone)."""
from __future__ import annotations

import json
import signal

import pytest

from cluster_util import DEADLINE_S, dask_cluster
from conftest import run_cli, tree_digest
from test_locks import paused, refusal, start, wait_until
from test_publish import S3_ENV, s3_server, s3_tree  # noqa: F401  (s3_server: the moto fixture)

KILL_ENV, PAUSE_ENV = "TESSERA_TEST_KILL_AT", "TESSERA_TEST_PAUSE"


@pytest.fixture(scope="module")
def s3(s3_server):  # noqa: F811
    """The moto server, with the credentials in this process's environment (boto3 in s3_tree reads them)."""
    import boto3
    with pytest.MonkeyPatch.context() as mp:
        for k, v in S3_ENV.items():
            mp.setenv(k, v)
        for bucket in ("tiles", "stores"):
            boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket=bucket)
        yield s3_server


def env(s3: str) -> dict:
    """A process's object store: the standard AWS variables, the endpoint among them."""
    return {**S3_ENV, "AWS_ENDPOINT_URL": s3}


@pytest.fixture(scope="module")
def s3_tiles(s3, tiles_root) -> str:
    import s3fs
    fs = s3fs.S3FileSystem(key="testing", secret="testing", client_kwargs={"endpoint_url": s3})
    fs.put(str(tiles_root), "tiles/t", recursive=True)
    return "s3://tiles/t"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3):
    with dask_cluster(tmp_path_factory.mktemp("cluster"), env(s3)) as (address, _):
        yield address


def build_args(tiles: str, out: str, scheduler: str, *extra: str) -> list[str]:
    return ["build", tiles, "--year", "2024", "--out", out, "--scheduler", scheduler, "-q", *extra]


def objects(s3: str, url: str) -> dict[str, str]:
    """sha256 of every object below an s3:// URL, by key relative to it."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    return s3_tree(s3, bucket, prefix.rstrip("/") + "/")


def assert_same_objects(got: dict[str, str], want: dict[str, str]) -> None:
    """The same keys, each with the same bytes (sha256 by key: `objects`, conftest.tree_digest)."""
    assert got.keys() == want.keys(), (f"only in this build: {sorted(got.keys() - want.keys())[:6]}; "
                                       f"only in the reference: {sorted(want.keys() - got.keys())[:6]}")
    differ = sorted(k for k in got if got[k] != want[k])
    assert not differ, f"{len(differ)} of {len(got)} objects differ from the reference: {differ[:6]}"


def assert_record_finished(s3: str, url: str) -> None:
    """The build record holds its record.json only: no journal, quarter, staging or lock object is left."""
    assert sorted(objects(s3, f"{url}/2024.zarr.build")) == ["record.json"]


def test_a_build_to_s3_on_a_two_worker_cluster_validates_and_equals_a_local_build(s3, s3_tiles, cluster, store):
    """The recipe: --scheduler names the scheduler, the tiles and --out are on the object store.  The client is
    killed should it compute a shard itself (the workers do), the store passes validate and equals the local build
    object for object; --out also gets catalog.json."""
    url = "s3://stores/cluster"
    p = run_cli(*build_args(s3_tiles, url, cluster), env={**env(s3), KILL_ENV: "shard-written"})
    assert f"{url}/2024.zarr: valid tessera:v1 store" in p.stdout, p.stdout
    v = run_cli("validate", f"{url}/2024.zarr", "--deep", env=env(s3))
    assert "valid tessera:v1 store" in v.stdout
    assert_same_objects(objects(s3, f"{url}/2024.zarr"), tree_digest(store))
    assert_record_finished(s3, url)
    import boto3
    doc = boto3.client("s3", endpoint_url=s3).get_object(Bucket="stores", Key="cluster/catalog.json")["Body"].read()
    assert json.loads(doc) == {"stores": [{"year": 2024, "url": "2024.zarr"}]}


def test_a_worker_killed_mid_build_leaves_the_build_to_the_other(tmp_path, s3, s3_tiles, tiles_root):
    """Both workers are held in their first shard task (its objects written, not yet journalled); one is then
    SIGKILLed, the other let go: the build finishes on it, and equals the local build of the same options."""
    gate_a, gate_b = tmp_path / "gate-a", tmp_path / "gate-b"
    url = "s3://stores/worker-killed"
    opts = ("--shard", "64")  # 8 to 15 shard tasks a zone: both workers get one
    with dask_cluster(tmp_path / "c", env(s3), [{PAUSE_ENV: f"shard-written={gate_a}"},
                                                {PAUSE_ENV: f"shard-written={gate_b}"}]) as (address, (a, b)):
        client = start(*build_args(s3_tiles, url, address, *opts), env=env(s3))
        try:
            wait_until(lambda: paused(gate_a, a) and paused(gate_b, b), [client, a, b],
                       "both workers held in a shard task")
            a.send_signal(signal.SIGKILL)
            a.wait(DEADLINE_S)
            gate_b.touch()
            out, err = client.communicate(timeout=DEADLINE_S)
            assert client.returncode == 0, err
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
        assert b.poll() is None  # the other worker is still there: it did the rest
    local = tmp_path / "local"
    run_cli("build", str(tiles_root), "--year", "2024", "--out", str(local), "-q", *opts)
    assert_same_objects(objects(s3, f"{url}/2024.zarr"), tree_digest(local / "2024.zarr"))
    assert_record_finished(s3, url)


@pytest.mark.parametrize("phase", ["zone-created", "zone-recorded", "overviews-level1", "consolidated"])
def test_a_killed_client_is_resumed_by_the_same_command(s3, s3_tiles, cluster, store, phase):
    """The client (the build command) SIGKILLed at a phase: its lock object stays (a process of this machine that is
    gone), and the same command takes it over at once and finishes the build, equal to the local build."""
    url = f"s3://stores/client-killed-{phase}"
    args = build_args(s3_tiles, url, cluster)
    killed = run_cli(*args, check=False, env={**env(s3), KILL_ENV: phase})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "build.lock" in objects(s3, f"{url}/2024.zarr.build")
    run_cli(*args, env=env(s3))
    assert_same_objects(objects(s3, f"{url}/2024.zarr"), tree_digest(store))
    assert_record_finished(s3, url)


def test_a_second_client_on_a_store_being_built_is_refused(tmp_path, s3, s3_tiles, cluster, store):
    """Two clients of one cluster on one store: while the first holds the store's lock object (held half-way, its
    first zone made), the second is refused in one line naming the first's pid and writes nothing; the first then
    finishes, equal to the local build."""
    url = "s3://stores/two-clients"
    args = build_args(s3_tiles, url, cluster)
    gate = tmp_path / "gate"
    first = start(*args, env={**env(s3), PAUSE_ENV: f"zone-created={gate}"})
    try:
        wait_until(lambda: paused(gate, first), [first], "the first client made its first zone")
        before = objects(s3, url)
        second = run_cli(*args, check=False, env=env(s3))
        line = refusal(second, f"{url}/2024.zarr", "another build is writing this store")
        assert f"(pid {first.pid} on " in line
        assert objects(s3, url) == before
        gate.touch()
        out, err = first.communicate(timeout=DEADLINE_S)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert_same_objects(objects(s3, f"{url}/2024.zarr"), tree_digest(store))
    assert_record_finished(s3, url)
