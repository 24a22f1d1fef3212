"""builder/wheels.py: the wheels the site rebuilds keep a RECORD that matches every member."""
import base64
import csv
import hashlib
import io
import zipfile

import pytest

from builder import wheels
from builder.errors import BuildError


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def _platform_wheel(path, members: dict[str, bytes], dist="demo-1.0.dist-info"):
    """A wheel as pip would download it, written with zipfile alone (independent of the code under test)."""
    members = {**members, f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n",
               f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"}
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([_record_line(n, d) for n, d in members.items()] + [[f"{dist}/RECORD", "", ""]])
    with zipfile.ZipFile(path, "w") as z:
        for n, d in members.items():
            z.writestr(n, d)
        z.writestr(f"{dist}/RECORD", buf.getvalue())
    return path


def _check_record(path) -> dict[str, bytes]:
    """Every member is listed in RECORD with its sha256 and size, and RECORD lists nothing else."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        record = [n for n in names if n.endswith(".dist-info/RECORD")]
        assert len(record) == 1, names
        rows = list(csv.reader(io.StringIO(z.read(record[0]).decode())))
        listed = {r[0]: r for r in rows}
        assert set(listed) == set(names)
        for n in names:
            if n != record[0]:
                assert listed[n] == _record_line(n, z.read(n)), n
        return {n: z.read(n) for n in names}


def test_strip_drops_extension_modules_patches_once_and_retags(tmp_path):
    src = _platform_wheel(tmp_path / "demo-1.0-cp312-cp312-linux_x86_64.whl", {
        "demo/__init__.py": b"CDN = 'https://cdn'\n", "demo/_speedups.cpython-312-x86_64-linux-gnu.so": b"\x7fELF",
        "demo/dist/big.js": b"x" * 100})
    out = wheels.strip(src, tmp_path, drop=("demo/dist/",), patches={"demo/__init__.py": ("'https://cdn'", "'local/'")})
    assert out.name == "demo-1.0-py3-none-any.whl"
    members = _check_record(out)
    assert members["demo/__init__.py"] == b"CDN = 'local/'\n"
    assert not any(n.endswith(".so") or n.startswith("demo/dist/") for n in members)
    assert b"Tag: py3-none-any" in members["demo-1.0.dist-info/WHEEL"]
    assert b"cp312" not in members["demo-1.0.dist-info/WHEEL"]


def test_a_patch_that_does_not_apply_exactly_once_is_refused(tmp_path):
    src = _platform_wheel(tmp_path / "demo-1.0-cp312-cp312-linux_x86_64.whl", {"demo/__init__.py": b"a a\n"})
    with pytest.raises(BuildError, match="cannot patch demo/__init__.py"):
        wheels.strip(src, tmp_path / "..", patches={"demo/__init__.py": ("a", "b")})


def test_a_member_takes_several_patches_each_applied_exactly_once(tmp_path):
    src = _platform_wheel(tmp_path / "demo-1.0-cp312-cp312-linux_x86_64.whl",
                          {"demo/__init__.py": b"import slow\nHASH = {slow.Thing: id}\nx = 1\n"})
    edits = [("import slow\n", ""), ("HASH = {slow.Thing: id}\n", "HASH = {}\n")]
    out = wheels.strip(src, tmp_path, patches={"demo/__init__.py": edits})
    assert _check_record(out)["demo/__init__.py"] == b"HASH = {}\nx = 1\n"
    with pytest.raises(BuildError, match="cannot patch demo/__init__.py"):  # the second edit's text is not there
        wheels.strip(src, tmp_path / "..", patches={"demo/__init__.py": [("x = 1", "x = 2"), ("y = 1", "y = 2")]})


def test_a_wheel_whose_members_do_not_match_its_record_is_refused(tmp_path):
    src = _platform_wheel(tmp_path / "demo-1.0-cp312-cp312-linux_x86_64.whl", {"demo/__init__.py": b"x = 1\n"})
    with zipfile.ZipFile(src, "a") as z:  # a second, different copy of a member (as a tampered download)
        z.writestr("demo/__init__.py", b"x = 2\n")
    with pytest.raises(Exception, match="(?i)hash|digest|mismatch"):
        wheels.strip(src, tmp_path / "..")


def test_pack_and_add_members_keep_the_record_whole(tmp_path):
    out = tmp_path / "tessera_explorer_app-0.1.0-py3-none-any.whl"
    wheels.pack(out, {"app/__init__.py": b"", "builder/core/grid.py": b"X = 1\n"}, "tessera-explorer-app", "0.1.0")
    wheels.add_members(out, {"app/__pycache__/__init__.cpython-312.pyc": b"\x00pyc"})
    members = _check_record(out)
    assert members["builder/core/grid.py"] == b"X = 1\n"
    assert members["app/__pycache__/__init__.cpython-312.pyc"] == b"\x00pyc"
    assert b"Tag: py3-none-any" in members["tessera_explorer_app-0.1.0.dist-info/WHEEL"]
    assert not (tmp_path / ".partial").exists()


def test_sourceless_puts_each_modules_bytecode_where_its_source_was_and_python_imports_it(tmp_path):
    import importlib.util
    import py_compile
    import subprocess
    import sys
    src = {"demo/__init__.py": b"from demo.core import X\n", "demo/core.py": b"X = 6 * 7\n",
           "demo/notes.py": b"N = 1\n", "demo/data.json": b"{}"}
    out = tmp_path / "demo-1.0-py3-none-any.whl"
    wheels.pack(out, src, "demo", "1.0")
    pycs = {}
    for arc in ("demo/__init__.py", "demo/core.py"):  # demo/notes.py has no bytecode: it keeps its source
        f = tmp_path / "src" / arc
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(src[arc])
        cfile = importlib.util.cache_from_source(str(f))
        py_compile.compile(str(f), cfile=cfile, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        pycs[arc.replace("/", "/__pycache__/").rsplit(".", 1)[0] + "." + cfile.split(".")[-2] + ".pyc"] = \
            open(cfile, "rb").read()
    wheels.sourceless(out, pycs)
    members = _check_record(out)
    assert sorted(n for n in members if not n.startswith("demo-1.0.dist-info")) == \
        ["demo/__init__.pyc", "demo/core.pyc", "demo/data.json", "demo/notes.py"]
    site = tmp_path / "site"
    zipfile.ZipFile(out).extractall(site)
    got = subprocess.run([sys.executable, "-c", "import demo, demo.core, demo.notes; "
                          "print(demo.X, demo.core.__file__.rsplit('/', 1)[1], demo.notes.N)"],
                         cwd=tmp_path, env={"PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert got == ["42", "core.pyc", "1"]


def test_sourceless_refuses_a_member_that_is_not_cached_bytecode(tmp_path):
    out = tmp_path / "demo-1.0-py3-none-any.whl"
    wheels.pack(out, {"demo/__init__.py": b""}, "demo", "1.0")
    with pytest.raises(BuildError, match="not __pycache__"):
        wheels.sourceless(out, {"demo/__init__.pyc": b"\x00"})


def test_the_download_cache_is_used_by_one_process_at_a_time(tmp_path):
    """Two site builds (or test processes in parallel) share .cache: the second waits for the first's lock,
    and the thread holding it may take it again (build_site holds it around helpers that take it too)."""
    import subprocess
    import sys
    import threading

    from builder.sitepkgs import REPO, cache_lock
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom builder.sitepkgs import cache_lock\nwith cache_lock(sys.argv[1]):\n"
         "    print('held', flush=True)\n    sys.stdin.readline()\n", str(tmp_path)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        got = threading.Event()

        def take():
            with cache_lock(tmp_path):
                with cache_lock(tmp_path):
                    got.set()
        t = threading.Thread(target=take, daemon=True)
        t.start()
        assert not got.wait(1.0), "the cache was taken while another process held it"
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert got.wait(60), "the cache was not taken once the other process let it go"
        t.join(60)
    finally:
        holder.kill()
        holder.wait()
