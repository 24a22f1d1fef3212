"""Check a year store against the `tessera:` convention v1 (or a multi-year index against `tessera-stack:`).

Every rule comes from builder.core.convention; this package only walks the store
(local path or any fsspec URL) and reports each violation as one line
"where: what".  One module per job:

  documents.py  bounded, cached reads of zarr.json documents; the bounds (docs/guarantees.md, "Validate")
  nodes.py      a node's attributes (schema, registrations), array metadata, coordinate values
  root.py       `validate`: open the store, the root group, consolidated metadata, every group
  zone.py       a zone group (utmNN): attributes, arrays, coordinates
  pyramid.py    the global_rgb group and its levels
  stack.py      the multi-year index (tessera-stack:)
  deep.py       --deep: every inner chunk against its crc32c, decoded

The store may be hostile: its metadata is read within bounds, never followed
outside the store, and never trusted for an allocation; a bound that stops a
check is itself reported, so a store the validator could not fully check never
passes.
"""
from __future__ import annotations

from builder.validate.documents import plain_key
from builder.validate.root import validate

__all__ = ["plain_key", "validate"]
