// The page's sign that a tool's step runs (app/tools/steps.py names it, app/main.py sends it): the step's name and the
// seconds since it began, counted by this thread's own timer. Python computes in its worker (app/web/worker.js), so
// the count keeps moving while a fit holds Python; the status line says what the step has done so far. Hidden when no
// step runs. The name is shown as text.
//
// Each step counts from its own start: one that starts while another runs begins at 0, and when it ends the step
// still running goes on with its own count. The starts are kept while the sign shows, forgotten once it hides.
let timer = null;
const starts = new Map(); // step name -> performance.now() at its start

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
    starts.clear();
    return;
  }
  if (!starts.has(what)) starts.set(what, performance.now());
  const since = starts.get(what);
  el.hidden = false;
  const tick = () => {
    const s = Math.floor((performance.now() - since) / 1000);
    el.dataset.seconds = String(s);
    el.lastChild.textContent = `${what}: ${s} s`;
  };
  tick();
  timer = setInterval(tick, 250);
}
