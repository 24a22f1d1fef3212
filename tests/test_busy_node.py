"""The page's busy sign (app/web/busy.js), run in node on a stand-in page with a clock the test moves: each step's
seconds count from its own start, whether it begins after a pause or while another step runs."""
from __future__ import annotations


from conftest import REPO, run_node

# A stand-in for the few DOM calls busy.js makes, a clock set by the test and timers never fired (each tick is
# shown at once by showBusy). Reads [[ms, step name], ...] from argv[2]; prints the sign after each: its text, or
# null while hidden.
NODE_JS = r"""
import { readFileSync } from "node:fs";
const calls = JSON.parse(readFileSync(process.argv[2], "utf8"));
let now = 0;
Object.defineProperty(globalThis, "performance", { value: { now: () => now }, configurable: true });
globalThis.setInterval = () => 1;
globalThis.clearInterval = () => {};
const byId = {};
const node = () => ({
  children: [], dataset: {}, hidden: false, textContent: "",
  setAttribute(k, v) { this[k] = v; },
  append(...c) { this.children.push(...c); if (this.id) byId[this.id] = this; },
  get lastChild() { return this.children.at(-1); },
});
globalThis.document = {
  getElementById: (id) => byId[id] || null,
  createElement: () => node(),
  body: { append(el) { byId[el.id] = el; } },
};
const { showBusy } = await import("./busy.js");
const out = [];
for (const [ms, what] of calls) {
  now = ms;
  showBusy(what);
  const el = document.getElementById("busy");
  out.push(el.hidden ? null : el.lastChild.textContent);
}
console.log(JSON.stringify(out));
"""


def shown(tmp_path, calls: list) -> list:
    return run_node(tmp_path, REPO / "app" / "web" / "busy.js", NODE_JS, calls)


def test_each_step_counts_its_own_seconds(tmp_path):
    calls = [
        [0, "k-means (k=4)"],
        [14_200, "Similarity"],  # starts while k-means runs: its own count
        [16_900, "k-means (k=4)"],  # similarity ended, k-means still runs: k-means' count goes on
        [20_000, ""],
        [21_000, "Regression (ridge)"],  # after a pause
    ]
    assert shown(tmp_path, calls) == ["k-means (k=4): 0 s", "Similarity: 0 s", "k-means (k=4): 16 s", None,
                                      "Regression (ridge): 0 s"]
