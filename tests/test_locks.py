"""One writer at a time: a second build or index of the same target is refused in one line while the first holds
its lock, a lock left by a killed command blocks nothing, and the target ends equal to a clean run's.

The commands are the real CLI in subprocesses, held at named phases by the test hook TESSERA_TEST_PAUSE
(builder/hooks.py), so every overlap below is a certainty, not a race won by timing."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli, tree_digest
from test_publish import S3_ENV, s3_server  # noqa: F401  (s3_server: the moto fixture)

DEADLINE_S = 300.0  # a loaded 2-core machine; each wait ends as soon as its condition holds


_started: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_process_left():
    """A test that fails while a command it started is held at a phase kills it (it would wait for ever)."""
    yield
    while _started:
        p = _started.pop()
        if p.poll() is None:
            p.kill()
            p.wait()


def start(*args: str, env: dict) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "builder", *args], cwd=REPO, env=dict(os.environ, **env),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _started.append(p)
    return p


def wait_until(cond, procs: list[subprocess.Popen], what: str) -> None:
    """Wait until cond() holds; fail at once, with its output, if a process ends first."""
    end = time.monotonic() + DEADLINE_S
    while not cond():
        for p in procs:
            if p.poll() is not None:
                out, err = p.communicate()
                raise AssertionError(f"process {p.pid} ended ({p.returncode}) before {what}:\n{out}\n{err}")
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


def paused(gate: Path, p: subprocess.Popen) -> bool:
    return Path(f"{gate}.{p.pid}.waiting").exists()


def refusal(p, target: Path | str, what: str) -> str:
    """The one line a refused command prints (exit 2)."""
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    assert lines[0].startswith(f"error: {target}: {what} (pid "), lines[0]
    return lines[0]


def build_args(tiles_root: Path, out: Path) -> list[str]:
    return ["build", str(tiles_root), "--year", "2024", "--out", str(out), "--workers", "1", "-q"]


def test_a_second_build_of_a_store_being_built_is_refused_in_one_line(tmp_path, tiles_root, store):
    """The first build is held half-way (its first zone group made, shards not yet written); a second build of the
    same store is refused in one line naming the store and the first build's pid, and touches nothing; the first
    then finishes, and the store equals a clean build."""
    out = tmp_path / "s"
    gate = tmp_path / "gate"
    first = start(*build_args(tiles_root, out), env={"TESSERA_TEST_PAUSE": f"zone-created={gate}"})
    wait_until(lambda: paused(gate, first), [first], "the first build reached its first zone")
    before = tree_digest(out)
    second = run_cli(*build_args(tiles_root, out), check=False)
    line = refusal(second, out / "2024.zarr", "another build is writing this store")
    assert f"(pid {first.pid} on " in line
    assert tree_digest(out) == before
    gate.touch()
    assert first.wait(DEADLINE_S) == 0, first.communicate()
    assert tree_digest(out / "2024.zarr") == tree_digest(store)
    assert not (out / "2024.zarr.build" / "build.lock").exists()  # released: removed


def test_two_builds_started_at_once_one_is_refused_and_the_store_equals_a_clean_build(tmp_path, tiles_root, store):
    """Four times: two builds of one new store are held just before they take the lock, then let go together; one
    takes it (and is held again, so the other's attempt surely comes while it is held), the other is refused in
    one line; the store then equals a clean build."""
    clean = tree_digest(store)
    for i in range(4):
        out, go, hold = tmp_path / f"r{i}", tmp_path / f"go{i}", tmp_path / f"hold{i}"
        env = {"TESSERA_TEST_PAUSE": f"lock={go},locked={hold}"}
        procs = [start(*build_args(tiles_root, out), env=env) for _ in range(2)]
        wait_until(lambda: all(paused(go, p) for p in procs), procs, "both builds reached the lock")
        go.touch()
        end = time.monotonic() + DEADLINE_S
        while not any(p.poll() is not None for p in procs):
            assert time.monotonic() < end, "neither build ended"
            time.sleep(0.02)
        loser = next(p for p in procs if p.returncode is not None)
        winner = next(p for p in procs if p is not loser)
        _, err = loser.communicate()
        loser.stderr = err
        refusal(loser, out / "2024.zarr", "another build is writing this store")
        assert paused(hold, winner), "the build that was not refused never held the lock"
        hold.touch()
        assert winner.wait(DEADLINE_S) == 0, winner.communicate()
        assert tree_digest(out / "2024.zarr") == clean, f"round {i}"


def test_a_lock_left_by_a_killed_build_blocks_nothing(tmp_path, tiles_root, store):
    """SIGKILL leaves the lock's file behind (nothing removes it), but nobody holds it: the same command then
    resumes the build at once, and the store equals a clean build."""
    out = tmp_path / "k"
    killed = run_cli(*build_args(tiles_root, out), check=False, env={"TESSERA_TEST_KILL_AT": "zone-created"})
    assert killed.returncode == -9, killed.stderr
    assert (out / "2024.zarr.build" / "build.lock").exists()
    run_cli(*build_args(tiles_root, out))
    assert tree_digest(out / "2024.zarr") == tree_digest(store)


def test_a_refused_first_build_leaves_no_lock_and_no_record_directory(tmp_path, tiles_root):
    """The lock's directory (the record's) is made for the lock; a first build refused for its input removes it."""
    out = tmp_path / "bad"
    p = run_cli("build", str(tiles_root), "--year", "1999", "--out", str(out), "-q", check=False)
    assert p.returncode == 2, p.stderr
    assert not (out / "1999.zarr").exists() and not (out / "1999.zarr.build").exists()


def test_a_second_index_of_the_same_output_is_refused_and_a_killed_ones_lock_blocks_nothing(tmp_path, store):
    """`index`: the same rule for one output file."""
    out = tmp_path / "years.json"
    args = ["index", "years", str(store), "-o", str(out)]
    gate = tmp_path / "gate"
    first = start(*args, env={"TESSERA_TEST_PAUSE": f"index-locked={gate}"})
    wait_until(lambda: paused(gate, first), [first], "the first index command took its lock")
    second = run_cli(*args, check=False)
    refusal(second, out, "another index command is writing this index")
    assert not out.exists()
    gate.touch()
    assert first.wait(DEADLINE_S) == 0, first.communicate()
    good = out.read_bytes()
    killed = run_cli(*args, check=False, env={"TESSERA_TEST_KILL_AT": "index-locked"})
    assert killed.returncode == -9 and (tmp_path / ".years.json.lock").exists()
    run_cli(*args)
    assert out.read_bytes() == good and not (tmp_path / ".years.json.lock").exists()


def test_a_second_publish_to_a_destination_being_written_is_refused_and_a_killed_ones_lock_blocks_nothing(
        tmp_path, store):
    """`publish` to a local directory: the same rule for one destination."""
    dest = tmp_path / "dest"
    args = ["publish", str(store), str(dest), "-q"]
    gate = tmp_path / "gate"
    first = start(*args, env={"TESSERA_TEST_PAUSE": f"publish-locked={gate}"})
    wait_until(lambda: paused(gate, first), [first], "the first publish took its lock")
    before = tree_digest(dest)
    refusal(run_cli(*args, check=False), Path(str(dest)), "another publish is writing this destination")
    assert tree_digest(dest) == before
    gate.touch()
    assert first.wait(DEADLINE_S) == 0, first.communicate()
    killed = run_cli(*args, check=False, env={"TESSERA_TEST_KILL_AT": "publish-locked"})
    assert killed.returncode == -9 and (dest / ".tessera.lock").exists()
    run_cli(*args)
    assert not (dest / ".tessera.lock").exists()
    published = {k: v for k, v in tree_digest(dest).items() if not k.startswith(".")}
    assert published == tree_digest(store)


def test_publish_to_s3_takes_a_lock_object_and_takes_over_only_a_stale_one(tmp_path, store, s3_server):
    """`publish` to s3:// (moto): the lock is an object made only if absent; a second publish is refused while the
    first holds it; a killed publish's lock object (its holder a process of this machine that is gone) is taken
    over at once; another machine's lock is honoured until its lease runs out, then taken over."""
    import json as _json
    import socket

    import boto3
    env = {**S3_ENV, "AWS_ENDPOINT_URL": s3_server}
    s3 = boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="testing", aws_secret_access_key="testing",
                      region_name="us-east-1")
    s3.create_bucket(Bucket="locks")
    dest = "s3://locks/site/2024.zarr"
    key = "site/2024.zarr/.tessera.lock"
    args = ["publish", str(store), dest, "-q"]
    gate = tmp_path / "gate"
    first = start(*args, env={**env, "TESSERA_TEST_PAUSE": f"publish-locked={gate}"})
    wait_until(lambda: paused(gate, first), [first], "the first publish took its lock")
    held = _json.loads(s3.get_object(Bucket="locks", Key=key)["Body"].read())
    assert held["pid"] == first.pid and held["expires"] > time.time()
    second = run_cli(*args, check=False, env=env)
    line = refusal(second, dest, "another publish is writing this destination")
    assert f"(pid {first.pid} on " in line
    gate.touch()
    assert first.wait(DEADLINE_S) == 0, first.communicate()
    keys = lambda: {o["Key"] for o in s3.list_objects_v2(Bucket="locks").get("Contents", [])}
    assert key not in keys()  # released
    killed = run_cli(*args, check=False, env={**env, "TESSERA_TEST_KILL_AT": "publish-locked"})
    assert killed.returncode == -9 and key in keys()
    run_cli(*args, env=env)  # the killed holder's lock is taken over at once
    assert key not in keys()
    elsewhere = {"pid": 1, "host": "another-machine-" + socket.gethostname(), "start": "1", "since": time.time(),
                 "argv": [], "expires": time.time() + 3600}
    s3.put_object(Bucket="locks", Key=key, Body=_json.dumps(elsewhere).encode())
    refusal(run_cli(*args, check=False, env=env), dest, "another publish is writing this destination")
    s3.put_object(Bucket="locks", Key=key, Body=_json.dumps({**elsewhere, "expires": time.time() - 1}).encode())
    run_cli(*args, env=env)
    assert key not in keys()
