// The Lua scripts' KEYS are declared once, in src/queue/scripts/registry.ts:
// each script's header must list the same keys, under the same names, in the
// same order, and every script takes its keys in the one order of KEY_ORDER
// (a key count or order restated by hand would silently shift KEYS into ARGV).
import { describe, expect, it } from 'vitest';
import { KEY_ORDER, SCRIPTS, type ScriptName, readLua } from '../../src/queue/scripts/registry.js';

const headerKeys = (lua: string) => [...lua.matchAll(/^KEYS\[(\d+)\]\s+(\S+)/gm)].map((m) => ({ index: Number(m[1]), name: m[2] }));

describe('script keys', () => {
  it.each(Object.keys(SCRIPTS) as ScriptName[])('%s: its header lists the keys it is given, in the one order', (name) => {
    const s = SCRIPTS[name];
    const listed = headerKeys(readLua(s.file));
    expect(listed.map((k) => k.index)).toEqual(s.keys.map((_, i) => i + 1));
    expect(listed.map((k) => k.name)).toEqual([...s.keys]);
    const positions = s.keys.map((k) => KEY_ORDER.indexOf(k));
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
  });

  it('every library a script names exists, and no two define the same function', () => {
    const libs = new Set(Object.values(SCRIPTS).flatMap((s) => [...s.libs]));
    const defined = new Map<string, string>();
    for (const lib of libs) {
      for (const m of readLua(`lib/${lib}.lua`).matchAll(/^local function (\w+)/gm)) {
        expect(defined.get(m[1]!), `${m[1]} in lib/${lib}.lua`).toBeUndefined();
        defined.set(m[1]!, lib);
      }
    }
  });
});
