// sheet-worker.js -- the .xlsx preview's parser, in a dedicated module Worker (build.mjs →
// assets/sheet-worker.js) so that a large workbook never holds the page's main thread:
// read-excel-file unzips (fflate, in workers of its own for large parts) and parses the XML
// (saxen) where it is called.  It answers the first rows and columns of each sheet as plain
// strings, never markup (the page puts them in table cells as text), and the sheets' real sizes.
// The page terminates it when it takes too long (previews.js).
//
// Message in: {bytes: ArrayBuffer, limits: {xmlBytes, sheets, rows, cols}}.
// Message out: {sheets: [{name, rows: string[][], totalRows, totalCols}], totalSheets} or
// {refused: what} (over the XML budget: nothing parsed) or {error: message}.
import readExcelFile from 'read-excel-file/browser';
import { unzipSync } from 'fflate';

const pad = (n) => String(n).padStart(2, '0');

/** A cell as the sheet would show it, as text. */
export function cellText(v) {
  if (v == null) return '';
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) return '';
    const day = `${v.getUTCFullYear()}-${pad(v.getUTCMonth() + 1)}-${pad(v.getUTCDate())}`;
    const t = v.getUTCHours() || v.getUTCMinutes() || v.getUTCSeconds() ? ` ${pad(v.getUTCHours())}:${pad(v.getUTCMinutes())}:${pad(v.getUTCSeconds())}` : '';
    return day + t;
  }
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  return String(v);
}

self.onmessage = async ({ data: { bytes, limits } }) => {
  try {
    let xmlBytes = 0;
    unzipSync(new Uint8Array(bytes), { filter: (f) => { if (/\.(xml|rels)$/i.test(f.name)) xmlBytes += f.originalSize; return false; } });
    if (xmlBytes > limits.xmlBytes) { self.postMessage({ refused: `${(xmlBytes / 1048576).toFixed(1)} MB of XML` }); return; }
    const all = await readExcelFile(bytes);
    const sheets = all.slice(0, limits.sheets).map(({ sheet, data }) => ({
      name: String(sheet),
      rows: data.slice(0, limits.rows).map((r) => r.slice(0, limits.cols).map(cellText)),
      totalRows: data.length,
      totalCols: data.reduce((m, r) => Math.max(m, r.length), 0),
    }));
    self.postMessage({ sheets, totalSheets: all.length });
  } catch (e) {
    self.postMessage({ error: String(e && e.message || e) });
  }
};
