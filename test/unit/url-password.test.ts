// Passwords inside URLs: masked by the URL parser (a raw `@` inside one must
// not leave its tail in a log line), and read for the placeholder check.
import { describe, expect, it } from 'vitest';
import { maskUrlPassword, urlPassword } from '../../src/core/url-password.js';

describe('maskUrlPassword', () => {
  it.each([
    ['postgres://user:secret@db:5432/orders', 'postgres://user:***@db:5432/orders'],
    ['postgres://user:p@ss@db:5432/orders', 'postgres://user:***@db:5432/orders'],
    ['redis://:p%40ss@redis:6379/2', 'redis://:***@redis:6379/2'],
    ['rediss://default:pw@redis.example:6380', 'rediss://default:***@redis.example:6380'],
    ['postgres://user@db/orders', 'postgres://user@db/orders'],
    ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379'],
    ['postgres://user:secret@[not-a-host/orders', 'postgres://***'],
    ['not a url', 'not a url'],
    ['Asia/Shanghai', 'Asia/Shanghai'],
  ])('shows %s as %s', (text, shown) => {
    expect(maskUrlPassword(text)).toBe(shown);
  });
});

describe('urlPassword', () => {
  it('answers the decoded password, or null', () => {
    expect(urlPassword('redis://:change-me%40x@redis:6379')).toBe('change-me@x');
    expect(urlPassword('postgres://u:p@ss@db/x')).toBe('p@ss');
    expect(urlPassword('postgres://u:%zz@db/x')).toBe('%zz');
    expect(urlPassword('postgres://u@db/x')).toBeNull();
    expect(urlPassword('change-me')).toBeNull();
  });
});
