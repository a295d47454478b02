// One process at a time in a data directory: a pid file taken with O_EXCL.
// Two processes opening one PGlite directory would corrupt it, and a key that
// the keys CLI writes into a copy the running service does not read is a key
// the service never accepts.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';

export class DataDirInUseError extends Error {
  constructor(
    readonly lockFile: string,
    readonly pid: number,
  ) {
    super(`${lockFile} says process ${pid} has the embedded database open (if no such process runs, delete the file)`);
    this.name = 'DataDirInUseError';
  }
}

/** Takes the lock file or throws DataDirInUseError; returns its release. */
export function lockDataDir(lockFile: string): () => void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lockFile, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return () => {
        if (holder(lockFile) === process.pid) rmSync(lockFile, { force: true });
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = holder(lockFile);
    if (pid !== undefined && alive(pid)) throw new DataDirInUseError(lockFile, pid);
    // Left by a process that died without stopping (a kill -9, a crash).
    rmSync(lockFile, { force: true });
  }
  throw new Error(`could not take ${lockFile}: another process keeps taking it`);
}

function holder(lockFile: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(lockFile, 'utf8'), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0); // signal 0: only asks whether the process exists
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by another user
  }
}
