// The page's sign that a tool's step runs (app/tools/steps.py names it, app/main.py sends it): the step's name and the
// seconds since it began, counted by this thread's own timer. Python computes in its worker (app/web/worker.js), so
// the count keeps moving while a fit holds Python; the status line says what the step has done so far. Hidden when no
// step runs. The name is shown as text.
let timer = null;
let since = 0;

function box() {
  let el = document.getElementById("busy");
  if (!el) {
    el = document.createElement("div");
    el.id = "busy";
    el.setAttribute("role", "status");
    el.hidden = true;
    const spin = document.createElement("span");
    spin.className = "spin";
    el.append(spin, document.createElement("span"));
    document.body.append(el);
  }
  return el;
}

// `what`: the step under way ("" or null: none).
export function showBusy(what) {
  const el = box();
  clearInterval(timer);
  timer = null;
  if (!what) {
    el.hidden = true;
    delete el.dataset.seconds;
    return;
  }
  if (el.hidden) since = performance.now(); // a step after another without a pause: one count
  el.hidden = false;
  const tick = () => {
    const s = Math.floor((performance.now() - since) / 1000);
    el.dataset.seconds = String(s);
    el.lastChild.textContent = `${what}: ${s} s`;
  };
  tick();
  timer = setInterval(tick, 250);
}
