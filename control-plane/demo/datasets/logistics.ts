/**
 * demo-logistics: a third-party logistics provider's outbound parcel and freight shipments from
 * its warehouses, with carrier scan events from label creation to delivery (or exception and
 * return). Promised dates follow the service level; on-time flags agree with the scans.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, dayOfWeek, SPAN_END_MS, SPAN_START_MS, US_CITIES, col, iso, isoDate, pad, round2 } from '../rng.js';

const TARGET_ID = 'demo-logistics';
const N_SHIPMENTS = 2000;

const WAREHOUSES = [
  { id: 'WH-NJ1', name: 'Edison Fulfillment Center', city: 'Newark', state: 'NJ', opened: '2016-04-01', capacity: 42000 },
  { id: 'WH-GA1', name: 'Atlanta South DC', city: 'Atlanta', state: 'GA', opened: '2018-09-15', capacity: 36000 },
  { id: 'WH-TX1', name: 'Dallas Regional DC', city: 'Dallas', state: 'TX', opened: '2017-02-01', capacity: 51000 },
  { id: 'WH-IL1', name: 'Joliet Cross-Dock', city: 'Chicago', state: 'IL', opened: '2019-06-10', capacity: 28000 },
  { id: 'WH-CA1', name: 'Inland Empire DC', city: 'Los Angeles', state: 'CA', opened: '2015-11-20', capacity: 64000 },
  { id: 'WH-WA1', name: 'Kent Valley Warehouse', city: 'Seattle', state: 'WA', opened: '2021-03-01', capacity: 18000 },
  { id: 'WH-AZ1', name: 'Phoenix West DC', city: 'Phoenix', state: 'AZ', opened: '2023-05-01', capacity: 24000 },
] as const;

const CARRIERS = [
  { id: 'CAR-01', name: 'SwiftParcel', scac: 'SWPC', mode: 'parcel' },
  { id: 'CAR-02', name: 'National Ground Express', scac: 'NGEX', mode: 'parcel' },
  { id: 'CAR-03', name: 'Postal Priority', scac: 'PSTL', mode: 'parcel' },
  { id: 'CAR-04', name: 'Heartland LTL', scac: 'HLTL', mode: 'ltl' },
  { id: 'CAR-05', name: 'Blue Ridge Freight', scac: 'BRFR', mode: 'ltl' },
  { id: 'CAR-06', name: 'Interstate Truckload', scac: 'ISTL', mode: 'ftl' },
] as const;

const HUBS = ['Memphis, TN', 'Louisville, KY', 'Indianapolis, IN', 'Columbus, OH', 'Kansas City, MO', 'Denver, CO', 'Ontario, CA', 'Allentown, PA', 'Atlanta, GA', 'Dallas, TX'] as const;

const CUSTOMERS = ['Northwind Outfitters', 'Lumen Home', 'Voltcraft Electronics', 'Glow Botanics', 'Pioneer Tools', 'Orchard Pet Supply', 'Summit Sports', 'Keystone Office'] as const;

const TABLES: readonly TableDef[] = [
  {
    name: 'warehouses',
    description: 'Warehouses / distribution centers shipments leave from.',
    primaryKey: 'warehouse_id',
    columns: [
      col('warehouse_id', 'text', 'Warehouse id, e.g. WH-TX1.'),
      col('name', 'text', 'Site name.'),
      col('city', 'text', 'City.'),
      col('state', 'text', 'US state (2-letter code).'),
      col('opened_on', 'date', 'Date the site opened (may precede the data span).'),
      col('capacity_pallets', 'integer', 'Storage capacity in pallet positions.'),
    ],
  },
  {
    name: 'carriers',
    description: 'Carriers the shipments are tendered to.',
    primaryKey: 'carrier_id',
    columns: [
      col('carrier_id', 'text', 'Carrier id.'),
      col('name', 'text', 'Carrier name.'),
      col('scac', 'text', 'Standard Carrier Alpha Code.'),
      col('mode', 'text', 'parcel | ltl (less than truckload) | ftl (full truckload).'),
    ],
  },
  {
    name: 'shipments',
    description: 'Outbound shipments: origin, destination, carrier, service level, cost, promised date and outcome.',
    primaryKey: 'shipment_id',
    timeColumn: 'created_at',
    columns: [
      col('shipment_id', 'text', 'Shipment id, e.g. SHP-000123; numbered in order of created_at.'),
      col('tracking_number', 'text', 'Carrier tracking number / PRO number.'),
      col('client', 'text', 'Client (shipper of record) the 3PL ships for.'),
      col('order_reference', 'text', "The client's order number."),
      col('warehouse_id', 'text', 'Origin warehouse (warehouses.warehouse_id).'),
      col('carrier_id', 'text', 'Carrier (carriers.carrier_id).'),
      col('service_level', 'text', 'ground | two_day | overnight | ltl_standard | ftl_dedicated.'),
      col('destination_city', 'text', 'Destination city.'),
      col('destination_state', 'text', 'Destination US state.'),
      col('destination_zip', 'text', 'Destination ZIP code.'),
      col('package_count', 'integer', 'Number of packages (or pallets for freight).'),
      col('weight_kg', 'numeric', 'Total billable weight, kg.'),
      col('declared_value', 'numeric', 'Declared value, USD.'),
      col('shipping_cost', 'numeric', 'Carrier charge, USD.'),
      col('created_at', 'timestamptz', 'When the label / bill of lading was created.'),
      col('promised_date', 'date', 'Delivery date promised by the service level (may fall just after the data span for the last shipments).'),
      col('picked_up_at', 'timestamptz', 'Carrier pickup scan.', true),
      col('delivered_at', 'timestamptz', 'Delivery scan.', true),
      col('status', 'text', 'label_created | in_transit | out_for_delivery | delivered | exception | returned_to_sender.'),
      col('on_time', 'boolean', 'Delivered by the end of the promised date; null until delivered.', true),
    ],
  },
  {
    name: 'tracking_events',
    description: 'Carrier scan events for each shipment, in time order.',
    primaryKey: 'event_id',
    timeColumn: 'occurred_at',
    columns: [
      col('event_id', 'bigint', 'Event id, increasing with occurred_at.'),
      col('shipment_id', 'text', 'The shipment (shipments.shipment_id).'),
      col('occurred_at', 'timestamptz', 'Scan time.'),
      col('event_code', 'text', 'LC label created | PU picked up | DP departed facility | AR arrived at facility | OD out for delivery | DL delivered | EX exception | RS return to sender.'),
      col('description', 'text', 'Scan description.'),
      col('location', 'text', 'City, state of the scan.'),
      col('exception_reason', 'text', 'Reason for EX scans: weather_delay | address_issue | damaged | recipient_unavailable | mechanical_delay.', true),
    ],
  },
];

const DESCRIPTIONS: Record<string, string> = {
  LC: 'Shipping label created',
  PU: 'Picked up by carrier',
  DP: 'Departed facility',
  AR: 'Arrived at facility',
  OD: 'Out for delivery',
  DL: 'Delivered',
  EX: 'Delivery exception',
  RS: 'Returned to sender',
};

function businessDaysAfter(ms: number, n: number): number {
  let t = Math.floor(ms / DAY) * DAY;
  let left = n;
  while (left > 0) {
    t += DAY;
    const dow = dayOfWeek(t);
    if (dow !== 0 && dow !== 6) left--;
  }
  return t;
}

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;

  const warehouseRows: Cell[][] = WAREHOUSES.map((w) => [w.id, w.name, w.city, w.state, w.opened, w.capacity]);
  const carrierRows: Cell[][] = CARRIERS.map((c) => [c.id, c.name, c.scac, c.mode]);

  const createdTimes = Array.from({ length: N_SHIPMENTS }, () => {
    // Peak season in November/December.
    for (;;) {
      const t = rng.businessTimeMs(SPAN_START_MS, END, 0.5, 0.2);
      const m = new Date(t).getUTCMonth();
      if (rng.next() < (m === 10 || m === 11 ? 1 : 0.7)) return t;
    }
  }).sort((a, b) => a - b);

  const shipmentRows: Cell[][] = [];
  interface Ev { at: number; seq: number; ship: string; code: string; loc: string; reason: string | null }
  const events: Ev[] = [];
  let seq = 0;
  const usedTracking = new Set<string>();

  createdTimes.forEach((created, i) => {
    const id = `SHP-${pad(i + 1, 6)}`;
    const wh = rng.pick(WAREHOUSES.filter((w) => w.id !== 'WH-AZ1' || created >= Date.UTC(2023, 4, 1)));
    const dest = rng.pick(US_CITIES.filter((c) => c.city !== wh.city));
    const mode = rng.weighted<'parcel' | 'ltl' | 'ftl'>([['parcel', 84], ['ltl', 13], ['ftl', 3]]);
    const carrier = rng.pick(CARRIERS.filter((c) => c.mode === mode));
    const service = mode === 'ltl' ? 'ltl_standard' : mode === 'ftl' ? 'ftl_dedicated' : rng.weighted<string>([['ground', 75], ['two_day', 18], ['overnight', 7]]);
    const far = Math.abs(US_CITIES.indexOf(dest) - US_CITIES.findIndex((c) => c.city === wh.city)) > 15;
    const transitDays = service === 'overnight' ? 1 : service === 'two_day' ? 2 : service === 'ground' ? (far ? rng.int(4, 5) : rng.int(1, 3)) : service === 'ltl_standard' ? (far ? rng.int(4, 6) : rng.int(2, 3)) : far ? 3 : 1;
    const packages = mode === 'parcel' ? rng.weighted<number>([[1, 70], [2, 18], [3, 8], [4, 4]]) : mode === 'ltl' ? rng.int(1, 6) : rng.int(14, 26);
    const weight = round2(mode === 'parcel' ? packages * rng.logNormal(3.5, 0.7, 0.2, 30) : mode === 'ltl' ? packages * rng.float(180, 550) : rng.float(9000, 19500));
    const value = round2(mode === 'parcel' ? rng.logNormal(120, 0.9, 10, 3000) : mode === 'ltl' ? rng.logNormal(4500, 0.6) : rng.logNormal(60000, 0.4));
    const cost = round2(
      mode === 'parcel' ? (8 + weight * (service === 'overnight' ? 3.2 : service === 'two_day' ? 1.8 : 0.9)) * (far ? 1.4 : 1)
      : mode === 'ltl' ? 120 + weight * 0.18 * (far ? 1.6 : 1)
      : (far ? 3400 : 1300) * rng.float(0.9, 1.25),
    );
    let tracking: string;
    do tracking = mode === 'parcel' ? `1Z${rng.alnum(6)}${rng.digits(10)}` : `${carrier.scac}${rng.digits(9)}`;
    while (usedTracking.has(tracking));
    usedTracking.add(tracking);
    const promised = businessDaysAfter(created, transitDays + (new Date(created).getUTCHours() >= 15 ? 1 : 0));
    const origin = `${wh.city}, ${wh.state}`;
    const destination = `${dest.city}, ${dest.state}`;

    const ev = (t: number, code: string, loc: string, reason: string | null = null): boolean => {
      if (t >= END) return false;
      events.push({ at: t, seq: seq++, ship: id, code, loc, reason });
      return true;
    };
    ev(created, 'LC', origin);
    let status = 'label_created';
    let pickedUp: number | null = null;
    let delivered: number | null = null;
    // Pickup at the end of the day (or next business day).
    let t = Math.floor(created / DAY) * DAY + 17 * HOUR + rng.int(0, 150) * MINUTE;
    if (t <= created) t = businessDaysAfter(created, 1) + 17 * HOUR + rng.int(0, 120) * MINUTE;
    const cancelled = rng.chance(0.01);
    if (!cancelled && ev(t, 'PU', origin)) {
      pickedUp = t;
      status = 'in_transit';
      const delay = rng.chance(0.1) ? rng.int(1, 3) * DAY : 0;
      const lateAt = delay > 0 ? rng.weighted<string>([['weather_delay', 35], ['mechanical_delay', 15], ['address_issue', 20], ['recipient_unavailable', 20], ['damaged', 10]]) : null;
      const due = promised + delay;
      const hubs = mode === 'ftl' ? [] : rng.sample(HUBS.filter((h) => h !== origin && h !== destination), far ? 2 : rng.int(0, 1));
      const legs = [...hubs, destination];
      const travelEnd = due + rng.int(5, 8) * HOUR; // morning of the delivery day
      const span = Math.max(2 * HOUR, travelEnd - (t + HOUR));
      let cursor = t + rng.int(1, 3) * HOUR;
      let ok = ev(cursor, 'DP', origin);
      legs.forEach((loc, k) => {
        if (!ok) return;
        const arrive = t + HOUR + Math.round(span * ((k + 1) / (legs.length + 0.3)));
        cursor = Math.max(cursor + HOUR, arrive);
        ok = ev(cursor, 'AR', loc);
        if (ok && loc !== destination) {
          cursor += rng.int(2, 10) * HOUR;
          ok = ev(cursor, 'DP', loc);
        }
      });
      if (ok && lateAt && lateAt !== 'damaged' && lateAt !== 'address_issue' && lateAt !== 'recipient_unavailable') {
        ok = ev(cursor + rng.int(1, 6) * HOUR, 'EX', destination, lateAt);
        if (ok) status = 'exception';
      }
      if (ok) {
        const ofd = Math.max(cursor + HOUR, Math.floor(Math.max(cursor, due) / DAY) * DAY + rng.int(7, 9) * HOUR);
        if (ev(ofd, 'OD', destination)) {
          status = 'out_for_delivery';
          const dl = ofd + rng.int(60, 600) * MINUTE;
          if (lateAt === 'address_issue' || lateAt === 'recipient_unavailable' || lateAt === 'damaged') {
            if (ev(dl, 'EX', destination, lateAt)) {
              status = 'exception';
              if (lateAt === 'damaged' || rng.chance(0.4)) {
                if (ev(dl + rng.int(1, 4) * DAY, 'RS', destination)) status = 'returned_to_sender';
              } else {
                const retry = Math.floor(dl / DAY) * DAY + rng.int(1, 2) * DAY + rng.int(9, 18) * HOUR;
                if (ev(retry - 2 * HOUR, 'OD', destination) && ev(retry, 'DL', destination)) {
                  status = 'delivered';
                  delivered = retry;
                }
              }
            }
          } else if (ev(dl, 'DL', destination)) {
            status = 'delivered';
            delivered = dl;
          }
        }
      }
    }
    const onTime = delivered === null ? null : delivered < promised + DAY;
    shipmentRows.push([
      id, tracking, rng.pick(CUSTOMERS), `SO-${rng.digits(7)}`, wh.id, carrier.id, service, dest.city, dest.state, dest.zip3 + rng.digits(2),
      packages, weight, value, cost, iso(created), isoDate(promised), pickedUp === null ? null : iso(pickedUp),
      delivered === null ? null : iso(delivered), status, onTime,
    ]);
  });

  events.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const eventRows: Cell[][] = events.map((e, i) => [1_000_001 + i, e.ship, iso(e.at), e.code, DESCRIPTIONS[e.code] ?? e.code, e.loc, e.reason]);

  return new Map<string, Cell[][]>([
    ['warehouses', warehouseRows],
    ['carriers', carrierRows],
    ['shipments', shipmentRows],
    ['tracking_events', eventRows],
  ]);
}

export const logistics: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'logistics',
  name: 'Logistics (shipments and tracking)',
  description:
    'A synthetic third-party logistics provider, 2023-2025: warehouses, carriers, parcel / LTL / truckload shipments with costs, promised dates and on-time outcomes, and every carrier scan from label to delivery, exception or return.',
  schema: 'demo_logistics',
  tables: TABLES,
  generate,
};


