// epbuf serve: the page's other views (app.js has the plan view and the shared helpers).
// Engine recipes (/api/engine/NAME with the launch line), simulate (/api/simulate: occupancy
// bars and the traffic heat map) and replay (/api/replay, DeepEP-Ascend). As in app.js, every
// number comes from the API; this file formats and draws it.
'use strict';

// epbuf.engines.ENGINES and the launch lines of epbuf.cli._engine_launch.EXAMPLES (a test
// checks both lists against the package).
const ENGINE_EXAMPLES = {
  vllm: 'vllm serve deepseek-ai/DeepSeek-V3 -dp 16 --enable-expert-parallel --all2all-backend deepep_low_latency',
  sglang: 'python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 16 --moe-a2a-backend deepep',
  megatron: 'torchrun --nproc-per-node 8 pretrain_gpt.py --expert-model-parallel-size 16 --moe-token-dispatcher-type flex',
  'sgl-kernel-npu': 'python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 16 --moe-a2a-backend deepep',
  mindspeed: 'torchrun --nproc-per-node 8 pretrain_gpt.py --expert-model-parallel-size 16 --hccl-group-buffer-adaptive',
  'vllm-ascend': 'vllm serve deepseek-ai/DeepSeek-V3 -dp 16 --enable-expert-parallel',
};
// Plan options replay reads (the record does not depend on the device or a GPU backend's knobs).
const REPLAY_KEYS = ['model', 'hidden', 'topk', 'experts', 'ranks', 'nodes', 'gpus-per-node', 'tokens',
  'redundant-experts', 'sf-packs'];
// The largest heat map side drawn; more ranks are summed into blocks.
const HEAT_SIDE = 64;

function initViews() {
  for (const name of Object.keys(ENGINE_EXAMPLES)) $('engine-name').add(new Option(name, name));
  $('engine-run').addEventListener('click', () => schedule(0));
  $('engine-example').addEventListener('click', () => {
    $('engine-launch').value = ENGINE_EXAMPLES[$('engine-name').value];
    schedule(0);
  });
  $('engine-name').addEventListener('change', () => {
    const text = $('engine-launch').value.trim();
    if (!text || Object.values(ENGINE_EXAMPLES).includes(text)) $('engine-launch').value = ENGINE_EXAMPLES[$('engine-name').value];
    schedule(0);
  });
  $('engine-budget').addEventListener('input', () => schedule(500));
  $('engine-device').addEventListener('input', () => schedule(400));
  $('engine-launch').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) schedule(0);
  });
  $('sim-kind').addEventListener('input', () => {
    $('sim-param').value = '';  // another kind's parameter means something else
    simPlaceholder();
    schedule(0);
  });
  for (const id of ['sim-param', 'sim-seed']) $(id).addEventListener('input', () => schedule(400));
}

// The parameter each routing kind takes (epbuf simulate --routing), as the field's hint.
const ROUTING_PARAMS = { zipf: 'S, e.g. 1.2', hot: 'SHARE[:N], e.g. 0.3', group: 'N_GROUP:TOPK_GROUP, e.g. 8:4',
  node: 'M, e.g. 4', 'all-to-one': 'RANK, e.g. 0' };
function simPlaceholder() {
  const hint = ROUTING_PARAMS[$('sim-kind').value];
  $('sim-param').placeholder = hint || 'none';
  $('sim-param').disabled = !hint;
}

// The view inputs into the state (and so into the link).
function readViewInputs(state) {
  const engine = $('engine-name').value;
  if (engine !== 'vllm') state.engine = engine;
  const launch = $('engine-launch').value.trim();
  if (launch && launch !== ENGINE_EXAMPLES[engine]) state.launch = launch;
  if ($('engine-budget').value.trim()) state['engine-budget'] = $('engine-budget').value.trim();
  if (currentView === 'engine') {
    const device = $('engine-device').value.trim();
    if (device) state.device = device; else delete state.device;
  }
  const kind = $('sim-kind').value;
  const param = $('sim-param').value.trim();
  const routing = param ? `${kind}:${param}` : kind;
  if (routing !== 'uniform') state.routing = routing;
  if ($('sim-seed').value.trim()) state.seed = $('sim-seed').value.trim();
}

function writeViewInputs(state) {
  const engine = state.engine && ENGINE_EXAMPLES[state.engine] !== undefined ? state.engine : 'vllm';
  $('engine-name').value = engine;
  $('engine-launch').value = state.launch || ENGINE_EXAMPLES[engine];
  $('engine-budget').value = state['engine-budget'] || '';
  $('engine-device').value = state.device || '';
  const [kind, ...rest] = (state.routing || 'uniform').split(':');
  $('sim-kind').value = [...$('sim-kind').options].some((o) => o.value === kind) ? kind : 'uniform';
  $('sim-param').value = rest.join(':');
  $('sim-seed').value = state.seed || '';
  simPlaceholder();
}

async function updateView(view, state, gen) {
  if (view === 'engine') return updateEngine(state, gen);
  if (view === 'simulate') return updateSimulate(state, gen);
  return updateReplay(state, gen);
}

function findingItems(findings, target) {
  const list = $(target);
  list.replaceChildren();
  const sorted = [...findings].sort((a, b) => SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity]);
  for (const f of sorted) {
    list.append(el('li', { class: f.severity }, el('span', { class: 'sev' }, f.severity), f.message,
      el('span', { class: 'code' }, `[${f.code}]`)));
  }
  if (!sorted.length) list.append(el('li', { class: 'ok' }, 'no findings'));
}

function regionRows(report) {
  const rows = [];
  for (const b of report.buffers) {
    rows.push({ attrs: { class: 'buffer' }, cells: [b.name, fmtInt(b.num_bytes), fmtBytes(b.num_bytes),
      withSource(`${b.rule} of its regions, aligned to ${fmtBytes(b.alignment)}`, b.source)], cellClass: { 3: 'formula' } });
    for (const r of b.regions) {
      rows.push({ cells: [r.name, fmtInt(r.num_bytes), fmtBytes(r.num_bytes), withSource(r.formula, r.source)],
        cellClass: { 3: 'formula' } });
    }
  }
  return table(['buffer / region', 'bytes', '', 'formula and upstream source'], rows, new Set([1, 2]));
}

// --- engine recipes -----------------------------------------------------------------------
async function updateEngine(state, gen) {
  const name = state.engine || 'vllm';
  const params = new URLSearchParams();
  params.set('launch', state.launch || ENGINE_EXAMPLES[name]);
  if (state.device) params.set('device', state.device);
  if (state['engine-budget']) params.set('budget', state['engine-budget']);
  const { data, command } = await api(`/api/engine/${encodeURIComponent(name)}`, params);
  if (gen !== generation) return;
  showError('');
  $('engine-command').textContent = command.replace(/ --json /, ' ').replace(/ --json$/, '');
  const parts = [el('strong', {}, `${fmtBytes(data.num_bytes)} per device`), data.engine];
  if (data.device) parts.push(`${fixed2(data.device.share * 100)} % of ${data.device.name}`);
  if (data.budget !== null) parts.push(data.fits_budget ? 'within the budget' : el('strong', {}, 'over the budget'));
  const errors = data.report.findings.filter((f) => f.severity === 'error');
  parts.push(errors.length ? `${errors.length} error(s): ${shortLine(errors[0].message)}` : 'no errors');
  setVerdict(parts, errors.length > 0 || (data.device && data.device.share > 1) || data.fits_budget === false);
  findingItems(data.report.findings, 'engine-errors');
  const advice = data.recommendations.map((r) => ({ cells: [r.setting, String(r.value), r.goal,
    r.num_bytes === null ? '' : fmtBytes(r.num_bytes), r.message], cellClass: { 4: 'src' } }));
  $('engine-advice').replaceChildren(advice.length
    ? table(['what to set', 'value', 'goal', 'then per device', 'why'], advice, new Set([3]))
    : el('p', { class: 'note' }, 'Nothing to change.'));
  const settings = data.settings.map((s) => ({ cells: [s.name, typeof s.value === 'object' && s.value !== null
    ? JSON.stringify(s.value) : String(s.value), s.source, s.note || ''], cellClass: { 3: 'src' } }));
  $('engine-settings').replaceChildren(table(['setting', 'value', 'from', 'note'], settings, new Set()));
  $('engine-regions').replaceChildren(el('p', { class: 'kicker' }, data.title),
    el('p', { class: 'note' }, `${fmtInt(data.num_bytes)} B per device (${fmtBytes(data.num_bytes)}); a real run ` +
      `needs ${fmtBytes(data.num_bytes_needed)}. ${data.version_note || ''}`), regionRows(data.report));
}

// --- simulate --------------------------------------------------------------------------------
async function updateSimulate(state, gen) {
  const params = planParams(state);
  params.delete('hbm');
  if (state.routing) params.set('routing', state.routing);
  if (state.seed) params.set('seed', state.seed);
  const { data, command } = await api('/api/simulate', params);
  if (gen !== generation) return;
  showError('');
  $('sim-command').textContent = command.replace(/ --json$/, '');
  const over = data.regions.filter((r) => !r.within);
  let fullest = null;
  for (const r of data.regions) {
    const share = r.reserved_slots ? r.peak_used_slots / r.reserved_slots : 0;
    if (!fullest || share > fullest.share) fullest = { share, region: r };
  }
  const parts = [el('strong', {}, over.length ? `${over.length} region(s) overflow` : 'every region within its reserve'),
    `${data.routing.name} routing on ${data.backend}`];
  if (fullest) parts.push(`fullest ${fixed2(fullest.share * 100)} % (${fullest.region.region})`);
  const times = Object.entries(data.time).map(([phase, t]) => `${phase} ${fixed2(t.seconds * 1e6)} µs`);
  if (times.length) parts.push(times.join(', '));
  setVerdict(parts, over.length > 0);
  renderBars(data.regions);
  findingItems(data.findings, 'sim-findings');
  renderHeat(data);
  $('sim-time').textContent = Object.entries(data.time).map(([phase, t]) => `${phase}: ${fixed2(t.seconds * 1e6)} µs, ` +
    `bound by rank ${t.rank}'s ${t.link} ${t.direction} (${fmtBytes(t.num_bytes)} at ${t.gbps} GB/s + ${t.latency_us} µs)`).join('; ');
}

function renderBars(regions) {
  const box = $('sim-bars');
  box.replaceChildren();
  for (const r of regions) {
    const share = r.reserved_slots ? r.peak_used_slots / r.reserved_slots : 0;
    const mean = r.reserved_slots ? r.mean_used_slots / r.reserved_slots : 0;
    // (widths through the CSSOM: the Content-Security-Policy refuses style attributes)
    const meanFill = el('div', { class: 'mean' });
    meanFill.style.width = `${Math.min(100, mean * 100).toFixed(2)}%`;
    const peakFill = el('div', { class: 'peak' });
    peakFill.style.width = `${Math.min(100, share * 100).toFixed(2)}%`;
    const bar = el('div', { class: 'bar' + (r.within ? '' : ' over') }, peakFill, meanFill);
    box.append(el('div', { class: 'occupancy' },
      el('div', { class: 'bar-label' }, el('strong', {}, `${r.phase} · ${r.region}`),
        ` peak ${fmtInt(r.peak_used_slots)} of ${fmtInt(r.reserved_slots)} slots (${fixed2(share * 100)} %, rank ${r.peak_rank}), ` +
        `mean ${fixed2(mean * 100)} %; ${r.within ? `headroom ${fmtBytes(r.headroom_bytes)}` : 'OVERFLOWS its reservation'}`),
      bar));
  }
}

// A ranks x ranks grid of messages per pair (dispatch and combine), summed into blocks past HEAT_SIDE.
function renderHeat(data) {
  const box = $('sim-heat');
  box.replaceChildren();
  for (const [phase, t] of Object.entries(data.traffic)) {
    const pairs = t.pair_messages;
    if (!pairs || !pairs.length) continue;
    const n = pairs.length;
    const block = Math.ceil(n / HEAT_SIDE);
    const side = Math.ceil(n / block);
    const grid = Array.from({ length: side }, () => new Array(side).fill(0));
    let peak = 0;
    for (let i = 0; i < n; i += 1) {
      for (let j = 0; j < n; j += 1) {
        const v = (grid[Math.floor(i / block)][Math.floor(j / block)] += Number(pairs[i][j]));
        if (v > peak) peak = v;
      }
    }
    const cell = Math.max(4, Math.floor(320 / side));
    const size = cell * side;
    const root = svg('svg', { viewBox: `0 0 ${size + 40} ${size + 30}`, width: size + 40, height: size + 30, class: 'heat' });
    for (let i = 0; i < side; i += 1) {
      for (let j = 0; j < side; j += 1) {
        const v = grid[i][j];
        const level = peak ? v / peak : 0;
        const rect = svg('rect', { x: 34 + j * cell, y: 4 + i * cell, width: cell, height: cell,
          fill: `hsl(210, 70%, ${(97 - level * 62).toFixed(1)}%)` });
        const who = block > 1 ? `ranks ${i * block}-${Math.min(n, (i + 1) * block) - 1} to ${j * block}-${Math.min(n, (j + 1) * block) - 1}`
          : `rank ${i} to rank ${j}`;
        rect.append(svg('title', {}, `${phase}: ${who}: ${fmtInt(v)} messages`));
        root.append(rect);
      }
    }
    root.append(svg('text', { x: 34, y: size + 22, class: 'tick' }, 'to rank →'));
    root.append(svg('text', { x: 12, y: 4 + size / 2, class: 'tick', transform: `rotate(-90 12 ${4 + size / 2})`,
      'text-anchor': 'middle' }, 'from rank'));
    box.append(el('figure', { class: 'heatmap' }, root, el('figcaption', { class: 'note' },
      `${phase}: ${t.record}, ${fmtInt(t.num_messages)} messages of ${fmtBytes(t.message_bytes)} per ${t.per}` +
      (block > 1 ? ` (blocks of ${block} ranks)` : '') + `; darkest ${fmtInt(peak)}`)));
  }
}

// --- replay (DeepEP-Ascend) -----------------------------------------------------------------
async function updateReplay(state, gen) {
  const params = new URLSearchParams();
  for (const key of REPLAY_KEYS) if (key in state) params.set(key, state[key]);
  if (state.bf16) params.set('bf16', '1');
  const { data, command } = await api('/api/replay', params);
  if (gen !== generation) return;
  showError('');
  $('replay-command').textContent = command.replace(/ --json$/, '');
  const differing = data.fields.filter((f) => f.num_differing);
  const verdict = data.consistent ? 'every field reads back as written'
    : `${differing.length} field(s) read back differently`;
  $('replay-summary').textContent = `${verdict}: slot ${data.sample.slot}, token ${data.sample.src_token_global_idx}, ` +
    `${fmtInt(data.num_slot_bytes)} B per slot (writer ${fmtInt(data.writer.num_bytes)} B, reader ${fmtInt(data.reader.num_bytes)} B)`;
  setVerdict([el('strong', {}, data.consistent ? 'consistent' : 'INCONSISTENT'), verdict,
    `${fmtInt(data.num_slot_bytes)} B per slot`], !data.consistent);
  const sample = (values) => values.slice(0, 6).join(' ') + (values.length > 6 ? ' …' : '');
  const rows = data.fields.map((f) => ({ attrs: f.num_differing ? { class: 'broken' } : {},
    cells: [f.name, f.dtype, fmtInt(f.count), fmtInt(f.num_bytes), fmtInt(f.written_offset), fmtInt(f.read_offset),
      f.num_differing ? fmtInt(f.num_differing) : 'none', sample(f.written), sample(f.read)], cellClass: { 7: 'src', 8: 'src' } }));
  $('replay-fields').replaceChildren(table(['field', 'dtype', 'count', 'bytes', 'written at', 'read at', 'differing',
    'written (first)', 'read (first)'], rows, new Set([2, 3, 4, 5])));
  findingItems(data.findings, 'replay-findings');
}
