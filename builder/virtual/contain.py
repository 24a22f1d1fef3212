"""Where an index's references and a catalog's stores may point (docs/guarantees.md: virtual indexes and
catalogs are contained).

Every reference is checked before anything is read: it must lie below `base` (when given) or the index's
own directory, or below a prefix the caller lists in `allow`; `..`, `.`, `//`, %-escapes and (for local
files) symlinks are resolved first.  The same rule serves JSON and Parquet indexes.

A catalog's stores (builder/reader/store.py reads catalog.json) must lie on the catalog's own origin:
scheme://host[:port]/ of a remote catalog, the local file system for a local one; or below a prefix of
`allow`.  So a catalog served over HTTP never makes a reader open a local path or a file:// URL, nor a
store of another host, unless the caller says so.
"""
from __future__ import annotations

import os
import posixpath
from typing import Iterable

TEMPLATE = "{{base}}"


def _canon(url: str) -> str:
    """A reference URL in one comparable form: scheme://host/path with `..`, `.`, `//` and %-escapes
    resolved; a local path (plain or file://) as file:// + its real path (symlinks followed), relative
    paths from the working directory, as fsspec reads them."""
    from urllib.parse import unquote
    if "::" in url:  # a chained fsspec URL: compared as written, so only an explicit allow admits it
        return url
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "file", url
    scheme = scheme.lower()
    if scheme in ("file", "local"):
        return "file://" + os.path.realpath(unquote(rest))
    host, _, path = rest.partition("/")
    path, q, query = path.partition("?")
    path = posixpath.normpath("/" + unquote(path)).lstrip("/")
    return f"{scheme}://{host.lower()}/{path}{q}{query}"


SHOWN = 300  # characters of a URL an error shows (the URL is data: control characters escaped)


def _shown(text: str) -> str:
    text = text if len(text) <= SHOWN else text[:SHOWN - 1] + "…"
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _inside(url: str, prefix: str) -> bool:
    """`url` is `prefix` itself or below it (a prefix names a directory, with or without its final /)."""
    return url == prefix.rstrip("/") or url.startswith(prefix if prefix.endswith("/") else prefix + "/")


def origin(url: str) -> str:
    """scheme://host/ of a URL (as _canon writes it); file:/// for a local path, plain or file://."""
    c = _canon(url)
    scheme, sep, rest = c.partition("://")
    if not sep or "::" in url:  # a chained URL: no origin of its own, only an explicit allow admits its entries
        return c
    return "file:///" if scheme == "file" else f"{scheme}://{rest.split('/', 1)[0]}/"


class _Containment:
    """Where an index's references may point: below `root` or below a prefix of `allow`."""

    what, option = "reference", "allow=[...]"

    def __init__(self, index: str, root: str, allow):
        self.index, self.root = index, _canon(root)
        if isinstance(allow, str):
            allow = [allow]
        self.allow = [_canon(a) for a in (allow or [])]
        self.seen: dict[str, str | None] = {}

    def check(self, key: str, raw: str, url: str) -> None:
        if url not in self.seen:
            c = _canon(url)
            ok = any(_inside(c, p) for p in [self.root, *self.allow])
            self.seen[url] = None if ok else c
        c = self.seen[url]
        if c is not None:
            shown = _shown(raw) if raw == url else f"{_shown(raw)} (= {_shown(url)})"
            raise ValueError(f"{_shown(self.index)}: {self.what} {_shown(key)} -> {shown} is outside {_shown(self.root)}; "
                             f"pass {self.option} with a prefix of {_shown(c)} to open it")


class _CatalogContainment(_Containment):
    """Where a catalog's stores may point: its own origin, or below a prefix of `allow`."""

    what, option = "store", "allow=[...] (sample: --allow)"


def check_catalog(catalog: str, stores: Iterable[tuple[object, str, str]], allow) -> None:
    """Check every (year, URL as listed, URL as resolved against the catalog) of a catalog; ValueError
    naming the first store outside the catalog's origin and every prefix of `allow`."""
    box = _CatalogContainment(catalog, origin(catalog), allow)
    for year, raw, url in stores:
        box.check(str(year), raw, url)


def check_references(index: str, refs: Iterable[tuple[str, str]], base: str | None, allow) -> str | None:
    """Check every (key, URL as stored) of an index; the protocol of the first URL (None: no reference)."""
    root = base if base is not None else os.path.dirname(os.path.abspath(index.rstrip("/"))) + "/"
    box = _Containment(index, root, allow)
    protocol = None
    for key, raw in refs:
        raw = str(raw)
        url = raw.replace(TEMPLATE, base or "")
        if "{" in url or "}" in url:  # fsspec would format it with the templates: not what is checked here
            raise ValueError(f"{index}: reference {key} -> {raw} uses a template other than {TEMPLATE}")
        box.check(key, raw, url)
        if protocol is None:
            protocol = url.split("://", 1)[0] if "://" in url else "file"
    return protocol
