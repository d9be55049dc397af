import t from 'tap';
import { api, signupAgent, startServer, type TestServer } from '../helpers/server.js';

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
  tables: { name: string; time_column: string | null; columns: { name: string; type: string }[] }[];
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
