"""A static file server for the site that honours HTTP Range, like production hosts do.

aiohttp's FileResponse implements Range (single and suffix ranges, 206/416),
conditional requests (ETag, If-None-Match -> 304) and sendfile; this module adds
what netlify.toml sets in production: CORS, Accept-Ranges, the .wasm/.mjs MIME
types, and cache headers (every *.json is metadata: `no-cache`, i.e. revalidate
by ETag on each use; other files under data/, pyodide/, wheels/ may be cached an
hour).  `--no-range` turns Range support off, to test how the app reports a host
that ignores it.

Hostile requests: only GET, HEAD and OPTIONS (405 otherwise); a path with NUL
or control characters, invalid percent-encoding or invalid UTF-8 is 400; a
dotfile (any segment starting with '.', but for Zarr v2's and Kerchunk's metadata file names as the last
segment), an overlong path or name, and anything outside the root (`..`, links) is 404; `Range: bytes=-0` is 416.

Ranges beyond aiohttp's single range: a request for several ranges
(`bytes=0-0,5-9`) gets 200 and the whole file (RFC 9110 lets a server ignore
Range; aiohttp answers 416).  `If-Range` is honoured: the range is served (206)
only when the validator matches the file now, a strong ETag exactly or the
HTTP-date equal to its Last-Modified; otherwise 200 and the whole file (aiohttp
compares dates only, so a stale ETag got 206).
"""
from __future__ import annotations

import math
import mimetypes
import re
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import unquote_to_bytes

from builder.sitefiles import hidden_segments, is_metadata

from aiohttp import web

mimetypes.add_type("application/wasm", ".wasm")
mimetypes.add_type("text/javascript", ".mjs")
mimetypes.add_type("text/javascript", ".js")
mimetypes.add_type("application/json", ".json")

METHODS = "GET, HEAD, OPTIONS"
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": METHODS,
    "Access-Control-Allow-Headers": "Range, If-Range, If-None-Match, If-Modified-Since",
    "Access-Control-Expose-Headers": "Content-Range, Content-Length, Accept-Ranges, ETag",
}
MAX_PATH = 2048  # bytes of a request path; no file of the site has a longer one
MAX_NAME = 255  # bytes of one path segment (NAME_MAX)
BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
EMPTY_SUFFIX_RANGE = re.compile(r"\s*bytes\s*=\s*-0+\s*")
_SPEC = r"\s*(?:\d+-\d*|-\d+)\s*"
MULTI_RANGE = re.compile(rf"\s*bytes\s*={_SPEC}(?:,{_SPEC})+")  # two or more byte ranges


class Refused(Exception):
    def __init__(self, status: int, reason: str):
        self.status = status
        super().__init__(reason)


def path_segments(raw_path: str) -> list[str]:
    """The decoded segments of a raw (percent-encoded) request path; Refused if it is malformed or hidden."""
    if len(raw_path) > MAX_PATH:
        raise Refused(404, "not found")
    if BAD_ESCAPE.search(raw_path):
        raise Refused(400, "invalid percent-encoding")
    out = []
    for part in filter(None, raw_path.split("/")):
        try:
            seg = unquote_to_bytes(part).decode("utf-8")
        except UnicodeDecodeError:
            raise Refused(400, "path is not UTF-8") from None
        if any(ord(c) < 32 or ord(c) == 127 for c in seg):
            raise Refused(400, "control character in path")
        if "/" in seg or "\\" in seg or len(seg.encode()) > MAX_NAME:
            raise Refused(404, "not found")
        out.append(seg)
    if hidden_segments(out):  # builder/sitefiles.py: dotfiles, but Zarr's and Kerchunk's metadata files
        raise Refused(404, "not found")
    return out


def file_for(root: Path, segments: list[str]) -> Path:
    """The regular file under `root` (a resolved path) that `segments` name; a directory means its index.html."""
    path = root.joinpath(*segments)
    try:
        if path.is_dir():
            path = path / "index.html"
        real = path.resolve(strict=True)
        if root in real.parents and real.is_file():
            return real
    except (OSError, RuntimeError):  # too long, a link loop, ...
        pass
    raise Refused(404, "not found")


def cache_control(segments: list[str]) -> str:
    """Metadata revalidates; data, Pyodide and wheels may be cached, Panel's files under its version and the JavaScript
    bundle's content-named chunks for good (the rules of netlify.toml)."""
    if segments[:2] == ["vendor", "panel"] and len(segments) > 3:  # vendor/panel/<version>/...: fixed per version
        return "public, max-age=31536000, immutable"
    if segments[:2] == ["vendor", "chunks"] and len(segments) > 2:  # the bundle's chunks: named by their content
        return "public, max-age=31536000, immutable"
    if segments and is_metadata(segments[-1]):
        return "no-cache"
    if any(s in ("data", "pyodide", "wheels") for s in segments[:-1]):
        return "public, max-age=3600"
    return "no-cache"


def etag_of(st) -> str:
    return f"{st.st_mtime_ns:x}-{st.st_size:x}"  # as aiohttp's FileResponse makes them


def if_range_holds(value: str, st) -> bool:
    """Whether an If-Range validator matches the file now (RFC 9110 13.1.5): a strong entity tag equal to its
    ETag, or an HTTP-date equal to its Last-Modified (aiohttp writes the mtime rounded up to the second)."""
    value = value.strip()
    if value.startswith("W/"):
        return False  # a weak tag never matches
    if value.startswith('"'):
        return value == f'"{etag_of(st)}"'
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return False
    return when.tzinfo is not None and when.timestamp() == math.ceil(st.st_mtime)


def whole_file(request: web.Request, path: Path, headers: dict) -> web.Response:
    """The whole file whatever Range says: --no-range (as a host that ignores Range sends it), several ranges, or a
    Range whose If-Range does not hold.  ETags still work."""
    st = path.stat()
    etag = etag_of(st)
    if any(t.value in (etag, "*") for t in request.if_none_match or ()):
        resp = web.Response(status=304, headers=headers)
    else:
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        resp = web.Response(body=path.read_bytes(), content_type=ctype, headers=headers)
    resp.etag = etag
    return resp


def make_app(root: Path, ranges: bool = True, cors: bool = True) -> web.Application:
    root = Path(root).resolve()
    cors_headers = CORS if cors else {}

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            return web.Response(status=405, text="method not allowed", headers={**cors_headers, "Allow": METHODS})
        if request.method == "OPTIONS":
            return web.Response(status=204, headers={**cors_headers, "Allow": METHODS})
        try:
            segments = path_segments(request.rel_url.raw_path)
            path = file_for(root, segments)
        except Refused as e:
            return web.Response(status=e.status, text=str(e), headers=cors_headers)
        headers = {**cors_headers, "Cache-Control": cache_control(segments)}
        if not ranges:
            return whole_file(request, path, headers)
        headers["Accept-Ranges"] = "bytes"
        rng, if_range = request.headers.get("Range"), request.headers.get("If-Range")
        if rng is not None and if_range is not None and not if_range_holds(if_range, path.stat()):
            return whole_file(request, path, headers)  # the client's copy is stale: all of the file as it is now
        if rng is not None and MULTI_RANGE.fullmatch(rng):
            return whole_file(request, path, headers)
        if EMPTY_SUFFIX_RANGE.fullmatch(rng or ""):  # the last 0 bytes: unsatisfiable
            return web.Response(status=416, headers={**headers, "Content-Range": f"bytes */{path.stat().st_size}"})
        return web.FileResponse(path, headers=headers)

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handle)
    return app


def urls(root: Path, host: str, port: int) -> list[tuple[str, str]]:
    """(what, URL) of the pages a user opens in the site at `root`: the explorer, and the documentation and the
    notebook (JupyterLite) when built."""
    base = f"http://{host}:{port}/"
    pages = [("explorer", "index.html"), ("documentation", "docs/index.html"), ("notebook", "lab/index.html")]
    return [(what, base + page) for what, page in pages if (Path(root) / page).is_file()]


def serve(root: Path, host: str = "127.0.0.1", port: int = 8000, ranges: bool = True, cors: bool = True) -> None:
    app = make_app(root, ranges, cors)
    print(f"serving {root} at http://{host}:{port}/", flush=True)
    for what, url in urls(root, host, port):
        print(f"  {what}: {url}", flush=True)
    web.run_app(app, host=host, port=port, print=None, access_log=None)
