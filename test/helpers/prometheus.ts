// A strict reader of the Prometheus text exposition format (0.0.4), for tests:
// every line must be a HELP, TYPE or comment line or a sample of a declared
// family; values are floats as Prometheus parses them; no series twice;
// histogram buckets rise with `le`, end at +Inf and match _count. It throws
// naming the line, instead of letting a malformed scrape pass.

export type Sample = { readonly name: string; readonly labels: Readonly<Record<string, string>>; readonly value: number };
export type Family = { readonly name: string; type: string; help: string; readonly samples: Sample[] };

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*';
// Prometheus reads values with Go's ParseFloat: Inf and NaN in any case
// (prom-client writes the event loop lag mean as "Nan" before its first sample).
const VALUE = '[+-]?(?:[Ii][Nn][Ff]|[Nn][Aa][Nn]|(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?)';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL}="(?:[^"\\\\\\n]|\\\\[\\\\"n])*",?)*)\\})? (${VALUE})(?: -?\\d+)?$`);
const LABEL_PAIR = new RegExp(`(${LABEL})="((?:[^"\\\\\\n]|\\\\[\\\\"n])*)"`, 'g');
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

const unescape = (v: string) => v.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
const key = (s: Sample) =>
  `${s.name}{${Object.entries(s.labels)
    .sort()
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(',')}}`;

/** The family a sample name belongs to, given the declared families. */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  const exact = families.get(name);
  if (exact) return exact;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  const base = m ? families.get(m[1] as string) : undefined;
  if (!base || !m) return undefined;
  if (base.type === 'histogram' || (base.type === 'summary' && m[2] !== 'bucket')) return base;
  return undefined;
}

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  const lines = text.split('\n');
  if (lines[lines.length - 1] !== '') throw new Error('the exposition must end with a newline');
  lines.slice(0, -1).forEach((line, i) => {
    const where = `line ${i + 1}: ${JSON.stringify(line)}`;
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (meta) {
      const [, kind, name, rest] = meta as unknown as [string, string, string, string];
      if (!new RegExp(`^${NAME}$`).test(name)) throw new Error(`bad metric name, ${where}`);
      const f = families.get(name) ?? { name, type: 'untyped', help: '', samples: [] };
      if (kind === 'TYPE') {
        if (!TYPES.has(rest) || f.samples.length > 0) throw new Error(`bad or late TYPE, ${where}`);
        f.type = rest;
      } else f.help = rest;
      families.set(name, f);
      return;
    }
    if (line.startsWith('#') || line === '') return;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample, ${where}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(LABEL_PAIR)) {
      if (Object.hasOwn(labels, k as string)) throw new Error(`label given twice, ${where}`);
      labels[k as string] = unescape(v as string);
    }
    const raw = m[3] as string;
    const value = /inf$/i.test(raw) ? (raw.startsWith('-') ? -Infinity : Infinity) : /nan$/i.test(raw) ? Number.NaN : Number(raw);
    const sample = { name: m[1] as string, labels, value };
    const family = familyOf(sample.name, families);
    if (!family) throw new Error(`sample of no declared family, ${where}`);
    if (seen.has(key(sample))) throw new Error(`series given twice, ${where}`);
    seen.add(key(sample));
    if (family.type === 'counter' && !(value >= 0)) throw new Error(`negative counter, ${where}`);
    family.samples.push(sample);
  });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

function checkHistogram(f: Family): void {
  const series = new Map<string, { buckets: [number, number][]; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const id = JSON.stringify(Object.entries(rest).sort());
    const h = series.get(id) ?? { buckets: [] };
    series.set(id, h);
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new Error(`${f.name}: a bucket without le`);
      h.buckets.push([le === '+Inf' ? Infinity : Number(le), s.value]);
    } else if (s.name === `${f.name}_count`) h.count = s.value;
  }
  for (const [id, h] of series) {
    const sorted = [...h.buckets].sort((a, b) => a[0] - b[0]);
    sorted.forEach(([, v], i) => {
      if (i > 0 && v < (sorted[i - 1] as [number, number])[1]) throw new Error(`${f.name}${id}: buckets not cumulative`);
    });
    const inf = sorted[sorted.length - 1];
    if (!inf || inf[0] !== Infinity) throw new Error(`${f.name}${id}: no +Inf bucket`);
    if (inf[1] !== h.count) throw new Error(`${f.name}${id}: +Inf bucket ${inf[1]} is not _count ${h.count}`);
  }
}

/** The value of one series (0 when absent: a counter not yet incremented is not exported). */
export function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string>): number {
  const family = familyOf(name, families);
  const s = family?.samples.find(
    (x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v) && Object.keys(x.labels).length === Object.keys(labels).length,
  );
  return s?.value ?? 0;
}
