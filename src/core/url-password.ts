// Passwords inside URLs (postgres://user:password@host/db): masked wherever a
// URL is logged or shown in an error, and read for the configuration's check
// of placeholder secrets. Parsed as a URL, not matched by a pattern: a raw `@`
// inside a password made a pattern stop early and show the password's tail.

/** `text` with a URL's password shown as `***`; text that does not parse as a URL but may hold a password is hidden after its scheme. */
export function maskUrlPassword(text: string): string {
  const url = parse(text);
  if (!url) return /^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(text) ? `${text.slice(0, text.indexOf('://') + 3)}***` : text;
  if (url.password === '') return text;
  url.password = '***';
  return url.href;
}

/** The decoded password of a URL; null when `text` is no URL or has none. */
export function urlPassword(text: string): string | null {
  const url = parse(text);
  if (!url?.password) return null;
  try {
    return decodeURIComponent(url.password);
  } catch {
    return url.password; // a stray % that is no escape: the text as given
  }
}

function parse(text: string): URL | null {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return null;
  try {
    return new URL(text);
  } catch {
    return null;
  }
}
