import { feature, mesh } from "topojson-client";
import { LIMITS, TesseraError, cappedText, parseJSON, tracedFetch } from "./fetching.js";
import { latToY, lonToX } from "./mercator.js";

// Coastlines and country borders from world-atlas (Natural Earth) TopoJSON, self-hosted
// in vendor/world-atlas/.  Decoded and projected to Web Mercator here, in JS, so Python
// gets flat x/y arrays (NaN between lines) ready for one Bokeh line glyph per layer,
// plus each country's name and lon/lat box for the "go to" box.

// A step of more than 180 degrees of longitude between two points of a line crosses the antimeridian
// (Fiji, Chukotka): the line is broken there (NaN) rather than drawn across the whole map.
function lines(multi) {
  let n = 0;
  for (const line of multi.coordinates) n += 2 * line.length;
  const xs = new Float64Array(n), ys = new Float64Array(n);
  let i = 0;
  for (const line of multi.coordinates) {
    let last = null;
    for (const [lon, lat] of line) {
      if (last !== null && Math.abs(lon - last) > 180) {
        xs[i] = NaN;
        ys[i] = NaN;
        i += 1;
      }
      xs[i] = lonToX(lon);
      ys[i] = latToY(lat);
      i += 1;
      last = lon;
    }
    xs[i] = NaN;
    ys[i] = NaN;
    i += 1;
  }
  return { xs: xs.slice(0, i), ys: ys.slice(0, i) };
}

// The lon/lat box of a country's largest polygon (by points): a country split by the
// antimeridian or with far islands is framed on its main land.
function mainBox(geometry) {
  const polys = geometry.type === "Polygon" ? [geometry.coordinates] : geometry.type === "MultiPolygon" ? geometry.coordinates : [];
  let best = null, size = -1;
  for (const poly of polys) {
    const ring = poly[0] || [];
    if (ring.length > size) {
      size = ring.length;
      best = ring;
    }
  }
  if (!best) return null;
  let w = Infinity, s = Infinity, e = -Infinity, n = -Infinity, w2 = Infinity, e2 = -Infinity;
  for (const [lon, lat] of best) {
    const lon2 = lon < 0 ? lon + 360 : lon; // the same ring seen across the antimeridian
    w = Math.min(w, lon); e = Math.max(e, lon); s = Math.min(s, lat); n = Math.max(n, lat);
    w2 = Math.min(w2, lon2); e2 = Math.max(e2, lon2);
  }
  return e2 - w2 < e - w ? [w2 > 180 ? w2 - 360 : w2, s, w2 > 180 ? e2 - 360 : e2, n] : [w, s, e, n];
}

export async function geography(url) {
  const resp = await tracedFetch(new Request(url), "geography");
  if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${url}`);
  const topo = parseJSON(await cappedText(resp, url, LIMITS.indexBytes), url);
  const countries = topo.objects.countries;
  const coast = lines(mesh(topo, countries, (a, b) => a === b));
  const borders = lines(mesh(topo, countries, (a, b) => a !== b));
  const places = [];
  for (const f of feature(topo, countries).features) {
    const box = mainBox(f.geometry || {});
    const name = f.properties && f.properties.name;
    if (box && typeof name === "string") places.push([name, box]);
  }
  return { coast_x: coast.xs, coast_y: coast.ys, border_x: borders.xs, border_y: borders.ys,
           places: JSON.stringify(places) };
}
