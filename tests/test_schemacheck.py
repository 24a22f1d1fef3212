"""builder/core/schemacheck.py: the convention's schemas applied by the real jsonschema library, on CPython (the
validator's jsonschema) and with the explorer's own: the site's sha256-pinned jsonschema 4.17.3, attrs and
pyrsistent wheels (builder/sitepkgs.py), imported from exactly those files in a CPython without
site-packages.  Planted errors are read off the schemas, never from the checker."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest

from builder.core import convention as conv
from builder.core import extensions as ext

REPO = Path(__file__).resolve().parent.parent
ZONE = conv.zone_attrs(year=2024, zone=30, south=False, n_bands=128, n_tiles=1, model_version="1.0",
                       build_version="x", has_rgb=True, origin_e=0.0, origin_n=0.0, height=256, width=256)
GOOD = {"ZONE_SCHEMA": ZONE, "ROOT_SCHEMA": conv.root_attrs(2024),
        "STACK_ROOT_SCHEMA": {"zarr_conventions": [dict(c) for c in ext.STACK_ROOT_CONVENTIONS],
                              "tessera:dataset_version": "v1", "tessera-stack:years": [2023, 2024]}}
SCHEMAS = {"ZONE_SCHEMA": conv.ZONE_SCHEMA, "ROOT_SCHEMA": conv.ROOT_SCHEMA, "STACK_ROOT_SCHEMA": ext.STACK_ROOT_SCHEMA}


def _planted(rule: dict) -> list:
    """Values that break a property's rule (read off the schema: const, type, minimum, maximum, pattern)."""
    bad = [None, {}]
    if "const" in rule:
        bad.append(f"not-{rule['const']}")
    if rule.get("type") in ("integer", "number"):
        bad += [True, "1", []] + ([rule["minimum"] - 1] if "minimum" in rule else []) \
            + ([rule["maximum"] + 1] if "maximum" in rule else [])
    if rule.get("type") == "string":
        bad += [1, True, []] + (["\x00 no match"] if "pattern" in rule else [])
    if rule.get("type") == "array":
        bad += ["x", 1] + ([[]] if rule.get("minItems") else []) + ([[{"name": 7}]] if "items" in rule else [])
    return bad


def broken(name: str) -> list[tuple[dict, str]]:
    """Each required key left out, and each planted value of each property with a checkable rule."""
    schema, good = SCHEMAS[name], GOOD[name]
    cases = [({k: v for k, v in good.items() if k != key}, f"without {key}") for key in schema["required"]]
    for key, rule in schema["properties"].items():
        if {"const", "type"} & set(rule):
            cases += [(dict(good, **{key: v}), f"{key}={v!r}") for v in _planted(rule)]
    return cases


def test_problems_name_the_key_and_what_is_wrong_one_line_each():
    assert conv.schema_problems(jsonschema, ZONE, conv.ZONE_SCHEMA, "utm30") == []
    bad = dict(ZONE, **{"tessera:dataset_version": "v2", "tessera:utm_zone": 61, "spatial:shape": "wide\nx"})
    del bad["tessera:model_version"]
    assert conv.schema_problems(jsonschema, bad, conv.ZONE_SCHEMA, "utm30") == [
        "utm30: attributes: 'tessera:model_version' is a required property",
        "utm30: spatial:shape: 'wide\\nx' is not of type 'array'",
        "utm30: tessera:dataset_version: 'v1' was expected",
        "utm30: tessera:utm_zone: 61 is greater than the maximum of 60"]
    long = conv.schema_problems(jsonschema, dict(ZONE, **{"proj:code": ["y" * 10_000]}), conv.ZONE_SCHEMA, "z")
    assert len(long) == 1 and len(long[0]) < 400 and long[0].endswith("…")


@pytest.fixture(scope="module")
def explorer_jsonschema(tmp_path_factory) -> Path:
    """The site's jsonschema wheels (downloaded and sha256-checked as the site build does), unpacked."""
    from builder.sitepkgs import SCHEMA_WHEELS, schema_wheels
    wheels = schema_wheels(REPO / ".cache")
    assert sorted(w.name.split("-")[0] for w in wheels) == sorted(SCHEMA_WHEELS)
    out = tmp_path_factory.mktemp("explorer-jsonschema")
    for w in wheels:
        with zipfile.ZipFile(w) as z:
            z.extractall(out)
    return out


_IN_SUBPROCESS = """
import json, sys
sys.path[:0] = sys.argv[1:3]
from importlib.metadata import version
import jsonschema
from builder.core.schemacheck import schema_problems
assert jsonschema.__file__.startswith(sys.argv[1]), jsonschema.__file__
cases = json.load(sys.stdin)
print(json.dumps({"version": version("jsonschema"),
                  "problems": [schema_problems(jsonschema, doc, schema, "w") for schema, doc in cases]}))
"""


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_explorers_jsonschema_finds_the_same_problems_as_the_validators(name, explorer_jsonschema):
    cases = broken(name)
    assert len(cases) > 10
    ours = [conv.schema_problems(jsonschema, doc, SCHEMAS[name], "w") for doc, _ in cases]
    for (doc, what), problems in zip(cases, ours):
        assert problems and all(p.startswith("w: ") and "\n" not in p for p in problems), what
    # -S: no site-packages, so only the unpacked wheels (and the repo, for the pure core) can be imported
    p = subprocess.run([sys.executable, "-S", "-c", _IN_SUBPROCESS, str(explorer_jsonschema), str(REPO)],
                       input=json.dumps([[SCHEMAS[name], GOOD[name]]] + [[SCHEMAS[name], d] for d, _ in cases]),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["version"] == "4.17.3" and version("jsonschema") != "4.17.3"  # two different libraries
    assert got["problems"][0] == []
    # The same problems at the same keys; releases word a few messages differently ("[] is too short" in
    # 4.17.3, "[] should be non-empty" later), so the message after "where: key: " is not compared.
    where_key = lambda problems: [p.split(": ", 2)[:2] for p in problems]  # noqa: E731
    for (doc, what), theirs, mine in zip(cases, got["problems"][1:], ours):
        assert where_key(theirs) == where_key(mine), what
