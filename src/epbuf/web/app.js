// epbuf serve: the page. Every number shown comes from the API (/api/...), which runs the
// epbuf command line's own code; this file only formats and draws what the API returned.
// The whole state lives in the URL query: its keys are the CLI's option names.
'use strict';

// Plan options passed to /api/hint, /api/fit, /api/compare, /api/layout as they are.
const PLAN_KEYS = ['model', 'hidden', 'topk', 'experts', 'ranks', 'nodes', 'gpus-per-node', 'tokens',
  'redundant-experts', 'sf-packs', 'backend-version', 'num-sms', 'device', 'hbm'];
const PLAN_SWITCHES = ['bf16', 'no-hybrid', 'single-reduction', 'no-nvlink'];
// Page-only keys: the backend (absent: the server chooses), the fit budget, the tokens to
// sweep (the CLI's list syntax) and the name of a pasted config.json.
const PAGE_KEYS = ['backend', 'budget', 'sweep', 'config'];
// The other views' keys (views.js): the engine, its launch line and budget; the routing and seed.
const VIEW_KEYS = ['engine', 'launch', 'engine-budget', 'routing', 'seed'];
const VIEWS = ['plan', 'engine', 'simulate', 'replay'];
const STATE_KEYS = [...PLAN_KEYS, ...PLAN_SWITCHES, ...PAGE_KEYS, ...VIEW_KEYS];
// The most points the chart draws (a 200,000-point sweep is thinned to this many, evenly).
const MAX_DOTS = 400;
const MAX_PATH = 2000;
// (the dots at least (plot width / MAX_DOTS) apart, the path vertices (plot width / MAX_PATH) apart)
const DEFAULT_SWEEP = '128:32768:*2';
// Options `epbuf sweep` does not take: the sweep uses the backend's defaults for them.
const NOT_SWEPT = ['backend-version', 'num-sms', 'sf-packs', 'no-hybrid', 'single-reduction', 'no-nvlink', 'nodes'];
const SEVERITY_ORDER = { error: 0, warning: 1, info: 2 };

const $ = (id) => document.getElementById(id);
const presets = { models: {}, devices: {} };
let generation = 0;
let debounce = null;

// --- exact numbers -------------------------------------------------------------------
// JSON integers beyond 2^53 are kept exact as BigInt (JSON.parse source text, where the browser has it).
function parseJSON(text) {
  return JSON.parse(text, function (key, value, context) {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && Number.isInteger(value) &&
        context && /^-?[0-9]+$/.test(context.source)) {
      return BigInt(context.source);
    }
    return value;
  });
}

// epbuf.units.format_int: thousands separators.
function fmtInt(v) {
  return typeof v === 'bigint' ? v.toLocaleString('en-US') : Number(v).toLocaleString('en-US', { maximumFractionDigits: 0 });
}

// Python's f"{x:.2f}": the double's exact binary value rounded to 2 decimals, ties to even
// (Number.prototype.toFixed rounds ties up, so 1.125 would read 1.13 instead of 1.12).
function fixed2(x) {
  if (!Number.isFinite(x)) return String(x);
  const negative = x < 0;
  let scaled = Math.abs(x);
  let den = 1n;
  while (!Number.isInteger(scaled)) { scaled *= 2; den *= 2n; }
  const num = BigInt(scaled) * 100n;
  let q = num / den;
  const r = num % den;
  if (2n * r > den || (2n * r === den && q % 2n === 1n)) q += 1n;
  const digits = q.toString().padStart(3, '0');
  return (negative && q !== 0n ? '-' : '') + digits.slice(0, -2) + '.' + digits.slice(-2);
}

const IEC = [['EiB', 60n], ['PiB', 50n], ['TiB', 40n], ['GiB', 30n], ['MiB', 20n], ['KiB', 10n]];
// epbuf.units.format_bytes: two decimals of the largest IEC unit; below 1 KiB plain bytes.
function fmtBytes(v) {
  const n = BigInt(v);
  const magnitude = n < 0n ? -n : n;
  for (const [unit, bits] of IEC) {
    if (magnitude >= (1n << bits)) return fixed2(Number(n) / Number(1n << bits)) + ' ' + unit;
  }
  return n.toString() + ' B';
}

// Axis labels only: 256 MiB, 1 GiB.
function tickBytes(bits) {
  for (const [unit, unitBits] of IEC) {
    if (bits >= Number(unitBits)) return 2 ** (bits - Number(unitBits)) + ' ' + unit;
  }
  return 2 ** bits + ' B';
}

// --- the API -------------------------------------------------------------------------
class ApiError extends Error {}

async function api(path, params, body) {
  const query = params ? '?' + params.toString() : '';
  const init = body === undefined ? {} : { method: 'POST', body, headers: { 'Content-Type': 'application/json' } };
  const response = await fetch(path + query, init);
  const text = await response.text();
  let data;
  try {
    data = parseJSON(text);
  } catch (e) {
    throw new ApiError(`${path}: HTTP ${response.status}, not JSON`);
  }
  if ((!response.ok && response.status !== 422) || (data && typeof data.error === 'string' && !data.schema)) {
    throw new ApiError(data.error || `${path}: HTTP ${response.status}`);
  }
  return { data, command: response.headers.get('X-Epbuf-Command') || '' };
}

// --- state <-> form <-> URL -------------------------------------------------------------
function readForm() {
  const state = {};
  for (const key of STATE_KEYS) {
    const el = document.querySelector(`[name="${key}"]`);
    if (!el) continue;
    if (el.type === 'checkbox') {
      if (el.checked) state[key] = '1';
    } else if (el.value.trim() !== '') {
      state[key] = el.value.trim();
    }
  }
  if ($('dtype').value === 'bf16') state.bf16 = '1';
  const label = $('config-label').dataset.title;
  if (label && !state.model) state.config = label;
  if (currentView !== 'plan') state.view = currentView;
  if (typeof readViewInputs === 'function') readViewInputs(state);
  return state;
}

function stateFromURL() {
  const state = {};
  const params = new URLSearchParams(location.search);
  for (const key of STATE_KEYS) {
    if (params.has(key)) state[key] = params.get(key);
  }
  if (VIEWS.includes(params.get('view'))) state.view = params.get('view');
  return state;
}

function writeForm(state) {
  for (const key of STATE_KEYS) {
    const el = document.querySelector(`[name="${key}"]`);
    if (!el) continue;
    if (el.type === 'checkbox') {
      el.checked = key in state && !['0', 'false', 'no', 'off'].includes(String(state[key]).toLowerCase());
    } else if (el.tagName === 'SELECT') {
      const value = state[key] || '';
      if (value && ![...el.options].some((o) => o.value === value)) {
        el.add(new Option(`${value} (from the link)`, value));
      }
      el.value = value;
    } else {
      el.value = state[key] || '';
    }
  }
  $('dtype').value = 'bf16' in state && !['0', 'false', 'no', 'off'].includes(String(state.bf16).toLowerCase()) ? 'bf16' : 'fp8';
  setConfigLabel(state.model ? '' : (state.config || ''));
  if (typeof writeViewInputs === 'function') writeViewInputs(state);
  showView(state.view || 'plan');
  updatePlaceholders();
}

// --- views: the plan (hint, fit, sweep, compare, byte map), engine recipes, simulate, replay
let currentView = 'plan';
function showView(view) {
  const next = VIEWS.includes(view) ? view : 'plan';
  // One device across the views: the engine card has its own field (the form is hidden there).
  if (next === 'engine' && currentView !== 'engine') $('engine-device').value = $('device').value;
  if (next !== 'engine' && currentView === 'engine') $('device').value = $('engine-device').value;
  currentView = next;
  document.body.dataset.view = currentView;
  for (const section of document.querySelectorAll('main .view')) section.hidden = section.dataset.view !== currentView;
  for (const tab of document.querySelectorAll('#tabs a')) {
    tab.classList.toggle('active', tab.dataset.view === currentView);
    if (tab.dataset.view === currentView) tab.setAttribute('aria-current', 'page'); else tab.removeAttribute('aria-current');
  }
}

// A finding's message up to its first parenthesis (the upstream source), at most 90 characters.
function shortLine(text) {
  let line = text.split(' (')[0];
  if (line.length > 90) line = line.slice(0, 88) + '…';
  return line;
}

// The answer in one line, at the top of every view (on a phone, in the first screen).
function setVerdict(parts, bad) {
  const box = $('verdict');
  box.replaceChildren(...parts.flatMap((part, i) => (i ? [' · ', part] : [part])));
  box.classList.toggle('bad', Boolean(bad));
}

function writeURL(state) {
  const params = new URLSearchParams();
  if (state.view) params.set('view', state.view);
  for (const key of STATE_KEYS) if (key in state) params.set(key, state[key]);
  const query = params.toString();
  history.replaceState(null, '', query ? '?' + query : location.pathname);
}

function setConfigLabel(title) {
  const el = $('config-label');
  el.dataset.title = title;
  el.hidden = !title;
  el.textContent = title ? `shape from a pasted config.json: ${title}` : '';
}

function planParams(state, { backend = true } = {}) {
  const params = new URLSearchParams();
  for (const key of PLAN_KEYS) if (key in state) params.set(key, state[key]);
  for (const key of PLAN_SWITCHES) if (key in state) params.set(key, '1');
  if (backend && state.backend) params.set('backend', state.backend);
  return params;
}

// /api/hint's options: the plan and the budget (an allocation over it is a budget.exceeded error).
function hintParams(state) {
  const params = planParams(state);
  if (state.budget) params.set('budget', state.budget);
  return params;
}

// Placeholders show the values a field takes when left empty: the model's, else the CLI's defaults.
function updatePlaceholders() {
  const model = presets.models[$('model').value];
  $('hidden').placeholder = model ? String(model.hidden) : '7168';
  $('topk').placeholder = model ? String(model.num_topk) : '6';
  $('experts').placeholder = model ? String(model.num_experts) : '256';
  $('ranks').placeholder = '8';
  $('tokens').placeholder = '4096';
  $('sweep').placeholder = DEFAULT_SWEEP;
  const device = presets.devices[$('device').value.trim()];
  $('gpus-per-node').placeholder = device && device.ranks_per_node ? String(device.ranks_per_node) : '8';
}

// --- rendering -------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function table(head, rows, numeric) {
  const thead = el('thead', {}, el('tr', {}, ...head.map((h, i) => el('th', numeric.has(i) ? { class: 'num' } : {}, h))));
  const tbody = el('tbody');
  for (const row of rows) {
    const tr = el('tr', row.attrs || {});
    row.cells.forEach((cell, i) => {
      const td = el('td', {}, cell);
      if (numeric.has(i)) td.classList.add('num');
      if (row.cellClass && row.cellClass[i]) td.classList.add(row.cellClass[i]);
      tr.append(td);
    });
    tbody.append(tr);
  }
  return el('table', {}, thead, tbody);
}

// The API's one-line error; the form field it names (--ranks -> ranks) is marked.
function showError(message) {
  const box = $('error');
  box.hidden = !message;
  box.textContent = message || '';
  $('results').classList.toggle('failed', Boolean(message));
  if (message) setVerdict([el('span', {}, el('strong', {}, 'error: '), message.replace(/^epbuf [a-z -]+: error: /, ''))], true);
  for (const field of document.querySelectorAll('.invalid')) field.classList.remove('invalid');
  const named = /--([a-z][a-z0-9-]*)/.exec(message || '');
  const field = named && document.querySelector(`[name="${named[1]}"]`);
  if (field) field.classList.add('invalid');
}

function renderSummary(hint, command, state) {
  const auto = state.backend ? '' : ' · backend chosen by the server (auto)';
  $('backend-title').textContent = `${hint.title} (${hint.backend})${auto}`;
  $('total-human').textContent = fmtBytes(hint.num_bytes);
  $('total-bytes').textContent = fmtInt(hint.num_bytes) + ' B';
  const meter = $('meter');
  if (hint.device) {
    const percent = hint.device.share * 100;
    $('share').textContent = `${fixed2(percent)} % of ${hint.device.name} (${fmtBytes(hint.device.num_bytes)})`;
    meter.hidden = false;
    meter.classList.toggle('over', hint.device.share > 1);
    $('meter-fill').style.width = Math.min(100, Math.max(0.5, percent)) + '%';
  } else {
    $('share').textContent = 'choose a device (or its memory under more options) to see the share of it';
    meter.hidden = true;
  }
  if (hint.budget) {
    const ofBudget = `${fixed2(hint.budget.share * 100)} % of the budget (${fmtBytes(hint.budget.num_bytes)})` +
      (hint.budget.fits ? '' : ': over budget');
    $('share').textContent = hint.device ? `${$('share').textContent}; ${ofBudget}` : ofBudget;
  }
  const needed = hint.num_bytes_needed;
  $('needed').textContent = String(needed) === String(hint.num_bytes)
    ? 'a real run with these shapes needs all of it (the hint reserves exactly this)'
    : `a real run with these shapes needs ${fmtInt(needed)} B (${fmtBytes(needed)}); the hint reserves more`;
  $('command').textContent = command.replace(/ --json$/, '');
  const parts = [el('strong', {}, `${fmtBytes(hint.num_bytes)} per device`), hint.backend];
  let bad = false;
  if (hint.device) {
    parts.push(`${fixed2(hint.device.share * 100)} % of ${hint.device.name}`);
    parts.push(hint.device.fits ? 'fits in memory' : el('strong', {}, 'does not fit'));
    bad = !hint.device.fits;
  }
  if (hint.budget) {
    parts.push(hint.budget.fits ? 'within the budget' : el('strong', {}, 'over the budget'));
    bad = bad || !hint.budget.fits;
  }
  const errors = hint.findings.filter((f) => f.severity === 'error');
  const broken = hint.limits.filter((l) => !l.ok).length;
  if (errors.length) {
    parts.push(`error: ${shortLine(errors[0].message)}` + (errors.length > 1 ? ` (+${errors.length - 1} more)` : ''));
  } else if (broken) parts.push(`${broken} upstream limit(s) broken`);
  setVerdict(parts, bad || errors.length > 0 || broken > 0);
}

function renderFindings(hint) {
  const list = $('findings');
  list.replaceChildren();
  const findings = [...hint.findings].sort((a, b) => SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity]);
  for (const f of findings) {
    list.append(el('li', { class: f.severity }, el('span', { class: 'sev' }, f.severity), f.message,
      el('span', { class: 'code' }, `[${f.code}]`)));
  }
  const broken = hint.limits.filter((l) => !l.ok);
  if (!findings.length && !broken.length) {
    list.append(el('li', { class: 'ok' }, 'no findings'));
  }
  const limits = $('limits');
  limits.replaceChildren();
  if (broken.length) {
    limits.append(el('h3', {}, 'Broken limits'), table(['limit', 'value', '', 'bound', 'enforced', 'source'],
      broken.map((l) => ({ attrs: { class: 'broken' }, cells: [l.name, fmtInt(l.value), l.relation, fmtInt(l.bound), l.enforced, l.source],
        cellClass: { 0: 'name', 4: 'src', 5: 'src' } })), new Set([1, 3])));
  } else {
    limits.append(el('p', { class: 'note' }, `All ${hint.limits.length} upstream limits hold.`));
  }
}

function withSource(text, source) {
  return el('div', {}, text ? el('div', {}, text) : null, source ? el('div', { class: 'src' }, source) : null);
}

function renderRegions(hint) {
  const rows = [];
  for (const b of hint.buffers) {
    const needed = String(b.num_bytes_needed) === String(b.num_bytes) ? 'same' : fmtInt(b.num_bytes_needed);
    rows.push({ attrs: { class: 'buffer' }, cells: [b.name, fmtInt(b.num_bytes), fmtBytes(b.num_bytes), needed,
      withSource(`${b.rule} of its regions, aligned to ${fmtBytes(b.alignment)}`, b.source)], cellClass: { 4: 'formula' } });
    for (const r of b.regions) {
      const used = String(r.num_bytes_used) === String(r.num_bytes) ? 'same' : fmtInt(r.num_bytes_used);
      rows.push({ cells: [r.name, fmtInt(r.num_bytes), fmtBytes(r.num_bytes), used, withSource(r.formula, r.source)],
        cellClass: { 4: 'formula' } });
    }
  }
  $('regions').replaceChildren(table(['buffer / region', 'bytes (hint)', '', 'real run', 'formula and upstream source'],
    rows, new Set([1, 2, 3])));
}

function renderCompare(compare, current) {
  const rows = [];
  for (const [name, r] of Object.entries(compare.backends)) {
    if (r.error) {
      rows.push({ attrs: { class: 'pick', 'data-backend': name }, cells: [name, '', '', '', r.error] });
      continue;
    }
    const errors = r.findings.filter((f) => f.severity === 'error').length;
    const broken = r.limits.filter((l) => !l.ok).length;
    const state = errors || broken ? `${errors} error finding(s), ${broken} broken limit(s)` : 'all hold';
    rows.push({ attrs: { class: 'pick' + (name === current ? ' current' : ''), 'data-backend': name },
      cells: [name, fmtInt(r.num_bytes), fmtBytes(r.num_bytes), fmtBytes(r.num_bytes_needed), state] });
  }
  const t = table(['backend', 'bytes', '', 'real run', 'upstream limits'], rows, new Set([1, 2, 3]));
  t.addEventListener('click', (event) => {
    const tr = event.target.closest('tr[data-backend]');
    if (!tr) return;
    $('backend').value = tr.dataset.backend;
    schedule(0);
  });
  const p = compare.plan;
  const inputs = [p.model || 'custom shape', `hidden ${fmtInt(p.hidden)}`, `top-${p.num_topk}`,
    `${fmtInt(p.num_experts)} experts` + (p.num_redundant_experts ? ` + ${fmtInt(p.num_redundant_experts)} redundant` : ''),
    `${fmtInt(p.num_ranks)} ranks` + (p.num_ranks_per_node ? ` (${p.num_ranks_per_node} per node)` : ''),
    `${fmtInt(p.num_max_tokens_per_rank)} tokens per rank`, p.use_fp8_dispatch ? 'FP8 dispatch' : 'BF16 dispatch'];
  if (compare.device) inputs.push(`device ${compare.device.name}`);
  $('compare-inputs').textContent = 'Inputs: ' + inputs.join(' · ');
  $('compare').replaceChildren(el('p', { class: 'note' }, 'Same plan, every backend (click one to show it).'), t);
}

function renderFit(fit, backend, command) {
  const r = fit.results[backend];
  const target = `a budget of ${fmtBytes(fit.budget)}` + (fit.budget_note ? ` (${fit.budget_note})` : '');
  const out = $('fit');
  out.replaceChildren();
  $('fit-command').textContent = command.replace(/ --json$/, '');
  if (!r || r.error) {
    out.append(`Largest tokens per rank within ${target}: `, el('strong', {}, 'not computed'), ` (${r ? r.error : 'no result'})`);
    return null;
  }
  if (r.value === null) {
    out.append(`Within ${target}: `, el('strong', { id: 'fit-value' }, 'nothing fits'), ` (${r.reason})`);
    return null;
  }
  out.append(`Largest tokens per rank within ${target}: `, el('strong', { id: 'fit-value' }, fmtInt(r.value)),
    ` (total ${fmtBytes(r.report.num_bytes)}; ${r.reason})`);
  if (r.constant_failures && r.constant_failures.length) {
    // As the CLI: the budget fits, but these limits break whatever the token count.
    out.append(el('span', { class: 'limit-note', id: 'fit-note' },
      ` — but broken whatever the tokens per rank: ${r.constant_failures.join('; ')}`));
  }
  return r.value;
}

// --- the chart: /api/sweep's rows, the device capacity and the budget ------------------
const SVG_NS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function minMax(values) {
  let lo = Infinity; let hi = -Infinity;
  for (const v of values) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return [lo, hi];
}

// The points at least `gap` pixels apart along x (sorted by x), the last always kept, at most
// `most` of them: on a log axis a 200,000-point sweep crowds its right end, so thin by pixels.
function thin(points, x, gap, most) {
  const out = [];
  let last = -Infinity;
  for (const p of points) {
    const at = x(p.tokens);
    if (at - last >= gap) { out.push(p); last = at; }
  }
  if (out[out.length - 1] !== points[points.length - 1]) out.push(points[points.length - 1]);
  return out.length <= most ? out : out.filter((_, i) => i % Math.ceil(out.length / most) === 0);
}

function renderChart(sweep, backend, hint, state, fitValue, budget, fitBroken) {
  const col = Object.fromEntries(sweep.columns.map((c, i) => [c, i]));
  const points = sweep.rows
    .filter((row) => row[col.backend] === backend && !row[col.error])
    .map((row) => ({ tokens: Number(row[col.num_max_tokens_per_rank]), bytes: row[col.num_bytes],
      broken: row[col.broken_limits] || '' }))
    .sort((a, b) => a.tokens - b.tokens);
  const chart = $('chart');
  chart.replaceChildren();
  if (!points.length) {
    chart.append(el('p', { class: 'note' }, 'The sweep has no rows for this backend.'));
    return;
  }
  const W = 900; const H = 330; const L = 78; const R = 150; const T = 16; const B = 42;
  const here = { tokens: Number(hint.inputs.num_max_tokens_per_rank ?? hint.inputs.num_max_dispatch_tokens_per_rank), bytes: hint.num_bytes };
  const lines = [];
  if (hint.device) lines.push({ bytes: hint.device.num_bytes, cls: 'capacity', text: `device ${fmtBytes(hint.device.num_bytes)}` });
  if (budget !== null) lines.push({ bytes: budget, cls: 'budget', text: `budget ${fmtBytes(budget)}` });
  const xs = points.map((p) => p.tokens).concat(Number.isFinite(here.tokens) ? [here.tokens] : []);
  if (fitValue !== null && fitValue !== undefined) xs.push(Number(fitValue));
  const ys = points.map((p) => Number(p.bytes)).concat([Number(here.bytes)], lines.map((l) => Number(l.bytes)));
  // (no Math.min(...xs): a 200,000-point sweep would overflow the call stack)
  const [xMin, xMax] = minMax(xs); const [yMin, yMax] = minMax(ys);
  const x0 = Math.log2(xMin); let x1 = Math.log2(xMax);
  if (x1 - x0 < 1) x1 = x0 + 1;
  const y0 = Math.floor(Math.log2(Math.max(1, yMin))) - 0.5;
  let y1 = Math.ceil(Math.log2(yMax)) + 0.3;
  if (y1 - y0 < 2) y1 = y0 + 2;
  const X = (t) => L + (Math.log2(t) - x0) / (x1 - x0) * (W - L - R);
  const Y = (b) => T + (1 - (Math.log2(Math.max(1, b)) - y0) / (y1 - y0)) * (H - T - B);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H });
  // grid and ticks
  const span = Math.ceil(y1) - Math.floor(y0);
  const step = Math.max(1, Math.ceil(span / 6));
  for (let bits = Math.ceil(y0); bits <= y1; bits += 1) {
    if (bits % step) continue;
    const y = Y(2 ** bits);
    root.append(svg('line', { x1: L, x2: W - R, y1: y, y2: y, class: 'grid' }));
    root.append(svg('text', { x: L - 6, y: y + 4, 'text-anchor': 'end', class: 'tick' }, tickBytes(bits)));
  }
  // Ticks: the sweep's own values when few; else powers of two across the axis.
  let tickTokens = points.map((p) => p.tokens);
  if (tickTokens.length > 12) {
    tickTokens = [];
    for (let k = Math.ceil(x0); k <= Math.floor(x1); k += 1) tickTokens.push(2 ** k);
  }
  const every = Math.max(1, Math.ceil(tickTokens.length / 10));
  tickTokens.forEach((t, i) => {
    if (i % every) return;
    root.append(svg('line', { x1: X(t), x2: X(t), y1: H - B, y2: H - B + 4, class: 'axis' }));
    root.append(svg('text', { x: X(t), y: H - B + 16, 'text-anchor': 'middle', class: 'tick' }, fmtInt(t)));
  });
  root.append(svg('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis' }));
  root.append(svg('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis' }));
  root.append(svg('text', { x: (L + W - R) / 2, y: H - 6, 'text-anchor': 'middle', class: 'title' }, 'tokens per rank (num_max_tokens_per_rank, log scale)'));
  root.append(svg('text', { x: 14, y: (T + H - B) / 2, 'text-anchor': 'middle', class: 'title',
    transform: `rotate(-90 14 ${(T + H - B) / 2})` }, 'total per device (log scale)'));
  // capacity and budget
  for (const line of lines) {
    const y = Y(Number(line.bytes));
    root.append(svg('line', { x1: L, x2: W - R, y1: y, y2: y, class: line.cls }));
    root.append(svg('text', { x: W - R + 6, y: y + 4, class: `label ${line.cls}-label` }, line.text));
  }
  if (fitValue !== null && fitValue !== undefined) {
    const x = X(Number(fitValue));
    root.append(svg('line', { x1: x, x2: x, y1: T, y2: H - B, class: 'fitline' }));
    const nearRight = x > W - R - 90;
    // At the foot of its line: the curve crosses the budget high up, where the capacity and budget labels are.
    root.append(svg('text', { x: nearRight ? x - 4 : x + 4, y: H - B - 8, 'text-anchor': nearRight ? 'end' : 'start',
      class: 'label fit-label' }, `fits: ${fmtInt(fitValue)}` + (fitBroken ? ' (a limit breaks whatever the tokens)' : '')));
  }
  // the series
  const d = thin(points, X, (W - L - R) / MAX_PATH, MAX_PATH).map((p, i) => `${i ? 'L' : 'M'}${X(p.tokens).toFixed(1)},${Y(Number(p.bytes)).toFixed(1)}`).join(' ');
  root.append(svg('path', { d, class: 'series' }));
  const dots = thin(points, X, (W - L - R) / MAX_DOTS, MAX_DOTS);
  if (dots.length < points.length) {
    chart.prepend(el('p', { class: 'note', id: 'chart-thinned' },
      `${fmtInt(points.length)} points; ${fmtInt(dots.length)} of them drawn as dots, at least a pixel apart`));
  }
  for (const p of dots) {
    const dot = svg('circle', { cx: X(p.tokens), cy: Y(Number(p.bytes)), r: 3.5, class: 'point' + (p.broken ? ' broken' : '') });
    dot.append(svg('title', {}, `${fmtInt(p.tokens)} tokens: ${fmtInt(p.bytes)} B (${fmtBytes(p.bytes)})` +
      (p.broken ? ` — breaks ${p.broken}` : '')));
    root.append(dot);
  }
  if (Number.isFinite(here.tokens)) {
    const hx = X(here.tokens); const hy = Y(Number(here.bytes));
    const mark = svg('circle', { cx: hx, cy: hy, r: 5.5, class: 'here' });
    mark.append(svg('title', {}, `this plan: ${fmtInt(here.tokens)} tokens, ${fmtInt(here.bytes)} B`));
    root.append(mark);
    // At the right edge the label would run into the capacity, budget and backend labels: put it left.
    const nearRight = hx > W - R - 70;
    root.append(svg('text', { x: nearRight ? hx - 8 : hx + 8, y: hy + 16, 'text-anchor': nearRight ? 'end' : 'start',
      class: 'label' }, 'this plan'));
  }
  root.append(svg('text', { x: W - R + 6, y: Y(Number(points[points.length - 1].bytes)) + 4, class: 'label' }, backend));
  chart.append(root);
}

// --- one update of the view shown
async function update(gen) {
  document.body.dataset.state = 'busy';
  const state = readForm();
  writeURL(state);
  if (currentView !== 'plan') {
    try {
      await updateView(currentView, state, gen);
    } catch (error) {
      if (gen !== generation) return;
      showError(error.message);
    }
    if (gen === generation) document.body.dataset.state = 'ready';
    return;
  }
  await updatePlan(gen, state);
}

// The plan: /api/hint first (it resolves the backend and the topology), then the rest.
async function updatePlan(gen, state) {
  try {
    const hint = await api('/api/hint', hintParams(state));
    if (gen !== generation) return;
    showError('');
    renderSummary(hint.data, hint.command, state);
    renderFindings(hint.data);
    renderRegions(hint.data);
    const backend = hint.data.backend;
    // No budget but a device: /api/fit grants its default share of the device, as `epbuf fit
    // --device` does, and says so in budget_note.
    const fitParams = planParams(state, { backend: false });
    fitParams.set('backends', backend);
    fitParams.delete('tokens');  // fit solves for the tokens per rank (with --tokens it refuses --ranks)
    if (state.budget) fitParams.set('budget', state.budget);
    const fitWanted = Boolean(state.budget || hint.data.device);
    const sweepParams = new URLSearchParams();
    for (const key of ['model', 'hidden', 'topk', 'experts', 'redundant-experts', 'device', 'hbm']) {
      if (key in state) sweepParams.set(key, state[key]);
    }
    sweepParams.set('backends', backend);
    sweepParams.set('ranks', String(hint.data.inputs.num_ranks));
    const perNode = hint.data.inputs.num_ranks_per_node ?? state['gpus-per-node'];
    if (perNode !== undefined) sweepParams.set('gpus-per-node', String(perNode));
    sweepParams.set('tokens', state.sweep || DEFAULT_SWEEP);
    sweepParams.set('dtype', state.bf16 ? 'bf16' : 'fp8');
    const bytemap = loadImage($('bytemap'), '/api/layout?' + new URLSearchParams([...planParams(state), ['format', 'svg']]));
    const [fit, sweep, compare] = await Promise.allSettled([
      fitWanted ? api('/api/fit', fitParams) : Promise.resolve(null),
      api('/api/sweep', sweepParams),
      api('/api/compare', planParams(state, { backend: false })),
    ]);
    if (gen !== generation) return;
    let fitValue = null;
    let fitBroken = false;
    let budgetBytes = null;
    if (fit.status === 'fulfilled' && fit.value) {
      fitValue = renderFit(fit.value.data, backend, fit.value.command);
    const result = fit.value.data.results[backend];
    fitBroken = Boolean(result && result.constant_failures && result.constant_failures.length);
      budgetBytes = fit.value.data.budget;
    } else if (fit.status === 'rejected') {
      $('fit').textContent = `Budget: ${fit.reason.message}`;
      $('fit-command').textContent = '';
    } else {
      $('fit-command').textContent = '';
      $('fit').textContent = 'Give a budget per device (e.g. 8GiB) or choose a device to find the largest tokens per rank that fit.';
    }
    if (sweep.status === 'fulfilled') {
      renderChart(sweep.value.data, backend, hint.data, state, fitValue, budgetBytes, fitBroken);
      const skipped = NOT_SWEPT.filter((k) => k in state);
      $('chart-note').textContent = `Curve: ${sweep.value.command.replace(/ --json$/, '')}` +
        (skipped.length ? ` (the sweep takes no ${skipped.map((k) => '--' + k).join(', ')}: defaults there; the black dot is this plan)` : '');
    } else {
      $('chart').replaceChildren(el('p', { class: 'error' }, sweep.reason.message));
      $('chart-note').textContent = '';
    }
    if (compare.status === 'fulfilled') renderCompare(compare.value.data, backend);
    else $('compare').replaceChildren(el('p', { class: 'error' }, compare.reason.message));
    await bytemap;
  } catch (error) {
    if (gen !== generation) return;
    showError(error.message);
  }
  if (gen === generation) document.body.dataset.state = 'ready';
}

function loadImage(img, src) {
  return new Promise((resolve) => {
    const done = () => { img.removeEventListener('load', done); img.removeEventListener('error', done); resolve(); };
    img.addEventListener('load', done);
    img.addEventListener('error', done);
    if (img.getAttribute('src') === src && img.complete) { done(); return; }
    img.src = src;
    setTimeout(done, 5000);
  });
}

// Every input starts a new generation at once: an update still in flight sees it is stale
// and neither draws nor marks the page ready.
function schedule(delay) {
  const gen = ++generation;
  document.body.dataset.state = 'busy';
  clearTimeout(debounce);
  debounce = setTimeout(() => update(gen), delay);
}

// --- a pasted config.json: /api/models reads it; its shape goes into the form (and the link)
async function useConfig() {
  const text = $('config-text').value;
  const status = $('config-status');
  // Fields the person typed fill keys the file lacks (as --topk does with --model-config);
  // fields that hold a previously pasted config's values do not.
  const params = new URLSearchParams();
  if (!$('config-label').dataset.title) {
    for (const key of ['hidden', 'topk', 'experts']) if ($(key).value.trim()) params.set(key, $(key).value.trim());
  }
  try {
    const { data } = await api('/api/models', params, text);
    const model = data.models[0];
    $('model').value = '';
    $('hidden').value = model.hidden;
    $('topk').value = model.num_topk;
    $('experts').value = model.num_experts;
    setConfigLabel(model.title);
    status.textContent = `config.json: ${model.notes}`;
    updatePlaceholders();
    schedule(0);
  } catch (error) {
    status.textContent = error.message;
  }
}

async function init() {
  const [models, devices, versions] = await Promise.all([api('/api/models'), api('/api/devices'), api('/api/versions')]);
  for (const m of models.data.models) {
    presets.models[m.name] = m;
    $('model').add(new Option(`${m.title}  (hidden ${m.hidden}, ${m.num_experts} experts, top-${m.num_topk})`, m.name));
  }
  for (const d of devices.data.devices) {
    presets.devices[d.name] = d;
    $('device-list').append(new Option(`${d.title} (${fmtBytes(d.num_bytes)})`, d.name));
  }
  const versionList = $('versions');
  for (const [backend, entry] of Object.entries(versions.data.backends)) {
    $('backend').add(new Option(backend, backend));
    for (const id of Object.keys(entry.versions)) if (id) versionList.append(new Option(`${backend}: ${entry.versions[id]}`.slice(0, 90), id));
  }
  if (typeof initViews === 'function') initViews();
  writeForm(stateFromURL());
  for (const tab of document.querySelectorAll('#tabs a')) {
    tab.addEventListener('click', (event) => {
      event.preventDefault();
      showView(tab.dataset.view);
      schedule(0);
    });
  }
  const form = $('plan');
  form.addEventListener('input', (event) => {
    if (event.target.closest('#paste')) return;
    if (['hidden', 'topk', 'experts'].includes(event.target.id) && !event.target.value) setConfigLabel($('model').value ? '' : $('config-label').dataset.title);
    schedule(event.target.tagName === 'SELECT' || event.target.type === 'checkbox' ? 0 : 350);
  });
  $('model').addEventListener('change', () => {
    if ($('model').value) {
      setConfigLabel('');
      for (const key of ['hidden', 'topk', 'experts']) $(key).value = '';
    }
    updatePlaceholders();
  });
  $('device').addEventListener('input', updatePlaceholders);
  form.addEventListener('submit', (event) => { event.preventDefault(); schedule(0); });
  $('config-use').addEventListener('click', useConfig);
  $('config-file').addEventListener('change', async () => {
    const file = $('config-file').files[0];
    if (file) { $('config-text').value = await file.text(); useConfig(); }
  });
  $('copy-link').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(location.href);
      $('copy-link').textContent = 'link copied';
    } catch (e) {
      window.prompt('Copy this link', location.href);
    }
    setTimeout(() => { $('copy-link').textContent = 'copy link'; }, 1500);
  });
  $('reset').addEventListener('click', () => { writeForm({}); schedule(0); });
  window.addEventListener('popstate', () => { writeForm(stateFromURL()); schedule(0); });
  await update(++generation);
}

document.addEventListener('DOMContentLoaded', () => {
  init().catch((error) => { showError(error.message); document.body.dataset.state = 'ready'; });
});
