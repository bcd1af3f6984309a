// The latency map: every leaf pair's one-way latency now (GET
// /api/v1/latency), one cell per pair (row: source leaf, column:
// destination) coloured by the mean over the pair's paths. A cell picked
// (click, or arrow keys and Enter) lists the pair's paths and their hops'
// queueing (GET /api/v1/latency?src=&dst=). Fabrics past the server's
// leaf limit get a note instead.
import { escapeHTML } from './app.js'; // app.js also sets up window.accelnet first

const REFRESH_MS = 2000;
const SIDE = 288; // the map's width and height, CSS pixels
const canvas = document.getElementById('latency-map');
const ctx = canvas.getContext('2d');
const note = document.getElementById('latency-note');
const scale = document.getElementById('latency-scale');
const detail = document.getElementById('latency-detail');

const lat = {
  matrix: null,
  cell: 0,       // a cell's side, pixels
  labels: 0,     // the label band's width (0: no labels)
  focus: null,   // [i, j] the keyboard is on
  pair: null,    // the drilled-down pair, as the API returns it
  off: false,    // the server does not serve the matrix (too many leaves)
};

function fmtUs(us) {
  return us >= 100 ? `${us.toFixed(0)} µs` : `${us.toFixed(1)} µs`;
}

// The colour of a latency between the map's floor (its fastest pair: the
// hops' fixed cost) and top: green, through amber, to red.
function colour(us, floor, top) {
  const f = top > floor ? Math.min(1, Math.max(0, (us - floor) / (top - floor))) : 0;
  const hue = 130 - 130 * f;
  return `hsl(${hue}, 70%, ${38 + 10 * f}%)`;
}

function bounds(m) {
  let floor = Infinity, top = 0;
  m.mean_us.forEach((row, i) => row.forEach((v, j) => {
    if (i === j) return;
    floor = Math.min(floor, v);
    top = Math.max(top, v);
  }));
  if (!isFinite(floor)) floor = 0;
  // A spread of under 2 µs is noise on an idle fabric: keep it green.
  return [floor, Math.max(top, floor + 2)];
}

function draw() {
  const m = lat.matrix;
  if (!m) return;
  const n = m.leaves.length;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = SIDE * dpr;
  canvas.height = SIDE * dpr;
  canvas.style.width = SIDE + 'px';
  canvas.style.height = SIDE + 'px';
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, SIDE, SIDE);
  lat.labels = n <= 16 ? 40 : 0;
  lat.cell = (SIDE - lat.labels) / n;
  const [floor, top] = bounds(m);
  ctx.font = '10px system-ui';
  ctx.textBaseline = 'middle';
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const x = lat.labels + j * lat.cell, y = lat.labels + i * lat.cell;
      ctx.fillStyle = i === j ? '#222b35' : colour(m.mean_us[i][j], floor, top);
      ctx.fillRect(x, y, Math.max(1, lat.cell - 1), Math.max(1, lat.cell - 1));
    }
    if (lat.labels) {
      ctx.fillStyle = '#9aa4ae';
      ctx.textAlign = 'right';
      ctx.fillText(m.leaves[i], lat.labels - 3, lat.labels + (i + 0.5) * lat.cell);
      ctx.save();
      ctx.translate(lat.labels + (i + 0.5) * lat.cell, lat.labels - 3);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = 'left';
      ctx.fillText(m.leaves[i], 0, 0);
      ctx.restore();
    }
  }
  const mark = (pair, style) => {
    if (!pair) return;
    ctx.strokeStyle = style;
    ctx.lineWidth = 2;
    ctx.strokeRect(lat.labels + pair[1] * lat.cell, lat.labels + pair[0] * lat.cell, lat.cell - 1, lat.cell - 1);
  };
  if (lat.pair) mark([m.leaves.indexOf(lat.pair.src), m.leaves.indexOf(lat.pair.dst)], '#ffffff');
  if (lat.focus && document.activeElement === canvas) mark(lat.focus, '#4ea1ff');
  scale.innerHTML = `<span><i style="background:${colour(floor, floor, top)}"></i>${fmtUs(floor)}</span>` +
    `<span><i style="background:${colour((floor + top) / 2, floor, top)}"></i>${fmtUs((floor + top) / 2)}</span>` +
    `<span><i style="background:${colour(top, floor, top)}"></i>${fmtUs(top)}</span>`;
  window.accelnet.latency.drawn = { leaves: n, floor, top };
}

// cellAt is the pair under a point of the canvas, or null.
function cellAt(px, py) {
  const m = lat.matrix;
  if (!m || !lat.cell) return null;
  const j = Math.floor((px - lat.labels) / lat.cell), i = Math.floor((py - lat.labels) / lat.cell);
  if (i < 0 || j < 0 || i >= m.leaves.length || j >= m.leaves.length || i === j) return null;
  return [i, j];
}

async function refresh() {
  if (lat.off) return;
  let res;
  try {
    res = await fetch('/api/v1/latency');
  } catch {
    return; // the stream's status says the server is gone
  }
  if (res.status === 400) {
    const p = await res.json();
    lat.off = true;
    note.textContent = p.detail || 'The latency map is not served for this fabric.';
    note.hidden = false;
    canvas.hidden = true;
    scale.hidden = true;
    return;
  }
  if (!res.ok) return;
  lat.matrix = await res.json();
  note.hidden = true;
  draw();
  if (lat.pair) loadPair(lat.pair.src, lat.pair.dst);
}

async function loadPair(src, dst) {
  const res = await fetch(`/api/v1/latency?src=${encodeURIComponent(src)}&dst=${encodeURIComponent(dst)}`);
  if (!res.ok) return;
  lat.pair = await res.json();
  renderPair();
  draw();
}

function renderPair() {
  const p = lat.pair;
  if (!p) return;
  const rows = p.paths.map((path) => {
    const worst = Math.max(...path.hops.map((h) => h.queueing_us));
    const hops = path.hops.map((h) => {
      const cls = h.queueing_us === worst && worst >= 1 ? ' class="hot"' : '';
      const from = h.probed ? ', as a probe met it (the switch reports no queue)' : h.measured ? '' : ', not reported: counted empty';
      return `<span${cls} title="${escapeHTML(`${h.switch}:${h.port} queue ${Math.round(h.queue_bytes)} bytes${from}`)}">${escapeHTML(h.switch)}:${h.port} ${fmtUs(h.queueing_us)}${h.probed ? '<sup>p</sup>' : ''}</span>`;
    }).join(' → ');
    return `<li><b>${fmtUs(path.now_us)}</b> (p99 ${fmtUs(path.p99_us)}) ${hops}</li>`;
  }).join('');
  detail.innerHTML = `<p><b>${escapeHTML(p.src)} → ${escapeHTML(p.dst)}</b>: now ${fmtUs(p.now_us)} (mean of ${p.paths.length} paths), ` +
    `p50 ${fmtUs(p.p50_us)}, p99 ${fmtUs(p.p99_us)} over ${p.intervals} intervals. Each hop: its egress port and queueing (<sup>p</sup>: as the probes met it).</p>` +
    `<ol id="latency-paths">${rows}</ol>` + probedHTML(p.probes);
}

// probedHTML is what the pingmesh's probes measured for the pair: their
// percentiles and the last probe's hops, each with the queueing the
// switch recorded (the deepest marked).
function probedHTML(pr) {
  if (!pr) return '<p id="latency-probes">No probe back in the window (the pingmesh is off, or has not reached this pair yet).</p>';
  const worst = Math.max(...pr.last.hops.map((h) => h.queue_us));
  const hops = pr.last.hops.map((h) => {
    const cls = h.queue_us === worst && worst >= 1 ? ' class="hot"' : '';
    return `<span${cls} title="${escapeHTML(`${h.switch}:${h.port} ${h.queue_packets} packets queued, ${h.hop_us} µs ingress to egress`)}">${escapeHTML(h.switch)}:${h.port} ${fmtUs(h.queue_us)}</span>`;
  }).join(' → ');
  return `<p id="latency-probes">Probed end to end: p50 ${fmtUs(pr.p50_us)}, p99 ${fmtUs(pr.p99_us)} over ${pr.count} probes; ` +
    `the last, ${fmtUs(pr.last.latency_us)}: ${hops}</p>`;
}

canvas.addEventListener('click', (e) => {
  const r = canvas.getBoundingClientRect();
  const c = cellAt(e.clientX - r.left, e.clientY - r.top);
  if (c) {
    lat.focus = c;
    loadPair(lat.matrix.leaves[c[0]], lat.matrix.leaves[c[1]]);
  }
});
canvas.addEventListener('mousemove', (e) => {
  const r = canvas.getBoundingClientRect();
  const c = cellAt(e.clientX - r.left, e.clientY - r.top);
  const m = lat.matrix;
  canvas.title = c ? `${m.leaves[c[0]]} → ${m.leaves[c[1]]}: mean ${fmtUs(m.mean_us[c[0]][c[1]])}, slowest path ${fmtUs(m.worst_us[c[0]][c[1]])}` : '';
});
canvas.addEventListener('keydown', (e) => {
  const m = lat.matrix;
  if (!m) return;
  const n = m.leaves.length;
  let [i, j] = lat.focus || [0, 1];
  const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
  if (moves[e.key]) {
    i = (i + moves[e.key][0] + n) % n;
    j = (j + moves[e.key][1] + n) % n;
    lat.focus = [i, j];
    e.preventDefault();
    draw();
  } else if (e.key === 'Enter' && i !== j) {
    loadPair(m.leaves[i], m.leaves[j]);
  }
});
canvas.addEventListener('focus', draw);
canvas.addEventListener('blur', draw);

// Test and debugging hooks.
window.accelnet.latency = {
  drawn: null,
  get matrix() { return lat.matrix; },
  get pair() { return lat.pair; },
  get off() { return lat.off; },
  // cellCentre is where a pair's cell is on the page.
  cellCentre(src, dst) {
    const m = lat.matrix;
    const i = m.leaves.indexOf(src), j = m.leaves.indexOf(dst);
    const r = canvas.getBoundingClientRect();
    return { x: r.left + lat.labels + (j + 0.5) * lat.cell, y: r.top + lat.labels + (i + 0.5) * lat.cell };
  },
};

refresh();
setInterval(refresh, REFRESH_MS);
