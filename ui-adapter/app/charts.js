// charts.js -- the admin page's activity charts: runs per second, run duration (p50 and p95) and
// live pages and runs over the last fifteen minutes, from GET /v1/admin/history (the server keeps
// a sample every five seconds: orchestrator/metrics.c).  Drawn with uPlot (npm, bundled as a chunk
// of its own, loaded when the admin page first has history to show).  It fetches nothing itself.

let uplot = null;   // the library, once loaded
const charts = new Map();   // id -> {plot, el}

const SERIES = {
  'chart-rate': { title: 'Runs ended per second', series: [{ label: 'runs/s', stroke: '#1a73e8', fill: 'rgba(26,115,232,.12)' }],
    pick: (s) => [s.runs_per_s] },
  'chart-latency': { title: 'Run duration, seconds (from started to result)', series: [{ label: 'p50', stroke: '#188038' }, { label: 'p95', stroke: '#d93025' }],
    pick: (s) => [s.p50_s, s.p95_s] },
  'chart-pages': { title: 'Live pages and runs', series: [{ label: 'pages', stroke: '#1a73e8' }, { label: 'runs not done', stroke: '#b06000' }],
    pick: (s) => [s.pages, s.runs_live] },
};

/** The columns uPlot takes for one chart: [times (s), series...]. */
export function columns(samples, pick) {
  const cols = [samples.map((s) => s.at / 1000)];
  samples.forEach((s, i) => pick(s).forEach((v, k) => { (cols[k + 1] ||= [])[i] = v ?? null; }));
  return cols;
}

/** Draws (or updates) every chart inside `box` from a history answer. */
export async function drawHistory(box, history) {
  const samples = history?.samples || [];
  if (!samples.length) { box.dataset.state = 'empty'; return; }
  box.dataset.state = 'drawn';
  if (!uplot) uplot = (await import('uplot')).default;
  const width = Math.max(280, Math.min(box.clientWidth || 640, 900));
  for (const [id, spec] of Object.entries(SERIES)) {
    const data = columns(samples, spec.pick);
    let c = charts.get(id);
    if (!c) {
      const el = document.createElement('div');
      el.id = id;
      el.className = 'chart';
      el.dataset.testid = id;
      box.append(el);
      const plot = new uplot({ title: spec.title, width, height: 160, scales: { x: { time: true } },
        series: [{}, ...spec.series.map((x) => ({ ...x, width: 2, spanGaps: false }))], axes: [{}, { size: 50 }] }, data, el);
      c = { plot, el };
      charts.set(id, c);
    } else {
      c.plot.setData(data);
    }
    c.el.dataset.points = String(samples.length);
  }
}
