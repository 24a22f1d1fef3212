"""The documentation (docs/, built by Sphinx: builder/docs.py), the Sphinx directive (builder/sphinx_ext.py) and
the README: the docs build with warnings as errors, their links and anchors resolve, they load nothing from another
origin, the extensions' registrations point at their sections, and the README stays short with working links."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from builder.core import convention as conv
from builder.core import extensions as ext
from builder.core.describe import is_stack
from builder.docs import build_docs, external_loads
from builder.errors import BuildError

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 250


class _Page(HTMLParser):
    """The ids of a page, and the URLs its links and resources name."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) is not None:
                self.links.append((tag, key, a[key]))


def parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(errors="replace"))
    return p


def broken_links(root: Path, site: Path | None = None) -> list[str]:
    """Every relative link or resource of the HTML pages under `root` whose file (or anchor) does not exist. Links
    out of `root` are checked against `site` (the whole site the docs are part of), or listed when it is None."""
    pages, bad = {}, []
    top = (site or root).resolve()
    for path in sorted(root.rglob("*.html")):
        for tag, key, url in parse(path).links:
            u = urlsplit(url)
            if u.scheme or u.netloc:  # another origin (or mailto:): a link to follow, not part of the site
                continue
            target = (path.parent / unquote(u.path)).resolve() if u.path else path.resolve()
            where = f"{path.relative_to(root)}: <{tag} {key}={url!r}>"
            if top not in target.parents and target != top:
                bad.append(f"{where} leaves the site")
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                bad.append(f"{where}: no file {target}")
                continue
            if u.fragment and tag == "a" and target.suffix == ".html":  # an iframe's hash is its page's state
                ids = pages.setdefault(target, parse(target).ids)
                if unquote(u.fragment) not in ids:
                    bad.append(f"{where}: no id {u.fragment!r} in {target.name}")
    return bad


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_docs(tmp_path_factory.mktemp("docs") / "docs")


def test_the_docs_build_with_warnings_as_errors_and_hold_every_page_and_the_api(built):
    sources = sorted(p.stem for p in (REPO / "docs").glob("*.md"))
    assert len(sources) >= 10
    for stem in sources:
        assert (built / f"{stem}.html").is_file(), stem
    api = parse(built / "api.html").ids
    # autodoc from the docstrings: the reader's entry point and its store's methods
    assert {"builder.reader.open_store", "builder.reader.EmbeddingStore.probe",
            "builder.reader.EmbeddingStore.sample_points", "builder.reader.EmbeddingStore.read_region"} <= api
    text = (built / "api.html").read_text()
    assert "storage_options" in text and "geoemb" in text  # open_store's docstring itself
    assert not (built / "_sources").exists()  # the sources are not copied into the site


def test_internal_links_and_anchors_of_the_docs_resolve(built):
    bad = broken_links(built)
    # the only links out of the docs are to the explorer's site they are part of (checked on the whole site by
    # tests/test_browser_docs.py): the embedded explorer and iframe-resizer's host script
    assert all(b.endswith("leaves the site") for b in bad), bad
    assert {re.search(r"=(['\"])(.*?)\1", b).group(2).split("?")[0] for b in bad} <= {
        "../index.html", "../vendor/iframe-resizer/iframeResizer.min.js"}


def test_the_link_check_finds_a_missing_page_and_a_missing_anchor(built, tmp_path):
    copy = tmp_path / "docs"
    shutil.copytree(built, copy)
    (copy / "extra.html").write_text('<a href="stores.html#no-such-section">x</a><a href="gone.html">y</a>'
                                     '<img src="_static/none.png">')
    bad = [b for b in broken_links(copy) if b.startswith("extra.html")]
    assert len(bad) == 3 and "no id 'no-such-section'" in bad[0] and "no file" in bad[1] and "no file" in bad[2]


def test_the_docs_load_nothing_from_another_origin(built, tmp_path):
    assert external_loads(built) == []
    # the check itself finds what a browser would fetch, and leaves links alone
    (tmp_path / "a.html").write_text('<a href="https://example.org/">ok</a><link rel="canonical" href="https://e.org/">'
                                     '<script src="https://cdn.example.org/x.js"></script>'
                                     '<link rel="stylesheet" href="//cdn.example.org/x.css">')
    (tmp_path / "b.css").write_text("@font-face { src: url(https://fonts.example.org/f.woff2) }")
    found = external_loads(tmp_path)
    assert len(found) == 3 and "cdn.example.org/x.js" in found[0] and "x.css" in found[1] and "b.css" in found[2]


def test_a_docs_warning_fails_the_build_in_one_line_naming_it(tmp_path):
    src = tmp_path / "docs"  # a copy of the docs with what they include from beside them
    shutil.copytree(REPO / "docs", src)
    (tmp_path / "benchmarks").mkdir()
    shutil.copy(REPO / "benchmarks" / "README.md", tmp_path / "benchmarks" / "README.md")
    shutil.copytree(REPO / "app" / "screenshots", tmp_path / "app" / "screenshots")
    page = src / "stores.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    out = tmp_path / "out"
    with pytest.raises(BuildError) as e:
        build_docs(out, source=src)
    msg = str(e.value)
    assert "\n" not in msg and "stores.md" in msg and "no-such-page" in msg and "WARNING" in msg
    assert not out.exists()  # nothing half-built is left


def test_the_docs_are_never_built_over_their_sources(tmp_path, monkeypatch):
    src = tmp_path / "docs"
    shutil.copytree(REPO / "docs", src)
    before = sorted(p.name for p in src.iterdir())
    monkeypatch.chdir(tmp_path)
    for out in (src, Path("docs"), src / "_build", tmp_path):
        with pytest.raises(BuildError, match="cannot be built into its own sources"):
            build_docs(out, source=src)
    assert sorted(p.name for p in src.iterdir()) == before


def test_the_extensions_registrations_point_at_their_sections_of_the_docs(built):
    for reg in (ext.STACK, ext.OVR):
        for key in ("spec_url", "schema_url"):
            url = urlsplit(reg[key])
            assert reg[key].startswith(ext.SPEC + "#")
            path = url.path.split("/blob/main/", 1)[1]
            assert (REPO / path).is_file(), path
            html = built / Path(path).relative_to("docs").with_suffix(".html")
            assert url.fragment in parse(html).ids, (reg["name"], key, url.fragment)


def test_stores_registering_the_extensions_urls_of_before_still_register_them():
    readme = "https://github.com/ucam-eo/tessera-explorer/blob/main/README.md"
    old_stack = {**dict(ext.STACK), "schema_url": f"{readme}#tessera-stack-schema",
                 "spec_url": f"{readme}#multi-year-index-extension-tessera-stack"}
    old_ovr = {**dict(ext.OVR), "schema_url": f"{readme}#tessera-ovr-schema",
               "spec_url": f"{readme}#embedding-overviews-tessera-ovr"}
    assert conv.registered({"zarr_conventions": [old_stack]}, ext.STACK_ROOT_CONVENTIONS) == []
    assert conv.registered({"zarr_conventions": [old_ovr]}, [ext.OVR]) == []
    assert is_stack({"zarr_conventions": [old_stack]})
    # any other URL is still a registration of something else
    assert conv.registered({"zarr_conventions": [{**old_ovr, "spec_url": f"{readme}#elsewhere"}]}, [ext.OVR]) == \
        ["tessera-ovr:"]
    assert dict(ext.OVR) == {k: ext.OVR[k] for k in ("schema_url", "spec_url", "uuid", "name", "description")}


# ---------------------------------------------------------------- the directive --
def sphinx_project(tmp_path: Path, pages: dict[str, str], url: str | None = None) -> subprocess.CompletedProcess:
    src = tmp_path / "src"
    for name, text in pages.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    conf = 'extensions = ["builder.sphinx_ext"]\n' + (f"tessera_explorer_url = {url!r}\n" if url else "")
    (src / "conf.py").write_text(conf)
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-n", "-q", "-b", "html", str(src),
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO)


def frame_of(html: Path) -> dict:
    for tag, key, url in parse(html).links:
        if tag == "iframe":
            return {"src": url, "page": html.read_text()}
    raise AssertionError(f"no iframe in {html}")


def test_the_directive_writes_the_explorers_url_relative_to_each_page(tmp_path):
    directive = (".. tessera-explorer::\n   :store: data/2023.zarr\n   :year: 2023\n   :lon: -0.05\n   :lat: 50.85\n"
                 "   :span: 2500\n   :selection: -0.05,50.851\n   :pins: 0.01,50.8;0.02,50.81\n   :height: 500\n"
                 "   :tools: Classify, similarity\n   :name: viewer\n")
    p = sphinx_project(tmp_path, {"index.rst": "Top\n===\n\n" + directive + "\n.. toctree::\n\n   deep/page\n",
                                  "deep/page.rst": "Deep\n====\n\n.. tessera-explorer::\n   :catalog: cat.json\n"},
                       url="../index.html")
    assert p.returncode == 0, p.stderr
    top, deep = frame_of(tmp_path / "out" / "index.html"), frame_of(tmp_path / "out" / "deep" / "page.html")
    assert top["src"] == ("../index.html?embed=1&store=data/2023.zarr&tools=classify,similarity#year=2023"
                          "&lon=-0.0500000&lat=50.8500000&span=2500.000&sel=-0.050000,50.851000"
                          "&pins=0.010000,50.800000;0.020000,50.810000")
    assert 'id="viewer"' in top["page"] and "height: 500px" in top["page"] and 'data-tessera-min-height="500"' in top["page"]
    assert 'data-tessera-resizer="../vendor/iframe-resizer/iframeResizer.min.js"' in top["page"]
    assert deep["src"] == "../../index.html?embed=1&catalog=cat.json"
    assert 'data-tessera-resizer="../../vendor/iframe-resizer/iframeResizer.min.js"' in deep["page"]
    for page in (top, deep):
        assert "_static/tessera-explorer.js" in page["page"]
    assert (tmp_path / "out" / "_static" / "tessera-explorer.js").is_file()


def test_the_directive_takes_an_absolute_explorer_and_escapes_what_it_writes(tmp_path):
    p = sphinx_project(tmp_path, {"index.rst": 'T\n=\n\n.. tessera-explorer::\n   :store: https://d.example/"><b>x\n'
                                  '   :title: a "quoted" <title>\n'},
                       url="https://viewer.example/app/index.html")
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "out" / "index.html").read_text()
    frame = frame_of(tmp_path / "out" / "index.html")
    assert frame["src"].startswith("https://viewer.example/app/index.html?embed=1&store=https://d.example/%22%3E%3Cb%3Ex")
    assert 'title="a &quot;quoted&quot; &lt;title&gt;"' in html and "<b>x" not in html
    assert 'data-tessera-resizer="https://viewer.example/app/vendor/iframe-resizer/iframeResizer.min.js"' in html


@pytest.mark.parametrize("option, value, said", [
    ("lat", "95", "lat"), ("lon", "east", "lon"), ("tools", "classify,umap", "tools"), ("year", "20x4", "year"),
    ("pins", "1,2;3", "pins"), ("store", "javascript:alert(1)", "store"), ("height", "-5", "height")])
def test_a_bad_directive_option_is_an_error_naming_it(tmp_path, option, value, said):
    p = sphinx_project(tmp_path, {"index.rst": f"T\n=\n\n.. tessera-explorer::\n   :{option}: {value}\n"})
    assert p.returncode != 0
    assert f'invalid option value: (option: "{said}"' in p.stderr, p.stderr


# ---------------------------------------------------------------- the README --
def test_the_readme_is_short_and_its_relative_links_point_at_files_that_exist():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    links = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"(?m)^\[[^\]]+\]:\s*(\S+)", text)
    relative = [u for u in links if not urlsplit(u).scheme and not u.startswith("#")]
    assert len(relative) >= 10  # the docs pages, the benchmarks, the screenshot
    missing = [u for u in relative if not (REPO / unquote(urlsplit(u).path)).exists()]
    assert missing == []
    # the two commands, exactly
    assert "pip install -e . && python -m builder up" in text and "bash .ci/setup && python -m pytest" in text


def test_the_readme_checks_can_fail(tmp_path, monkeypatch):
    (tmp_path / "ok.md").write_text("ok")
    good = "".join(f"[{i}](ok.md)\n" for i in range(10)) + \
        "pip install -e . && python -m builder up\nbash .ci/setup && python -m pytest\n"
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "README.md").write_text(good)
    test_the_readme_is_short_and_its_relative_links_point_at_files_that_exist()  # the check passes on this one
    (tmp_path / "README.md").write_text(good + "[a](docs/nothing.md)\n")
    with pytest.raises(AssertionError, match="nothing"):
        test_the_readme_is_short_and_its_relative_links_point_at_files_that_exist()
    (tmp_path / "README.md").write_text(good + "x\n" * README_MAX_LINES)
    with pytest.raises(AssertionError, match="README_MAX_LINES|<="):
        test_the_readme_is_short_and_its_relative_links_point_at_files_that_exist()
