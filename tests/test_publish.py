"""Publishing to a local directory and to a real S3 API server (moto in server mode on 127.0.0.1).

Publish makes the destination a mirror of the source: tested with a rebuilt source that lost a zone,
with real SIGKILLs part-way through, with links, dotfiles and build records in the source, with
destinations that overlap the source, hold links, or hold files publish did not write.  Publish marks a
destination it owns with MARKER, which every published tree here must hold beside the mirror.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from browser_util import free_port
from builder import demo
from builder.validate import validate
from conftest import PLACES, PX, REPO, run_cli, tree_digest
from test_serve import running_server


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 API on 127.0.0.1 (tests/moto_s3.py); its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running_server([sys.executable, str(Path(__file__).with_name("moto_s3.py")), str(port)], url):
        yield url


S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
MARKER = ".tessera-publish.json"  # what publish writes at a destination it owns (docs/guarantees.md: publish's rules)
LOCK = ".tessera.lock"  # publish's lock at a local destination (builder/lock.py), left by a killed publish


def mirror_tree(tree: dict[str, str]) -> dict[str, str]:
    """A published destination's tree (tree_digest or s3_tree) without publish's marker, which must be there."""
    assert MARKER in tree, f"no {MARKER} among {sorted(tree)[:5]}"
    return {k: v for k, v in tree.items() if k != MARKER}


def test_publish_to_a_local_directory(store, tmp_path):
    dest = tmp_path / "site" / "data"
    p = run_cli("publish", str(store), str(dest), "-q")
    assert "published" in p.stdout
    assert mirror_tree(tree_digest(dest)) == tree_digest(store)
    assert validate(str(dest)) == []


def test_publish_to_s3(store, s3_server, monkeypatch):
    import boto3
    for k, v in S3_ENV.items():
        monkeypatch.setenv(k, v)
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="tessera")
    p = run_cli("publish", str(store), "s3://tessera/stores/2024.zarr", "-q", "-o", f"endpoint_url={s3_server}",
                env=S3_ENV)
    assert "published" in p.stdout
    opts = s3_opts(s3_server)
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
    assert keys == local_files | {f"stores/2024.zarr/{MARKER}"}


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


# ------------------------------------------------------------------ a mirror --
@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory, world) -> Path:
    """The `store` fixture's directory rebuilt from two of its four tiles: zone utm34 (and its
    global_rgb chunks) is gone, utm30's grid is smaller, the RGB colours (PCA) differ."""
    tiles = tmp_path_factory.mktemp("tiles-v2")
    for lon, lat in PLACES[:2]:
        demo.write_tile(tiles, 2024, lon, lat, PX, world=world)
    out = tmp_path_factory.mktemp("stores-v2")
    run_cli("build", str(tiles), "--year", "2024", "--out", str(out), "--scheduler", "threads", "-q")
    return out


def published(src_dir: Path) -> dict[str, str]:
    """What a publish of a build's --out directory must put at the destination: the store and catalog.json
    (the build record 2024.zarr.build/ beside the store is not published)."""
    tree = {f"2024.zarr/{k}": v for k, v in tree_digest(src_dir / "2024.zarr").items()}
    tree["catalog.json"] = tree_digest(src_dir)["catalog.json"]
    return tree


def test_republish_is_a_mirror_locally(store, rebuilt, tmp_path):
    old, new = published(store.parent), published(rebuilt)
    gone = set(old) - set(new)
    assert any(k.startswith("2024.zarr/utm34/") for k in gone) and any("/global_rgb/" in k for k in gone)
    dest = tmp_path / "site" / "data"
    run_cli("publish", str(store.parent), str(dest), "-q")
    assert mirror_tree(tree_digest(dest)) == old
    unchanged = next(k for k in new if "/utm31/embeddings/c/" in k and old[k] == new[k])
    mtime = (dest / unchanged).stat().st_mtime_ns
    p = run_cli("publish", str(rebuilt), str(dest), "-q")
    assert mirror_tree(tree_digest(dest)) == new
    assert not (dest / "2024.zarr" / "utm34").exists()  # no empty directories left behind either
    assert (dest / unchanged).stat().st_mtime_ns == mtime  # an unchanged file is not rewritten
    assert f"removed {len(gone)} files" in p.stdout
    assert validate(str(dest / "2024.zarr")) == []


def s3_opts(url: str) -> dict:
    return {"client_kwargs": {"endpoint_url": url}, "key": "testing", "secret": "testing"}


def s3_tree(s3_server: str, bucket: str, prefix: str) -> dict[str, str]:
    """sha256 of every object under `prefix`, by key relative to it (credentials from S3_ENV in the environment)."""
    import boto3
    s3 = boto3.client("s3", endpoint_url=s3_server)
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            out[o["Key"][len(prefix):]] = hashlib.sha256(body).hexdigest()
    return out


def test_republish_is_a_mirror_on_s3(store, rebuilt, s3_server, monkeypatch):
    import boto3
    for k, v in S3_ENV.items():
        monkeypatch.setenv(k, v)
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="mirror")
    url = "s3://mirror/site/data"
    run_cli("publish", str(store.parent), url, "-q", "-o", f"endpoint_url={s3_server}", env=S3_ENV)
    assert mirror_tree(s3_tree(s3_server, "mirror", "site/data/")) == published(store.parent)
    run_cli("publish", str(rebuilt), url, "-q", "-o", f"endpoint_url={s3_server}", env=S3_ENV)
    assert mirror_tree(s3_tree(s3_server, "mirror", "site/data/")) == published(rebuilt)
    assert validate(f"{url}/2024.zarr", s3_opts(s3_server)) == []


# ------------------------------------------------------------ killed publish --
STOP = "TESSERA_PUBLISH_STOP_AFTER"  # test hook: publish SIGSTOPs itself after that many destination changes


def stopped_publish(src: Path, dest: Path, after: int) -> None:
    """Run `python -m builder publish`, let it stop itself after `after` changes at `dest`, then SIGKILL it."""
    log = dest.with_name(f"{dest.name}.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "builder", "publish", str(src), str(dest), "-q"], cwd=REPO,
                                env={**os.environ, STOP: str(after)}, stdout=out, stderr=out)
    try:
        end = time.monotonic() + 180
        while True:
            pid, status = os.waitpid(proc.pid, os.WUNTRACED | os.WNOHANG)
            if pid:
                assert os.WIFSTOPPED(status), f"publish ended instead of stopping after {after} changes: {log.read_text()}"
                break
            assert time.monotonic() < end, f"publish did not stop after {after} changes within 180 s"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()


def chunk_files_decode(dest: Path) -> None:
    """Open the store as readers do (the root's consolidated metadata) and decode the first inner chunk of
    every shard or chunk file present.  Shards and global_rgb chunks have a fixed shape, so this holds
    under the old metadata too; the 1-D coordinate arrays (one chunk of the whole axis) are left out."""
    g = zarr.open_group(dest / "2024.zarr", mode="r")
    for name, node in g.members(max_depth=None):
        cdir = dest / "2024.zarr" / name / "c"
        if not isinstance(node, zarr.Array) or node.ndim == 1 or not cdir.exists():
            continue
        grid = node.shards or node.chunks
        for f in (f for f in cdir.rglob("*") if f.is_file()):
            start = [int(i) * n for i, n in zip(f.relative_to(cdir).parts, grid)]
            node[tuple(slice(s0, s0 + c) for s0, c in zip(start, node.chunks))]


def test_a_killed_publish_leaves_the_old_or_the_new_store(store, rebuilt, tmp_path):
    old, new = published(store.parent), published(rebuilt)
    changed = {k for k in new if old.get(k) != new[k]}
    data = len([k for k in changed if not k.endswith(".json")])
    meta = len(changed) - data
    stale = set(old) - set(new)
    assert data > 2 and meta > 2 and len(stale) > 2
    template = tmp_path / "template"
    run_cli("publish", str(store.parent), str(template), "-q")
    switch = data + meta  # the change that writes the root zarr.json
    for after in sorted({1, data // 2, data, data + 1, switch - 1, switch, switch + 1}):
        dest = tmp_path / f"after-{after}"
        shutil.copytree(template, dest)
        stopped_publish(rebuilt, dest, after)
        now = mirror_tree(tree_digest(dest))
        assert now.pop(LOCK, None) is not None, "the killed publish held no lock"  # held to the end: the kernel freed it
        assert not [k for k in now if Path(k).name.startswith(".")], "a temporary file outlived its rename"
        for k, h in now.items():  # every file is a whole old or new version
            assert h in (old.get(k), new.get(k)), (after, k)
        root = now["2024.zarr/zarr.json"]
        if after < switch:  # data first, root metadata last
            assert root == old["2024.zarr/zarr.json"] and set(old) <= set(now), after
            if after <= data:
                assert all(now[k] == old[k] for k in now if k.endswith(".json")), after
        else:  # the switch: every file of the new store is in place; stale files go only after it
            assert root == new["2024.zarr/zarr.json"] and all(now.get(k) == h for k, h in new.items()), after
            assert len(stale & set(now)) == len(stale) - (after - switch), after
        chunk_files_decode(dest)
        run_cli("publish", str(rebuilt), str(dest), "-q")  # a re-run completes the mirror, and releases its lock
        assert mirror_tree(tree_digest(dest)) == new, after
    assert validate(str(dest / "2024.zarr")) == []


# ------------------------------------------------------- what is not published --
@pytest.fixture()
def src(store, tmp_path) -> Path:
    """A copy of the `store` fixture's build directory: 2024.zarr, 2024.zarr.build/record.json, catalog.json."""
    s = tmp_path / "src"
    shutil.copytree(store.parent, s)
    assert (s / "2024.zarr.build" / "record.json").exists()
    return s


def one_error_line(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    return lines[0]


@pytest.mark.parametrize("kind", ["file-outside", "dir-outside", "file-inside"])
def test_publish_refuses_symlinks(src, tmp_path, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    link = src / "2024.zarr" / "utm30" / "extra"
    target = {"file-outside": Path("/etc/passwd"), "dir-outside": outside, "file-inside": src / "catalog.json"}[kind]
    link.symlink_to(target)
    before = tree_digest(src)
    dest = tmp_path / "dest"
    line = one_error_line(run_cli("publish", str(src), str(dest), check=False))
    assert line.startswith(f"error: {link}: is a symbolic link") and str(target) in line
    assert not dest.exists() and tree_digest(src) == before


def test_publish_leaves_out_dotfiles_and_build_records(src, tmp_path):
    extras = [".env", ".git/config", "2024.zarr/.DS_Store", "2024.zarr/utm30/.cache/notes.txt",
              "2024.zarr/utm30/embeddings/c/0/0/0.1234.partial", "2024.zarr.build/utm30.done", "record.json",
              "old.zarr.build/x.npy"]
    expected = published(src)
    for e in extras:
        (src / e).parent.mkdir(parents=True, exist_ok=True)
        (src / e).write_text("not for publishing")
    dest = tmp_path / "dest"
    run_cli("publish", str(src), str(dest), "-q")
    assert mirror_tree(tree_digest(dest)) == expected


@pytest.mark.parametrize("case", ["dest-inside-src", "dest-is-src", "src-inside-dest", "file-url-inside-src"])
def test_publish_refuses_overlapping_source_and_destination(src, tmp_path, case):
    if case == "src-inside-dest":
        site = tmp_path / "site"
        site.mkdir()
        source, dest = site / "data", str(site)
        src.rename(source)
    else:
        source = src
        dest = {"dest-inside-src": str(src / "mirror"), "dest-is-src": str(src),
                "file-url-inside-src": f"file://{src}/2024.zarr/mirror"}[case]
    before = tree_digest(source)
    line = one_error_line(run_cli("publish", str(source), dest, check=False))
    what = {"dest-is-src": "is the source", "src-inside-dest": "contains the source"}.get(case, "is inside the source")
    assert line.startswith(f"error: {dest.removeprefix('file://')}: destination {what} {source}"), line
    assert tree_digest(source) == before
    assert not (source / "mirror").exists() and not (source / "2024.zarr" / "mirror").exists()


# ------------------------------------------------------------ the destination --
@pytest.mark.parametrize("kind", ["zone-dir", "catalog-file"])
def test_publish_refuses_links_in_the_destination(src, tmp_path, kind):
    """The issue's case: DEST/2024.zarr/utm30 a link to another directory.  Publish wrote the zone's files into
    that directory, then deleted the link as stale (exit 0, the zone gone from DEST).  Now nothing is written."""
    dest = tmp_path / "dest"
    run_cli("publish", str(src), str(dest), "-q")
    outside = tmp_path / "outside"
    outside.mkdir()
    if kind == "zone-dir":  # an empty directory elsewhere stands in for the zone
        link, target = dest / "2024.zarr" / "utm30", outside
        shutil.rmtree(link)
    else:  # someone's file elsewhere stands in for catalog.json
        link, target = dest / "catalog.json", outside / "mine.json"
        target.write_text('{"mine": true}')
        link.unlink()
    link.symlink_to(target)
    before_dest, before_outside = tree_digest(dest), tree_digest(outside)
    line = one_error_line(run_cli("publish", str(src), str(dest), check=False))
    assert line.startswith(f"error: {link}: is a symbolic link to {target}"), line
    assert link.is_symlink() and tree_digest(outside) == before_outside and tree_digest(dest) == before_dest


def test_publish_refuses_a_destination_it_did_not_write_unless_forced(src, tmp_path):
    """A directory of someone's files (no marker): refused, untouched; --force makes it a mirror (its files gone,
    its dotfiles kept), and from then on it is publish's own."""
    dest = tmp_path / "home"
    for rel, text in (("notes.txt", "mine"), ("photos/a.jpg", "jpeg"), (".profile", "dotfile")):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    before = tree_digest(dest)
    line = one_error_line(run_cli("publish", str(src), str(dest), check=False))
    assert line.startswith(f"error: {dest}: holds 2 files (e.g. notes.txt) and no {MARKER}"), line
    assert "--force" in line and tree_digest(dest) == before
    run_cli("publish", str(src), str(dest), "-q", "--force")
    assert mirror_tree(tree_digest(dest)) == {**published(src), ".profile": before[".profile"]}
    run_cli("publish", str(src), str(dest), "-q")  # publish's own now: no --force needed
    assert mirror_tree(tree_digest(dest)) == {**published(src), ".profile": before[".profile"]}


@pytest.mark.parametrize("holding", ["nothing", "dotfiles"])
def test_publish_into_an_empty_directory_needs_no_force(src, tmp_path, holding):
    dest = tmp_path / "site"
    dest.mkdir()
    if holding == "dotfiles":  # e.g. a checkout's .git: publish leaves dotfiles alone, so nothing is at risk
        (dest / ".git").mkdir()
        (dest / ".git" / "config").write_text("[core]")
    before = tree_digest(dest)
    run_cli("publish", str(src), str(dest), "-q")
    assert mirror_tree(tree_digest(dest)) == {**published(src), **before}


def test_publish_to_s3_refuses_a_prefix_it_did_not_write_unless_forced(src, s3_server, monkeypatch):
    import boto3
    for k, v in S3_ENV.items():
        monkeypatch.setenv(k, v)
    s3 = boto3.client("s3", endpoint_url=s3_server)
    s3.create_bucket(Bucket="theirs")
    s3.put_object(Bucket="theirs", Key="www/index.html", Body=b"<html>their site</html>")
    url, opt = "s3://theirs/www", f"endpoint_url={s3_server}"
    before = s3_tree(s3_server, "theirs", "www/")
    line = one_error_line(run_cli("publish", str(src), url, "-q", "-o", opt, env=S3_ENV, check=False))
    assert line.startswith(f"error: {url}: holds 1 file (e.g. index.html) and no {MARKER}"), line
    assert s3_tree(s3_server, "theirs", "www/") == before
    run_cli("publish", str(src), url, "-q", "-o", opt, "--force", env=S3_ENV)
    assert mirror_tree(s3_tree(s3_server, "theirs", "www/")) == published(src)
    run_cli("publish", str(src), url, "-q", "-o", opt, env=S3_ENV)  # the marker object: publish's own now
    assert mirror_tree(s3_tree(s3_server, "theirs", "www/")) == published(src)


def test_publish_carries_a_parquet_index_whole_and_it_reads_the_same_at_the_destination(site, tmp_path):
    """A Kerchunk Parquet index keeps its metadata in `.zmetadata`: a data file whatever its dot."""
    from builder.reader import open_store
    src = tmp_path / "src"
    for year in (2023, 2024):
        shutil.copytree(site / "data" / f"{year}.zarr", src / f"{year}.zarr")
    run_cli("index", "years", str(src / "2023.zarr"), str(src / "2024.zarr"), "-o", str(src / "years.parquet"),
            "--template-base", "{{base}}")
    dest = tmp_path / "dest"
    run_cli("publish", str(src), str(dest), "-q")
    assert (dest / "years.parquet" / ".zmetadata").read_bytes() == (src / "years.parquet" / ".zmetadata").read_bytes()
    shutil.rmtree(src)  # what is read below can only come from the destination
    index = open_store(str(dest / "years.parquet"))
    for year in (2023, 2024):
        g = zarr.open_group(str(dest / f"{year}.zarr" / "utm30"), mode="r")
        valid = np.argwhere(~np.isnan(g["scales"][:]))[::997][:20]
        t = g.attrs["spatial:transform"]
        lon, lat = Transformer.from_crs(g.attrs["proj:code"], "EPSG:4326", always_xy=True).transform(
            t[2] + (valid[:, 1] + 0.5) * t[0], t[5] + (valid[:, 0] + 0.5) * t[4])
        got = index.sample_points(np.column_stack([lon, lat]), year)
        rows, cols = valid[:, 0], valid[:, 1]
        want = g["embeddings"][:][rows, cols].astype(np.float32) * g["scales"][:][rows, cols][:, None]
        np.testing.assert_array_equal(got[[c for c in got.columns if c.startswith("b")]].to_numpy(), want)
