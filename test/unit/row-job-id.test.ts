import { describe, expect, it } from 'vitest';
import { rowJobId } from '../../src/core/row-job-id.js';

const ID = '0b8f3c2a-1d4e-4f6a-9b7c-2e5d8a1f3c4b';

describe('rowJobId', () => {
  it('builds <kind>:<uuid>:<action> and reads the row back', () => {
    const j = rowJobId('order', 'expire');
    expect(j.of(ID)).toBe(`order:${ID}:expire`);
    expect(j.rowOf(j.of(ID))).toBe(ID);
  });

  it('reads upper-case hex only when asked to', () => {
    const upper = `order:${ID.toUpperCase()}:expire`;
    expect(rowJobId('order', 'expire').rowOf(upper)).toBeNull();
    expect(rowJobId('order', 'expire', { anyCase: true }).rowOf(upper)).toBe(ID.toUpperCase());
  });

  it('answers null for an id of another shape', () => {
    const j = rowJobId('order', 'expire', { anyCase: true });
    for (const id of [
      `order:${ID}:remind`,
      `appointment:${ID}:expire`,
      `order:${ID}`,
      `order:${ID.slice(1)}:expire`,
      `xorder:${ID}:expire`,
      `order:${ID}:expirex`,
      '',
    ]) {
      expect(j.rowOf(id), id).toBeNull();
    }
  });
});
