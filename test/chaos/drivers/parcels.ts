// Parcels load: a few delivery areas, then parcels posted by concurrent intake
// clients at a steady pace over a spread of time, unevenly over the areas (some
// fill batches, some only ever time out). Records every parcel intake accepted.
import { type Http, sleepUntil } from './http.js';

export type ParcelRecord = { trackingNo: string; area: string };

export type ParcelsLoad = {
  tag: string;
  count: number;
  areas: number;
  clients: number;
  spreadMs: number;
};

export const areaCode = (tag: string, i: number) => `${tag}-A${i}`;
export const vehicleOf = (area: string) => `V${area.slice(-6)}`;

export async function driveParcels(http: Http, load: ParcelsLoad): Promise<ParcelRecord[]> {
  const areas = Array.from({ length: load.areas }, (_, i) => areaCode(load.tag, i));
  for (const a of areas) {
    const r = await http.send('PUT', `/areas/${a}`, { vehiclePlate: vehicleOf(a), sorterContact: `${a}@example.com` });
    if (r.status !== 200) throw new Error(`area ${a}: answered ${r.status} ${JSON.stringify(r.body)}`);
  }
  const accepted: ParcelRecord[] = [];
  const t0 = Date.now();
  let next = 0;
  const client = async () => {
    for (;;) {
      const i = next++;
      if (i >= load.count) return;
      await sleepUntil(t0 + (i * load.spreadMs) / load.count);
      const area = areas[Math.floor(Math.random() ** 2 * areas.length)] as string;
      const trackingNo = `${load.tag}-P${i}`;
      const r = await http.send('POST', '/parcels', { trackingNo, area });
      // 200: a retried intake whose first attempt had committed.
      if (r.status !== 202 && r.status !== 200) throw new Error(`parcel ${trackingNo}: answered ${r.status} ${JSON.stringify(r.body)}`);
      accepted.push({ trackingNo, area });
    }
  };
  await Promise.all(Array.from({ length: load.clients }, client));
  return accepted;
}
