"""A static file server for the site that honours HTTP Range, like production hosts do.

aiohttp's FileResponse implements Range (single and suffix ranges, 206/416),
conditional requests and sendfile; this module adds what netlify.toml sets
in production: CORS, Accept-Ranges, the .wasm/.mjs MIME types, and cache
headers.  `--no-range` turns Range support off, to test how the app reports
a host that ignores it.
"""
from __future__ import annotations

import mimetypes
from pathlib import Path

from aiohttp import web

mimetypes.add_type("application/wasm", ".wasm")
mimetypes.add_type("text/javascript", ".mjs")
mimetypes.add_type("text/javascript", ".js")
mimetypes.add_type("application/json", ".json")

CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Headers": "Range, If-None-Match, If-Modified-Since",
    "Access-Control-Expose-Headers": "Content-Range, Content-Length, Accept-Ranges, ETag",
}


def make_app(root: Path, ranges: bool = True, cors: bool = True) -> web.Application:
    root = Path(root).resolve()

    cors_headers = CORS if cors else {}

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.method == "OPTIONS":
            return web.Response(status=204, headers=cors_headers)
        rel = request.match_info["path"] or "index.html"
        path = (root / rel).resolve()
        if root not in path.parents and path != root:
            raise web.HTTPForbidden()
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            return web.Response(status=404, text="not found", headers=cors_headers)
        headers = dict(cors_headers)
        if "/data/" in f"/{rel}" or "/pyodide/" in f"/{rel}" or "/wheels/" in f"/{rel}":
            headers["Cache-Control"] = "public, max-age=3600"
        else:
            headers["Cache-Control"] = "no-cache"
        if not ranges:
            body = path.read_bytes()
            ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            return web.Response(body=body, content_type=ctype, headers=headers)
        headers["Accept-Ranges"] = "bytes"
        resp = web.FileResponse(path, headers=headers)
        return resp

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handle)
    return app


def serve(root: Path, host: str = "127.0.0.1", port: int = 8000, ranges: bool = True, cors: bool = True) -> None:
    app = make_app(root, ranges, cors)
    print(f"serving {root} at http://{host}:{port}/  (explorer: http://{host}:{port}/index.html)", flush=True)
    web.run_app(app, host=host, port=port, print=None, access_log=None)
