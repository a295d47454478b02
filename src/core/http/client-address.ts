// The peer's address as a bucket name for the per-address limits (the failed
// authentication brake, the public routes' limit): never a raw header.
import { isIP } from 'node:net';
import type { Request } from 'express';

/**
 * An IPv4 address, or the /64 of an IPv6 one (a host usually holds a whole
 * /64), or "unknown". Behind a proxy every client shares its address: a
 * per-address limit then counts that proxy's requests.
 */
export function addressOf(req: Request): string {
  const ip = req.socket.remoteAddress ?? '';
  const v4 = /^(?:::ffff:)?(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (v4 && isIP(v4[1] as string) === 4) return v4[1] as string;
  if (isIP(ip) !== 6) return 'unknown';
  const groups = expandIpv6(ip);
  return groups ? `${groups.slice(0, 4).join('_')}_64` : 'unknown';
}

/** The eight groups of an IPv6 address (without an embedded IPv4 tail), or null. */
function expandIpv6(ip: string): string[] | null {
  const [head, tail, ...more] = ip.toLowerCase().split('::');
  if (more.length > 0 || (head ?? '').includes('.') || (tail ?? '').includes('.')) return null;
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array<string>(8 - h.length - t.length).fill('0');
  const all = [...h, ...fill, ...t];
  return all.length === 8 ? all.map((g) => g.replace(/^0+(?=.)/, '')) : null;
}
