"""A build straight into an object store (s3://, moto in server mode on 127.0.0.1) resumes after a kill as a local
build does (tests/test_kills.py): SIGKILLed at a phase, then run again with the same command, it leaves every object
equal to the local build's, key for key and byte for byte, and a build record holding its record.json only.

The build runs on this process's threads (--scheduler threads) so that a kill in a shard task kills the build
itself.  A build that adds a tile north of a zone moves the zone's shards (builder/regrid.py: a copy then a delete
per object on an object store) and is killed at each step of the move."""
from __future__ import annotations

import shutil
import signal

import pytest

from builder import demo
from conftest import PX, run_cli, tree_digest
from test_cluster import KILL_ENV, assert_record_finished, assert_same_objects, env, objects, s3  # noqa: F401
from test_kills import ADD_PHASES, NORTH
from test_publish import s3_server  # noqa: F401  (the moto fixture)

FRESH = ["shard-written", "overviews-level1", "pyramid-level0", "consolidated"]
REGRID = [p for p in ADD_PHASES if p.startswith("regrid")]


def build(tiles, out: str, s3: str, phase: str | None = None) -> int:
    """Run the build command (killed at `phase`); its exit status."""
    kill = {KILL_ENV: phase} if phase else {}
    p = run_cli("build", str(tiles), "--year", "2024", "--out", out, "--scheduler", "threads", "-q", check=False,
                env={**env(s3), **kill})
    assert p.returncode in (0, -signal.SIGKILL), p.stderr
    return p.returncode


@pytest.mark.parametrize("phase", FRESH)
def test_a_first_build_to_s3_killed_at_a_phase_is_resumed(s3, tiles_root, store, phase):
    url = f"s3://stores/fresh-{phase}"
    assert build(tiles_root, url, s3, phase=phase) == -signal.SIGKILL
    assert build(tiles_root, url, s3) == 0
    assert_same_objects(objects(s3, f"{url}/2024.zarr"), tree_digest(store))
    assert_record_finished(s3, url)


@pytest.fixture(scope="module")
def adding(tmp_path_factory, tiles_root, world):
    """The local build of the session's tiles (the base), the tiles with one added north of utm30, and the local
    build that adds it to a copy of the base (the reference)."""
    base = tmp_path_factory.mktemp("base")
    run_cli("build", str(tiles_root), "--year", "2024", "--out", str(base), "--scheduler", "threads", "-q")
    more = tmp_path_factory.mktemp("more") / "tiles"
    shutil.copytree(tiles_root, more)
    demo.write_tile(more, 2024, *NORTH, PX, world=world)
    ref = tmp_path_factory.mktemp("added")
    for name in ("2024.zarr", "2024.zarr.build"):
        shutil.copytree(base / name, ref / name)
    run_cli("build", str(more), "--year", "2024", "--out", str(ref), "--scheduler", "threads", "-q")
    return base, more, ref


@pytest.mark.parametrize("phase", REGRID)
def test_a_build_to_s3_that_moves_a_zone_killed_at_a_phase_is_resumed(s3, adding, phase):
    """The base store and its record copied to the object store (the local and the object store builds are the same
    bytes: tests/test_parity.py), then the build adding the tile killed while it moves utm30's shards."""
    import s3fs
    base, more, ref = adding
    url = f"s3://stores/add-{phase}"
    fs = s3fs.S3FileSystem(key="testing", secret="testing", client_kwargs={"endpoint_url": s3})
    for name in ("2024.zarr", "2024.zarr.build"):
        fs.put(str(base / name), f"{url.removeprefix('s3://')}/{name}", recursive=True)
    assert build(more, url, s3, phase=phase) == -signal.SIGKILL
    assert build(more, url, s3) == 0
    assert_same_objects(objects(s3, f"{url}/2024.zarr"), tree_digest(ref / "2024.zarr"))
    assert_record_finished(s3, url)


def test_a_build_into_a_bucket_that_does_not_exist_is_one_line_and_writes_nothing(s3, tiles_root):
    """Bad input: the object store refuses the first write (the lock object): one line naming the store, exit 2."""
    import boto3
    p = run_cli("build", str(tiles_root), "--year", "2024", "--out", "s3://no-such-bucket/x", "-q", check=False,
                env=env(s3))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    assert lines[0].startswith("error: s3://no-such-bucket/x/2024.zarr: cannot create the store's build record and "
                               "lock ("), lines[0]
    assert "bucket does not exist" in lines[0]
    names = [b["Name"] for b in boto3.client("s3", endpoint_url=s3).list_buckets()["Buckets"]]
    assert "no-such-bucket" not in names


def root_doc(s3: str, url: str) -> dict | None:
    """The store's root zarr.json on the object store, or None while there is none."""
    import json
    import boto3
    bucket, _, key = url.removeprefix("s3://").partition("/")
    client = boto3.client("s3", endpoint_url=s3)
    try:
        return json.loads(client.get_object(Bucket=bucket, Key=f"{key}/zarr.json")["Body"].read())
    except client.exceptions.NoSuchKey:
        return None


def test_the_root_with_the_consolidated_metadata_is_written_last(s3, tiles_root, store):
    """Killed once every shard, overview and pyramid level is written, a first build to s3:// has left no root
    zarr.json that lists the zones (the commit point a reader opens); the same command then writes it, equal
    to the local build's."""
    import json
    url = "s3://stores/commit"
    assert build(tiles_root, url, s3, phase="pyramid-level0") == -signal.SIGKILL
    doc = root_doc(s3, f"{url}/2024.zarr")
    assert doc is None or not doc.get("consolidated_metadata"), sorted(doc)
    assert build(tiles_root, url, s3) == 0
    doc = root_doc(s3, f"{url}/2024.zarr")
    assert doc == json.loads((store / "zarr.json").read_text())
    assert any(k.startswith("utm") for k in doc["consolidated_metadata"]["metadata"])


def test_store_names_a_single_year_store_on_s3(s3, tiles_root, store):
    """`build --store s3://.../2024.zarr` builds that one store on the object store, object for object the
    local build."""
    url = "s3://stores/single/2024.zarr"
    p = run_cli("build", str(tiles_root), "--year", "2024", "--store", url, "--scheduler", "threads", "-q",
                check=False, env=env(s3))
    assert p.returncode == 0, p.stderr
    assert_same_objects(objects(s3, url), tree_digest(store))
