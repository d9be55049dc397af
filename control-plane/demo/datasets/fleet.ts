/**
 * demo-fleet: a regional trucking fleet's telematics: vehicles, drivers, trips with odometer
 * readings, fuel purchases and maintenance work orders. Odometers only go up, a vehicle never
 * runs two trips at once, a driver never drives two, and fuel follows the distance driven.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, dayOfWeek, SPAN_END_MS, SPAN_START_MS, at, col, iso, isoDate, pad, round1, round2 } from '../rng.js';

const TARGET_ID = 'demo-fleet';

const DEPOTS = [
  { code: 'DEP-CHI', city: 'Chicago, IL' },
  { code: 'DEP-IND', city: 'Indianapolis, IN' },
  { code: 'DEP-STL', city: 'St. Louis, MO' },
] as const;

const ROUTES: Record<string, readonly (readonly [string, number])[]> = {
  'DEP-CHI': [['Milwaukee, WI', 150], ['Detroit, MI', 455], ['Indianapolis, IN', 295], ['Madison, WI', 240], ['Grand Rapids, MI', 285], ['Des Moines, IA', 535], ['Rockford, IL', 145], ['South Bend, IN', 150]],
  'DEP-IND': [['Columbus, OH', 280], ['Louisville, KY', 180], ['Cincinnati, OH', 180], ['Fort Wayne, IN', 200], ['Dayton, OH', 190], ['Chicago, IL', 295], ['Evansville, IN', 270]],
  'DEP-STL': [['Kansas City, MO', 400], ['Springfield, IL', 160], ['Memphis, TN', 455], ['Columbia, MO', 200], ['Peoria, IL', 270], ['Nashville, TN', 495], ['Tulsa, OK', 635]],
};

const MODELS = [
  { make: 'Freightliner', model: 'Cascadia 126', type: 'tractor', fuel: 'diesel', lPer100: 35 },
  { make: 'Kenworth', model: 'T680', type: 'tractor', fuel: 'diesel', lPer100: 34 },
  { make: 'Volvo', model: 'VNL 760', type: 'tractor', fuel: 'diesel', lPer100: 33 },
  { make: 'International', model: 'MV607', type: 'box_truck', fuel: 'diesel', lPer100: 26 },
  { make: 'Isuzu', model: 'FTR', type: 'box_truck', fuel: 'diesel', lPer100: 24 },
  { make: 'Ford', model: 'Transit 350 HD', type: 'cargo_van', fuel: 'gasoline', lPer100: 15 },
] as const;

const WORK_TYPES = [
  ['preventive', 'PM-B service: oil and filters, chassis lube, brake inspection'],
  ['preventive', 'PM-A service: oil change and visual inspection'],
  ['inspection', 'Annual DOT inspection'],
  ['tires', 'Replace steer tires (2)'],
  ['tires', 'Replace drive tires (4)'],
  ['repair', 'Replace alternator'],
  ['repair', 'DEF system fault: replace NOx sensor'],
  ['repair', 'Air brake leak: replace brake chamber'],
  ['repair', 'Replace starter motor'],
  ['repair', 'Coolant leak: replace water pump'],
  ['repair', 'Liftgate hydraulic repair'],
  ['recall', 'Manufacturer recall campaign: software update'],
] as const;

const VIN_CHARS = 'ABCDEFGHJKLMNPRSTUVWXYZ0123456789';

const TABLES: readonly TableDef[] = [
  {
    name: 'vehicles',
    description: 'Vehicles of the fleet. No event time of their own (in_service_on may precede the data span).',
    primaryKey: 'vehicle_id',
    columns: [
      col('vehicle_id', 'text', 'Unit number, e.g. VEH-014.'),
      col('vin', 'text', 'Vehicle identification number (17 characters, synthetic).'),
      col('make', 'text', 'Manufacturer.'),
      col('model', 'text', 'Model.'),
      col('model_year', 'integer', 'Model year.'),
      col('vehicle_type', 'text', 'tractor | box_truck | cargo_van.'),
      col('fuel_type', 'text', 'diesel | gasoline.'),
      col('depot', 'text', 'Home depot code.'),
      col('in_service_on', 'date', 'Date the unit entered service.'),
      col('retired_on', 'date', 'Date the unit left the fleet.', true),
      col('odometer_km', 'integer', 'Odometer after its last recorded trip, km.'),
    ],
  },
  {
    name: 'drivers',
    description: 'Drivers employed by the fleet. No event time of their own.',
    primaryKey: 'driver_id',
    columns: [
      col('driver_id', 'text', 'Driver id, e.g. DRV-031.'),
      col('full_name', 'text', 'Full name.'),
      col('license_class', 'text', 'Commercial driver license class: A (tractors) | B (straight trucks) | C.'),
      col('depot', 'text', 'Home depot code.'),
      col('hired_on', 'date', 'Hire date (may precede the data span).'),
      col('status', 'text', 'active | on_leave | terminated.'),
    ],
  },
  {
    name: 'trips',
    description: 'Dispatched trips (depot to destination and back) recorded by the telematics unit.',
    primaryKey: 'trip_id',
    timeColumn: 'started_at',
    columns: [
      col('trip_id', 'text', 'Trip id, e.g. TRP-000123; numbered in order of started_at.'),
      col('vehicle_id', 'text', 'The vehicle (vehicles.vehicle_id).'),
      col('driver_id', 'text', 'The driver (drivers.driver_id).'),
      col('started_at', 'timestamptz', 'Ignition on at departure.'),
      col('ended_at', 'timestamptz', 'Ignition off back at the depot.'),
      col('origin', 'text', 'Depot city.'),
      col('destination', 'text', 'Delivery city.'),
      col('distance_km', 'numeric', 'Distance driven, km.'),
      col('odometer_start_km', 'integer', 'Odometer at departure, km.'),
      col('odometer_end_km', 'integer', 'Odometer at return, km.'),
      col('fuel_used_l', 'numeric', 'Fuel burned according to the engine ECU, liters.'),
      col('idle_minutes', 'integer', 'Minutes idling with the engine on.'),
      col('max_speed_kph', 'integer', 'Highest speed recorded.'),
      col('harsh_events', 'integer', 'Harsh braking / acceleration / cornering events.'),
    ],
  },
  {
    name: 'fuel_purchases',
    description: 'Fuel card transactions.',
    primaryKey: 'purchase_id',
    timeColumn: 'purchased_at',
    columns: [
      col('purchase_id', 'text', 'Purchase id, e.g. FUEL-000123.'),
      col('vehicle_id', 'text', 'The vehicle fuelled (vehicles.vehicle_id).'),
      col('driver_id', 'text', 'The driver holding the fuel card (drivers.driver_id).'),
      col('trip_id', 'text', 'The trip during which the purchase was made (trips.trip_id).'),
      col('purchased_at', 'timestamptz', 'Transaction time.'),
      col('station', 'text', 'Truck stop / station brand and city.'),
      col('fuel_type', 'text', 'diesel | gasoline | def (diesel exhaust fluid).'),
      col('liters', 'numeric', 'Volume purchased, liters.'),
      col('price_per_liter', 'numeric', 'Pump price, USD per liter.'),
      col('total_cost', 'numeric', 'liters x price_per_liter, USD.'),
      col('odometer_km', 'integer', 'Odometer entered at the pump, km.'),
    ],
  },
  {
    name: 'maintenance_orders',
    description: 'Maintenance work orders: preventive service, inspections, tires, repairs and recalls.',
    primaryKey: 'work_order_id',
    timeColumn: 'opened_at',
    columns: [
      col('work_order_id', 'text', 'Work order id, e.g. WO-00123.'),
      col('vehicle_id', 'text', 'The vehicle (vehicles.vehicle_id).'),
      col('opened_at', 'timestamptz', 'When the vehicle came into the shop.'),
      col('closed_at', 'timestamptz', 'When the work was completed; null while open.', true),
      col('work_type', 'text', 'preventive | inspection | tires | repair | recall.'),
      col('description', 'text', 'Work performed.'),
      col('odometer_km', 'integer', 'Odometer at intake, km.'),
      col('labor_hours', 'numeric', 'Labor hours billed.'),
      col('parts_cost', 'numeric', 'Parts cost, USD.'),
      col('labor_cost', 'numeric', 'Labor cost, USD.'),
      col('status', 'text', 'open | completed.'),
    ],
  },
];

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;

  // --- vehicles -----------------------------------------------------------------------------
  interface Vehicle { id: string; model: (typeof MODELS)[number]; depot: (typeof DEPOTS)[number]; from: number; to: number; odo: number; retired: number | null; startOdo: number; row: Cell[] }
  const vehicles: Vehicle[] = [];
  for (let i = 1; i <= 24; i++) {
    const model = i <= 12 ? rng.pick(MODELS.slice(0, 3)) : i <= 20 ? rng.pick(MODELS.slice(3, 5)) : at(MODELS, 5);
    const depot = at(DEPOTS, (i - 1) % 3);
    const early = i <= 18;
    const inService = early ? Date.UTC(2018, 0, 1) + rng.int(0, 1700) * DAY : SPAN_START_MS + rng.int(60, 800) * DAY;
    const retired = early && rng.chance(0.2) ? SPAN_START_MS + rng.int(300, 1000) * DAY : null;
    const year = new Date(inService).getUTCFullYear() + (rng.chance(0.5) ? 1 : 0);
    const startOdo = early ? Math.round(((SPAN_START_MS - inService) / (365 * DAY)) * rng.float(70000, 120000)) : rng.int(20, 400);
    let vin = '';
    for (let k = 0; k < 17; k++) vin += VIN_CHARS.charAt(rng.int(0, VIN_CHARS.length - 1));
    const v: Vehicle = {
      id: `VEH-${pad(i, 3)}`, model, depot, from: Math.max(SPAN_START_MS, inService), to: retired ?? END, odo: startOdo, retired, startOdo,
      row: [`VEH-${pad(i, 3)}`, vin, model.make, model.model, year, model.type, model.fuel, depot.code, isoDate(inService), retired === null ? null : isoDate(retired), 0],
    };
    vehicles.push(v);
  }

  // --- drivers --------------------------------------------------------------------------------
  interface Driver { id: string; depot: string; cls: 'A' | 'B' | 'C'; hired: number; left: number | null; busyUntil: number }
  const drivers: Driver[] = [];
  const driverRows: Cell[][] = [];
  for (let i = 1; i <= 34; i++) {
    const depot = at(DEPOTS, (i - 1) % 3).code;
    const cls: Driver['cls'] = i <= 18 ? 'A' : i <= 30 ? 'B' : 'C';
    const hired = rng.chance(0.7) ? Date.UTC(2012, 0, 1) + rng.int(0, 3800) * DAY : SPAN_START_MS + rng.int(10, 900) * DAY;
    const left = rng.chance(0.15) ? Math.max(hired, SPAN_START_MS) + rng.int(120, 700) * DAY : null;
    const d: Driver = { id: `DRV-${pad(i, 3)}`, depot, cls, hired, left: left !== null && left < END ? left : null, busyUntil: 0 };
    drivers.push(d);
    driverRows.push([d.id, rng.fullName(), cls, depot, isoDate(hired), d.left !== null ? 'terminated' : rng.chance(0.06) ? 'on_leave' : 'active']);
  }

  // --- trips per vehicle (no overlaps), then drivers assigned in time order ------------------
  interface Trip { v: Vehicle; start: number; end: number; dest: string; km: number; seq: number; driver: Driver | null; odoStart: number; fuel: number; id: string }
  const trips: Trip[] = [];
  interface Shop { v: Vehicle; opened: number; closed: number | null; kind: (typeof WORK_TYPES)[number]; odo: number; seq: number }
  const shops: Shop[] = [];
  let seq = 0;
  for (const v of vehicles) {
    let t = v.from + rng.int(0, 3) * DAY;
    let odo = v.odo;
    let nextPm = odo + rng.int(5000, 25000);
    let nextInspection = Date.UTC(new Date(t).getUTCFullYear(), rng.int(0, 11), rng.int(1, 28));
    if (nextInspection < t) nextInspection += 365 * DAY;
    while (t < v.to) {
      const dow = dayOfWeek(t);
      // Mostly weekdays; about one working day in two for this unit.
      if (dow === 0 || dow === 6 || rng.chance(0.45)) {
        t = Math.floor(t / DAY) * DAY + DAY;
        continue;
      }
      const [dest, oneWay] = rng.pick(ROUTES[v.depot.code] ?? []);
      const km = round1(oneWay * 2 * rng.float(1.0, 1.08));
      const driveH = km / rng.float(68, 82);
      const start = Math.floor(t / DAY) * DAY + rng.int(4, 8) * HOUR + rng.int(0, 59) * MINUTE;
      // Drive time plus stops and unloading; long runs include a 10-hour rest break (hours of service).
      const end = start + Math.round((driveH + rng.float(1, 3) + (driveH > 10 ? 10 : 0)) * 60) * MINUTE;
      if (end >= v.to) break;
      const fuel = round1((km / 100) * v.model.lPer100 * rng.float(0.92, 1.12));
      trips.push({ v, start, end, dest, km, seq: seq++, driver: null, odoStart: Math.round(odo), fuel, id: '' });
      odo += km;
      // Maintenance due?
      let shopAt = end + rng.int(10, 40) * HOUR;
      if (odo >= nextPm || shopAt >= nextInspection || rng.chance(0.006)) {
        const kind =
          odo >= nextPm ? at(WORK_TYPES, rng.chance(0.3) ? 0 : 1)
          : shopAt >= nextInspection ? at(WORK_TYPES, 2)
          : rng.pick(WORK_TYPES.slice(3));
        shopAt = Math.floor(shopAt / DAY) * DAY + rng.int(7, 10) * HOUR;
        const hours = kind[0] === 'preventive' ? rng.float(2, 5) : kind[0] === 'inspection' ? rng.float(1.5, 3) : kind[0] === 'recall' ? rng.float(1, 2) : rng.float(3, 30);
        const closed = shopAt + Math.round(hours * 60 + rng.int(60, 24 * 60)) * MINUTE;
        if (shopAt < v.to) shops.push({ v, opened: shopAt, closed: closed < END ? closed : null, kind, odo: Math.round(odo), seq: seq++ });
        if (odo >= nextPm) nextPm = odo + (v.model.type === 'tractor' ? 25000 : 15000) * rng.float(0.9, 1.1);
        if (shopAt >= nextInspection) nextInspection += 365 * DAY;
        t = Math.max(end, closed) + HOUR;
      } else t = end + rng.int(12, 40) * HOUR;
    }
    v.odo = odo;
  }
  trips.sort((a, b) => a.start - b.start || a.seq - b.seq);
  for (const trip of trips) {
    const needed = trip.v.model.type === 'tractor' ? ['A'] : trip.v.model.type === 'box_truck' ? ['A', 'B'] : ['A', 'B', 'C'];
    const available = drivers.filter((d) => d.depot === trip.v.depot.code && needed.includes(d.cls) && d.hired <= trip.start && (d.left === null || d.left > trip.end) && d.busyUntil <= trip.start);
    const pool = available.length > 0 ? available : drivers.filter((d) => needed.includes(d.cls) && d.hired <= trip.start && (d.left === null || d.left > trip.end) && d.busyUntil <= trip.start);
    if (pool.length === 0) continue;
    // Prefer the driver who has been resting longest (simple rotation).
    pool.sort((a, b) => a.busyUntil - b.busyUntil || (a.id < b.id ? -1 : 1));
    const d = rng.chance(0.7) ? at(pool, 0) : rng.pick(pool);
    trip.driver = d;
    d.busyUntil = trip.end + 10 * HOUR; // hours-of-service rest
  }
  const kept = trips.filter((t) => t.driver !== null);

  const tripRows: Cell[][] = [];
  const fuelRows: Cell[][] = [];
  interface FuelDraft { at: number; seq: number; row: (id: string) => Cell[] }
  const fuelDrafts: FuelDraft[] = [];
  const tankOf = new Map<string, number>();
  kept.forEach((t, i) => {
    t.id = `TRP-${pad(i + 1, 6)}`;
    const driver = t.driver;
    if (!driver) return;
    const idle = rng.int(10, 90);
    tripRows.push([
      t.id, t.v.id, driver.id, iso(t.start), iso(t.end), t.v.depot.city, t.dest, t.km, t.odoStart, Math.round(t.odoStart + t.km), t.fuel,
      idle, rng.int(96, 112), rng.weighted<number>([[0, 60], [1, 22], [2, 10], [3, 5], [5, 3]]),
    ]);
    // Refuel when the tank has burned enough.
    const capacity = t.v.model.type === 'tractor' ? 900 : t.v.model.type === 'box_truck' ? 250 : 95;
    const burned = (tankOf.get(t.v.id) ?? rng.float(0, capacity * 0.5)) + t.fuel;
    if (burned >= capacity * 0.55) {
      const liters = round1(Math.min(capacity, burned) * rng.float(0.9, 1));
      const when = t.start + Math.round(((t.end - t.start) / MINUTE) * rng.float(0.3, 0.7)) * MINUTE;
      const price = round2((t.v.model.fuel === 'diesel' ? 1.02 : 0.9) + 0.12 * Math.sin((when - SPAN_START_MS) / (365 * DAY) * 2 * Math.PI) + rng.float(-0.05, 0.08));
      const station = `${rng.pick(['Pilot', "Love's", 'TA', 'Petro', 'Speedway', 'Casey\'s'])} - ${rng.chance(0.5) ? t.dest : t.v.depot.city}`;
      const odo = Math.round(t.odoStart + t.km * rng.float(0.3, 0.7));
      fuelDrafts.push({ at: when, seq: seq++, row: (id) => [id, t.v.id, driver.id, t.id, iso(when), station, t.v.model.fuel, liters, price, round2(liters * price), odo] });
      if (t.v.model.fuel === 'diesel' && rng.chance(0.25)) {
        const defL = round1(rng.float(20, 60));
        const defPrice = round2(rng.float(0.75, 0.95));
        fuelDrafts.push({ at: when + 4 * MINUTE, seq: seq++, row: (id) => [id, t.v.id, driver.id, t.id, iso(when + 4 * MINUTE), station, 'def', defL, defPrice, round2(defL * defPrice), odo] });
      }
      tankOf.set(t.v.id, Math.max(0, burned - liters));
    } else tankOf.set(t.v.id, burned);
  });
  fuelDrafts.sort((a, b) => a.at - b.at || a.seq - b.seq);
  fuelDrafts.forEach((f, i) => fuelRows.push(f.row(`FUEL-${pad(i + 1, 6)}`)));

  shops.sort((a, b) => a.opened - b.opened || a.seq - b.seq);
  const shopRows: Cell[][] = shops.map((s, i) => {
    const hours = round1(s.kind[0] === 'preventive' ? rng.float(2, 5) : s.kind[0] === 'inspection' ? rng.float(1.5, 3) : s.kind[0] === 'recall' ? rng.float(0.5, 2) : rng.float(2, 14));
    const parts = round2(s.kind[0] === 'tires' ? (s.kind[1].includes('(4)') ? 4 : 2) * rng.float(420, 640) : s.kind[0] === 'preventive' ? rng.float(120, 480) : s.kind[0] === 'repair' ? rng.float(150, 2800) : s.kind[0] === 'recall' ? 0 : rng.float(0, 90));
    return [
      `WO-${pad(i + 1, 5)}`, s.v.id, iso(s.opened), s.closed === null ? null : iso(s.closed), s.kind[0], s.kind[1], s.odo, hours, parts,
      s.kind[0] === 'recall' ? 0 : round2(hours * 135), s.closed === null ? 'open' : 'completed',
    ];
  });

  // Odometer as last recorded (trip end or shop intake).
  const lastOdo = new Map<string, number>();
  for (const t of kept) lastOdo.set(t.v.id, Math.max(lastOdo.get(t.v.id) ?? 0, Math.round(t.odoStart + t.km)));
  for (const s of shops) lastOdo.set(s.v.id, Math.max(lastOdo.get(s.v.id) ?? 0, s.odo));
  for (const v of vehicles) v.row[10] = lastOdo.get(v.id) ?? v.startOdo;
  return new Map<string, Cell[][]>([
    ['vehicles', vehicles.map((v) => v.row)],
    ['drivers', driverRows],
    ['trips', tripRows],
    ['fuel_purchases', fuelRows],
    ['maintenance_orders', shopRows],
  ]);
}

export const fleet: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'logistics',
  name: 'Fleet telematics',
  description:
    'A synthetic regional trucking fleet, 2023-2025: vehicles, drivers, telematics trips with odometers and fuel burn, fuel card purchases and maintenance work orders, all mutually consistent (no overlapping trips, monotonic odometers).',
  schema: 'demo_fleet',
  tables: TABLES,
  generate,
};
