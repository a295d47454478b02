// The strict exposition reader the metrics test relies on: it accepts what
// Prometheus accepts and throws on each kind of malformed scrape.
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parseExposition, valueOf } from '../helpers/prometheus.js';

const GOOD = `# HELP c_total A counter
# TYPE c_total counter
c_total{q="a"} 3
c_total{q="b\\"x\\\\y\\n"} 1.5e3
# TYPE h histogram
h_bucket{le="0.1",q="a"} 1
h_bucket{le="+Inf",q="a"} 2
h_sum{q="a"} 0.35
h_count{q="a"} 2
# TYPE g gauge
g NaN
g{x="1"} -Inf
g{x="2"} Nan
`;

describe('parseExposition', () => {
  it('reads families, label escapes and special values', () => {
    const f = parseExposition(GOOD);
    expect(valueOf(f, 'c_total', { q: 'a' })).toBe(3);
    expect(valueOf(f, 'c_total', { q: 'b"x\\y\n' })).toBe(1_500);
    expect(valueOf(f, 'h_count', { q: 'a' })).toBe(2);
    expect(valueOf(f, 'g', { x: '1' })).toBe(-Infinity);
    expect(valueOf(f, 'g', { x: '2' })).toBeNaN(); // Go's ParseFloat takes any case, and prom-client writes this
    expect(valueOf(f, 'c_total', { q: 'missing' })).toBe(0);
  });

  it('reads what prom-client writes', async () => {
    const r = new Registry();
    new Counter({ name: 'x_total', help: 'x', labelNames: ['a'], registers: [r] }).inc({ a: 'q"\\' }, 2);
    new Histogram({ name: 'y_seconds', help: 'y', buckets: [0.1, 1], registers: [r] }).observe(0.5);
    const f = parseExposition(await r.metrics());
    expect(valueOf(f, 'x_total', { a: 'q"\\' })).toBe(2);
    expect(valueOf(f, 'y_seconds_bucket', { le: '1' })).toBe(1);
  });

  it.each([
    ['a value that is no number', GOOD.replace('c_total{q="a"} 3', 'c_total{q="a"} 3x')],
    ['a sample of no declared family', `${GOOD}other 1\n`],
    ['a series given twice', `${GOOD}c_total{q="a"} 4\n`],
    ['buckets that fall', GOOD.replace('h_bucket{le="+Inf",q="a"} 2', 'h_bucket{le="+Inf",q="a"} 0').replace('h_count{q="a"} 2', 'h_count{q="a"} 0')],
    ['+Inf bucket unlike _count', GOOD.replace('h_count{q="a"} 2', 'h_count{q="a"} 3')],
    ['a negative counter', GOOD.replace('c_total{q="a"} 3', 'c_total{q="a"} -3')],
    ['an unquoted label value', GOOD.replace('c_total{q="a"} 3', 'c_total{q=a} 3')],
    ['a TYPE after samples', `${GOOD}# TYPE g gauge\n`],
    ['no final newline', GOOD.slice(0, -1)],
  ])('throws on %s', (_what, text) => {
    expect(() => parseExposition(text)).toThrow();
  });
});
