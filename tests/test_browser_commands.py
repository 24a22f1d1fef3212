"""Commands that overlap, in real Chromium on real Pyodide: scripts on the page (window.tesseraApi) and host pages
(postMessage) send commands without waiting for the ones before. Each command resolves or rejects, later commands
are not held up by earlier ones, and the explorer ends in the state the last command asked for."""
from __future__ import annotations

import json
import math

import pytest
from pyproj import Transformer

from browser_util import wait_state
from test_browser import demo_pixel

pytestmark = pytest.mark.browser
SETTLE_MS = 60_000  # a burst's commands all resolve or reject within this (they took ~1-5 s on a loaded machine)

# The explorer's view, selection and similarity switch, read from Python in the worker.
STATE = """import gc, json
s = next(o for o in gc.get_objects() if type(o).__name__ == "Explorer")
json.dumps({"view": list(s.view), "selected": None if s.selected is None else [s.selected.zone, s.selected.row,
            s.selected.col], "similarity": s.tools.similarity.on})"""

# Every command of a burst through window.tesseraApi, none awaited before the next is sent; "hung" when they have
# not all resolved or rejected within the limit.
API_BURST = """async ([cmds, limit]) => {
    const all = Promise.allSettled(cmds.map(([name, ...args]) => window.tesseraApi[name](...args)));
    const late = new Promise((ok) => setTimeout(() => ok(null), limit));
    const got = await Promise.race([all, late]);
    return got === null ? "hung" : got.map((r) => r.status === "fulfilled" ? ["ok", r.value] : ["error", r.reason.message]);
}"""

# The same through postMessage, from the page to itself (its own origin is obeyed): each reply is matched by id.
MESSAGE_BURST = """async ([cmds, limit, first]) => {
    const replies = new Map();
    const ids = cmds.map((_, i) => `burst-${first + i}`);
    const all = new Promise((done) => {
        addEventListener("message", function on(e) {
            if (!e.data || !ids.includes(e.data.id) || !("ok" in e.data)) return;
            replies.set(e.data.id, e.data.ok ? ["ok", e.data.result] : ["error", e.data.error]);
            if (replies.size === ids.length) { removeEventListener("message", on); done(); }
        });
    });
    cmds.forEach(([cmd, ...args], i) => postMessage({tessera: 1, id: ids[i], cmd, args}, location.origin));
    const late = new Promise((ok) => setTimeout(() => ok("hung"), limit));
    return (await Promise.race([all, late])) === "hung" ? "hung" : ids.map((id) => replies.get(id));
}"""


def explorer(page) -> dict:
    return json.loads(page.evaluate("async (code) => await window.tesseraWorker.python(code)", STATE))


def view_centre_lonlat(view) -> tuple[float, float]:
    x0, x1, y0, y1 = view
    lon, lat = Transformer.from_crs(3857, 4326, always_xy=True).transform((x0 + x1) / 2, (y0 + y1) / 2)
    return lon, lat


def test_overlapping_commands_from_scripts_and_host_pages_all_settle_and_the_last_one_wins(page, server, site):
    """The issue's burst (view, then select, unawaited) hung for ever and took every later command with it; so did
    bursts through postMessage. Each burst below must settle within SETTLE_MS, and leave the selection, view and
    similarity switch its last commands set."""
    pixels = [demo_pixel(site, k) for k in (0, 1, 2, 3)]  # row, col, lon, lat, x, y
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    (r0, c0, lon0, lat0, *_), (r1, c1, lon1, lat1, *_), (r2, c2, lon2, lat2, *_), (r3, c3, lon3, lat3, *_) = pixels
    bursts = [
        ("api", [["view", 0.05, 50.85, 7600], ["select", 0.05, 50.85]], None),  # the issue's own
        ("api", [["select", lon0, lat0], ["view", lon1, lat1, 7600], ["goto", f"{lon2},{lat2}"],
                 ["select", lon1, lat1], ["similarity", True], ["view", lon2, lat2, 5000], ["select", lon2, lat2]],
         ((r2, c2), (lon2, lat2), True)),
        ("message", [["view", lon3, lat3, 7600], ["select", lon3, lat3], ["similarity", False], ["select", lon0, lat0],
                     ["pin"], ["view", lon0, lat0, 6000]], ((r0, c0), (lon0, lat0), False)),
        ("message", [["goto", f"{lon1},{lat1}"], ["similarity", True], ["select", lon1, lat1], ["view", lon3, lat3, 7600],
                     ["select", lon3, lat3]], ((r3, c3), (lon3, lat3), True)),
        # both channels at once: which reaches Python first is the browser's choice, so only "all settle" is checked
        ("both", [["select", lon2, lat2], ["view", lon2, lat2, 7600], ["similarity", False], ["select", lon1, lat1],
                  ["view", lon1, lat1, 7000]], None),
    ]
    sent = 0
    for how, cmds, want in bursts:
        if how == "both":  # half through postMessage, half through tesseraApi, at once
            got = page.evaluate(f"""async ([cmds, limit, first]) => {{
                const [a, b] = await Promise.all([({MESSAGE_BURST})([cmds.slice(0, 2), limit, first]),
                                                  ({API_BURST})([cmds.slice(2), limit])]);
                return a === "hung" || b === "hung" ? "hung" : [...a, ...b]; }}""", [cmds, SETTLE_MS, sent])
        elif how == "api":
            got = page.evaluate(API_BURST, [cmds, SETTLE_MS])
        else:
            got = page.evaluate(MESSAGE_BURST, [cmds, SETTLE_MS, sent])
        sent += len(cmds)
        assert got != "hung", f"a {how} burst did not settle within {SETTLE_MS} ms: {cmds}"
        assert [g[0] for g in got] == ["ok"] * len(cmds), got
        if want is None:
            continue
        (row, col), (lon, lat), sim = want
        state = explorer(page)
        assert state["selected"] == ["utm30", row, col]
        clon, clat = view_centre_lonlat(state["view"])
        assert math.hypot((clon - lon) * 70_000, (clat - lat) * 111_000) < 1.0  # metres: the last view's centre
        assert state["similarity"] is sim


def test_the_embed_pages_helper_rejects_a_command_left_unanswered(page, server):
    """embed.html's tessera() waited for ever on a command the explorer never answered (one not loaded, or from an
    origin it does not obey). It rejects after tessera.timeout ms, with a line naming the command."""
    page.goto(server + "embed.html?explorer=no-explorer-here.html")  # the frame holds no explorer: nothing answers
    got = page.evaluate("""async () => {
        window.tessera.timeout = 1500;
        const t0 = performance.now();
        const answer = window.tessera("select", 0.05, 50.85).then(() => "resolved", (e) => e.message);
        const late = new Promise((ok) => setTimeout(() => ok("no answer in 20 s"), 20000));
        return [await Promise.race([answer, late]), performance.now() - t0, window.tesseraPending.size]; }""")
    message, ms, pending = got
    assert message == "select: no answer from the explorer within 1.5 s", message
    assert 1500 <= ms < 10_000 and pending == 0
