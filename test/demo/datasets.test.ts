import { createHash } from 'node:crypto';
import t from 'tap';
import { DATASETS, PACKS } from '../../control-plane/demo/datasets/index.js';
import type { Cell, ColumnType, DatasetDef, TableDef } from '../../control-plane/demo/types.js';

const SPAN_START = Date.UTC(2023, 0, 1);
const SPAN_END = Date.UTC(2026, 0, 1); // exclusive

/** Tables expected to hold the bulk of each dataset: each must have at least 1,000 rows. */
const MAIN_TABLES: Record<string, readonly string[]> = {
  'demo-healthcare': ['patients', 'encounters', 'claims', 'prior_authorizations', 'coverage_eligibility', 'adt_events'],
  'demo-pharmacy': ['prescriptions', 'dispenses'],
  'demo-ecommerce': ['customers', 'orders', 'order_items', 'product_reviews'],
  'demo-subscriptions': ['accounts', 'subscriptions', 'invoices', 'subscription_events'],
  'demo-banking': ['transactions', 'statements'],
  'demo-payments': ['charges', 'payouts'],
  'demo-logistics': ['shipments', 'tracking_events'],
  'demo-fleet': ['trips', 'fuel_purchases'],
  'demo-incidents': ['deployments', 'incidents', 'alerts', 'incident_updates'],
  'demo-web-analytics': ['visitors', 'sessions', 'pageviews', 'events'],
  'demo-crm': ['contacts', 'activities'],
  'demo-support': ['customers', 'tickets', 'ticket_comments', 'satisfaction_ratings'],
};

/** Foreign keys per dataset: `table.column` -> referenced table (its primary key). */
const FOREIGN_KEYS: Record<string, Record<string, string>> = {
  'demo-healthcare': {
    'encounters.patient_id': 'patients',
    'claims.patient_id': 'patients',
    'claims.encounter_id': 'encounters',
    'claims.prior_authorization_id': 'prior_authorizations',
    'prior_authorizations.patient_id': 'patients',
    'prior_authorizations.encounter_id': 'encounters',
    'coverage_eligibility.patient_id': 'patients',
    'coverage_eligibility.encounter_id': 'encounters',
    'adt_events.patient_id': 'patients',
    'adt_events.encounter_id': 'encounters',
  },
  'demo-pharmacy': {
    'prescriptions.patient_id': 'patients',
    'prescriptions.medication_id': 'medications',
    'dispenses.prescription_id': 'prescriptions',
    'dispenses.pharmacy_id': 'pharmacies',
  },
  'demo-ecommerce': {
    'orders.customer_id': 'customers',
    'order_items.order_id': 'orders',
    'order_items.product_id': 'products',
    'product_reviews.product_id': 'products',
    'product_reviews.customer_id': 'customers',
    'product_reviews.order_id': 'orders',
  },
  'demo-subscriptions': {
    'subscriptions.account_id': 'accounts',
    'subscriptions.plan_id': 'plans',
    'invoices.account_id': 'accounts',
    'invoices.subscription_id': 'subscriptions',
    'invoices.plan_id': 'plans',
    'subscription_events.subscription_id': 'subscriptions',
    'subscription_events.account_id': 'accounts',
    'subscription_events.from_plan_id': 'plans',
    'subscription_events.to_plan_id': 'plans',
  },
  'demo-banking': {
    'accounts.customer_id': 'customers',
    'transactions.account_id': 'accounts',
    'statements.account_id': 'accounts',
    'fraud_alerts.transaction_id': 'transactions',
    'fraud_alerts.account_id': 'accounts',
  },
  'demo-payments': {
    'charges.merchant_id': 'merchants',
    'refunds.charge_id': 'charges',
    'refunds.merchant_id': 'merchants',
    'disputes.charge_id': 'charges',
    'disputes.merchant_id': 'merchants',
    'payouts.merchant_id': 'merchants',
  },
  'demo-logistics': {
    'shipments.warehouse_id': 'warehouses',
    'shipments.carrier_id': 'carriers',
    'tracking_events.shipment_id': 'shipments',
  },
  'demo-fleet': {
    'trips.vehicle_id': 'vehicles',
    'trips.driver_id': 'drivers',
    'fuel_purchases.vehicle_id': 'vehicles',
    'fuel_purchases.driver_id': 'drivers',
    'fuel_purchases.trip_id': 'trips',
    'maintenance_orders.vehicle_id': 'vehicles',
  },
  'demo-incidents': {
    'deployments.service_id': 'services',
    'incidents.service_id': 'services',
    'incidents.caused_by_deployment_id': 'deployments',
    'alerts.service_id': 'services',
    'alerts.incident_id': 'incidents',
    'incident_updates.incident_id': 'incidents',
  },
  'demo-web-analytics': {
    'sessions.visitor_id': 'visitors',
    'pageviews.session_id': 'sessions',
    'pageviews.visitor_id': 'visitors',
    'events.session_id': 'sessions',
    'events.visitor_id': 'visitors',
  },
  'demo-crm': {
    'companies.owner_id': 'users',
    'contacts.company_id': 'companies',
    'deals.company_id': 'companies',
    'deals.primary_contact_id': 'contacts',
    'deals.owner_id': 'users',
    'activities.contact_id': 'contacts',
    'activities.company_id': 'companies',
    'activities.deal_id': 'deals',
    'activities.owner_id': 'users',
  },
  'demo-support': {
    'tickets.customer_id': 'customers',
    'tickets.assignee_id': 'agents',
    'ticket_comments.ticket_id': 'tickets',
    'ticket_comments.agent_id': 'agents',
    'satisfaction_ratings.ticket_id': 'tickets',
    'satisfaction_ratings.agent_id': 'agents',
  },
};

type Data = Map<string, Cell[][]>;

function toJson(data: Data): string {
  return JSON.stringify(Object.fromEntries(data));
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

function table(ds: DatasetDef, name: string): TableDef {
  const tbl = ds.tables.find((x) => x.name === name);
  if (!tbl) throw new Error(`${ds.targetId} has no table ${name}`);
  return tbl;
}

function colIndex(tbl: TableDef, name: string): number {
  const i = tbl.columns.findIndex((c) => c.name === name);
  if (i < 0) throw new Error(`${tbl.name} has no column ${name}`);
  return i;
}

function rowsOf(data: Data, name: string): Cell[][] {
  const rows = data.get(name);
  if (!rows) throw new Error(`no rows for ${name}`);
  return rows;
}

/** Values of one column. */
function column(ds: DatasetDef, data: Data, tableName: string, col: string): Cell[] {
  const i = colIndex(table(ds, tableName), col);
  return rowsOf(data, tableName).map((r) => r[i] ?? null);
}

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
const TS_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const NUMERIC_RE = /^-?\d+(\.\d{1,2})?$/;

function isPlainJson(v: unknown): boolean {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v);
  if (Array.isArray(v)) return v.every(isPlainJson);
  if (typeof v === 'object') {
    const proto = Object.getPrototypeOf(v) as unknown;
    return (proto === Object.prototype || proto === null) && Object.values(v as Record<string, unknown>).every(isPlainJson);
  }
  return false;
}

/** Why a cell does not fit its column type, or null when it does. */
function cellProblem(v: Cell, type: ColumnType): string | null {
  switch (type) {
    case 'text':
      return typeof v === 'string' ? null : 'not a string';
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v) && v >= -2147483648 && v <= 2147483647 ? null : 'not an int4';
    case 'bigint':
      return typeof v === 'number' && Number.isSafeInteger(v) ? null : 'not a safe integer';
    case 'numeric':
      return typeof v === 'number' && Number.isFinite(v) && NUMERIC_RE.test(String(v)) ? null : 'not a finite number with at most 2 decimals';
    case 'boolean':
      return typeof v === 'boolean' ? null : 'not a boolean';
    case 'date':
      return typeof v === 'string' && DATE_RE.test(v) && new Date(`${v}T00:00:00.000Z`).toISOString().slice(0, 10) === v ? null : 'not an ISO date';
    case 'timestamptz':
      return typeof v === 'string' && TS_RE.test(v) && new Date(v).toISOString() === v ? null : 'not an ISO UTC timestamp';
    case 'jsonb':
      return typeof v === 'object' && v !== null && isPlainJson(v) ? null : 'not a plain JSON object/array';
  }
}

function timeOf(v: string, type: ColumnType): number {
  return type === 'date' ? Date.parse(`${v}T00:00:00.000Z`) : Date.parse(v);
}

// Generate everything once (timed), and a second time for the determinism checks.
const t0 = performance.now();
const FIRST = new Map<string, Data>(DATASETS.map((d) => [d.targetId, d.generate()]));
const generationMs = performance.now() - t0;

function dataOf(ds: DatasetDef): Data {
  const d = FIRST.get(ds.targetId);
  if (!d) throw new Error(`not generated: ${ds.targetId}`);
  return d;
}

t.test('catalogue: 12 demo datasets in 6 packs of 2', async (t) => {
  t.equal(DATASETS.length, 12, '12 datasets');
  t.equal(PACKS.length, 6, '6 packs');
  const ids = DATASETS.map((d) => d.targetId);
  t.equal(new Set(ids).size, 12, 'target ids are unique');
  for (const id of ids) t.match(id, /^demo-[a-z0-9-]+$/, `${id} is a demo target id`);
  const schemas = DATASETS.map((d) => d.schema);
  t.equal(new Set(schemas).size, 12, 'schemas are unique');
  for (const s of schemas) t.match(s, /^demo_[a-z0-9_]+$/, `${s} is demo_<snake>`);
  t.equal(new Set(PACKS.map((p) => p.id)).size, 6, 'pack ids are unique');
  for (const p of PACKS) {
    t.equal(p.targets.length, 2, `pack ${p.id} has 2 targets`);
    t.ok(p.name.length > 0 && p.description.length > 0, `pack ${p.id} has a name and description`);
    for (const target of p.targets) {
      const ds = DATASETS.find((d) => d.targetId === target);
      t.ok(ds, `pack ${p.id} target ${target} exists`);
      t.equal(ds?.pack, p.id, `${target} names its pack ${p.id}`);
    }
  }
  for (const d of DATASETS) {
    const packs = PACKS.filter((p) => p.targets.includes(d.targetId));
    t.equal(packs.length, 1, `${d.targetId} is in exactly one pack`);
    t.ok(d.name.length > 0 && d.description.length > 0, `${d.targetId} has a name and description`);
  }
  t.same(PACKS.map((p) => p.id), ['healthcare', 'commerce', 'finance', 'logistics', 'engineering', 'go-to-market'], 'stable pack order');
});

t.test('healthcare contract', async (t) => {
  const pack = PACKS.find((p) => p.id === 'healthcare');
  t.ok(pack?.targets.includes('demo-healthcare'), 'pack healthcare contains demo-healthcare');
  const hc = DATASETS.find((d) => d.targetId === 'demo-healthcare');
  if (!hc) return t.fail('demo-healthcare missing');
  t.equal(hc.pack, 'healthcare');
  t.equal(hc.schema, 'demo_healthcare');
  t.same(hc.tables.map((x) => x.name), ['patients', 'encounters', 'claims', 'prior_authorizations', 'coverage_eligibility', 'adt_events']);
  t.equal(table(hc, 'patients').timeColumn, undefined, 'patients has no time column');
  for (const tbl of hc.tables) {
    if (tbl.name === 'patients') continue;
    t.ok(tbl.timeColumn, `${tbl.name} has a time column`);
  }
  const enc = table(hc, 'encounters');
  t.equal(enc.timeColumn, 'period_start');
  t.equal(enc.columns[colIndex(enc, 'period_start')]?.type, 'timestamptz');
});

t.test('table and column definitions', async (t) => {
  for (const d of DATASETS) {
    t.ok(d.tables.length >= 3 && d.tables.length <= 6, `${d.targetId} has 3-6 tables`);
    const names = d.tables.map((x) => x.name);
    t.equal(new Set(names).size, names.length, `${d.targetId}: unique table names`);
    for (const tbl of d.tables) {
      const where = `${d.targetId}.${tbl.name}`;
      t.match(tbl.name, /^[a-z_][a-z0-9_]*$/, `${where}: lower-case identifier`);
      t.ok(tbl.description.trim().length > 0, `${where}: has a description`);
      const cols = tbl.columns.map((c) => c.name);
      t.equal(new Set(cols).size, cols.length, `${where}: unique column names`);
      t.equal(tbl.primaryKey, cols[0], `${where}: primary key is the first column`);
      t.not(tbl.columns[0]?.notNull, false, `${where}: primary key is NOT NULL`);
      const undescribed = tbl.columns.filter((c) => c.description.trim().length === 0 || !/^[a-z_][a-z0-9_]*$/.test(c.name)).map((c) => c.name);
      t.same(undescribed, [], `${where}: every column is a described lower-case identifier`);
      if (tbl.timeColumn !== undefined) {
        const tc = tbl.columns.find((c) => c.name === tbl.timeColumn);
        t.ok(tc && (tc.type === 'timestamptz' || tc.type === 'date'), `${where}: time column ${tbl.timeColumn} is a date/timestamptz column`);
        t.not(tc?.notNull, false, `${where}: time column is NOT NULL`);
      }
    }
  }
});

t.test('rows match their columns: arity, types, NOT NULL, unique primary keys', async (t) => {
  for (const d of DATASETS) {
    const data = dataOf(d);
    t.same([...data.keys()].sort(), d.tables.map((x) => x.name).sort(), `${d.targetId}: rows for exactly its tables`);
    for (const tbl of d.tables) {
      const rows = data.get(tbl.name) ?? [];
      const problems: string[] = [];
      const keys = new Set<Cell>();
      let dupKeys = 0;
      for (let r = 0; r < rows.length && problems.length < 10; r++) {
        const row = rows[r] ?? [];
        if (row.length !== tbl.columns.length) {
          problems.push(`row ${r}: ${row.length} cells for ${tbl.columns.length} columns`);
          continue;
        }
        tbl.columns.forEach((c, i) => {
          const v = row[i];
          if (v === undefined) problems.push(`row ${r} ${c.name}: undefined`);
          else if (v === null) {
            if (c.notNull !== false) problems.push(`row ${r} ${c.name}: null in a NOT NULL column`);
          } else {
            const p = cellProblem(v, c.type);
            if (p) problems.push(`row ${r} ${c.name} (${c.type}): ${JSON.stringify(v)} ${p}`);
          }
        });
        const key = row[0] ?? null;
        if (keys.has(key)) dupKeys++;
        keys.add(key);
      }
      t.same(problems, [], `${d.targetId}.${tbl.name}: cells fit the columns`);
      t.equal(dupKeys, 0, `${d.targetId}.${tbl.name}: primary keys are unique`);
      t.ok(rows.length > 0, `${d.targetId}.${tbl.name}: has rows`);
    }
  }
});

t.test('time values lie in 2023-01-01 .. 2025-12-31', async (t) => {
  for (const d of DATASETS) {
    const data = dataOf(d);
    for (const tbl of d.tables) {
      const rows = data.get(tbl.name) ?? [];
      // The time column, and every timestamptz column (event times), must be in the span.
      // Other date columns (birth dates, hire dates, opening dates) may precede it.
      tbl.columns.forEach((c, i) => {
        if (c.name !== tbl.timeColumn && c.type !== 'timestamptz') return;
        let outside = 0;
        let example: Cell = null;
        for (const row of rows) {
          const v = row[i];
          if (typeof v !== 'string') continue;
          const ms = timeOf(v, c.type);
          if (!(ms >= SPAN_START && ms < SPAN_END)) {
            outside++;
            example ??= v;
          }
        }
        t.equal(outside, 0, `${d.targetId}.${tbl.name}.${c.name}: in span${outside ? ` (e.g. ${String(example)})` : ''}`);
      });
    }
  }
});

t.test('every quarter of 2023-2025 has data in every time-column table', async (t) => {
  for (const d of DATASETS) {
    const data = dataOf(d);
    for (const tbl of d.tables) {
      if (!tbl.timeColumn) continue;
      const i = colIndex(tbl, tbl.timeColumn);
      const quarters = new Set<string>();
      for (const row of data.get(tbl.name) ?? []) {
        const v = row[i];
        if (typeof v === 'string') quarters.add(`${v.slice(0, 4)}-Q${Math.floor((Number(v.slice(5, 7)) - 1) / 3) + 1}`);
      }
      t.equal(quarters.size, 12, `${d.targetId}.${tbl.name}: rows in all 12 quarters`);
    }
  }
});

t.test('foreign keys reference existing rows', async (t) => {
  for (const d of DATASETS) {
    const data = dataOf(d);
    const fks = FOREIGN_KEYS[d.targetId] ?? {};
    t.ok(Object.keys(fks).length > 0, `${d.targetId}: foreign keys listed`);
    for (const [ref, target] of Object.entries(fks)) {
      const [tableName = '', col = ''] = ref.split('.');
      const keys = new Set(column(d, data, target, table(d, target).primaryKey));
      const missing = column(d, data, tableName, col).filter((v) => v !== null && !keys.has(v));
      t.same(missing.slice(0, 5), [], `${d.targetId}: ${ref} -> ${target}`);
    }
  }
});

t.test('healthcare data is FHIR-shaped and internally consistent', async (t) => {
  const hc = DATASETS.find((d) => d.targetId === 'demo-healthcare');
  if (!hc) return t.fail('demo-healthcare missing');
  const data = dataOf(hc);
  const inSet = (tableName: string, col: string, allowed: readonly string[]): void => {
    const bad = [...new Set(column(hc, data, tableName, col))].filter((v) => v !== null && !allowed.includes(String(v)));
    t.same(bad, [], `${tableName}.${col} in ${allowed.join('|')}`);
  };
  inSet('patients', 'gender', ['male', 'female', 'other', 'unknown']);
  inSet('encounters', 'class_code', ['AMB', 'EMER', 'IMP', 'OBSENC', 'HH', 'VR']);
  inSet('encounters', 'status', ['planned', 'arrived', 'triaged', 'in-progress', 'onleave', 'finished', 'cancelled', 'entered-in-error', 'unknown']);
  inSet('claims', 'status', ['active', 'cancelled', 'draft', 'entered-in-error']);
  inSet('claims', 'outcome', ['queued', 'complete', 'error', 'partial']);
  inSet('claims', 'claim_type', ['institutional', 'oral', 'pharmacy', 'professional', 'vision']);
  inSet('prior_authorizations', 'status', ['approved', 'denied', 'pending', 'cancelled']);
  inSet('prior_authorizations', 'service_code_system', ['CPT', 'HCPCS']);
  inSet('coverage_eligibility', 'purpose', ['benefits', 'validation', 'discovery', 'auth-requirements']);
  inSet('coverage_eligibility', 'outcome', ['queued', 'complete', 'error', 'partial']);
  inSet('adt_events', 'trigger_event', ['A01', 'A02', 'A03', 'A04', 'A08']);

  // Every value of the enumerations actually occurs.
  for (const [tbl, col, expected] of [
    ['encounters', 'class_code', ['AMB', 'EMER', 'IMP', 'OBSENC', 'HH', 'VR']],
    ['claims', 'status', ['active', 'cancelled', 'draft', 'entered-in-error']],
    ['claims', 'outcome', ['queued', 'complete', 'error', 'partial']],
    ['prior_authorizations', 'status', ['approved', 'denied', 'pending', 'cancelled']],
    ['coverage_eligibility', 'purpose', ['benefits', 'validation', 'discovery', 'auth-requirements']],
    ['adt_events', 'trigger_event', ['A01', 'A02', 'A03', 'A04', 'A08']],
  ] as const) {
    const present = new Set(column(hc, data, tbl, col));
    t.same(expected.filter((v) => !present.has(v)), [], `${tbl}.${col}: every value occurs`);
  }

  const ICD10 = /^[A-Z][0-9][0-9A-Z](\.[0-9A-Z]{1,4})?$/;
  const badIcd = [...column(hc, data, 'encounters', 'reason_code'), ...column(hc, data, 'claims', 'diagnosis_code'), ...column(hc, data, 'prior_authorizations', 'diagnosis_code')].filter((v) => typeof v !== 'string' || !ICD10.test(v));
  t.same([...new Set(badIcd)], [], 'ICD-10-CM code shape');
  const pa = table(hc, 'prior_authorizations');
  const badService = rowsOf(data, 'prior_authorizations').filter((r) => {
    const code = String(r[colIndex(pa, 'service_code')]);
    return r[colIndex(pa, 'service_code_system')] === 'CPT' ? !/^\d{5}$/.test(code) : !/^[A-Z]\d{4}$/.test(code);
  });
  t.equal(badService.length, 0, 'CPT (5 digits) / HCPCS (letter + 4 digits) service codes');
  t.ok(column(hc, data, 'patients', 'mrn').every((v) => typeof v === 'string' && /^MRN\d{8}$/.test(v)), 'MRN identifiers');

  // Relationships agree with each other.
  const encT = table(hc, 'encounters');
  const enc = new Map(rowsOf(data, 'encounters').map((r) => [r[0], r]));
  const patients = new Map(rowsOf(data, 'patients').map((r) => [r[0], r]));
  const birth = colIndex(table(hc, 'patients'), 'birth_date');
  const iEncPatient = colIndex(encT, 'patient_id');
  const iStart = colIndex(encT, 'period_start');
  const iEnd = colIndex(encT, 'period_end');
  const iStatus = colIndex(encT, 'status');
  const encProblems: string[] = [];
  for (const r of enc.values()) {
    const p = patients.get(r[iEncPatient] ?? null);
    if (p && String(p[birth]) >= String(r[iStart]).slice(0, 10)) encProblems.push(`${String(r[0])} before birth`);
    if (r[iEnd] !== null && String(r[iEnd]) < String(r[iStart])) encProblems.push(`${String(r[0])} ends before it starts`);
    if (r[iStatus] === 'finished' && r[iEnd] === null) encProblems.push(`${String(r[0])} finished without an end`);
  }
  t.same(encProblems.slice(0, 5), [], 'encounters start after birth, end after start, finished ones have an end');

  const samePatient = (tableName: string): string[] => {
    const tbl = table(hc, tableName);
    const ip = colIndex(tbl, 'patient_id');
    const ie = colIndex(tbl, 'encounter_id');
    return rowsOf(data, tableName)
      .filter((r) => r[ie] !== null && enc.get(r[ie] ?? null)?.[iEncPatient] !== r[ip])
      .map((r) => String(r[0]));
  };
  for (const tbl of ['claims', 'prior_authorizations', 'coverage_eligibility', 'adt_events']) t.same(samePatient(tbl).slice(0, 5), [], `${tbl}: patient_id is the encounter's patient`);

  const claimT = table(hc, 'claims');
  const claimProblems: string[] = [];
  const pas = new Map(rowsOf(data, 'prior_authorizations').map((r) => [r[0], r]));
  for (const r of rowsOf(data, 'claims')) {
    const e = enc.get(r[colIndex(claimT, 'encounter_id')] ?? null);
    if (!e) continue;
    if (e[iStatus] !== 'finished') claimProblems.push(`${String(r[0])} bills an encounter that is ${String(e[iStatus])}`);
    if (e[iEnd] !== null && String(r[colIndex(claimT, 'created_at')]) < String(e[iEnd])) claimProblems.push(`${String(r[0])} created before the encounter ended`);
    const paId = r[colIndex(claimT, 'prior_authorization_id')] ?? null;
    if (paId !== null) {
      const p = pas.get(paId);
      if (p?.[colIndex(pa, 'status')] !== 'approved') claimProblems.push(`${String(r[0])} references a PA that is not approved`);
      if (p?.[colIndex(pa, 'encounter_id')] !== r[colIndex(claimT, 'encounter_id')]) claimProblems.push(`${String(r[0])} references another encounter's PA`);
    }
    const allowed = r[colIndex(claimT, 'allowed_amount')];
    const paid = r[colIndex(claimT, 'paid_amount')];
    const share = r[colIndex(claimT, 'patient_responsibility')];
    if (typeof allowed === 'number' && typeof paid === 'number' && typeof share === 'number' && Math.abs(allowed - paid - share) > 0.005) claimProblems.push(`${String(r[0])} amounts do not add up`);
    if (typeof allowed === 'number' && allowed > Number(r[colIndex(claimT, 'total_amount')])) claimProblems.push(`${String(r[0])} allows more than billed`);
  }
  t.same(claimProblems.slice(0, 5), [], 'claims bill finished encounters after they end, with approved PAs of the same encounter and amounts that add up');

  const paProblems = rowsOf(data, 'prior_authorizations').filter((r) => {
    const e = enc.get(r[colIndex(pa, 'encounter_id')] ?? null);
    const decided = r[colIndex(pa, 'decided_at')];
    return (
      !e ||
      String(r[colIndex(pa, 'requested_at')]) >= String(e[iStart]) ||
      (decided !== null && String(decided) < String(r[colIndex(pa, 'requested_at')])) ||
      ((r[colIndex(pa, 'status')] === 'pending' || r[colIndex(pa, 'status')] === 'cancelled') && decided !== null)
    );
  });
  t.equal(paProblems.length, 0, 'prior authorizations are requested before the encounter and decided after the request');

  const adtT = table(hc, 'adt_events');
  const adtProblems = rowsOf(data, 'adt_events').filter((r) => {
    const e = enc.get(r[colIndex(adtT, 'encounter_id')] ?? null);
    const trig = r[colIndex(adtT, 'trigger_event')];
    if (!e) return true;
    if (trig === 'A01' || trig === 'A02') return e[colIndex(encT, 'class_code')] !== 'IMP';
    if (trig === 'A03') return e[iEnd] === null || r[colIndex(adtT, 'occurred_at')] !== e[iEnd];
    return false;
  });
  t.equal(adtProblems.length, 0, 'A01/A02 only for inpatient stays; A03 at the encounter end');
});

t.test('other datasets add up', async (t) => {
  const ec = DATASETS.find((d) => d.targetId === 'demo-ecommerce');
  if (ec) {
    const data = dataOf(ec);
    const ot = table(ec, 'orders');
    const it = table(ec, 'order_items');
    const sums = new Map<Cell, number>();
    for (const r of rowsOf(data, 'order_items')) {
      const k = r[colIndex(it, 'order_id')] ?? null;
      sums.set(k, (sums.get(k) ?? 0) + Number(r[colIndex(it, 'quantity')]) * Number(r[colIndex(it, 'unit_price')]));
    }
    const bad = rowsOf(data, 'orders').filter((r) => {
      const n = (c: string): number => Number(r[colIndex(ot, c)]);
      return Math.abs(n('subtotal') - (sums.get(r[0] ?? null) ?? 0)) > 0.011 || Math.abs(n('total') - (n('subtotal') - n('discount') + n('shipping_fee') + n('tax'))) > 0.011;
    });
    t.equal(bad.length, 0, 'ecommerce: order subtotal = sum of lines, total = subtotal - discount + shipping + tax');
  }
  const bk = DATASETS.find((d) => d.targetId === 'demo-banking');
  if (bk) {
    const data = dataOf(bk);
    const st = table(bk, 'statements');
    const bad = rowsOf(data, 'statements').filter((r) => {
      const n = (c: string): number => Number(r[colIndex(st, c)]);
      return Math.abs(n('opening_balance') + n('total_credits') - n('total_debits') - n('closing_balance')) > 0.011;
    });
    t.equal(bad.length, 0, 'banking: opening + credits - debits = closing');
    const tt = table(bk, 'transactions');
    const last = new Map<Cell, number>();
    for (const r of rowsOf(data, 'transactions')) last.set(r[colIndex(tt, 'account_id')] ?? null, Number(r[colIndex(tt, 'balance_after')]));
    const at = table(bk, 'accounts');
    const mismatched = rowsOf(data, 'accounts').filter((r) => last.has(r[0] ?? null) && Math.abs((last.get(r[0] ?? null) ?? 0) - Number(r[colIndex(at, 'current_balance')])) > 0.011);
    t.equal(mismatched.length, 0, 'banking: current balance = balance after the last transaction');
  }
});

t.test('main tables have at least 1,000 rows; the whole catalogue stays under 250,000', async (t) => {
  let total = 0;
  for (const d of DATASETS) {
    const data = dataOf(d);
    const main = MAIN_TABLES[d.targetId] ?? [];
    t.ok(main.length > 0, `${d.targetId}: main tables listed`);
    for (const name of main) t.ok((data.get(name)?.length ?? 0) >= 1000, `${d.targetId}.${name}: ${data.get(name)?.length ?? 0} rows >= 1000`);
    for (const rows of data.values()) total += rows.length;
  }
  t.ok(total < 250_000, `${total} rows in all`);
  t.comment(`generated ${total} rows in ${Math.round(generationMs)} ms`);
  t.ok(generationMs < 15_000, 'generation is fast enough to seed on start');
});

t.test('deterministic: the same rows on every call, independent of other datasets', async (t) => {
  const first = DATASETS[0];
  if (!first) return t.fail('no datasets');
  const a = sha256(toJson(first.generate()));
  const b = sha256(toJson(first.generate()));
  t.equal(a, b, `${first.targetId}: same sha256 on two calls`);
  t.match(a, /^[0-9a-f]{64}$/);
  // Generate in reverse order: each dataset seeds its own PRNG, so order does not matter.
  for (const d of [...DATASETS].reverse()) {
    const again = toJson(d.generate());
    t.ok(again === toJson(dataOf(d)), `${d.targetId}: second generation is identical`);
  }
  t.equal(sha256(toJson(dataOf(first))), a, `${first.targetId}: digest unchanged after generating the others`);
});
