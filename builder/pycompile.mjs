// Compile wheels' Python sources to bytecode for Pyodide's own CPython 3.12, at site-build time.
// Runs the site's Pyodide under node: usage `node pycompile.mjs PYODIDE_DIR OUT_DIR WHEEL...`.
// For each wheel i, OUT_DIR/i/<path>.pyc are written (unchecked-hash pycs: independent of mtimes).
import fs from "fs";
const [, , pyodideDir, outDir, ...wheels] = process.argv;
const { loadPyodide } = await import(pyodideDir + "/pyodide.mjs");
const py = await loadPyodide({ indexURL: pyodideDir + "/" });
for (const [i, wheel] of wheels.entries()) {
  const root = `/w${i}`;
  py.FS.mkdirTree(root);
  py.unpackArchive(new Uint8Array(fs.readFileSync(wheel)), "zip", { extractDir: root });
  const files = py.runPython(`
import compileall, os, py_compile
compileall.compile_dir("${root}", quiet=2, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
[os.path.relpath(os.path.join(d, f), "${root}") for d, _, fs in os.walk("${root}") for f in fs if f.endswith(".pyc")]
`).toJs();
  for (const rel of files) {
    const dest = `${outDir}/${i}/${rel}`;
    fs.mkdirSync(dest.substring(0, dest.lastIndexOf("/")), { recursive: true });
    fs.writeFileSync(dest, py.FS.readFile(`${root}/${rel}`));
  }
}
