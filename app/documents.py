"""JSON from users, links and host pages (a label file, a link's labels, saved labels, a command's arguments): data,
read within the limits that documents from stores have.

In the browser JavaScript checks it first (app/js/fetching.js: LIMITS, 16 MiB and 64 levels; app/js/tessera.js
jsonProblem, valueProblem), and Python parses or converts only what passed: Python's JSON parser and Pyodide's
conversion of JavaScript values recurse on the stack, and nesting some thousands of levels deep overflows it, which
kills Python in the page for good ("Maximum call stack size exceeded"), beyond any exception handler. On CPython (the
tests) the text is parsed by json alone, whose RecursionError is caught.
"""
from __future__ import annotations

import json
import sys

IN_BROWSER = sys.platform == "emscripten"


def parse(text: str, what: str):
    """The JSON value of `text`; ValueError with one line naming `what` when it is too large, too deep or not JSON."""
    if IN_BROWSER:
        import js
        problem = " ".join(str(js.tesseraJS.jsonProblem(text, what)).split())  # the parser may quote a line break
        if problem:
            raise ValueError(problem)
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None
    except ValueError as e:
        raise ValueError(f"{what}: not JSON ({e})") from None


def plain(value, what: str):
    """A JavaScript value from the page (a command's arguments, a host page's message) as Python values, converted
    once JavaScript has checked its depth; ValueError with one line otherwise."""
    import js
    problem = str(js.tesseraJS.valueProblem(value, what))
    if problem:
        raise ValueError(problem)
    return value.to_py()
