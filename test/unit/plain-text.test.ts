// Free text a client sends refuses what would make a stored value read as
// something it is not (review of 2026-11-26, S11), and still takes the
// letters the product needs.
import { describe, expect, it } from 'vitest';
import { plainText } from '../../src/core/http/plain-text.js';

const text = plainText(1, 64);

describe('plainText', () => {
  it('takes letters of any script and characters outside the BMP', () => {
    for (const s of ['沪A12345', 'Zoë Ünal', 'Ольга', 'محمد', 'नमस्ते', 'c-3', 'ann@example.com', '+44 7911 123456', '🚚 parcel', 'order:1b2c:expire']) {
      expect(text.safeParse(s).success, s).toBe(true);
    }
  });

  it('refuses C0 and C1 controls, bidi controls, format and line-separator characters', () => {
    const refused = {
      NUL: 'a\u0000b',
      tab: 'a\tb',
      newline: 'a\nb',
      DEL: 'a\u007fb',
      NEL: 'a\u0085b',
      CSI: 'a\u009b31m',
      'right-to-left override': 'ab\u202Egnp.exe',
      'left-to-right embedding': 'a\u202Ab',
      'first strong isolate': 'a\u2068b',
      'pop directional isolate': 'a\u2069b',
      'zero-width space': 'a\u200Bb',
      'zero-width joiner': 'a\u200Db',
      BOM: '\uFEFFab',
      'soft hyphen': 'a\u00ADb',
      'line separator': 'a\u2028b',
      'paragraph separator': 'a\u2029b',
      'the review value': 'ab\u202Egnp.exe\u0085\u009B31m\u200B',
    };
    for (const [name, s] of Object.entries(refused)) expect(text.safeParse(s).success, name).toBe(false);
  });

  it('refuses strings that are not well formed rather than letting them be stored as U+FFFD', () => {
    for (const s of ['a\ud800b', 'a\udc00', '\ud83d']) expect(text.safeParse(s).success, JSON.stringify(s)).toBe(false);
    expect(text.safeParse('a\ud83d\ude9ab').success).toBe(true);
  });
});
