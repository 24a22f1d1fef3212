"""What `build --from URL` will take from a mirror: sizes, rows, time and hosts.

A mirror is not trusted to be honest.  Each limit has a default generous for real TESSERA data, a flag of
`build` that sets it, and an environment variable that sets its default (the flag wins):

    --max-file-size BYTES      TESSERA_MIRROR_MAX_FILE_SIZE      1 GiB   one tile file; a real tile's int8
        grid is about 100-110 MB (its scales about 5 MB), so ten times the largest.  A file the manifest
        lists as larger is never requested; a file is read up to the size the manifest lists and no further
        (a longer body is an error), and a file listed without a size up to this limit.
    --max-manifest-size BYTES  TESSERA_MIRROR_MAX_MANIFEST_SIZE  2 GiB   manifest.parquet, registry.parquet or
        landmasks.parquet, each.  A whole-world manifest of 10^7 rows (nine years of about 1.3x10^6 land
        tiles) with two sha256 columns and paths is about 1 GB of Parquet.  It is held in an anonymous
        temporary file in the cache, not in memory.
    --max-manifest-rows N      TESSERA_MIRROR_MAX_MANIFEST_ROWS  5x10^7  rows of one manifest, counted from
        its Parquet footer before any row is decoded: five times a whole-world manifest.  Rows are then
        decoded 65,536 at a time and only those of the bbox's tiles kept (manifest.py).
    --file-timeout SECONDS     TESSERA_MIRROR_FILE_TIMEOUT       1800    the whole download of one file,
        its retries included (a 110 MB tile at 62 KB/s); each socket read also times out after 60 s
        (TESSERA_MIRROR_TIMEOUT).
    --allow-other-hosts        a redirect to another host name is refused without it.

BYTES take a suffix K, M, G or T (powers of 1024): 500M, 2G.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields

from builder.errors import BuildError

_SIZE = re.compile(r"(\d+(?:\.\d*)?)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)


def parse_size(text: str, what: str) -> int:
    """Bytes from '1000', '500M', '2G', '1.5GiB' (powers of 1024); BuildError naming `what` otherwise."""
    m = _SIZE.fullmatch(str(text).strip())
    n = float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ") if m else math.nan
    if not (math.isfinite(n) and 1 <= n < 2 ** 63):
        raise BuildError(f"{what} {str(text)[:40]!r}: expected a size in bytes such as 1000, 500M or 2G")
    return int(n)


def _seconds(text: str, what: str) -> float:
    try:
        s = float(text)
    except ValueError:
        s = math.nan
    if not (math.isfinite(s) and s > 0):
        raise BuildError(f"{what} {str(text)[:40]!r}: expected a number of seconds above 0")
    return s


def _count(text: str, what: str) -> int:
    if not re.fullmatch(r"\d{1,18}", str(text).strip()) or int(text) < 1:
        raise BuildError(f"{what} {str(text)[:40]!r}: expected a whole number above 0")
    return int(text)


@dataclass(frozen=True)
class Limits:
    file_size: int = 1 << 30
    manifest_size: int = 2 << 30
    manifest_rows: int = 50_000_000
    file_timeout: float = 1800.0
    other_hosts: bool = False

    @classmethod
    def resolve(cls, given: dict[str, str | bool | None]) -> "Limits":
        """The limits from the flags `given` (field name -> the flag's text, None when not given), then the
        environment, then the defaults."""
        values = {}
        for f in fields(cls):
            if f.name == "other_hosts":
                values[f.name] = bool(given.get(f.name))
                continue
            text, what = given.get(f.name), FLAGS[f.name]
            if text is None and os.environ.get(ENV[f.name]):
                text, what = os.environ[ENV[f.name]], ENV[f.name]
            if text is not None:
                values[f.name] = PARSE[f.name](text, what)
        return cls(**values)


FLAGS = {"file_size": "--max-file-size", "manifest_size": "--max-manifest-size",
         "manifest_rows": "--max-manifest-rows", "file_timeout": "--file-timeout", "other_hosts": "--allow-other-hosts"}
ENV = {"file_size": "TESSERA_MIRROR_MAX_FILE_SIZE", "manifest_size": "TESSERA_MIRROR_MAX_MANIFEST_SIZE",
       "manifest_rows": "TESSERA_MIRROR_MAX_MANIFEST_ROWS", "file_timeout": "TESSERA_MIRROR_FILE_TIMEOUT"}
PARSE = {"file_size": parse_size, "manifest_size": parse_size, "manifest_rows": _count, "file_timeout": _seconds}


def _size_text(n: int) -> str:
    return next(f"{n >> k}{u}" for k, u in ((40, "T"), (30, "G"), (20, "M"), (10, "K"), (0, "")) if n % (1 << k) == 0)


def add_arguments(build) -> None:
    """`build`'s flags for these limits (argparse); tiles_from_args (builder/mirror) reads them."""
    d = Limits()
    for name, metavar, what, default in (
            ("file_size", "BYTES", "largest tile file taken", _size_text(d.file_size)),
            ("manifest_size", "BYTES", "largest manifest taken", _size_text(d.manifest_size)),
            ("manifest_rows", "N", "most rows of a manifest", str(d.manifest_rows)),
            ("file_timeout", "SECONDS", "deadline of each file's download, retries included", f"{d.file_timeout:g}")):
        build.add_argument(FLAGS[name], dest=name, metavar=metavar,
                           help=f"with --from: {what} (default {default}, or ${ENV[name]})")
    build.add_argument(FLAGS["other_hosts"], dest="other_hosts", action="store_true",
                       help="with --from: follow the mirror's redirects to other hosts (refused by default)")
