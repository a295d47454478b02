// Walks a table in key order a page at a time (keyset paging: each page is
// fetched after the last row of the one before, so a pass costs one index
// range scan however far it goes, and rows changed behind it are not met twice).

/** Calls `handle` with each page `fetch` returns after the previous page's last row, until an empty page. */
export async function forEachPage<R>(fetch: (after: R | null) => Promise<readonly R[]>, handle: (page: readonly R[]) => Promise<void>): Promise<void> {
  let after: R | null = null;
  for (;;) {
    const page = await fetch(after);
    if (page.length === 0) return;
    await handle(page);
    after = page[page.length - 1] as R;
  }
}
