// Owner-only modes for a directory tree (directories 0700, files 0600): for
// the embedded database's files, which PGlite writes 0666 (its initdb image
// carries that mode, applied by chmod, so no umask lowers it).
import { chmodSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export function makePrivate(dir: string): void {
  chmodSync(dir, 0o700);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) makePrivate(path);
    else if (entry.isFile()) chmodSync(path, 0o600);
  }
}

/** Runs `work` with a umask that keeps what it creates with default modes owner-only. */
export async function withPrivateUmask<T>(work: () => Promise<T>): Promise<T> {
  const before = process.umask(0o077);
  try {
    return await work();
  } finally {
    process.umask(before);
  }
}
