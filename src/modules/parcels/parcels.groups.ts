// An area's batcher group, the Redis group its waiting parcels are counted in,
// and back. Area codes are unique per client, so the group names the client:
// two clients' areas B7 never fill one batch. The default client's group is
// the bare code, as before clients existed: a single-client deployment's
// Redis keys stay the same across the upgrade.
import { DEFAULT_CLIENT } from '../../core/auth/api-key-input.js';

/** An area by its key: codes are unique per client. */
export type AreaKey = { readonly client: string; readonly code: string };

/**
 * The group of an area: `<code>` for the default client, `<client>/<code>`
 * otherwise. Neither part holds a '/' (clientIdSchema, areaCodeSchema), so
 * the name is one area's only, and the batcher's group pattern admits it.
 */
export function groupOf(area: AreaKey): string {
  return area.client === DEFAULT_CLIENT ? area.code : `${area.client}/${area.code}`;
}

/** The area of a group that groupOf named (a flush round's, a put back's). */
export function areaOfGroup(group: string): AreaKey {
  const slash = group.indexOf('/');
  return slash < 0 ? { client: DEFAULT_CLIENT, code: group } : { client: group.slice(0, slash), code: group.slice(slash + 1) };
}
