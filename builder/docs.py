"""The documentation site: Sphinx builds docs/ into the site's docs/ (`python -m builder site` calls build_docs).

Warnings are errors (`-W --keep-going`, so every one is found in one run) and references are checked
(`-n`, nitpicky); a failed build is one line naming the first problem and how many there were.  The built
pages must load nothing from another origin: `external_loads` lists every http(s) URL a browser would fetch
on opening them (script, stylesheet, image, frame and media sources, `<link>`s other than navigation, CSS
`url()` and `@import`), and a build that has any fails.  Links a reader may follow (`<a href>`) are not loads.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from builder.errors import BuildError

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "docs"
PROBLEM = re.compile(r"(WARNING|ERROR|CRITICAL|SEVERE):")
# What a browser loads from a page: src/srcset/data/poster of any element, <link href> except navigation links,
# and in stylesheets url(...) and @import.
_SRC = re.compile(r"""\s(?:src|srcset|data|poster)\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]*)""", re.I)
_LINK = re.compile(r"<link\b[^>]*>", re.I)
_LINK_NAV = re.compile(r"""\srel\s*=\s*["']?(?:[^"'>]*\s)?(?:canonical|next|prev|index|search|alternate|author|license|help)\b""", re.I)
_HREF_EXTERNAL = re.compile(r"""\shref\s*=\s*["']?\s*(https?:)?//""", re.I)
_CSS = re.compile(r"""(?:url\(\s*["']?\s*|@import\s+["']\s*)((?:https?:)?//[^"')\s;]*)""", re.I)


def external_loads(root: Path) -> list[str]:
    """`file: snippet` for each URL on another origin that the built pages under `root` would load."""
    found = []
    for path in sorted(Path(root).rglob("*")):
        if path.suffix not in (".html", ".css") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        rel = path.relative_to(root).as_posix()
        hits = []
        if path.suffix == ".html":
            hits += [m.group(1) for m in _SRC.finditer(text)]
            hits += [t for t in _LINK.findall(text) if _HREF_EXTERNAL.search(t) and not _LINK_NAV.search(t)]
        if path.suffix in (".html", ".css"):
            hits += [m.group(1) for m in _CSS.finditer(text)]
        found += [f"{rel}: {h.strip()[:120]}" for h in hits]
    return found


def build_docs(out: Path, source: Path = SOURCE) -> Path:
    """Build the documentation into `out` (replaced whole); returns `out`.  An `out` that is, holds or lies in the
    sources is refused: replacing it would delete them."""
    out = Path(out)
    o, src = out.resolve(), Path(source).resolve()
    if o == src or o in src.parents or src in o.parents:
        raise BuildError("the documentation cannot be built into its own sources", str(out))
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "html"
        p = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
                            "-d", str(Path(tmp) / "doctrees"), str(source), str(html)],
                           capture_output=True, text=True, cwd=REPO)
        if p.returncode:
            problems = [line.strip() for line in (p.stderr + p.stdout).splitlines() if PROBLEM.search(line)]
            tail = (problems or (p.stderr or p.stdout).strip().splitlines() or ["(no output)"])
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            raise BuildError(f"the documentation does not build: {tail[0]}{more}", str(source))
        loads = external_loads(html)
        if loads:
            raise BuildError(f"the documentation loads from another origin: {loads[0]}"
                             + (f" (+{len(loads) - 1} more)" if len(loads) > 1 else ""), str(source))
        (html / ".buildinfo").unlink(missing_ok=True)
        shutil.rmtree(html / "_sources", ignore_errors=True)  # empty: conf.py does not copy the sources
        out.parent.mkdir(parents=True, exist_ok=True)
        new, old = out.with_name(f".{out.name}.new"), out.with_name(f".{out.name}.old")
        for d in (new, old):
            shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(html, new)  # the pages appear whole: the old ones stay until the new ones are in place
        if out.exists():
            out.rename(old)
        new.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    return out
