"""One rule for an array's record of its chunks in both languages: the browser's check (app/js/chunkruns.js), run
in node, accepts and refuses the same `chunks_present` values as builder/core/chunkruns.py, with the same one-line
reason; a refused record reads as none (every chunk asked for, a missing one fill), in Python as in the browser."""
from __future__ import annotations


import pytest

from builder.core.chunkruns import ChunkRuns, record_of
from conftest import REPO, run_node

# Reads [[runs, rows, cols], ...] from argv[2]; prints, for each, {present: [[i, j], ...] | null, warned: [line, ...],
# viaMeta: whether recordOf of an array's zarr.json with that record gives a test}.
NODE_JS = r"""
import { readFileSync } from "node:fs";
const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
let warned = [];
console.warn = (...args) => warned.push(args.join(" "));
const out = [];
for (const [k, [runs, rows, cols]] of cases.entries()) {
  // a fresh module for each case: it warns once per refused record
  const { chunksPresent, recordOf } = await import(`./chunkruns.js?case=${k}`);
  warned = [];
  const has = chunksPresent(runs, rows, cols);
  const present = has && [];
  for (let i = 0; has && i < rows; i++) for (let j = 0; j < cols; j++) if (has(i, j)) present.push([i, j]);
  // the same value as an array's attribute: recordOf of its zarr.json (a 3-D array, one chunk deep)
  const meta = { shape: [rows * 4, cols * 4, 8], chunk_grid: { configuration: { chunk_shape: [4, 4, 8] } },
                 attributes: { chunks_present: runs } };
  out.push({ present, warned, viaMeta: recordOf(meta) !== null });
}
console.log(JSON.stringify(out));
"""

ROWS, COLS = 3, 5
# (runs, the chunks present or the reason it is refused), written out by hand
CASES = [
    ([[0, 0, 2], [0, 3, 5], [2, 1, 2]], [(0, 0), (0, 1), (0, 3), (0, 4), (2, 1)]),
    ([], []),
    ([[1, 0, 5]], [(1, j) for j in range(5)]),
    ([[2, 1, 2], [0, 0, 2]], "runs are not sorted at [0, 0, 2]"),
    ([[0, 3, 5], [0, 0, 2]], "runs are not sorted at [0, 0, 2]"),
    ([[0, 0, 2], [0, 0, 2]], "runs are not sorted at [0, 0, 2]"),
    ([[0, 0, 3], [0, 2, 4]], "run [0, 2, 4] overlaps the one before"),
    ([[0, 0, 3], [0, 1, 2]], "run [0, 1, 2] overlaps the one before"),
    ([[0, 0, 6]], "run [0, 0, 6] is outside the level's 3x5 chunks"),
    ([[3, 0, 1]], "run [3, 0, 1] is outside the level's 3x5 chunks"),
    ([[0, 2, 2]], "run [0, 2, 2] is outside the level's 3x5 chunks"),
    ([[0, 1]], "a run is not [row, col0, col1] integers"),
    ([[0, "1", 2]], "a run is not [row, col0, col1] integers"),
    ({"0": [0, 1]}, "chunks_present is not a list"),
]


def run_cases(tmp_path, cases: list) -> list:
    return run_node(tmp_path, REPO / "app" / "js" / "chunkruns.js", NODE_JS, cases)


@pytest.mark.parametrize("lang", ["python", "js"])
def test_both_languages_accept_and_refuse_the_same_records(tmp_path, lang):
    if lang == "js":
        got = run_cases(tmp_path, [[runs, ROWS, COLS] for runs, _ in CASES])
    for k, (runs, want) in enumerate(CASES):
        if lang == "python":
            try:
                present, reason = sorted(ChunkRuns.from_attr(runs, (ROWS, COLS))), None
            except ValueError as e:
                present, reason = None, str(e)
            fallback = record_of({"chunks_present": runs}, (ROWS * 4, COLS * 4, 8), (4, 4, 8)) is None
        else:
            r = got[k]
            present = None if r["present"] is None else [tuple(c) for c in r["present"]]
            fallback = not r["viaMeta"]
            if present is None:
                assert len(r["warned"]) == 1 and "\n" not in r["warned"][0], (runs, r["warned"])
                reason = r["warned"][0]
            else:
                assert r["warned"] == [], (runs, r["warned"])
                reason = None
        if isinstance(want, str):
            assert present is None and fallback, (lang, runs, present)
            assert want in reason and "chunks_present" in reason, (lang, runs, reason)
        else:
            assert present == want and not fallback, (lang, runs, present)


def test_a_missing_record_is_none_without_a_warning(tmp_path):
    (r,) = run_cases(tmp_path, [[None, ROWS, COLS]])
    assert r == {"present": None, "warned": [], "viaMeta": False}
