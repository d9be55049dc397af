import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { GITHUB, HUBSPOT, SALESFORCE, STRIPE } from '../../control-plane/live/rest/index.js';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';
import { ROOT } from '../helpers/root.js';

let srv: TestServer;
let key: string;
t.before(async () => {
  srv = await startServer();
  key = (await signupAgent(srv.url)).key;
});
t.teardown(() => srv.close());

type Target = {
  id: string;
  kind: string;
  pack: string | null;
  credential_kind: string | null;
  queryable: boolean;
  scopes: { name: string; pattern: string; required: boolean }[];
  tables: { name: string; description: string; time_column: string | null; columns: { name: string; type: string; description: string }[] }[];
  tiers: string[];
};

t.test('20 targets: 12 demo in 6 packs, 8 live', async (t) => {
  const r = await api<{ targets: Target[]; count: number }>(srv.url, 'GET', '/v1/connections/targets', { key });
  t.equal(r.status, 200);
  t.equal(r.body.targets.length, 20);
  t.equal(r.body.count, 20);
  const demo = r.body.targets.filter((x) => x.kind === 'demo');
  const live = r.body.targets.filter((x) => x.kind === 'live');
  t.equal(demo.length, 12);
  t.same(live.map((x) => x.id).sort(), ['github', 'http-files', 'hubspot', 'mysql', 'postgres', 'postgres-relay', 'salesforce', 'stripe']);
  t.equal(new Set(r.body.targets.map((x) => x.id)).size, 20, 'ids are unique');
  for (const x of demo) {
    t.ok(x.pack, `${x.id} has a pack`);
    t.ok(x.tiers.includes('container'), `${x.id} accepts container`);
    t.ok(x.tables.length >= 3, `${x.id} has tables`);
    t.same(x.scopes.map((s) => s.name), ['read', 'period'], `${x.id} grammar`);
    t.equal(x.queryable, true);
  }
  for (const x of live) {
    t.equal(x.pack, null);
    t.ok(x.scopes.some((s) => s.name === 'read'), `${x.id} accepts read:`);
    t.ok(x.tiers.length > 0);
  }
  const creds = Object.fromEntries(live.map((x) => [x.id, x.credential_kind]));
  t.same(creds, { 'postgres-relay': null, postgres: 'postgres', mysql: 'mysql', stripe: 'stripe', github: 'github', hubspot: 'hubspot', salesforce: 'salesforce', 'http-files': 'http-files' });
  const relay = live.find((x) => x.id === 'postgres-relay');
  t.match(relay?.scopes.find((s) => s.name === 'relay'), { pattern: 'relay:<relay_id>', required: true });

  const filtered = await api<{ targets: Target[] }>(srv.url, 'GET', '/v1/connections/targets?kind=live', { key });
  t.equal(filtered.body.targets.length, 8);
  const byPack = await api<{ targets: Target[] }>(srv.url, 'GET', '/v1/connections/targets?pack=healthcare', { key });
  t.same(byPack.body.targets.map((x) => x.id).sort(), ['demo-healthcare', 'demo-pharmacy']);
});

t.test('6 packs, each listing demo targets that exist', async (t) => {
  const r = await api<{ packs: { id: string; targets: string[] }[] }>(srv.url, 'GET', '/v1/connections/packs', { key });
  t.equal(r.status, 200);
  t.equal(r.body.packs.length, 6);
  const targets = (await api<{ targets: Target[] }>(srv.url, 'GET', '/v1/connections/targets', { key })).body.targets;
  const inPacks = r.body.packs.flatMap((p) => p.targets);
  t.same(inPacks.sort(), targets.filter((x) => x.kind === 'demo').map((x) => x.id).sort(), 'every demo target in exactly one pack');
  for (const p of r.body.packs) for (const id of p.targets) t.equal(targets.find((x) => x.id === id)?.pack, p.id);
});

t.test('the healthcare target matches the contract', async (t) => {
  const r = await api<Target>(srv.url, 'GET', '/v1/connections/targets/demo-healthcare', { key });
  t.equal(r.status, 200);
  t.equal(r.body.pack, 'healthcare');
  t.same(r.body.tables.map((x) => x.name), ['patients', 'encounters', 'claims', 'prior_authorizations', 'coverage_eligibility', 'adt_events']);
  for (const table of r.body.tables) {
    if (table.name === 'patients') t.equal(table.time_column, null);
    else t.ok(table.time_column, `${table.name} has a time column`);
  }
  t.equal(r.body.tables.find((x) => x.name === 'encounters')?.time_column, 'period_start');
  t.match(r.body.scopes.find((s) => s.name === 'period')?.pattern, /period:<YYYY>-Q<1-4>/);

  const missing = await api<{ error: { code: string } }>(srv.url, 'GET', '/v1/connections/targets/nope', { key });
  t.equal(missing.status, 404);
  t.equal(missing.body.error.code, 'not_found');
});

t.test('healthcare data is synthetic, within 2023–2025, and FHIR-coded', async (t) => {
  const a = await signupAgent(srv.url);
  const conn = (await api<{ connectionId: string }>(srv.url, 'POST', '/v1/connections', { key: a.key, body: { target_id: 'demo-healthcare', scopes: ['read:*'] } })).body.connectionId;
  const q = async (sql: string) => (await api<{ rows: Record<string, unknown>[] }>(srv.url, 'POST', `/v1/connections/${conn}/query`, { key: a.key, body: { sql } })).body.rows;
  const [span] = await q('SELECT min(period_start) AS lo, max(period_start) AS hi, count(*) AS n FROM encounters');
  t.ok((span?.['lo'] as string) >= '2023-01-01' && (span?.['hi'] as string) < '2026-01-01', 'encounters inside 2023–2025');
  t.ok((span?.['n'] as number) >= 1000, 'thousands of encounters');
  const classes = (await q('SELECT DISTINCT class_code FROM encounters ORDER BY 1')).map((x) => x['class_code']);
  t.ok(classes.length >= 4, `encounter classes: ${classes.join(',')}`);
  t.ok(classes.every((c) => ['AMB', 'EMER', 'IMP', 'OBSENC', 'HH', 'VR'].includes(c as string)), 'v3 ActCode classes');
  const genders = (await q('SELECT DISTINCT gender FROM patients')).map((x) => x['gender']);
  t.ok(genders.length >= 2);
  t.ok(genders.every((g) => ['male', 'female', 'other', 'unknown'].includes(g as string)), 'administrative-gender');
  const adt = (await q('SELECT DISTINCT trigger_event FROM adt_events ORDER BY 1')).map((x) => x['trigger_event']);
  t.ok(adt.length > 0 && adt.every((e) => /^A0[1-8]$/.test(e as string)), `HL7 v2 ADT triggers: ${adt.join(',')}`);
});

const SQL_TYPES = ['text', 'bigint', 'numeric', 'boolean', 'timestamptz', 'jsonb'];

t.test('API targets list the columns their queries get (from the REST specs)', async (t) => {
  const list = (await api<{ targets: Target[] }>(srv.url, 'GET', '/v1/connections/targets?kind=live', { key })).body.targets;
  for (const spec of [STRIPE, GITHUB, HUBSPOT, SALESFORCE]) {
    const one = await api<Target>(srv.url, 'GET', `/v1/connections/targets/${spec.id}`, { key });
    t.equal(one.status, 200);
    const listed = list.find((x) => x.id === spec.id);
    t.same(listed?.tables, one.body.tables, `${spec.id}: the list and the single target agree`);
    t.same(one.body.tables.map((x) => x.name), spec.tables.map((x) => x.name), `${spec.id}: the spec's tables`);
    for (const table of spec.tables) {
      const shown = one.body.tables.find((x) => x.name === table.name);
      t.ok(shown && shown.columns.length > 0, `${spec.id}.${table.name} has columns`);
      t.same(
        shown?.columns,
        table.columns.map((c) => ({ name: c.name, type: c.type, description: c.description })),
        `${spec.id}.${table.name}: every column with its SQL type and description, in order`,
      );
      t.equal(shown?.description, table.description);
      t.equal(shown?.time_column, 'created', `${spec.id}.${table.name}: period: restricts created`);
      t.ok(shown?.columns.some((c) => c.name === 'created' && c.type === 'timestamptz'), 'the time column is one of the columns');
      for (const c of shown?.columns ?? []) {
        t.ok(SQL_TYPES.includes(c.type), `${spec.id}.${table.name}.${c.name}: ${c.type} is a SQL type`);
        t.ok(c.description.length > 0, `${spec.id}.${table.name}.${c.name} is described`);
      }
    }
  }
  // a few columns an agent writes queries against
  const stripe = (await api<Target>(srv.url, 'GET', '/v1/connections/targets/stripe', { key })).body;
  t.match(stripe.tables.find((x) => x.name === 'charges')?.columns.find((c) => c.name === 'amount'), { type: 'bigint' });
  t.match(stripe.tables.find((x) => x.name === 'customers')?.columns.find((c) => c.name === 'email'), { type: 'text' });
  // databases and http-files have no fixed tables: theirs are the credential's own
  for (const id of ['postgres', 'mysql', 'postgres-relay', 'http-files']) t.same(list.find((x) => x.id === id)?.tables, [], `${id}: no fixed tables`);
});

/** Relative runtime imports (not `import type`) of a TypeScript module, as absolute .ts paths. */
function runtimeImports(file: string): string[] {
  const src = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of src.matchAll(/^(?:import|export)\s+(type\s+)?(?:[^;'"]*?\sfrom\s+)?'([^']+)'/gm)) {
    if (m[1] || !m[2]) continue;
    out.push(m[2].startsWith('.') ? path.resolve(path.dirname(file), m[2].replace(/\.js$/, '.ts')) : m[2]);
  }
  return out;
}

t.test('the catalogue loads the column lists without the connectors, engines or drivers', async (t) => {
  const root = ROOT;
  const seen = new Set<string>();
  const todo = [path.join(root, 'control-plane/catalogue/index.ts')];
  while (todo.length > 0) {
    const f = todo.pop() as string;
    if (seen.has(f)) continue;
    seen.add(f);
    if (f.startsWith('/')) todo.push(...runtimeImports(f));
  }
  const rel = [...seen].map((f) => (f.startsWith('/') ? path.relative(root, f) : f));
  t.ok(rel.includes('control-plane/live/rest/apis/index.ts'), 'the declarative specs are read');
  const heavy = rel.filter((f) => (f.startsWith('control-plane/live/') && !/^control-plane\/live\/rest\/(apis\/[a-z]+|spec)\.ts$/.test(f)) || /^control-plane\/(query|embedded|store|net)\//.test(f) || !(f.startsWith('control-plane/') || f.startsWith('node:')));
  t.same(heavy, [], `only leaf modules and node built-ins: ${rel.join(', ')}`);
});
