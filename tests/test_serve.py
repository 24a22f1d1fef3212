"""The dev server (`python -m builder serve`) against hostile requests, its cache headers, and netlify.toml's.

Requests go over a raw socket so that no client normalises the path first; responses are parsed
by http.client.  Servers are real processes on 127.0.0.1, started by `running_server` (which the
moto fixture of test_publish.py uses too).
"""
from __future__ import annotations

import http.client
import re
import socket
import subprocess
import sys
import time
import tomllib
from contextlib import contextmanager
from pathlib import Path

import pytest

from browser_util import free_port, wait_http
from conftest import REPO

SHARD = bytes(range(256)) * 40  # 10240 bytes standing in for a shard file


# ------------------------------------------------------------ server processes --
@contextmanager
def running_server(cmd: list[str], url: str, deadline: float = 60.0):
    """Run `cmd`, wait until `url` gives any HTTP answer, yield the process; it is stopped however this ends.

    browser_util.wait_http counts refused connections and read timeouts as "not up yet" and raises
    after `deadline` seconds, or at once if the process exits.
    """
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(url, proc, deadline)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_readiness_wait_gives_up_on_a_server_that_never_answers():
    """A server that accepts connections but never answers raises a clear error after the deadline, and is stopped."""
    port = free_port()
    silent = ("import socket, sys\ns = socket.create_server(('127.0.0.1', int(sys.argv[1])))\nheld = []\n"
              "while True:\n    held.append(s.accept())\n")
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=rf"127\.0\.0\.1:{port}/ did not answer within 3 s"):
        with running_server([sys.executable, "-c", silent, str(port)], f"http://127.0.0.1:{port}/", deadline=3):
            pass
    assert time.monotonic() - t0 < 60
    with pytest.raises(ConnectionRefusedError):  # the process is gone, so is its socket
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_readiness_wait_reports_a_server_that_exits():
    port = free_port()
    with pytest.raises(RuntimeError, match="exited with code 3 before answering"):
        with running_server([sys.executable, "-c", "raise SystemExit(3)"], f"http://127.0.0.1:{port}/"):
            pass


# ------------------------------------------------------------------- fixtures --
@pytest.fixture(scope="module")
def site_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("served")
    (root / "index.html").write_text("<html>explorer</html>")
    store = root / "data" / "2024.zarr"
    (store / "utm30" / "embeddings" / "c" / "0" / "0").mkdir(parents=True)
    (store / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    (store / "utm30" / "embeddings" / "c" / "0" / "0" / "0").write_bytes(SHARD)
    (root / "data" / "catalog.json").write_text('{"stores": []}')
    (root / "vendor" / "panel" / "1.7.5" / "dist" / "css").mkdir(parents=True)
    (root / "vendor" / "panel" / "1.7.5" / "dist" / "css" / "button.css").write_text(".x {}")
    (root / "vendor" / "bokeh").mkdir(parents=True)
    (root / "vendor" / "bokeh" / "bokeh.min.js").write_text("var x;")
    (root / ".env").write_text("SECRET=1")
    (root / "data" / ".hidden").mkdir()
    (root / "data" / ".hidden" / "x.json").write_text("{}")
    (root / "data" / "v2.zarr" / ".zarray").mkdir(parents=True)  # a directory of that name: not served
    (root / "data" / "v2.zarr" / ".zarray" / "x").write_text("{}")
    (root / "data" / "years.parquet").mkdir()
    (root / "data" / "years.parquet" / ".zmetadata").write_text('{"metadata": {}}')
    (root / "data" / "passwd").symlink_to("/etc/passwd")  # a link out of the served root
    return root


def serve_cmd(root: Path, port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "builder", "serve", "--root", str(root), "--port", str(port), *flags]


@pytest.fixture(scope="module")
def port(site_root):
    p = free_port()
    with running_server(serve_cmd(site_root, p), f"http://127.0.0.1:{p}/index.html"):
        yield p


def raw(port: int, method: str, target: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """One request with `target` sent byte for byte; (status, headers with lower-case names, body)."""
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
             *(f"{k}: {v}" for k, v in (headers or {}).items())]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        resp = http.client.HTTPResponse(s, method=method)
        resp.begin()
        body = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


SHARD_PATH = "/data/2024.zarr/utm30/embeddings/c/0/0/0"


# ------------------------------------------------------------- hostile input --
@pytest.mark.parametrize("target", [
    "/%00", "/index.html%00", "/data/%00/x",                    # NUL
    "/..%2f..%2fetc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/../../etc/passwd", "/data/..%5c..%5cindex.html",
    pytest.param("/" + "a" * 4000, id="long-name"), pytest.param("/data/" + "b" * 300, id="long-name-2"),
    pytest.param("/a" * 1200, id="long-path"),
    "/%zz", "/%", "/%4", "/%ff", "/%c0%af", "/%e2%82",           # invalid percent-encoding or UTF-8
    "/data/%0a", "/data/passwd",                                 # control character; a link out of the root
])
def test_malformed_paths_get_400_or_404_never_500(port, target):
    status, _, body = raw(port, "GET", target)
    assert status in (400, 404), (target, status)
    assert b"root:" not in body


@pytest.mark.parametrize("target", ["/.env", "/%2eenv", "/data/.hidden/x.json", "/data/%2Ehidden/x.json",
                                    "/data/v2.zarr/.zarray/x", "/data/.zmetadata/../.env"])
def test_dotfiles_are_404(port, target):
    assert raw(port, "GET", target)[0] == 404


def test_zarr_and_kerchunk_metadata_files_are_served(port):
    status, _, body = raw(port, "GET", "/data/years.parquet/.zmetadata")
    assert (status, body) == (200, b'{"metadata": {}}')


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "TRACE", "PROPFIND"])
def test_other_methods_get_405(port, site_root, method):
    status, headers, _ = raw(port, method, "/index.html", {"Content-Length": "0"})
    assert (status, headers.get("allow")) == (405, "GET, HEAD, OPTIONS")
    assert raw(port, method, "/written.txt", {"Content-Length": "0"})[0] == 405
    assert not (site_root / "written.txt").exists()


def test_get_head_options(port):
    assert raw(port, "GET", "/index.html")[:3:2] == (200, b"<html>explorer</html>")
    status, headers, body = raw(port, "HEAD", "/index.html")
    assert (status, body, headers["content-length"]) == (200, b"", "21")
    assert raw(port, "OPTIONS", SHARD_PATH)[0] == 204


def test_ranges(port):
    status, headers, body = raw(port, "GET", SHARD_PATH, {"Range": "bytes=100-199"})
    assert (status, body, headers["content-range"]) == (206, SHARD[100:200], f"bytes 100-199/{len(SHARD)}")
    status, _, body = raw(port, "GET", SHARD_PATH, {"Range": "bytes=-16"})
    assert (status, body) == (206, SHARD[-16:])
    for bad in ["bytes=-0", "bytes=-00", f"bytes={len(SHARD)}-", "bytes=9-2"]:
        status, headers, _ = raw(port, "GET", SHARD_PATH, {"Range": bad})
        assert (status, headers.get("content-range")) == (416, f"bytes */{len(SHARD)}"), bad


# ------------------------------------------------------------------- caching --
@pytest.mark.parametrize("target", ["/data/2024.zarr/zarr.json", "/data/catalog.json"])
def test_metadata_is_revalidated(port, target):
    status, headers, _ = raw(port, "GET", target)
    assert status == 200 and headers["cache-control"] == "no-cache"
    etag = headers["etag"]
    status, headers, body = raw(port, "GET", target, {"If-None-Match": etag})
    assert (status, body, headers["etag"]) == (304, b"", etag)
    assert raw(port, "GET", target, {"If-None-Match": '"other"'})[0] == 200


def test_shards_may_be_cached(port):
    status, headers, _ = raw(port, "GET", SHARD_PATH)
    assert status == 200 and "max-age=3600" in headers["cache-control"] and "no-cache" not in headers["cache-control"]
    assert headers["access-control-allow-origin"] == "*" and headers["accept-ranges"] == "bytes"


def test_versioned_and_content_named_files_are_cached_for_good_and_the_others_revalidate(port, site_root):
    """vendor/panel/<version>/ (the stylesheets the page preloads, app/web/boot.js) is fixed per version, and the
    JavaScript bundle's chunks (vendor/chunks/, builder/site.py) are named by their content; vendor/bokeh/ and the
    bundle's entry are not versioned by their paths. The same rules as netlify.toml's."""
    (site_root / "vendor" / "panel" / "1.7.5" / "dist" / "panel.json").write_text("{}")  # metadata of a version too
    (site_root / "vendor" / "chunks").mkdir(exist_ok=True)
    (site_root / "vendor" / "chunks" / "blosc-OVWLUYHB.mjs").write_text("export default 1;")
    (site_root / "vendor" / "tessera.mjs").write_text("export const x = 1;")
    for target, want in (("/vendor/panel/1.7.5/dist/css/button.css", "public, max-age=31536000, immutable"),
                         ("/vendor/panel/1.7.5/dist/panel.json", "public, max-age=31536000, immutable"),
                         ("/vendor/chunks/blosc-OVWLUYHB.mjs", "public, max-age=31536000, immutable"),
                         ("/vendor/tessera.mjs", "no-cache"),
                         ("/vendor/bokeh/bokeh.min.js", "no-cache"), ("/index.html", "no-cache")):
        status, headers, _ = raw(port, "GET", target)
        assert (status, headers["cache-control"]) == (200, want), target
        cc = netlify_headers(target).get("cache-control", [])  # Netlify's own default where no rule sets one:
        assert cc[-1:] == [want] if "immutable" in want else not cc, (target, cc)  # max-age=0, must-revalidate


def test_no_range_and_no_cors_flags(site_root):
    p = free_port()
    with running_server(serve_cmd(site_root, p, "--no-range", "--no-cors"), f"http://127.0.0.1:{p}/index.html"):
        status, headers, body = raw(p, "GET", SHARD_PATH, {"Range": "bytes=0-9"})
        assert (status, body) == (200, SHARD)  # the whole file, as a host that ignores Range sends it
        assert "accept-ranges" not in headers and "access-control-allow-origin" not in headers
        status, headers, _ = raw(p, "GET", "/data/catalog.json")
        assert headers["cache-control"] == "no-cache"
        assert raw(p, "GET", "/data/catalog.json", {"If-None-Match": headers["etag"]})[0] == 304
        assert raw(p, "GET", "/.env")[0] == 404


# ------------------------------------------------------------- netlify.toml --
def netlify_pattern(rule: str) -> re.Pattern:
    """A `for` path as Netlify matches it.

    Assumption (from Netlify's own parser, @netlify/headers-parser getForRegExp): a `:name` segment
    matches one segment, a standalone `*` segment matches the rest of the path, a `*` inside a segment
    matches any characters including '/', matching is case-insensitive and allows a trailing '/'.
    """
    parts = []
    for part in filter(None, rule.split("/")):
        if part.startswith(":"):
            parts.append("([^/]+)")
        elif part == "*":
            parts.append("?(.*)")
        else:
            parts.append(".*".join(re.escape(p) for p in part.split("*")))
    return re.compile(f"^/{'/'.join(parts)}/?$", re.IGNORECASE)


def netlify_headers(path: str) -> dict[str, list[str]]:
    """Every value each header gets on `path` from netlify.toml's rules, in rule order.

    Netlify applies all matching rules.  For a header set by several, the emulation assumes a later
    rule overrides an earlier one (Netlify's own headersForPath); the assertions also hold if the
    values were comma-joined instead, since a no-cache directive forces revalidation whatever max-age says.
    """
    rules = tomllib.loads((REPO / "netlify.toml").read_text())["headers"]
    out: dict[str, list[str]] = {}
    for rule in rules:
        if netlify_pattern(rule["for"]).match(path):
            for k, v in rule["values"].items():
                out.setdefault(k.lower(), []).append(v)
    return out


def test_netlify_pattern_emulation():
    assert netlify_pattern("/data/*").match("/data/2024.zarr/utm30/embeddings/c/0/0/0")
    assert netlify_pattern("/data/*.json").match("/data/2024.zarr/utm30/zarr.json")
    assert not netlify_pattern("/data/*.json").match("/data/2024.zarr/utm30/embeddings/c/0/0/0")
    assert not netlify_pattern("/pyodide/*").match("/data/x")


def test_netlify_headers_for_a_real_store(store):
    """Every file of a real store, published under /data: metadata revalidates, shards cache, CORS + ranges on all."""
    files = [f"/data/2024.zarr/{p.relative_to(store).as_posix()}" for p in sorted(store.rglob("*")) if p.is_file()]
    files += ["/data/catalog.json", "/data/years.json"]
    assert any(f.endswith("/zarr.json") for f in files) and any("/c/" in f for f in files)
    for f in files:
        h = netlify_headers(f)
        cc = h.get("cache-control", [])
        if f.endswith(".json"):
            assert cc[-1:] == ["no-cache"], (f, cc)
        else:
            assert cc[-1:] == ["public, max-age=3600"] and not any("no-cache" in v for v in cc), (f, cc)
        assert h["access-control-allow-origin"] == ["*"] and h["accept-ranges"] == ["bytes"], f
        assert "ETag" in h["access-control-expose-headers"][0] and "If-None-Match" in h["access-control-allow-headers"][0]


# ------------------------------------------------------- several ranges, If-Range --
@pytest.mark.parametrize("rng", ["bytes=0-0,5-9", "bytes=0-1, 100-199", "bytes=-16,0-3"])
def test_several_ranges_get_the_whole_file(port, rng):
    """aiohttp answered 416; a server may ignore Range (RFC 9110 14.2): 200 and the whole file."""
    status, headers, body = raw(port, "GET", SHARD_PATH, {"Range": rng})
    assert (status, body) == (200, SHARD) and "content-range" not in headers


def test_if_range_serves_the_range_only_for_the_file_as_it_is(port, site_root):
    """A range with If-Range: 206 when the validator (a strong ETag, or the Last-Modified date) matches the file
    now; otherwise 200 and the whole file.  aiohttp compared dates only, so a stale ETag still got 206."""
    path = site_root / "data" / "changing.bin"
    path.write_bytes(SHARD)
    target = "/data/changing.bin"
    status, headers, _ = raw(port, "GET", target)
    etag, modified = headers["etag"], headers["last-modified"]
    assert status == 200 and etag.startswith('"')
    for validator in (etag, modified):
        status, headers, body = raw(port, "GET", target, {"Range": "bytes=100-199", "If-Range": validator})
        assert (status, body, headers["content-range"]) == (206, SHARD[100:200], f"bytes 100-199/{len(SHARD)}"), validator
    for validator in ('"0-0"', f"W/{etag}", "Mon, 01 Jan 2001 00:00:00 GMT", "not a validator"):
        status, headers, body = raw(port, "GET", target, {"Range": "bytes=100-199", "If-Range": validator})
        assert (status, body) == (200, SHARD) and "content-range" not in headers, validator
    path.write_bytes(SHARD[::-1] + b"longer")  # the file changes: the client's ETag is stale now
    status, headers, body = raw(port, "GET", target, {"Range": "bytes=100-199", "If-Range": etag})
    assert (status, body) == (200, SHARD[::-1] + b"longer") and headers["etag"] != etag
    assert "If-Range" in raw(port, "OPTIONS", target)[1]["access-control-allow-headers"]


def _printed_urls(root: Path) -> list[str]:
    """The lines `python -m builder serve` prints as it starts, after its first (port numbers as PORT)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "builder", "serve", "--root", str(root), "--port", str(port)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/index.html", proc)
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [line.strip() for line in out.splitlines()]
    assert lines[0] == f"serving {root} at http://127.0.0.1:{port}/"
    return [line.replace(str(port), "PORT") for line in lines[1:]]


def test_serve_prints_the_explorers_url_and_the_documentations_beside_it(tmp_path):
    (tmp_path / "index.html").write_text("<!doctype html><title>explorer</title>")
    assert _printed_urls(tmp_path) == ["explorer: http://127.0.0.1:PORT/index.html"]  # no docs built: none named
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.html").write_text("<!doctype html><title>docs</title>")
    assert _printed_urls(tmp_path) == ["explorer: http://127.0.0.1:PORT/index.html",
                                       "documentation: http://127.0.0.1:PORT/docs/index.html"]
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "index.html").write_text("<!doctype html><title>lab</title>")
    assert _printed_urls(tmp_path) == ["explorer: http://127.0.0.1:PORT/index.html",
                                       "documentation: http://127.0.0.1:PORT/docs/index.html",
                                       "notebook: http://127.0.0.1:PORT/lab/index.html"]
