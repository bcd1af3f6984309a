// accelnet dashboard: draws the fabric in tiers and follows the controller's
// live stream (server-sent events). No build step, no dependencies.

const canvas = document.getElementById('fabric');
const ctx = canvas.getContext('2d');
const tooltip = document.getElementById('tooltip');
const statusEl = document.getElementById('status');
const details = document.getElementById('details');
const chart = document.getElementById('chart');
const HISTORY_SECONDS = 900; // the server keeps 15 minutes too (/api/v1/history)
const MAX_HOSTS_DRAWN = 256; // above this, hosts are drawn as one box per leaf

const state = {
  topo: null,
  layoutKey: '',
  pos: new Map(),       // switch name -> {x, y}
  hostPos: new Map(),   // host name or "leaf:<name>" -> {x, y, n}
  history: new Map(),   // "link:<id>" | "switch:<name>" -> [{t, v}]
  selected: null,       // {kind: 'link'|'switch', id}
  hover: null,
  token: sessionStorage.getItem('accelnet-token') || '',
  intents: new Map(),   // id -> intent, as the API returns it
  intent: null,         // the selected intent's id
  highlighted: [],      // link ids and "host:<name>" of the selected intent's paths
  events: null,         // AbortController of the intent event stream
  elephants: [],        // detected elephants (operators only)
  elephantTimer: null,
  elephantsAll: false,  // the whole list shown, not the top ones
  entryCounts: new Map(), // switch name -> "routes 12, flow_pins 3, …" (operators)
  updates: 0,           // topology updates received
  view: null,           // 'overview' (one box per pod), 'pod' (state.pod), 'full'; null: chosen by size
  pod: 0,
  tierSpacing: [0, 0, 0], // pixels between neighbours in each tier (labels where they fit)
  podBoxes: [],         // overview: {pod, x, y, w, h}
  intentState: 'active', // the intents list's filter: 'active' (not Failed or Rejected), 'all', or one state
  intentTenant: '',     // '' or one tenant
};

// A fabric with pods and more switches than this opens on its overview.
const OVERVIEW_ABOVE = 60;

// Switch labels: their font, and the room around the text in a box.
const LABEL_FONT = '10px system-ui';
const LABEL_PAD = 4;

const ELEPHANTS_SHOWN = 10; // a longer list is collapsed to its biggest

// Test and debugging hooks.
window.accelnet = {
  ready: false,
  drawn: [],
  linkState(id) {
    const l = state.topo && state.topo.links.find((x) => x.id === id);
    if (!l) return 'unknown';
    if (!l.load.up) return 'down';
    if (miswired(l)) return l.discovery.state; // miswired or lost
    if (l.drained) return 'drained';
    if (l.dampened) return 'dampened';
    return 'up';
  },
  switchDrained(name) {
    const sw = state.topo && state.topo.switches.find((x) => x.name === name);
    return !!(sw && sw.drained);
  },
  select(kind, id) { select({ kind, id }); },
  maxUtilization() { return state.topo ? Math.max(0, ...state.topo.links.map((l) => l.load.utilization)) : 0; },
  get selected() { return state.selected; },
  get intents() { return [...state.intents.values()].map((i) => ({ id: i.id, tenant: i.tenant, name: i.spec.name, state: i.status.state })); },
  selectIntent(id) { selectIntent(id); },
  get highlighted() { return state.highlighted.slice(); },
  get elephants() { return state.elephants.slice(); },
  get updates() { return state.updates; },
  get view() { return currentView(); },
  get pod() { return state.pod; },
  setView(kind, pod) { setView(kind, pod); },
  get pods() { return state.podBoxes.map((b) => b.pod); },
  get podBoxes() { return state.podBoxes.map((b) => ({ ...b })); },
  historyLength(key) { return (state.history.get(key) || []).length; },
  labelled: [],
  boxes: [],          // switches drawn: {name, x, y, w, h, text} (text: its label's width, 0 if none)
  strongLinks: [],    // links drawn at full strength (the rest faint)
  listedIntents: [],  // ids the intents list shows
  chartLabels: [],    // the chart's axis labels
  linkMidpoint(id) {
    const l = state.topo && state.topo.links.find((x) => x.id === id);
    const a = l && state.pos.get(l.a.switch), b = l && state.pos.get(l.b.switch);
    return a && b ? { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 } : null;
  },
  setIntentFilter(st, tenant) { state.intentState = st; state.intentTenant = tenant; renderIntents(); },
};

// miswired: link discovery found the cable goes elsewhere, or stopped
// hearing it (lost); either way the link carries no routes.
function miswired(l) {
  return !!(l.discovery && (l.discovery.state === 'miswired' || l.discovery.state === 'lost'));
}

// Utilization colour: green (idle) through yellow to red (full and beyond).
function utilColor(u) {
  const x = Math.max(0, Math.min(1, u));
  const hue = 120 - 120 * x;
  return `hsl(${hue}, 80%, ${45 + 10 * (1 - x)}%)`;
}

function drawLegend() {
  const legend = document.getElementById('legend');
  const stops = [0, 0.25, 0.5, 0.75, 1];
  legend.innerHTML = stops.map((u) => `<span><i style="background:${utilColor(u)}"></i>${Math.round(u * 100)}%</span>`).join('') +
    '<span><i style="background:repeating-linear-gradient(90deg,#ff5c5c 0 4px,transparent 4px 7px)"></i>down</span>' +
    '<span><i style="background:repeating-linear-gradient(90deg,#8a94a0 0 2px,transparent 2px 6px)"></i>drained</span>' +
    '<span><i style="background:repeating-linear-gradient(90deg,#e0a030 0 2px,transparent 2px 6px)"></i>flapping</span>' +
    '<span><i style="background:repeating-linear-gradient(90deg,#d04ce0 0 6px,transparent 6px 8px)"></i>miswired / lost</span>';
}

function tierOf(sw) {
  switch (sw.role) {
    case 'core': return 0;
    case 'spine': return 1;
    default: return 2;
  }
}

// layout places switches in tiers; fat-tree pods side by side.
function layout(topo) {
  const key = currentView() + state.pod + '|' + topo.switches.map((s) => s.name).join(',') + '|' + topo.hosts.length;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  const sizeKey = key + `|${w}x${h}`;
  if (sizeKey === state.layoutKey) return;
  state.layoutKey = sizeKey;
  state.pos.clear();
  state.hostPos.clear();
  const hasCore = topo.switches.some((s) => s.role === 'core');
  const tierY = hasCore ? [0.1, 0.36, 0.62] : [0.1, 0.2, 0.55];
  // Wide enough that the outermost switches' labels stay inside the map.
  ctx.font = LABEL_FONT;
  const widest = Math.max(0, ...topo.switches.map((s) => ctx.measureText(s.name).width));
  const margin = Math.max(40, widest / 2 + LABEL_PAD + 4);
  const tiers = [[], [], []];
  for (const sw of topo.switches) tiers[tierOf(sw)].push(sw);
  const byPodName = (a, b) => (a.pod - b.pod) || a.name.localeCompare(b.name, undefined, { numeric: true });
  tiers.forEach((list, t) => {
    list.sort(byPodName);
    const pods = [...new Set(list.map((s) => s.pod || 0))];
    const gap = pods.length > 1 ? 24 : 0;
    const usable = w - 2 * margin - gap * (pods.length - 1);
    state.tierSpacing[t] = list.length > 1 ? usable / (list.length - 1) : w;
    list.forEach((sw, i) => {
      const podIdx = pods.indexOf(sw.pod || 0);
      const x = margin + (list.length === 1 ? usable / 2 : (usable * i) / (list.length - 1)) + gap * podIdx;
      state.pos.set(sw.name, { x, y: tierY[t] * h });
    });
  });
  const aggregate = topo.hosts.length > MAX_HOSTS_DRAWN;
  const onLeaf = new Map();
  for (const host of topo.hosts) {
    const leaf = host.attach.switch;
    if (!onLeaf.has(leaf)) onLeaf.set(leaf, []);
    onLeaf.get(leaf).push(host);
  }
  for (const [leaf, hosts] of onLeaf) {
    const p = state.pos.get(leaf);
    if (!p) continue;
    if (aggregate) {
      state.hostPos.set('leaf:' + leaf, { x: p.x, y: 0.85 * h, n: hosts.length, leaf });
      continue;
    }
    const spread = Math.min(60, (w - 2 * margin) / Math.max(1, onLeaf.size) - 4);
    hosts.forEach((host, i) => {
      const dx = hosts.length === 1 ? 0 : -spread / 2 + (spread * i) / (hosts.length - 1);
      state.hostPos.set(host.name, { x: p.x + dx, y: 0.85 * h, n: 1, host });
    });
  }
}

function resize() {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = canvas.clientWidth * dpr;
  canvas.height = canvas.clientHeight * dpr;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  state.layoutKey = '';
  draw();
}

function fmtBps(bps) {
  if (bps >= 1e9) return (bps / 1e9).toFixed(1) + ' Gb/s';
  if (bps >= 1e6) return (bps / 1e6).toFixed(1) + ' Mb/s';
  return Math.round(bps) + ' b/s';
}

// --- views: the whole fabric, an overview of its pods, one pod ---

function hasPods(topo) { return topo.switches.some((s) => s.pod > 0); }

function currentView() {
  if (!state.topo) return 'full';
  if (!hasPods(state.topo)) return 'full';
  if (state.view) return state.view;
  return state.topo.switches.length > OVERVIEW_ABOVE ? 'overview' : 'full';
}

function setView(kind, pod) {
  state.view = kind;
  if (kind === 'pod') state.pod = pod;
  state.layoutKey = '';
  renderViewBar();
  draw();
}

// viewTopo is what the map draws: in a pod's view, the pod's switches,
// the cores it reaches, the links among them and its hosts.
function viewTopo() {
  const topo = state.topo;
  if (!topo || currentView() !== 'pod') return topo;
  const inPod = new Set(topo.switches.filter((s) => s.pod === state.pod).map((s) => s.name));
  const links = topo.links.filter((l) => inPod.has(l.a.switch) || inPod.has(l.b.switch));
  const keep = new Set(inPod);
  for (const l of links) { keep.add(l.a.switch); keep.add(l.b.switch); }
  return { ...topo, switches: topo.switches.filter((s) => keep.has(s.name)), links,
    hosts: topo.hosts.filter((h) => inPod.has(h.attach.switch)) };
}

function renderViewBar() {
  const bar = document.getElementById('viewbar');
  if (!state.topo || !hasPods(state.topo)) { bar.hidden = true; return; }
  bar.hidden = false;
  const v = currentView();
  const pods = [...new Set(state.topo.switches.map((s) => s.pod).filter((p) => p > 0))].sort((a, b) => a - b);
  bar.innerHTML = `<button type="button" data-view="overview" aria-pressed="${v === 'overview'}">pods</button>` +
    `<button type="button" data-view="full" aria-pressed="${v === 'full'}">every switch</button>` +
    `<select aria-label="One pod">${['<option value="">one pod…</option>', ...pods.map((p) => `<option value="${p}"${v === 'pod' && p === state.pod ? ' selected' : ''}>pod ${p}</option>`)].join('')}</select>`;
  for (const b of bar.querySelectorAll('button')) b.addEventListener('click', () => setView(b.dataset.view));
  bar.querySelector('select').addEventListener('change', (e) => { if (e.target.value) setView('pod', Number(e.target.value)); });
}

// drawOverview draws one box per pod under one band of cores: each box
// coloured by the busiest link inside the pod, its line to the cores by
// the busiest of its uplinks; down links counted in red. A click opens
// the pod.
function drawOverview(topo) {
  const w = canvas.clientWidth, h = canvas.clientHeight, margin = 40;
  const podOf = new Map(topo.switches.map((s) => [s.name, s.pod || 0]));
  const pods = [...new Set(topo.switches.map((s) => s.pod).filter((p) => p > 0))].sort((a, b) => a - b);
  const stats = new Map(pods.map((p) => [p, { inside: 0, up: 0, down: 0, hosts: 0, switches: 0 }]));
  let coreU = 0, cores = 0;
  for (const sw of topo.switches) {
    if (sw.pod > 0) stats.get(sw.pod).switches++;
    else cores++;
  }
  for (const hst of topo.hosts) {
    const p = podOf.get(hst.attach.switch);
    if (stats.has(p)) stats.get(p).hosts++;
  }
  for (const l of topo.links) {
    const pa = podOf.get(l.a.switch), pb = podOf.get(l.b.switch);
    const p = pa || pb;
    if (!stats.has(p)) continue;
    const st = stats.get(p);
    if (!l.load.up) st.down++;
    if (pa && pb) st.inside = Math.max(st.inside, l.load.utilization);
    else { st.up = Math.max(st.up, l.load.utilization); coreU = Math.max(coreU, l.load.utilization); }
  }
  const coreBox = { x: margin, y: 0.1 * h, w: w - 2 * margin, h: 28 };
  const gap = 12;
  const bw = Math.max(30, (w - 2 * margin - gap * (pods.length - 1)) / pods.length);
  state.podBoxes = pods.map((p, i) => ({ pod: p, x: margin + i * (bw + gap), y: 0.5 * h, w: bw, h: 70 }));
  for (const b of state.podBoxes) {
    const st = stats.get(b.pod);
    ctx.strokeStyle = utilColor(st.up); ctx.lineWidth = 3;
    ctx.beginPath(); ctx.moveTo(b.x + b.w / 2, b.y); ctx.lineTo(b.x + b.w / 2, coreBox.y + coreBox.h); ctx.stroke();
  }
  ctx.fillStyle = '#223044'; ctx.fillRect(coreBox.x, coreBox.y, coreBox.w, coreBox.h);
  ctx.strokeStyle = utilColor(coreU); ctx.lineWidth = 2; ctx.strokeRect(coreBox.x, coreBox.y, coreBox.w, coreBox.h);
  ctx.fillStyle = '#ffffff'; ctx.font = '12px system-ui'; ctx.textAlign = 'center';
  ctx.fillText(`${cores} core switches · busiest uplink ${(100 * coreU).toFixed(0)}%`, coreBox.x + coreBox.w / 2, coreBox.y + 18);
  const labelled = [];
  for (const b of state.podBoxes) {
    const st = stats.get(b.pod);
    const sel = state.selected && state.selected.kind === 'pod' && state.selected.id === b.pod;
    ctx.fillStyle = '#1d2a38'; ctx.fillRect(b.x, b.y, b.w, b.h);
    ctx.strokeStyle = sel ? '#ffffff' : utilColor(st.inside); ctx.lineWidth = sel ? 3 : 2; ctx.strokeRect(b.x, b.y, b.w, b.h);
    // two bars: uplinks, inside
    ctx.fillStyle = utilColor(st.up); ctx.fillRect(b.x + 4, b.y + 4, (b.w - 8) * Math.min(1, st.up), 5);
    ctx.fillStyle = utilColor(st.inside); ctx.fillRect(b.x + 4, b.y + 12, (b.w - 8) * Math.min(1, st.inside), 5);
    ctx.fillStyle = '#ffffff'; ctx.font = (b.w < 60 ? '10px' : '12px') + ' system-ui'; ctx.textAlign = 'center';
    ctx.fillText(`pod ${b.pod}`, b.x + b.w / 2, b.y + 34);
    ctx.fillStyle = '#9aa4ae'; ctx.font = '10px system-ui';
    if (b.w >= 60) ctx.fillText(`${st.switches} sw · ${st.hosts} hosts`, b.x + b.w / 2, b.y + 48);
    if (st.down) { ctx.fillStyle = '#ff5c5c'; ctx.fillText(`${st.down} down`, b.x + b.w / 2, b.y + 62); }
    labelled.push(`pod ${b.pod}`);
  }
  window.accelnet.labelled = labelled;
  window.accelnet.drawn = [];
}

function draw() {
  ctx.clearRect(0, 0, canvas.clientWidth, canvas.clientHeight);
  if (!state.topo) return;
  if (currentView() === 'overview') {
    drawOverview(state.topo);
    return;
  }
  state.podBoxes = [];
  const topo = viewTopo();
  layout(topo);
  const drawn = [];
  // Host links first, under everything.
  ctx.lineWidth = 1;
  for (const hp of state.hostPos.values()) {
    const leaf = hp.host ? hp.host.attach.switch : hp.leaf;
    const p = state.pos.get(leaf);
    let u = 0;
    if (hp.host) u = Math.max(hp.host.tx_bps, hp.host.rx_bps) / (hp.host.nic_gbps * 1e9);
    ctx.strokeStyle = utilColor(u);
    ctx.globalAlpha = 0.6;
    ctx.beginPath(); ctx.moveTo(p.x, p.y); ctx.lineTo(hp.x, hp.y); ctx.stroke();
    ctx.globalAlpha = 1;
    ctx.fillStyle = '#8899aa';
    if (hp.host) {
      ctx.beginPath(); ctx.arc(hp.x, hp.y, 3, 0, 2 * Math.PI); ctx.fill();
    } else {
      ctx.fillRect(hp.x - 14, hp.y - 7, 28, 14);
      ctx.fillStyle = '#0f1419'; ctx.font = '9px system-ui'; ctx.textAlign = 'center';
      ctx.fillText(String(hp.n), hp.x, hp.y + 3);
    }
  }
  const dense = topo.links.length > 600;
  // Every switch of a fat-tree at once is a tangle of crossing links:
  // there they are drawn faint, and the selected switch's (or link) at
  // full strength. Down, drained and miswired links always stand out.
  const tangle = currentView() === 'full' && hasPods(topo);
  const selSwitch = state.selected && state.selected.kind === 'switch' ? state.selected.id : null;
  const strong = [];
  if (tangle && !selSwitch && !(state.selected && state.selected.kind === 'link')) {
    ctx.fillStyle = '#9aa4ae'; ctx.font = '12px system-ui'; ctx.textAlign = 'left';
    ctx.fillText('select a switch to see its links', 12, 18);
  }
  for (const l of topo.links) {
    const a = state.pos.get(l.a.switch), b = state.pos.get(l.b.switch);
    if (!a || !b) continue;
    const sel = state.selected && state.selected.kind === 'link' && state.selected.id === l.id;
    const mine = selSwitch && (l.a.switch === selSwitch || l.b.switch === selSwitch);
    const faint = tangle && !sel && !mine && l.load.up && !miswired(l) && !l.drained && !l.dampened;
    ctx.globalAlpha = faint ? 0.12 : 1;
    if (!faint) strong.push(l.id);
    ctx.lineWidth = sel ? 4 : (dense ? 1 : 2);
    if (!l.load.up) {
      ctx.strokeStyle = '#ff5c5c';
      ctx.setLineDash([5, 4]);
    } else if (miswired(l)) {
      ctx.strokeStyle = '#d04ce0';
      ctx.setLineDash([6, 2]);
    } else if (l.drained || l.dampened) {
      ctx.strokeStyle = l.drained ? '#8a94a0' : '#e0a030';
      ctx.setLineDash([2, 4]);
    } else {
      ctx.strokeStyle = utilColor(l.load.utilization);
      ctx.setLineDash([]);
    }
    ctx.beginPath(); ctx.moveTo(a.x, a.y); ctx.lineTo(b.x, b.y); ctx.stroke();
  }
  ctx.globalAlpha = 1;
  window.accelnet.strongLinks = strong;
  ctx.setLineDash([]);
  drawHighlight();
  const labelled = [];
  const boxes = [];
  for (const sw of topo.switches) {
    const p = state.pos.get(sw.name);
    const sel = state.selected && state.selected.kind === 'switch' && state.selected.id === sw.name;
    const synced = sw.status && sw.status.in_sync;
    // A label where the tier leaves room for one; its box as wide as it.
    ctx.font = LABEL_FONT;
    const text = ctx.measureText(sw.name).width;
    const small = state.tierSpacing[tierOf(sw)] < Math.max(50, text + 2 * LABEL_PAD + 4);
    const wbox = small ? 8 : Math.max(46, text + 2 * LABEL_PAD), hbox = small ? 8 : 18;
    ctx.fillStyle = sw.drained ? '#4a525c' : (synced ? '#2d5b8c' : '#7a5d12');
    ctx.strokeStyle = sel ? '#ffffff' : '#0f1419';
    ctx.lineWidth = sel ? 2 : 1;
    ctx.fillRect(p.x - wbox / 2, p.y - hbox / 2, wbox, hbox);
    ctx.strokeRect(p.x - wbox / 2, p.y - hbox / 2, wbox, hbox);
    if (!small) {
      ctx.fillStyle = '#ffffff'; ctx.font = LABEL_FONT; ctx.textAlign = 'center';
      ctx.fillText(sw.name, p.x, p.y + 3);
      labelled.push(sw.name);
    }
    boxes.push({ name: sw.name, x: p.x, y: p.y, w: wbox, h: hbox, text: small ? 0 : text });
    drawn.push(sw.name);
  }
  window.accelnet.drawn = drawn;
  window.accelnet.labelled = labelled;
  window.accelnet.boxes = boxes;
}

// The selected intent's paths, drawn over the links: every link a flow
// leaves a switch by, and the last hop down to the destination host.
function drawHighlight() {
  const hl = [];
  const inn = state.intent && state.intents.get(state.intent);
  if (inn && state.topo) {
    const byEnd = new Map();
    for (const l of state.topo.links) {
      byEnd.set(`${l.a.switch}:${l.a.port}`, l);
      byEnd.set(`${l.b.switch}:${l.b.port}`, l);
    }
    const hostAt = new Map(state.topo.hosts.map((h) => [`${h.attach.switch}:${h.attach.port}`, h]));
    ctx.strokeStyle = '#4ea1ff';
    ctx.lineWidth = 5;
    ctx.globalAlpha = 0.85;
    for (const f of inn.status.flows || []) {
      const src = state.hostPos.get(f.src);
      if (src && f.path && f.path.length) {
        const leaf = state.pos.get(f.path[0].switch);
        if (leaf) {
          ctx.beginPath(); ctx.moveTo(src.x, src.y); ctx.lineTo(leaf.x, leaf.y); ctx.stroke();
          if (!hl.includes('host:' + f.src)) hl.push('host:' + f.src);
        }
      }
      for (const e of f.path || []) {
        const key = `${e.switch}:${e.port}`;
        const l = byEnd.get(key);
        let a, b, id;
        if (l) {
          a = state.pos.get(l.a.switch); b = state.pos.get(l.b.switch); id = l.id;
        } else if (hostAt.has(key)) {
          const h = hostAt.get(key);
          a = state.pos.get(e.switch); b = state.hostPos.get(h.name) || state.hostPos.get('leaf:' + e.switch); id = 'host:' + h.name;
        }
        if (!a || !b) continue;
        ctx.beginPath(); ctx.moveTo(a.x, a.y); ctx.lineTo(b.x, b.y); ctx.stroke();
        if (!hl.includes(id)) hl.push(id);
      }
    }
    ctx.globalAlpha = 1;
  }
  state.highlighted = hl;
}

function distToSegment(px, py, a, b) {
  const dx = b.x - a.x, dy = b.y - a.y;
  const len2 = dx * dx + dy * dy || 1;
  const t = Math.max(0, Math.min(1, ((px - a.x) * dx + (py - a.y) * dy) / len2));
  const x = a.x + t * dx, y = a.y + t * dy;
  return Math.hypot(px - x, py - y);
}

function hit(px, py) {
  if (!state.topo) return null;
  if (currentView() === 'overview') {
    const b = state.podBoxes.find((b) => px >= b.x && px <= b.x + b.w && py >= b.y && py <= b.y + b.h);
    return b ? { kind: 'pod', id: b.pod } : null;
  }
  const topo = viewTopo();
  for (const sw of topo.switches) {
    const p = state.pos.get(sw.name);
    if (p && Math.abs(px - p.x) <= 24 && Math.abs(py - p.y) <= 10) return { kind: 'switch', id: sw.name };
  }
  let best = null, bestD = 5;
  for (const l of topo.links) {
    const a = state.pos.get(l.a.switch), b = state.pos.get(l.b.switch);
    if (!a || !b) continue;
    const d = distToSegment(px, py, a, b);
    if (d < bestD) { best = { kind: 'link', id: l.id }; bestD = d; }
  }
  return best;
}

function linkText(l) {
  const st = !l.load.up ? 'DOWN' : miswired(l) ? `up, ${l.discovery.state} (no routes)` : l.drained ? 'up, drained' : l.dampened ? 'up, dampened (flapping)' : 'up';
  const seen = l.discovery && l.discovery.seen ? `\n${l.discovery.seen.join('\n')}` : '';
  return `${l.id}\n${l.gbps} Gb/s  ${st}${seen}\n` +
    `${l.a.switch}→${l.b.switch}: ${fmtBps(l.load.a_to_b_bps)}\n${l.b.switch}→${l.a.switch}: ${fmtBps(l.load.b_to_a_bps)}\n` +
    `utilization ${(100 * l.load.utilization).toFixed(1)}%${l.load.stale ? ' (stale)' : ''}` +
    (l.load.a_to_b_ecn_bps || l.load.b_to_a_ecn_bps ? `\nECN-marked ${fmtBps(l.load.a_to_b_ecn_bps)} / ${fmtBps(l.load.b_to_a_ecn_bps)}` : '') +
    (l.load.a_to_b_drop_bps || l.load.b_to_a_drop_bps ? `\ndrops ${fmtBps(l.load.a_to_b_drop_bps)} / ${fmtBps(l.load.b_to_a_drop_bps)}` : '');
}

canvas.addEventListener('mousemove', (e) => {
  const r = canvas.getBoundingClientRect();
  const h = hit(e.clientX - r.left, e.clientY - r.top);
  if (!h) { tooltip.hidden = true; return; }
  let text = h.id;
  if (h.kind === 'link') text = linkText(state.topo.links.find((l) => l.id === h.id));
  if (h.kind === 'pod') text = `pod ${h.id}: click to open`;
  tooltip.textContent = text;
  tooltip.style.left = (e.clientX - r.left + 12) + 'px';
  tooltip.style.top = (e.clientY - r.top + 12) + 'px';
  tooltip.hidden = false;
});
canvas.addEventListener('mouseleave', () => { tooltip.hidden = true; });
canvas.addEventListener('click', (e) => {
  const r = canvas.getBoundingClientRect();
  const h = hit(e.clientX - r.left, e.clientY - r.top);
  if (h && h.kind === 'pod') setView('pod', h.id);
  else if (h) select(h);
});

function switchBps(name) {
  let bps = 0;
  for (const l of state.topo.links) {
    if (l.a.switch === name) bps += l.load.a_to_b_bps;
    if (l.b.switch === name) bps += l.load.b_to_a_bps;
  }
  return bps;
}

// loadHistory fills a selection's chart with what the server kept of it
// (the page's own points only start when it opened).
async function loadHistory(sel) {
  const q = sel.kind === 'link' ? 'link=' : 'switch=';
  const res = await fetch('/api/v1/history?' + q + encodeURIComponent(sel.id));
  if (!res.ok) return;
  const body = await res.json();
  const key = sel.kind + ':' + sel.id;
  const mine = state.history.get(key) || [];
  const first = mine.length ? mine[0].t : Infinity;
  const older = body.points.filter((p) => p.t < first).map((p) => ({ t: p.t, v: p.v }));
  state.history.set(key, older.concat(mine));
  if (state.selected === sel) drawChart();
}

async function select(sel) {
  state.selected = sel;
  if (sel.kind === 'link' || sel.kind === 'switch') loadHistory(sel).catch(() => {});
  if (sel.kind === 'switch' && currentView() !== 'full') {
    // Show it: the pod it is in (a core: every switch).
    const sw = state.topo && state.topo.switches.find((x) => x.name === sel.id);
    if (sw && sw.pod > 0 && (currentView() !== 'pod' || state.pod !== sw.pod)) setView('pod', sw.pod);
    else if (sw && !(sw.pod > 0)) setView('full');
  }
  document.querySelectorAll('#switch-list button').forEach((b) => b.setAttribute('aria-pressed', String(sel.kind === 'switch' && b.dataset.name === sel.id)));
  renderDetails();
  draw();
  if (sel.kind === 'switch') {
    try {
      const res = await authFetch(`/api/v1/switches/${encodeURIComponent(sel.id)}/entries`);
      const body = await res.json();
      // Kept, so that the once-a-second redraw shows them too.
      state.entryCounts.set(sel.id, res.ok ? Object.entries(body.counts).map(([k, v]) => `${k} ${v}`).join(', ') : (body.detail || res.statusText));
      if (state.selected === sel) renderDetails();
    } catch (err) {
      const el = document.getElementById('entry-counts');
      if (el) el.textContent = 'unavailable';
    }
  }
}

function renderDetails() {
  const sel = state.selected;
  if (!sel || !state.topo) return;
  if (sel.kind === 'link') {
    const l = state.topo.links.find((x) => x.id === sel.id);
    if (!l) return;
    details.innerHTML = `<dl><dt>link</dt><dd>${l.id}</dd><dt>capacity</dt><dd>${l.gbps} Gb/s</dd>` +
      `<dt>state</dt><dd class="${l.load.up ? '' : 'down'}">${l.load.up ? 'up' : 'down'}</dd>` +
      `<dt>${l.a.switch}→</dt><dd>${fmtBps(l.load.a_to_b_bps)}</dd><dt>${l.b.switch}→</dt><dd>${fmtBps(l.load.b_to_a_bps)}</dd>` +
      `<dt>utilization</dt><dd>${(100 * l.load.utilization).toFixed(1)}%</dd>` +
      `<dt>ECN-marked</dt><dd>${fmtBps(l.load.a_to_b_ecn_bps)} / ${fmtBps(l.load.b_to_a_ecn_bps)}</dd>` +
      `<dt>drops</dt><dd>${fmtBps(l.load.a_to_b_drop_bps)} / ${fmtBps(l.load.b_to_a_drop_bps)}</dd></dl>`;
  } else {
    const sw = state.topo.switches.find((x) => x.name === sel.id);
    if (!sw) return;
    const st = sw.status || {};
    details.innerHTML = `<dl><dt>switch</dt><dd>${sw.name}</dd><dt>role</dt><dd>${sw.role}</dd><dt>device id</dt><dd>${sw.device_id}</dd>` +
      (sw.drained ? '<dt>drained</dt><dd class="down">yes (maintenance)</dd>' : '') +
      `<dt>in sync</dt><dd>${st.in_sync ? 'yes' : 'no'}</dd><dt>entries</dt><dd id="entry-counts">${escapeHTML(state.entryCounts.get(sw.name) ?? String(st.entries ?? '—'))}</dd>` +
      `<dt>traffic out</dt><dd>${fmtBps(switchBps(sw.name))}</dd>` +
      (st.last_error ? `<dt>last error</dt><dd class="down">${st.last_error}</dd>` : '') + '</dl>';
  }
  drawChart();
}

// drawChart draws the selection's last 15 minutes: a link's utilization
// (0-100%) or a switch's traffic out, with the scale on the left and the
// time below.
function drawChart() {
  const c = chart.getContext('2d');
  c.clearRect(0, 0, chart.width, chart.height);
  const sel = state.selected;
  window.accelnet.chartLabels = [];
  if (!sel) return;
  const series = state.history.get(sel.kind + ':' + sel.id) || [];
  const now = Date.now() / 1000;
  const maxV = sel.kind === 'link' ? 1 : Math.max(1, ...series.map((p) => p.v));
  const left = 48, top = 16, bottom = chart.height - 16, right = chart.width - 6;
  const yOf = (v) => bottom - (bottom - top) * Math.min(1, v / maxV);
  const xOf = (t) => left + (right - left) * (1 - (now - t) / HISTORY_SECONDS);
  const labels = [];
  c.font = '10px system-ui';
  c.fillStyle = '#9aa4ae';
  c.textAlign = 'left';
  c.fillText(sel.kind === 'link' ? 'utilization' : 'traffic out', left, 10);
  // The scale: three lines and their values.
  c.strokeStyle = '#2a323c'; c.lineWidth = 1;
  c.textAlign = 'right';
  for (const f of [0, 0.5, 1]) {
    const y = Math.round(yOf(f * maxV)) + 0.5;
    c.beginPath(); c.moveTo(left, y); c.lineTo(right, y); c.stroke();
    const text = sel.kind === 'link' ? `${Math.round(100 * f)}%` : fmtBps(f * maxV);
    c.fillText(text, left - 4, y + 3);
    labels.push(text);
  }
  // Time: minutes before now.
  c.textAlign = 'center';
  for (const m of [15, 10, 5, 0]) {
    const text = m === 0 ? 'now' : `−${m} min`;
    const x = Math.min(right - 12, Math.max(left + 16, xOf(now - 60 * m)));
    c.fillText(text, x, chart.height - 3);
    labels.push(text);
  }
  c.strokeStyle = '#4ea1ff'; c.lineWidth = 1.5; c.beginPath();
  series.forEach((p, i) => {
    const x = xOf(p.t), y = yOf(p.v);
    if (i === 0) c.moveTo(x, y); else c.lineTo(x, y);
  });
  c.stroke();
  window.accelnet.chartLabels = labels;
}

function record(topo) {
  const t = Date.now() / 1000;
  const push = (key, v) => {
    if (!state.history.has(key)) state.history.set(key, []);
    const s = state.history.get(key);
    s.push({ t, v });
    while (s.length && t - s[0].t > HISTORY_SECONDS) s.shift();
  };
  for (const l of topo.links) push('link:' + l.id, l.load.utilization);
  for (const sw of topo.switches) push('switch:' + sw.name, switchBps(sw.name));
}

function renderSummary(topo) {
  const down = topo.links.filter((l) => !l.load.up).length;
  const synced = topo.switches.filter((s) => s.status && s.status.in_sync).length;
  const maxU = Math.max(0, ...topo.links.map((l) => l.load.utilization));
  const drainedSw = topo.switches.filter((s) => s.drained).length;
  const drainedLinks = topo.links.filter((l) => l.drained).length;
  const plural = (n, one) => `${n} ${one}${n === 1 ? '' : (one === 'switch' ? 'es' : 's')}`;
  document.getElementById('summary').innerHTML = `<dl><dt>switches</dt><dd>${topo.switches.length} (${synced} in sync)</dd>` +
    `<dt>links</dt><dd>${topo.links.length}${down ? ` <span class="down">(${down} down)</span>` : ''}</dd>` +
    `<dt>drained</dt><dd id="summary-drained">${drainedSw || drainedLinks ? `${plural(drainedSw, 'switch')}, ${plural(drainedLinks, 'link')}` : 'nothing'}</dd>` +
    `<dt>hosts</dt><dd>${topo.hosts.length}</dd><dt>busiest link</dt><dd>${(100 * maxU).toFixed(1)}%</dd>` +
    `<dt>revision</dt><dd>${topo.revision}</dd></dl>`;
  document.getElementById('fabric-name').textContent = topo.name || '';
  const list = document.getElementById('switch-list');
  if (list.childElementCount !== topo.switches.length) {
    list.innerHTML = '';
    for (const sw of topo.switches) {
      const li = document.createElement('li');
      const b = document.createElement('button');
      b.textContent = sw.name;
      b.dataset.name = sw.name;
      b.setAttribute('aria-pressed', 'false');
      b.addEventListener('click', () => {
        select({ kind: 'switch', id: sw.name });
        // Details are at the top of the panel, out of view from here.
        document.getElementById('details-h').scrollIntoView({ block: 'start' });
      });
      li.appendChild(b);
      list.appendChild(li);
    }
  }
  for (const b of list.querySelectorAll('button')) {
    const sw = topo.switches.find((s) => s.name === b.dataset.name);
    b.classList.toggle('unsynced', !(sw && sw.status && sw.status.in_sync));
  }
}

function onTopology(topo) {
  state.topo = topo;
  state.updates++;
  document.getElementById('view').classList.remove('stale');
  record(topo);
  if (!state.viewBarFor || state.viewBarFor !== topo.switches.length) {
    state.viewBarFor = topo.switches.length;
    renderViewBar();
  }
  draw();
  renderSummary(topo);
  renderDetails();
  window.accelnet.ready = true;
}

function setStatus(kind, text) {
  statusEl.className = 'status ' + kind;
  statusEl.textContent = text;
}

function connect() {
  const es = new EventSource('/api/v1/stream');
  es.addEventListener('open', () => setStatus('live', 'live'));
  es.addEventListener('topology', (e) => {
    setStatus('live', 'live');
    onTopology(JSON.parse(e.data));
  });
  // After the whole topology, each second only what changed.
  es.addEventListener('load', (e) => {
    setStatus('live', 'live');
    if (!state.topo) return;
    const d = JSON.parse(e.data);
    const merge = (list, changed, key) => {
      if (!changed) return list;
      const by = new Map(changed.map((x) => [x[key], x]));
      return list.map((x) => by.get(x[key]) || x);
    };
    onTopology({ ...state.topo, revision: d.revision,
      switches: merge(state.topo.switches, d.switches, 'name'),
      links: merge(state.topo.links, d.links, 'id'),
      hosts: merge(state.topo.hosts, d.hosts, 'name'),
      undeclared_links: d.undeclared_links !== undefined ? d.undeclared_links : state.topo.undeclared_links });
  });
  // EventSource reconnects by itself; say so while it does.
  // What the map shows is no longer current: grey it out.
  es.addEventListener('error', () => {
    setStatus('lost', 'connection to the controller lost — retrying');
    document.getElementById('view').classList.add('stale');
  });
}

// --- intents: sign in with a token, list them, follow their events ---

function authFetch(url, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  return fetch(url, Object.assign({}, opts, { headers }));
}

export function escapeHTML(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

// FINISHED are the states of intents that hold nothing: collapsed by
// default (a tenant's refused attempts would otherwise bury the rest).
const FINISHED = ['Failed', 'Rejected'];

function renderIntents() {
  const el = document.getElementById('intents');
  window.accelnet.listedIntents = [];
  if (!state.token) {
    el.innerHTML = '<p class="hint">Sign in with a token to see intents (a tenant sees its own).</p>';
    return;
  }
  const all = [...state.intents.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  if (!all.length) {
    el.innerHTML = '<p class="hint">No intents.</p>';
    return;
  }
  const tenants = [...new Set(all.map((i) => i.tenant))].sort();
  const states = ['Pending', 'Admitted', 'Installed', 'Degraded', 'Failed', 'Rejected', 'Deleted'];
  const byTenant = all.filter((i) => !state.intentTenant || i.tenant === state.intentTenant);
  const finished = byTenant.filter((i) => FINISHED.includes(i.status.state)).length;
  const items = byTenant.filter((i) => state.intentState === 'all' ||
    (state.intentState === 'active' ? !FINISHED.includes(i.status.state) : i.status.state === state.intentState));
  const opt = (v, label, cur) => `<option value="${escapeHTML(v)}"${v === cur ? ' selected' : ''}>${escapeHTML(label)}</option>`;
  el.innerHTML = '<div id="intent-filter">' +
    `<select id="intent-state" aria-label="Intents in state">${opt('active', 'all but failed and rejected', state.intentState)}${opt('all', 'all', state.intentState)}` +
    states.map((st) => opt(st, st, state.intentState)).join('') + '</select>' +
    (tenants.length > 1 || state.intentTenant ? `<select id="intent-tenant" aria-label="Intents of tenant">${opt('', 'every tenant', state.intentTenant)}` +
      tenants.map((t) => opt(t, t, state.intentTenant)).join('') + '</select>' : '') +
    '</div><ul id="intent-list"></ul>' +
    (state.intentState === 'active' && finished ? `<button type="button" id="intents-finished">show ${finished} failed or rejected</button>` : '');
  document.getElementById('intent-state').addEventListener('change', (e) => { state.intentState = e.target.value; renderIntents(); });
  const tsel = document.getElementById('intent-tenant');
  if (tsel) tsel.addEventListener('change', (e) => { state.intentTenant = e.target.value; renderIntents(); });
  const more = document.getElementById('intents-finished');
  if (more) more.addEventListener('click', () => { state.intentState = 'all'; renderIntents(); });
  const list = document.getElementById('intent-list');
  if (!items.length) list.innerHTML = '<li class="hint">None here.</li>';
  for (const i of items) {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.dataset.id = i.id;
    b.setAttribute('aria-pressed', String(state.intent === i.id));
    const gbps = i.spec.collective ? i.spec.collective.gbps_per_gpu * i.spec.collective.endpoints.length : i.spec.gbps;
    b.innerHTML = `<span class="state state-${escapeHTML(i.status.state)}">${escapeHTML(i.status.state)}</span> ` +
      `${escapeHTML(i.spec.name)} · ${gbps} Gb/s · ${escapeHTML(i.tenant)}` +
      `<span class="reason">${escapeHTML(i.status.reason)}</span>`;
    b.addEventListener('click', () => selectIntent(state.intent === i.id ? null : i.id));
    li.appendChild(b);
    list.appendChild(li);
  }
  window.accelnet.listedIntents = items.map((i) => i.id);
}

function selectIntent(id) {
  state.intent = id;
  renderIntents();
  draw();
}

async function loadIntents() {
  const all = new Map();
  let page = '';
  for (;;) {
    const res = await authFetch('/api/v1/intents?limit=1000' + (page ? '&page_token=' + encodeURIComponent(page) : ''));
    if (!res.ok) throw new Error('intents: HTTP ' + res.status);
    const body = await res.json();
    for (const i of body.items) all.set(i.id, i);
    if (!body.next_page_token) break;
    page = body.next_page_token;
  }
  state.intents = all;
  renderIntents();
  draw();
}

function onEvent(name, data) {
  const ev = JSON.parse(data);
  if (ev.type === 'intent' && ev.intent) state.intents.set(ev.intent.id, ev.intent);
  else if (ev.type === 'intent-removed') state.intents.delete(ev.id);
  else if (ev.type === 'resync') { loadIntents().catch(() => {}); return; }
  else if (ev.type === 'revoked') { signOut('token revoked'); return; }
  else return;
  renderIntents();
  draw();
}

// followEvents reads /api/v1/events with the token (EventSource cannot
// send an Authorization header), reconnecting until signed out.
async function followEvents(abort) {
  while (!abort.signal.aborted) {
    try {
      const res = await authFetch('/api/v1/events?current=false', { signal: abort.signal });
      if (res.status === 401) { signOut('token refused'); return; }
      if (!res.ok) throw new Error('events: HTTP ' + res.status);
      await loadIntents(); // after subscribing, so nothing falls between
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let name = 'message', data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) name = line.slice(7);
            else if (line.startsWith('data: ')) data += line.slice(6);
          }
          if (data) onEvent(name, data);
        }
      }
    } catch (err) {
      if (abort.signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

// --- elephants: flows nobody declared, found by sampling (operators) ---

function renderElephants() {
  const el = document.getElementById('elephants');
  if (!state.elephants.length) {
    el.innerHTML = '<p class="hint">None detected.</p>';
    return;
  }
  // The count, the list and the toggle are made once and then updated in
  // place: the list is redrawn every poll, and a button replaced under the
  // pointer between press and release loses the click.
  let list = document.getElementById('elephant-list');
  if (!list) {
    el.innerHTML = '<p id="elephant-count"></p><ul id="elephant-list"></ul>' +
      '<button type="button" id="elephants-toggle" hidden></button>';
    list = document.getElementById('elephant-list');
    document.getElementById('elephants-toggle').addEventListener('click', () => {
      state.elephantsAll = !state.elephantsAll;
      renderElephants();
    });
  }
  // Biggest first; a long list shows its top ones and a count, so that
  // it does not push the rest of the page away.
  const all = state.elephants.slice().sort((a, b) => b.gbps - a.gbps);
  const shown = state.elephantsAll ? all : all.slice(0, ELEPHANTS_SHOWN);
  const pinned = all.filter((e) => e.pinned).length;
  const rows = shown.map((e) => {
    const where = e.pinned ? 'pinned' : 'not pinned: ' + e.reason;
    return `<li><span class="state state-${e.pinned ? 'Installed' : 'Pending'}">${escapeHTML(where)}</span> ` +
      `${escapeHTML(e.src)} → ${escapeHTML(e.dst)} :${e.src_port} · ${e.gbps.toFixed(1)} Gb/s</li>`;
  });
  document.getElementById('elephant-count').textContent = `${all.length} detected, ${pinned} pinned`;
  list.innerHTML = rows.join('');
  const toggle = document.getElementById('elephants-toggle');
  toggle.hidden = all.length <= ELEPHANTS_SHOWN;
  toggle.setAttribute('aria-expanded', String(state.elephantsAll));
  toggle.textContent = state.elephantsAll ? `show the top ${ELEPHANTS_SHOWN}` : `show all ${all.length}`;
}

async function loadElephants() {
  const res = await authFetch('/api/v1/elephants');
  if (!res.ok) return;
  state.elephants = (await res.json()).items;
  renderElephants();
}

function followElephants(on) {
  clearInterval(state.elephantTimer);
  state.elephantTimer = null;
  state.elephants = [];
  document.getElementById('elephants-section').hidden = !on;
  if (!on) return;
  renderElephants();
  loadElephants().catch(() => {});
  state.elephantTimer = setInterval(() => loadElephants().catch(() => {}), 2000);
}

async function signIn(token) {
  state.token = token;
  const res = await authFetch('/api/v1/whoami');
  if (!res.ok) { signOut(res.status === 401 ? 'token refused' : `sign-in failed: HTTP ${res.status}`); return; }
  const who = await res.json();
  document.getElementById('login-error').hidden = true;
  sessionStorage.setItem('accelnet-token', token);
  document.getElementById('login').hidden = true;
  const whoEl = document.getElementById('who');
  whoEl.textContent = who.role === 'operator' ? 'operator' : 'tenant ' + who.tenant;
  followElephants(who.role === 'operator');
  whoEl.hidden = false;
  document.getElementById('logout').hidden = false;
  if (state.events) state.events.abort();
  state.events = new AbortController();
  followEvents(state.events);
  if (state.selected) select(state.selected); // entry counts need the token
}

function signOut(why) {
  if (state.events) state.events.abort();
  state.events = null;
  state.token = '';
  state.intents = new Map();
  state.intent = null;
  followElephants(false);
  sessionStorage.removeItem('accelnet-token');
  document.getElementById('login').hidden = false;
  document.getElementById('who').hidden = true;
  document.getElementById('logout').hidden = true;
  const input = document.getElementById('token');
  input.value = '';
  // Said where it is seen, not only as placeholder text.
  const err = document.getElementById('login-error');
  err.textContent = why || '';
  err.hidden = !why;
  state.entryCounts.clear();
  renderIntents();
  draw();
}

document.getElementById('login').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = document.getElementById('token').value.trim();
  if (t) signIn(t);
});
document.getElementById('logout').addEventListener('click', () => signOut());

window.addEventListener('resize', resize);
drawLegend();
resize();
connect();
if (state.token) signIn(state.token);
