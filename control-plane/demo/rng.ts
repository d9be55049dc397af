/**
 * A small seeded PRNG and deterministic helpers for the synthetic demo datasets.
 *
 * - `Rng` is sfc32 seeded from a string through cyrb128, so every dataset seeds its own stream
 *   from its target id and the datasets stay independent of each other.
 * - Nothing here reads the clock or Math.random: the same seed yields the same values on every
 *   machine (all arithmetic is 32-bit integer or IEEE double, and dates are formatted in UTC).
 */

import type { ColumnDef, ColumnType } from './types.js';

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** First instant of the demo data (inclusive): 2023-01-01T00:00:00Z. */
export const SPAN_START_MS = Date.UTC(2023, 0, 1);
/** End of the demo data (exclusive): 2026-01-01T00:00:00Z. Every time value is strictly before it. */
export const SPAN_END_MS = Date.UTC(2026, 0, 1);

const dayStrings = new Map<number, string>();
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));

/** `YYYY-MM-DD` of a day number (days since 1970-01-01), memoized: formatting dominates generation time. */
function dayString(day: number): string {
  let s = dayStrings.get(day);
  if (s === undefined) {
    s = new Date(day * DAY).toISOString().slice(0, 10);
    dayStrings.set(day, s);
  }
  return s;
}

/**
 * ISO 8601 timestamp in UTC, e.g. `2024-02-03T10:15:00.000Z` (for timestamptz columns).
 * Same output as `new Date(ms).toISOString()` for years 0000-9999, several times faster.
 */
export function iso(ms: number): string {
  const t = Math.trunc(ms);
  const day = Math.floor(t / DAY);
  let rem = t - day * DAY;
  const h = Math.floor(rem / HOUR);
  rem -= h * HOUR;
  const m = Math.floor(rem / MINUTE);
  rem -= m * MINUTE;
  const sec = Math.floor(rem / 1000);
  const milli = rem - sec * 1000;
  return `${dayString(day)}T${TWO_DIGITS[h] ?? ''}:${TWO_DIGITS[m] ?? ''}:${TWO_DIGITS[sec] ?? ''}.${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}

/** ISO calendar date in UTC, e.g. `2024-02-03` (for date columns). */
export function isoDate(ms: number): string {
  return dayString(Math.floor(Math.trunc(ms) / DAY));
}

/** Midnight UTC of the day containing `ms`. */
export function startOfDay(ms: number): number {
  return Math.floor(ms / DAY) * DAY;
}

/** Day of the week in UTC, 0 = Sunday .. 6 = Saturday (like Date#getUTCDay). */
export function dayOfWeek(ms: number): number {
  return (((Math.floor(ms / DAY) + 4) % 7) + 7) % 7;
}

/** Round to cents (at most 2 decimals in the shortest decimal representation). */
export function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

/** Round to one decimal. */
export function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

/** Zero-padded decimal, e.g. pad(42, 6) = `000042`. */
export function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

/** A text id such as `pat-000123`. */
export function textId(prefix: string, n: number, width = 6): string {
  return `${prefix}-${pad(n, width)}`;
}

/** Element i of an array, throwing instead of returning undefined. */
export function at<T>(arr: readonly T[], i: number): T {
  const v = arr[i];
  if (v === undefined) throw new RangeError(`index ${i} out of range (length ${arr.length})`);
  return v;
}

/** Clamp an instant into the demo span [SPAN_START_MS, SPAN_END_MS - 1 minute]. */
export function clampToSpan(ms: number): number {
  return Math.min(Math.max(ms, SPAN_START_MS), SPAN_END_MS - MINUTE);
}

/** Column definition shorthand; `nullable` true means the column may hold null. */
export function col(name: string, type: ColumnType, description: string, nullable = false): ColumnDef {
  return nullable ? { name, type, description, notNull: false } : { name, type, description };
}

/** cyrb128: a fast 128-bit string hash used to seed sfc32. */
function cyrb128(str: string): [number, number, number, number] {
  let h1 = 1779033703;
  let h2 = 3144134277;
  let h3 = 1013904242;
  let h4 = 2773480762;
  for (let i = 0; i < str.length; i++) {
    const k = str.charCodeAt(i);
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067);
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233);
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213);
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179);
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067);
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233);
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213);
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179);
  h1 ^= h2 ^ h3 ^ h4;
  h2 ^= h1;
  h3 ^= h1;
  h4 ^= h1;
  return [h1 >>> 0, h2 >>> 0, h3 >>> 0, h4 >>> 0];
}

// ---------------------------------------------------------------------------------------------
// Small built-in word lists for names, places and companies.
// ---------------------------------------------------------------------------------------------

export const FEMALE_NAMES = [
  'Mary', 'Patricia', 'Jennifer', 'Linda', 'Elizabeth', 'Barbara', 'Susan', 'Jessica', 'Sarah',
  'Karen', 'Lisa', 'Nancy', 'Betty', 'Sandra', 'Margaret', 'Ashley', 'Kimberly', 'Emily', 'Donna',
  'Michelle', 'Carol', 'Amanda', 'Melissa', 'Deborah', 'Stephanie', 'Rebecca', 'Sharon', 'Laura',
  'Cynthia', 'Amy', 'Kathleen', 'Angela', 'Anna', 'Brenda', 'Emma', 'Olivia', 'Sofia', 'Maria',
  'Aisha', 'Priya', 'Mei', 'Yuki', 'Fatima', 'Lucia', 'Chloe', 'Grace', 'Hannah', 'Zoe', 'Nora',
  'Camila', 'Ava', 'Isabella', 'Leah', 'Ruth', 'Diana', 'Gloria', 'Rosa', 'Ines', 'Keisha', 'Tanya',
] as const;

export const MALE_NAMES = [
  'James', 'Robert', 'John', 'Michael', 'David', 'William', 'Richard', 'Joseph', 'Thomas',
  'Christopher', 'Charles', 'Daniel', 'Matthew', 'Anthony', 'Mark', 'Donald', 'Steven', 'Andrew',
  'Paul', 'Joshua', 'Kenneth', 'Kevin', 'Brian', 'George', 'Timothy', 'Ronald', 'Jason', 'Edward',
  'Jeffrey', 'Ryan', 'Jacob', 'Gary', 'Nicholas', 'Eric', 'Jonathan', 'Liam', 'Noah', 'Ethan',
  'Mateo', 'Diego', 'Raj', 'Arjun', 'Wei', 'Hiroshi', 'Omar', 'Ahmed', 'Luis', 'Carlos', 'Samuel',
  'Benjamin', 'Lucas', 'Henry', 'Owen', 'Isaac', 'Malik', 'Darnell', 'Tomas', 'Ivan', 'Kofi', 'Jamal',
] as const;

export const LAST_NAMES = [
  'Smith', 'Johnson', 'Williams', 'Brown', 'Jones', 'Garcia', 'Miller', 'Davis', 'Rodriguez',
  'Martinez', 'Hernandez', 'Lopez', 'Gonzalez', 'Wilson', 'Anderson', 'Thomas', 'Taylor', 'Moore',
  'Jackson', 'Martin', 'Lee', 'Perez', 'Thompson', 'White', 'Harris', 'Sanchez', 'Clark', 'Ramirez',
  'Lewis', 'Robinson', 'Walker', 'Young', 'Allen', 'King', 'Wright', 'Scott', 'Torres', 'Nguyen',
  'Hill', 'Flores', 'Green', 'Adams', 'Nelson', 'Baker', 'Hall', 'Rivera', 'Campbell', 'Mitchell',
  'Carter', 'Roberts', 'Patel', 'Shah', 'Kim', 'Chen', 'Wang', 'Tanaka', 'Okafor', 'Mensah',
  'Kowalski', 'Novak', 'Schmidt', 'Muller', 'Rossi', 'Silva', 'Santos', 'Cohen', 'Murphy', 'Kelly',
  "O'Brien", 'Sullivan', 'Brooks', 'Price', 'Bennett', 'Wood', 'Barnes', 'Ross', 'Henderson',
] as const;

export const STREET_NAMES = [
  'Main', 'Oak', 'Pine', 'Maple', 'Cedar', 'Elm', 'Washington', 'Lake', 'Hill', 'Park', 'Walnut',
  'Sunset', 'Lincoln', 'Jackson', 'Highland', 'Madison', 'Franklin', 'Church', 'Spring', 'River',
  'Meadow', 'Forest', 'Willow', 'Chestnut', 'Adams', 'Jefferson', 'Broad', 'Center', 'Mill', 'Union',
] as const;

export const STREET_SUFFIXES = ['St', 'Ave', 'Rd', 'Blvd', 'Ln', 'Dr', 'Ct', 'Way', 'Pl'] as const;

/** US cities with state and a plausible ZIP prefix (3 digits). */
export const US_CITIES: readonly { readonly city: string; readonly state: string; readonly zip3: string }[] = [
  { city: 'Boston', state: 'MA', zip3: '021' },
  { city: 'Worcester', state: 'MA', zip3: '016' },
  { city: 'Providence', state: 'RI', zip3: '029' },
  { city: 'Hartford', state: 'CT', zip3: '061' },
  { city: 'New York', state: 'NY', zip3: '100' },
  { city: 'Brooklyn', state: 'NY', zip3: '112' },
  { city: 'Buffalo', state: 'NY', zip3: '142' },
  { city: 'Newark', state: 'NJ', zip3: '071' },
  { city: 'Philadelphia', state: 'PA', zip3: '191' },
  { city: 'Pittsburgh', state: 'PA', zip3: '152' },
  { city: 'Baltimore', state: 'MD', zip3: '212' },
  { city: 'Richmond', state: 'VA', zip3: '232' },
  { city: 'Charlotte', state: 'NC', zip3: '282' },
  { city: 'Raleigh', state: 'NC', zip3: '276' },
  { city: 'Atlanta', state: 'GA', zip3: '303' },
  { city: 'Miami', state: 'FL', zip3: '331' },
  { city: 'Orlando', state: 'FL', zip3: '328' },
  { city: 'Tampa', state: 'FL', zip3: '336' },
  { city: 'Nashville', state: 'TN', zip3: '372' },
  { city: 'Cleveland', state: 'OH', zip3: '441' },
  { city: 'Columbus', state: 'OH', zip3: '432' },
  { city: 'Detroit', state: 'MI', zip3: '482' },
  { city: 'Chicago', state: 'IL', zip3: '606' },
  { city: 'Milwaukee', state: 'WI', zip3: '532' },
  { city: 'Minneapolis', state: 'MN', zip3: '554' },
  { city: 'St. Louis', state: 'MO', zip3: '631' },
  { city: 'Kansas City', state: 'MO', zip3: '641' },
  { city: 'Dallas', state: 'TX', zip3: '752' },
  { city: 'Houston', state: 'TX', zip3: '770' },
  { city: 'Austin', state: 'TX', zip3: '787' },
  { city: 'San Antonio', state: 'TX', zip3: '782' },
  { city: 'Denver', state: 'CO', zip3: '802' },
  { city: 'Phoenix', state: 'AZ', zip3: '850' },
  { city: 'Salt Lake City', state: 'UT', zip3: '841' },
  { city: 'Las Vegas', state: 'NV', zip3: '891' },
  { city: 'Los Angeles', state: 'CA', zip3: '900' },
  { city: 'San Diego', state: 'CA', zip3: '921' },
  { city: 'San Francisco', state: 'CA', zip3: '941' },
  { city: 'Sacramento', state: 'CA', zip3: '958' },
  { city: 'Portland', state: 'OR', zip3: '972' },
  { city: 'Seattle', state: 'WA', zip3: '981' },
];

export const COUNTRIES = [
  'US', 'US', 'US', 'US', 'US', 'CA', 'GB', 'DE', 'FR', 'NL', 'AU', 'IE', 'ES', 'SE', 'JP', 'BR', 'MX', 'IN',
] as const;

const COMPANY_PREFIXES = [
  'Acme', 'Northwind', 'Blue Harbor', 'Summit', 'Redwood', 'Ironclad', 'Brightline', 'Cobalt',
  'Evergreen', 'Granite', 'Harborview', 'Keystone', 'Lumen', 'Meridian', 'Nimbus', 'Orchard',
  'Pioneer', 'Quantum', 'Riverbend', 'Silverline', 'Tidewater', 'Vertex', 'Willow Creek', 'Zenith',
  'Atlas', 'Beacon', 'Cascade', 'Driftwood', 'Foxglove', 'Golden Gate', 'Helix', 'Juniper', 'Kestrel',
  'Lighthouse', 'Mosaic', 'Northstar', 'Oakridge', 'Prairie', 'Sterling', 'Trident', 'Upland', 'Vantage',
] as const;

const COMPANY_SUFFIXES = [
  'Labs', 'Systems', 'Logistics', 'Health', 'Foods', 'Analytics', 'Manufacturing', 'Partners',
  'Software', 'Retail', 'Energy', 'Robotics', 'Financial', 'Media', 'Outfitters', 'Networks',
  'Biotech', 'Builders', 'Supply Co', 'Studios', 'Dynamics', 'Capital', 'Apparel', 'Motors',
] as const;

const LEGAL_FORMS = ['Inc.', 'LLC', 'Corp.', 'Ltd.', 'Group', 'Co.'] as const;

/** Hour-of-day weights for business activity. */
const BUSINESS_HOURS: readonly (readonly [number, number])[] = [
  [7, 2], [8, 6], [9, 9], [10, 10], [11, 10], [12, 7], [13, 9], [14, 10], [15, 9], [16, 8],
  [17, 6], [18, 3], [19, 2], [20, 1], [21, 1], [22, 0.5], [6, 1], [23, 0.3], [0, 0.2],
];

// ---------------------------------------------------------------------------------------------

/** Seeded pseudo-random generator (sfc32). */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: string) {
    const [a, b, c, d] = cyrb128(seed);
    this.a = a;
    this.b = b;
    this.c = c;
    this.d = d;
    // Warm up so similar seeds diverge.
    for (let i = 0; i < 15; i++) this.nextUint32();
  }

  /** A fresh, independent generator derived from this one's seed and a label. */
  fork(label: string): Rng {
    return new Rng(`${this.a}:${this.b}:${this.c}:${this.d}:${label}`);
  }

  nextUint32(): number {
    this.a >>>= 0;
    this.b >>>= 0;
    this.c >>>= 0;
    this.d >>>= 0;
    let t = (this.a + this.b) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.d = (this.d + 1) | 0;
    t = (t + this.d) | 0;
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform integer in [min, max] (both inclusive). */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Uniform float in [min, max). */
  float(min = 0, max = 1): number {
    return min + this.next() * (max - min);
  }

  /** Uniform amount in [min, max) rounded to cents. */
  money(min: number, max: number): number {
    return round2(this.float(min, max));
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element, uniformly. */
  pick<T>(arr: readonly T[]): T {
    if (arr.length === 0) throw new RangeError('pick from an empty array');
    return at(arr, Math.floor(this.next() * arr.length));
  }

  /** One value, with probability proportional to its weight. */
  weighted<T>(choices: readonly (readonly [T, number])[]): T {
    const n = choices.length;
    if (n === 0) throw new RangeError('weighted pick from an empty list');
    let total = 0;
    for (let i = 0; i < n; i++) total += (choices[i] as readonly [T, number])[1];
    let r = this.next() * total;
    for (let i = 0; i < n; i++) {
      const c = choices[i] as readonly [T, number];
      r -= c[1];
      if (r < 0) return c[0];
    }
    return (choices[n - 1] as readonly [T, number])[0];
  }

  /** Standard normal variate (Box–Muller). */
  gaussian(): number {
    const u = 1 - this.next(); // (0, 1]
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Normal variate with the given mean and standard deviation, clamped to [min, max]. */
  normal(mean: number, sd: number, min = -Infinity, max = Infinity): number {
    return Math.min(max, Math.max(min, mean + sd * this.gaussian()));
  }

  /** Log-normal variate with the given median and shape sigma, clamped to [min, max]. */
  logNormal(median: number, sigma: number, min = 0, max = Infinity): number {
    return Math.min(max, Math.max(min, median * Math.exp(sigma * this.gaussian())));
  }

  /** Poisson-ish small count (Knuth), for lambda up to ~30. */
  poisson(lambda: number): number {
    const l = Math.exp(-lambda);
    let k = 0;
    let p = 1;
    do {
      k++;
      p *= this.next();
    } while (p > l);
    return k - 1;
  }

  /** In-place Fisher–Yates shuffle; returns the array. */
  shuffle<T>(arr: T[]): T[] {
    for (let i = arr.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      const tmp = arr[i] as T;
      arr[i] = arr[j] as T;
      arr[j] = tmp;
    }
    return arr;
  }

  /** k distinct elements (k clamped to the length), in random order. */
  sample<T>(arr: readonly T[], k: number): T[] {
    return this.shuffle([...arr]).slice(0, Math.max(0, Math.min(k, arr.length)));
  }

  // --- time --------------------------------------------------------------------------------

  /** Instant (ms) uniformly in [fromMs, toMs), truncated to the minute. */
  timeMs(fromMs: number, toMs: number): number {
    const t = fromMs + Math.floor(this.next() * Math.max(0, toMs - fromMs));
    return Math.max(fromMs, Math.floor(t / MINUTE) * MINUTE);
  }

  /** ISO timestamp (UTC) uniformly in [fromMs, toMs), to the minute. */
  timestamp(fromMs: number, toMs: number): string {
    return iso(this.timeMs(fromMs, toMs));
  }

  /** ISO date (UTC) uniformly in [fromMs, toMs). */
  date(fromMs: number, toMs: number): string {
    return isoDate(this.timeMs(fromMs, toMs));
  }

  /**
   * Instant in [fromMs, toMs) with density growing linearly over the interval
   * (growth 0 = uniform, 1 = the end is twice as busy as the start), truncated to the minute.
   */
  trendingTimeMs(fromMs: number, toMs: number, growth = 0.8): number {
    const u = this.next();
    const f = growth <= 0 ? u : (-1 + Math.sqrt(1 + 2 * growth * u * (1 + growth / 2))) / growth;
    const t = fromMs + Math.floor(Math.min(f, 0.999999) * (toMs - fromMs));
    return Math.floor(t / MINUTE) * MINUTE;
  }

  /**
   * An instant on the day of `dayMs` at a plausible local-business hour (UTC stands in for
   * local time here): mostly 08:00–18:00 with tails into the evening.
   */
  businessTimeOnDay(dayMs: number): number {
    const hour = this.weighted<number>(BUSINESS_HOURS);
    return startOfDay(dayMs) + hour * HOUR + this.int(0, 59) * MINUTE;
  }

  /** Like trendingTimeMs, but moved to a business hour of the chosen day (weekdays favoured). */
  businessTimeMs(fromMs: number, toMs: number, growth = 0.8, weekendFactor = 0.35): number {
    for (let i = 0; i < 8; i++) {
      const t = this.trendingTimeMs(fromMs, toMs, growth);
      const dow = dayOfWeek(t);
      if ((dow === 0 || dow === 6) && !this.chance(weekendFactor)) continue;
      const b = this.businessTimeOnDay(t);
      if (b >= fromMs && b < toMs) return b;
    }
    return this.timeMs(fromMs, toMs);
  }

  // --- identities --------------------------------------------------------------------------

  /** Decimal digits as a string of the given length. */
  digits(n: number): string {
    let s = '';
    while (s.length < n) s += String(Math.floor(this.next() * 1e9)).padStart(9, '0');
    return s.slice(0, n);
  }

  /** Lower-case hex of the given length. */
  hex(n: number): string {
    let s = '';
    while (s.length < n) s += this.nextUint32().toString(16).padStart(8, '0');
    return s.slice(0, n);
  }

  /** Alphanumeric (A-Z0-9) string of the given length. */
  alnum(n: number): string {
    const alphabet = 'ABCDEFGHJKLMNPQRSTUVWXYZ0123456789';
    let s = '';
    for (let i = 0; i < n; i++) s += alphabet.charAt(this.int(0, alphabet.length - 1));
    return s;
  }

  /** RFC 4122-shaped version-4 UUID (deterministic, from this stream). */
  uuid(): string {
    const h = this.hex(32);
    const variant = '89ab'.charAt(this.int(0, 3));
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
  }

  firstName(gender?: 'male' | 'female' | string): string {
    if (gender === 'male') return this.pick(MALE_NAMES);
    if (gender === 'female') return this.pick(FEMALE_NAMES);
    return this.chance(0.5) ? this.pick(MALE_NAMES) : this.pick(FEMALE_NAMES);
  }

  lastName(): string {
    return this.pick(LAST_NAMES);
  }

  fullName(gender?: string): string {
    return `${this.firstName(gender)} ${this.lastName()}`;
  }

  streetAddress(): string {
    return `${this.int(1, 9899)} ${this.pick(STREET_NAMES)} ${this.pick(STREET_SUFFIXES)}`;
  }

  /** A US city with its state and a 5-digit ZIP code. */
  usPlace(): { city: string; state: string; zip: string } {
    const p = this.pick(US_CITIES);
    return { city: p.city, state: p.state, zip: p.zip3 + this.digits(2) };
  }

  /** NANP-shaped phone number using the fictional 555-01xx range. */
  phone(): string {
    return `+1-${this.int(201, 989)}-555-01${this.digits(2)}`;
  }

  /** An e-mail address on a reserved example domain. */
  email(first: string, last: string, domain?: string): string {
    const local = `${first}.${last}`.toLowerCase().replace(/[^a-z.]/g, '');
    const d = domain ?? this.pick(['example.com', 'example.org', 'example.net', 'mail.example.com']);
    return `${local}${this.chance(0.4) ? String(this.int(1, 99)) : ''}@${d}`;
  }

  companyName(): string {
    return `${this.pick(COMPANY_PREFIXES)} ${this.pick(COMPANY_SUFFIXES)}${this.chance(0.5) ? ` ${this.pick(LEGAL_FORMS)}` : ''}`;
  }

  /** A domain name derived from a company name, under `.example`. */
  static domainOf(company: string): string {
    const base = company
      .toLowerCase()
      .replace(/\b(inc|llc|corp|ltd|group|co)\.?$/g, '')
      .replace(/[^a-z0-9]+/g, '');
    return `${base}.example`;
  }
}

/** Picks indices with probability proportional to fixed weights (binary search over prefix sums). */
export class WeightedIndex {
  private readonly cum: Float64Array;
  private readonly total: number;

  constructor(weights: readonly number[]) {
    if (weights.length === 0) throw new RangeError('WeightedIndex needs at least one weight');
    this.cum = new Float64Array(weights.length);
    let s = 0;
    for (let i = 0; i < weights.length; i++) {
      s += Math.max(0, weights[i] ?? 0);
      this.cum[i] = s;
    }
    this.total = s;
  }

  pick(rng: Rng): number {
    const r = rng.next() * this.total;
    let lo = 0;
    let hi = this.cum.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.cum[mid] ?? 0) > r) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}

/** Luhn check digit for a string of decimal digits (as used by NPIs and card numbers). */
export function luhnCheckDigit(digits: string): number {
  let sum = 0;
  let double = true; // the digit next to the check digit is doubled
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return (10 - (sum % 10)) % 10;
}

/** A valid-looking 10-digit US National Provider Identifier (Luhn over the `80840` prefix). */
export function npi(rng: Rng, first: '1' | '2' = '1'): string {
  const body = first + rng.digits(8);
  return body + String(luhnCheckDigit('80840' + body));
}
