"""The convention's JSON schemas applied by the real `jsonschema` library, the same way on CPython (the
validator, the readers) and in the browser (the explorer), and whether conventions are registered.

Pure core (stdlib only): the core cannot import jsonschema, so callers hand the module in
(`schema_problems(jsonschema, attrs, schema, where)`; `describe(doc, where, jsonschema=jsonschema)`).
This module is the one place that picks the draft and words the problems.  The browser ships
jsonschema 4.17.3, CPython has whatever pyproject allows (builder/sitepkgs.py SCHEMA_WHEELS says why).
"""
from __future__ import annotations

from typing import Any, Iterable

MESSAGE_MAX = 300  # characters of one problem's message: jsonschema quotes the offending value, which is data


def _line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MESSAGE_MAX else text[:MESSAGE_MAX - 1] + "…"


def schema_problems(jsonschema, attrs: Any, schema: dict[str, Any], where: str) -> list[str]:
    """Every way `attrs` breaks `schema` (JSON Schema draft 2020-12), one line each: `where: key: message`
    (`attributes` for the object itself), ordered by key.  `jsonschema` is the jsonschema module."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(attrs), key=lambda e: [str(p) for p in e.path])
    return [f"{where}: {'/'.join(str(p) for p in e.path) or 'attributes'}: {_line(e.message)}" for e in errors]


def registered(attrs: dict[str, Any], required: Iterable[dict[str, str]]) -> list[str]:
    """Names of the conventions in `required` that `attrs['zarr_conventions']` does not register exactly: the same
    uuid and name, and the same schema_url and spec_url, or a pair the registration lists as `former` (URLs it
    was written with before; builder/core/extensions.py Registration)."""
    have = attrs.get("zarr_conventions") or []
    missing = []
    for conv in required:
        urls = {(conv["schema_url"], conv["spec_url"]), *getattr(conv, "former", ())}
        ok = any(isinstance(c, dict) and c.get("uuid") == conv["uuid"] and c.get("name") == conv["name"]
                 and (c.get("schema_url"), c.get("spec_url")) in urls for c in have)
        if not ok:
            missing.append(conv["name"])
    return missing
