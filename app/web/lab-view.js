// The lab's half of the explorer's "Open this view in a notebook" (builder/lab.py loads it into lab/lab/index.html).
//
// The explorer links to lab/lab/index.html#view=<its own link's hash>. Once JupyterLite has started, this copies
// the notebook VIEW_TEMPLATE (app/notebooks/), writes the link into its cell tagged "tessera-view" as a Python
// string literal, saves the copy in the browser's storage as this-view.ipynb (this-view-2.ipynb, ... when taken)
// and opens it. The link is data: it becomes one string literal (JSON's escapes are Python's), never code, and
// nothing runs until the user runs the cells. The link reaches Python only through app/notebook.py `view`, which
// reads it with the explorer's own parser (app/state.py).
(() => {
  "use strict";
  const VIEW_TEMPLATE = "5-a-view-from-the-explorer.ipynb";
  const TAG = "tessera-view";
  const LINK_MAX = 8192; // characters of a view link: a view, its pins and a small label set fit in far fewer
  const NAMES_MAX = 100; // this-view.ipynb ... this-view-100.ipynb
  const START_MS = 300_000; // JupyterLite's start on a slow machine
  const refuse = (why) => console.error(`tessera: the explorer's view was not opened: ${why}`);

  // The view link in the page's hash, or null (no view, or refused in one console line).
  function viewLink() {
    const hash = window.location.hash;
    if (!hash.startsWith("#view=")) return null;
    let link;
    try {
      link = decodeURIComponent(hash.slice("#view=".length));
    } catch (e) {
      refuse("its link is not valid percent-encoding");
      return null;
    }
    if (link.length > LINK_MAX) {
      refuse(`its link is ${link.length} characters, more than ${LINK_MAX}`);
      return null;
    }
    return link;
  }

  async function app() {
    // JupyterLite sets window.jupyterapp just before it starts (exposeAppInBrowser in lab/jupyter-lite.json).
    const until = Date.now() + START_MS;
    while (!window.jupyterapp) {
      if (Date.now() > until) throw new Error("JupyterLite did not start");
      await new Promise((r) => setTimeout(r, 50));
    }
    await window.jupyterapp.restored;
    return window.jupyterapp;
  }

  async function freeName(contents) {
    for (let i = 1; i <= NAMES_MAX; i++) {
      const name = i === 1 ? "this-view.ipynb" : `this-view-${i}.ipynb`;
      try {
        await contents.get(name, { content: false });
      } catch (e) {
        return name; // absent
      }
    }
    throw new Error(`this-view.ipynb to this-view-${NAMES_MAX}.ipynb are all taken`);
  }

  async function open(link) {
    const lab = await app();
    const contents = lab.serviceManager.contents;
    const template = await contents.get(VIEW_TEMPLATE, { content: true, type: "notebook" });
    const nb = JSON.parse(JSON.stringify(template.content));
    const cell = nb.cells.find((c) => ((c.metadata || {}).tags || []).includes(TAG));
    if (!cell) throw new Error(`${VIEW_TEMPLATE} has no cell tagged ${TAG}`);
    cell.source = `LINK = ${JSON.stringify(link)}\n`;
    const name = await freeName(contents);
    await contents.save(name, { type: "notebook", format: "json", content: nb });
    // A reload must not make another copy: the hash goes once the notebook is saved.
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    await lab.commands.execute("docmanager:open", { path: name, factory: "Notebook" });
    document.body.dataset.tesseraView = name; // what the tests wait for
  }

  function handle() {
    const link = viewLink();
    if (link !== null) open(link).catch((e) => refuse(e && e.message ? e.message : String(e)));
  }

  handle(); // the page opened with a view
  window.addEventListener("hashchange", handle); // a lab tab given another view
})();
