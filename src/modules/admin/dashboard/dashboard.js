// @ts-check
// The operators' dashboard: asks for the admin token (kept in sessionStorage,
// for this tab only), then polls the token-protected /admin API and redraws
// the queue table, the lateness chart, the dead letters and recent batches.
// Everything from the API is written as text, never as HTML.
import { COLOURS, drawLateness, formatMs } from './chart.js';

/**
 * @typedef {{ queue: string, shard: number | 'all', pending: number, dueNow: number, inFlight: number, dead: number, nextDueAt: number | null, oldestDueLagMs: number }} Stats
 * @typedef {{ id: string, type: string, attempts: number, diedAt: string | null, lastError: string | null }} Job
 * @typedef {{ id: string, client: string, area: string, vehiclePlate: string, reason: string, parcels: number, createdAt: string }} Batch
 * @typedef {import('./chart.js').Series} Series
 * @typedef {import('./chart.js').Stat} Stat
 */

const TOKEN_KEY = 'ots-admin-token';
const REFRESH_MS = 2_000;
const DEAD_PAGE = 20;

/** @template {HTMLElement} T @param {string} id @returns {T} */
const $ = (id) => /** @type {T} */ (document.getElementById(id));

class Unauthorized extends Error {}

/** @param {string} path @param {RequestInit} [init] */
async function api(path, init = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY) ?? '';
  const res = await fetch(path, { ...init, headers: { Authorization: `Bearer ${token}` } });
  if (res.status === 401) throw new Unauthorized('the token was refused');
  const body = await res.json();
  if (!res.ok) throw new Error(`${res.status} ${body.code ?? ''}: ${body.title ?? ''}`);
  return body;
}

/** @param {string} tag @param {string | number} [text] @param {Record<string, string>} [data] */
function cell(tag, text = '', data = {}) {
  const e = document.createElement(tag);
  e.textContent = String(text);
  Object.assign(e.dataset, data);
  return e;
}

/** @param {number} ms */
const ago = (ms) => (ms <= 0 ? '–' : formatMs(ms));
/** @param {number | null} at */
const dueIn = (at) => (at === null ? '–' : at <= Date.now() ? 'now' : `in ${formatMs(at - Date.now())}`);

/** @param {{ total: Stats, shards: Stats[] }[]} queues */
function renderQueues(queues) {
  const rows = queues.map(({ total: s, shards }) => {
    const tr = cell('tr', '', { queue: s.queue });
    tr.append(
      cell('th', s.queue),
      cell('td', s.pending, { field: 'pending' }),
      cell('td', s.dueNow, { field: 'dueNow' }),
      cell('td', s.inFlight, { field: 'inFlight' }),
      cell('td', s.dead, { field: 'dead' }),
      cell('td', dueIn(s.nextDueAt)),
      cell('td', ago(s.oldestDueLagMs), { field: 'oldestDueLagMs' }),
      cell('td', shards.length),
    );
    if (s.dead > 0) tr.classList.add('has-dead');
    return tr;
  });
  /** @type {HTMLTableElement} */ ($('queues')).tBodies[0]?.replaceChildren(...rows);
}

/** @param {string} queue @param {Job[]} jobs @param {number} dead */
function deadTable(queue, jobs, dead) {
  const box = cell('div', '', { deadQueue: queue });
  const head = cell('h3', `${queue} · ${dead} dead`);
  const all = cell('button', 'Redrive all', { action: 'redrive-all', queue });
  head.append(' ', all);
  const table = document.createElement('table');
  table.append(cell('thead'));
  table.tHead?.append(cell('tr'));
  table.tHead?.rows[0]?.append(cell('th', 'job'), cell('th', 'type'), cell('th', 'attempts'), cell('th', 'died'), cell('th', 'last error'), cell('th', ''));
  const body = document.createElement('tbody');
  for (const j of jobs) {
    const tr = cell('tr', '', { jobId: j.id });
    const actions = cell('td');
    actions.append(cell('button', 'Redrive', { action: 'redrive', queue, id: j.id }), ' ', cell('button', 'Delete', { action: 'delete', queue, id: j.id }));
    tr.append(
      cell('td', j.id),
      cell('td', j.type),
      cell('td', j.attempts),
      cell('td', j.diedAt ? new Date(j.diedAt).toLocaleTimeString() : ''),
      cell('td', j.lastError ?? ''),
      actions,
    );
    body.append(tr);
  }
  table.append(body);
  box.append(head, table);
  if (dead > jobs.length) box.append(cell('p', `the oldest ${jobs.length} of ${dead} shown`, {}));
  return box;
}

/** @param {Stats[]} totals */
async function renderDead(totals) {
  const withDead = totals.filter((s) => s.dead > 0);
  const boxes = await Promise.all(
    withDead.map(async (s) => {
      const page = await api(`/admin/queues/${encodeURIComponent(s.queue)}/dead?limit=${DEAD_PAGE}`);
      return deadTable(s.queue, page.jobs, s.dead);
    }),
  );
  $('dead').replaceChildren(...boxes);
  $('dead-empty').hidden = boxes.length > 0;
}

async function renderLateness() {
  const minutes = /** @type {HTMLSelectElement} */ ($('minutes')).value;
  const stat = /** @type {Stat} */ (/** @type {HTMLSelectElement} */ ($('stat')).value);
  const data = await api(`/admin/lateness?minutes=${encodeURIComponent(minutes)}`);
  /** @type {Series[]} */
  const queues = data.queues;
  drawLateness(/** @type {SVGSVGElement} */ (/** @type {unknown} */ ($('lateness'))), { from: Date.parse(data.from), to: Date.parse(data.to), queues, stat });
  $('legend').replaceChildren(
    ...queues.map((q, i) => {
      const li = cell('li', `${q.queue} · ${q.points.reduce((a, p) => a + p.count, 0)} jobs`, { queue: q.queue });
      li.style.setProperty('--colour', COLOURS[i % COLOURS.length] ?? '#000');
      return li;
    }),
  );
}

async function renderBatches() {
  const { batches } = /** @type {{ batches: Batch[] }} */ (await api('/admin/batches?limit=20'));
  const rows = batches.map((b) => {
    const tr = cell('tr', '', { batchId: b.id });
    tr.append(
      cell('td', new Date(b.createdAt).toLocaleTimeString()),
      cell('td', b.client),
      cell('td', b.area),
      cell('td', b.vehiclePlate),
      cell('td', b.reason),
      cell('td', b.parcels),
      cell('td', b.id.slice(0, 8)),
    );
    return tr;
  });
  /** @type {HTMLTableElement} */ ($('batches')).tBodies[0]?.replaceChildren(...rows);
}

/** @param {string} text @param {boolean} [error] */
function status(text, error = false) {
  const s = $('status');
  s.textContent = text;
  s.classList.toggle('error', error);
}

let timer = 0;
async function refresh() {
  window.clearTimeout(timer);
  try {
    const { queues } = await api('/admin/queues');
    renderQueues(queues);
    await Promise.all([renderDead(queues.map((/** @type {{ total: Stats }} */ q) => q.total)), renderLateness(), renderBatches()]);
    status(`updated ${new Date().toLocaleTimeString()}`);
  } catch (err) {
    if (err instanceof Unauthorized) return signOut('The token was refused.');
    status(`refresh failed: ${err instanceof Error ? err.message : String(err)}`, true);
  }
  // One pending timer at most, however many refreshes ran at once (a click refreshes too).
  window.clearTimeout(timer);
  if (!$('board').hidden) timer = window.setTimeout(refresh, REFRESH_MS);
}

/** @param {string} [message] */
function signOut(message) {
  window.clearTimeout(timer);
  sessionStorage.removeItem(TOKEN_KEY);
  $('board').hidden = true;
  $('sign-out').hidden = true;
  $('login').hidden = false;
  const e = $('login-error');
  e.textContent = message ?? '';
  e.hidden = !message;
  status('');
}

function signIn() {
  $('login').hidden = true;
  $('board').hidden = false;
  $('sign-out').hidden = false;
  void refresh();
}

/** Redrive, delete and redrive-all buttons, delegated: the tables are redrawn every refresh. */
$('dead').addEventListener('click', async (ev) => {
  const b = /** @type {HTMLElement} */ (ev.target).closest('button');
  if (!b) return;
  const { action, queue = '', id = '' } = b.dataset;
  const q = `/admin/queues/${encodeURIComponent(queue)}/dead`;
  if ((action === 'delete' && !confirm(`Delete dead job ${id}?`)) || (action === 'redrive-all' && !confirm(`Redrive all dead jobs of ${queue}?`))) return;
  b.disabled = true;
  try {
    if (action === 'redrive') await api(`${q}/${encodeURIComponent(id)}/redrive`, { method: 'POST' });
    if (action === 'delete') await api(`${q}/${encodeURIComponent(id)}`, { method: 'DELETE' });
    if (action === 'redrive-all') await api(`${q}/redrive`, { method: 'POST' });
    status(`${action} ${id || queue}: done`);
  } catch (err) {
    if (err instanceof Unauthorized) return signOut('The token was refused.');
    status(`${action} failed: ${err instanceof Error ? err.message : String(err)}`, true);
  }
  void refresh();
});

$('login').addEventListener('submit', (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, /** @type {HTMLInputElement} */ ($('token')).value);
  /** @type {HTMLInputElement} */ ($('token')).value = '';
  signIn();
});
$('sign-out').addEventListener('click', () => signOut());
for (const id of ['stat', 'minutes']) $(id).addEventListener('change', () => void refresh());

if (sessionStorage.getItem(TOKEN_KEY)) signIn();
else signOut();
