// Web Mercator (spherical, EPSG:3857), the one projection of the page's JavaScript: the coastlines
// (geography.js) and the preview (app/web/preview.js, through window.tesseraJS.mercator) both use it.
// Python's twin is app/geo.py (lonlat_to_merc, merc_to_lonlat), with the same radius and latitude clamp.
export const R = 6378137.0;
export const MAX_LAT = 85.05112878;
const D = Math.PI / 180;

export const lonToX = (lon) => lon * D * R;
export const latToY = (lat) => R * Math.log(Math.tan(Math.PI / 4 + (Math.max(-MAX_LAT, Math.min(MAX_LAT, lat)) * D) / 2));
export const xToLon = (x) => x / R / D;
export const yToLat = (y) => Math.atan(Math.sinh(y / R)) / D;
