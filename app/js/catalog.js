// catalog.json as the map's preview reads it, before Python has loaded: the format, rules and limits are
// builder/core/catalog.py's (the parser the explorer and the Python reader share).  This is their mirror for the
// one reader that cannot wait for Python; tests/test_catalog.py feeds both the same catalogs, hostile ones
// included, and checks they accept the same ones and pick the same store.
import { TesseraError, parseBytes } from "./fetching.js";

export const CATALOG = { bytes: 512 * 2 ** 10, stores: 1000, text: 2048, origins: 100, yearMin: 1, yearMax: 9999 };

// Characters are code points, as Python counts them (a string's .length counts UTF-16 units).
const text = (v, what, bad) => {
  if (typeof v !== "string") throw bad(`${what} is not a string`);
  if (v.length > CATALOG.text && Array.from(v).length > CATALOG.text) throw bad(`${what} is longer than ${CATALOG.text} characters`);
  return v;
};

// Every number finite (a number beyond a double's range parses to Infinity here, to an integer or inf in Python).
function allFinite(doc) {
  const stack = [doc];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === "number" && !Number.isFinite(v)) return false;
    if (v !== null && typeof v === "object") for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push(child);
  }
  return true;
}

// A JSON number of integral value in yearMin..yearMax, else null.
const year = (v) => (typeof v === "number" && Number.isInteger(v) && v >= CATALOG.yearMin && v <= CATALOG.yearMax ? v : null);

// The catalog a parsed document states ({stores: [{year, url, label, truth}], multiyear, embedOrigins, tilesUrl});
// a TesseraError ("invalid", one line naming `where`) for anything else.
export function checkCatalog(doc, where) {
  const bad = (what) => new TesseraError("invalid", `${where}: ${what}`);
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  if (!isObject(doc) || !Array.isArray(doc.stores) || !doc.stores.length) throw bad('expected an object with a non-empty "stores" list');
  if (!allFinite(doc)) throw bad("a number beyond a double's range");
  if (doc.stores.length > CATALOG.stores) throw bad(`${doc.stores.length} stores, more than the ${CATALOG.stores} read`);
  const seen = new Set();
  const stores = doc.stores.map((s, i) => {
    if (!isObject(s) || !("url" in s)) throw bad(`store ${i} has no url`);
    const url = text(s.url, `store ${i}: url`, bad);
    const y = year(s.year);
    if (y === null) throw bad(`store ${i} has no integer year in ${CATALOG.yearMin}..${CATALOG.yearMax}`);
    if (seen.has(y)) throw bad(`store ${i}: year ${y} is listed twice`);
    seen.add(y);
    const label = "label" in s ? s.label : y;
    const truth = s.truth === undefined || s.truth === null ? null : text(s.truth, `store ${i}: truth`, bad);
    return { year: y, url, label: text(typeof label === "number" ? String(label) : label, `store ${i}: label`, bad), truth };
  });
  const optional = (k) => (doc[k] === undefined || doc[k] === null ? null : text(doc[k], k, bad));
  let origins = doc.embed_origins;
  if (origins !== undefined && origins !== null) {
    if (!Array.isArray(origins) || origins.length > CATALOG.origins) throw bad(`embed_origins is not a list of at most ${CATALOG.origins} origins`);
    origins = origins.map((o, k) => text(o, `embed_origins ${k}`, bad));
  }
  return { stores, multiyear: optional("multiyear"), embedOrigins: origins ?? null, tilesUrl: optional("tiles_url") };
}

// A catalog's bytes, within the catalog's size and the documents' depth limits, checked.
export function readCatalog(raw, where) {
  return checkCatalog(parseBytes(raw, where, CATALOG.bytes), where);
}

// The store of `year`, else the last listed: what the explorer opens first (builder/core/catalog.py Catalog.pick).
export function pickStore(catalog, year) {
  return catalog.stores.find((s) => s.year === year) || catalog.stores[catalog.stores.length - 1];
}
