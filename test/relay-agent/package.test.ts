/**
 * svc-relay as its own npm package (relay-agent/package.json), as a customer gets it:
 *  - its manifest: private, a name of ours (never `svc` or `svc-relay`, which the public registry
 *    may hand to anyone), the `svc-relay` bin, the version of RELAY_AGENT_VERSION, and each
 *    dependency pinned to exactly the root package-lock.json's version (fails when they drift);
 *  - `npm pack` (its prepack: relay-agent/pack.mjs, one TypeScript compile) in a copy of the
 *    checkout's sources, so the checkout's relay-agent/ never holds a half-made node_modules
 *    while other tests run: the tarball holds the compiled relay and its bundled dependencies,
 *    no TypeScript, tests or control plane;
 *  - `npm install -g <tarball> --prefix <tmp> --offline` with the registry pointed at a closed
 *    port, so any network attempt fails. The dependencies are bundled in the tarball (npm ignores
 *    an npm-shrinkwrap.json inside a file tarball and would ask the registry for each
 *    dependency's metadata, which the cache cannot answer for another registry URL), so the
 *    install needs neither the registry nor the npm cache: nothing to skip;
 *  - the INSTALLED `svc-relay` (the bin in the prefix, run as a program) enrolls with a token
 *    from a control plane started here, runs with its database URL in a 0600 file, and an
 *    agent's query is answered through it; SIGTERM drains and it exits 0.
 */
import { execFile, spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { RELAY_AGENT_VERSION } from '../../relay-agent/index.js';
import { pathToFileURL } from 'node:url';
import { openConnection, signupAgent, startServer, tempDir } from '../helpers/server.js';
import { ordersDatabase, queryFn, root, until, waitStatus } from './harness.js';

// pack.mjs reads the files beside it: loaded from the repository, not from a compiled copy of the tests
const { dependencyClosure, importedPackages, packageProblems, pinProblems, relayPackage, rootLockfile } = (await import(
  pathToFileURL(path.join(root, 'relay-agent/pack.mjs')).href
)) as typeof import('../../relay-agent/pack.mjs');

const run = promisify(execFile);

interface RootPackage {
  name: string;
  private?: boolean;
  bin?: Record<string, string>;
  files?: string[];
}

t.test('the relay package: private, our names, its version, pinned dependencies', async (t) => {
  const pkg = relayPackage();
  const manifest = JSON.parse(readFileSync(path.join(root, 'relay-agent/package.json'), 'utf8')) as { private?: boolean; type?: string; bin?: Record<string, string>; files?: string[] };
  t.equal(manifest.private, true, 'never published by accident');
  t.equal(manifest.type, 'module');
  t.match(pkg.name, /^@svc-data\//, 'a scoped name of ours, not a public unscoped one');
  t.same(manifest.bin, { 'svc-relay': 'dist/cli/svc-relay.js' });
  t.equal(`svc-relay/${pkg.version}`, RELAY_AGENT_VERSION, 'the package version is the relay agent version');

  const lock = rootLockfile();
  t.same(pinProblems(pkg, lock), [], 'each dependency is exactly the root lockfile version');
  t.same(packageProblems(pkg, lock), [], 'and bundled');
  for (const name of Object.keys(pkg.dependencies ?? {})) t.equal(pkg.dependencies?.[name], lock.packages[`node_modules/${name}`]?.version, name);
  // the check can fail: a range, another version, a package the lockfile does not have
  t.match(pinProblems({ ...pkg, dependencies: { ...pkg.dependencies, pg: '^8.0.0' } }, lock), [/^pg: "\^8\.0\.0" in relay-agent\/package\.json, \d+\.\d+\.\d+ in the root package-lock\.json$/]);
  t.match(pinProblems({ ...pkg, dependencies: { 'left-pad': '1.3.0' } }, lock), [/left-pad: not in the root package-lock.json/]);
  t.match(packageProblems({ ...pkg, bundleDependencies: ['pg'] }, lock), [/bundleDependencies/]);

  // what pack.mjs counts as the relay's imports (a package it imports must be a dependency)
  const sample = await tempDir('svc-relay-imports-');
  t.teardown(() => fs.rm(sample, { recursive: true, force: true }));
  writeFileSync(
    path.join(sample, 'a.js'),
    "import ws from 'ws';\nimport './local.js';\nimport fs from 'node:fs';\nimport 'side-effect';\nexport { x } from '@scope/pkg/deep.js';\nconst u = createRequire(import.meta.url)('pg/lib/utils.js');\nconst l = await import('lazy');\n",
  );
  t.same([...importedPackages(sample)].sort(), ['@scope/pkg', 'lazy', 'pg', 'side-effect', 'ws']);

  const closure = dependencyClosure(pkg, lock).map((c) => c.key);
  for (const k of ['node_modules/pg', 'node_modules/pg-pool', 'node_modules/pg-protocol', 'node_modules/ws', 'node_modules/p-retry', 'node_modules/is-network-error']) t.ok(closure.includes(k), `${k} is bundled`);
  t.notOk(closure.some((k) => /fastify|pglite|typescript|tap|@types/.test(k)), 'nothing of the control plane or the tooling');

  const rootPkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as RootPackage;
  t.equal(rootPkg.name, '@svc-data/svc', 'the root package is not the public `svc`');
  t.equal(rootPkg.private, true);
  t.same(rootPkg.bin, { svc: 'dist/cli/svc.js' }, 'svc-relay comes from its own package only');
  t.equal(lock.name, rootPkg.name, 'the lockfile names the same package');
  t.ok(rootPkg.files?.includes('dist/cli/'), 'the root tarball holds the compiled CLI');
});

/** a TCP port that refuses connections right now */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** what the relay build reads, copied (node_modules linked) into `dir` */
function copyCheckout(dir: string): void {
  for (const f of ['package.json', 'package-lock.json', 'tsconfig.json']) cpSync(path.join(root, f), path.join(dir, f));
  for (const d of ['cli', 'pg-read', 'protocol', 'pki']) cpSync(path.join(root, d), path.join(dir, d), { recursive: true });
  const skip = new Set(['dist', 'node_modules'].map((d) => path.join(root, 'relay-agent', d)));
  cpSync(path.join(root, 'relay-agent'), path.join(dir, 'relay-agent'), { recursive: true, filter: (src) => !skip.has(src) && !src.endsWith('.tgz') });
  symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
}

interface PackResult {
  filename: string;
  version: string;
  files: { path: string; mode: number }[];
  bundled: string[];
}

t.test('npm pack, an offline install, and the installed svc-relay answers a query', async (t) => {
  const t0 = Date.now();
  const stage = (what: string): void => t.comment(`${what}: ${Date.now() - t0} ms`);
  const work = await tempDir('svc-relay-pkg-');
  t.teardown(() => fs.rm(work, { recursive: true, force: true }));
  // the customer database and the control plane start while npm packs
  const dbReady = ordersDatabase('svc_relay_pkg');
  const srvReady = startServer();
  t.teardown(async () => {
    await Promise.allSettled([dbReady.then((db) => db.drop()), srvReady.then((srv) => srv.close())]);
  });
  const checkout = path.join(work, 'checkout');
  mkdirSync(checkout);
  copyCheckout(checkout);
  const out = path.join(work, 'out');
  mkdirSync(out);
  // a registry nobody answers: any attempt to reach the network fails
  // (and none of the npm_* variables `npm test` sets for its scripts, e.g. the root's local prefix)
  const inherited = Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_') || ['npm_config_cache', 'npm_config_userconfig', 'npm_config_globalconfig', 'npm_config_cafile'].includes(k.toLowerCase()));
  const npmEnv = { ...Object.fromEntries(inherited), npm_config_registry: `http://127.0.0.1:${await closedPort()}/`, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };

  const packed = await run('npm', ['pack', '--json', '--offline', '--pack-destination', out], { cwd: path.join(checkout, 'relay-agent'), env: npmEnv, maxBuffer: 64 * 1024 * 1024 }).catch((err: unknown) => {
    throw new Error(`npm pack failed: ${String((err as { stderr?: string }).stderr ?? err)}`);
  });
  stage('packed');
  const [info] = JSON.parse(packed.stdout) as PackResult[];
  if (!info) throw new Error(`npm pack printed no result: ${packed.stdout}`);
  t.equal(info.version, RELAY_AGENT_VERSION.replace('svc-relay/', ''));
  t.equal(info.filename, `svc-data-relay-${info.version}.tgz`);
  t.notOk(existsSync(path.join(checkout, 'relay-agent/node_modules')), 'postpack removed the bundling copy');

  const paths = info.files.map((f) => f.path);
  const own = paths.filter((p) => !p.startsWith('node_modules/'));
  t.same(own.filter((p) => !p.startsWith('dist/')).sort(), ['README.md', 'package.json'], 'outside dist/: the manifest and the README');
  t.same(
    own.filter((p) => p.startsWith('dist/') && !/^dist\/(cli\/svc-relay|(relay-agent|pg-read|protocol|pki)\/[a-z-]+)\.js$/.test(p)),
    [],
    'dist/ holds only the compiled relay, pg-read, protocol and pki',
  );
  t.ok(own.includes('dist/cli/svc-relay.js') && own.includes('dist/relay-agent/agent.js') && own.includes('dist/relay-agent/version.js') && own.includes('dist/pg-read/run.js') && own.includes('dist/protocol/session.js') && own.includes('dist/pki/csr.js'));
  t.notOk(own.some((p) => /control-plane|test|bench|\.ts$|\.map$|pack\.mjs|tsconfig/.test(p)), 'no control plane, tests, sources or build files');
  const bundledTop = new Set(paths.filter((p) => p.startsWith('node_modules/')).map((p) => p.split('/').slice(1, p.split('/')[1]?.startsWith('@') ? 3 : 2).join('/')));
  const closure = dependencyClosure(relayPackage(), rootLockfile()).map((c) => c.key.replace(/^node_modules\//, ''));
  t.same([...bundledTop].sort(), closure.sort(), 'node_modules/ holds exactly the dependencies and what they need');

  const prefix = path.join(work, 'prefix');
  const installed = await run('npm', ['install', '-g', path.join(out, info.filename), '--prefix', prefix, '--offline', '--no-audit', '--no-fund'], { cwd: work, env: npmEnv }).catch((err: unknown) => {
    throw new Error(`the offline install failed: ${String((err as { stderr?: string }).stderr ?? err)}`);
  });
  stage('installed');
  t.match(installed.stdout, /added 1 package/);
  const bin = path.join(prefix, 'bin', 'svc-relay');
  t.ok(lstatSync(bin).isSymbolicLink(), 'npm linked the bin');
  const target = realpathSync(bin);
  t.equal(target, realpathSync(path.join(prefix, 'lib/node_modules/@svc-data/relay/dist/cli/svc-relay.js')), 'the bin is the installed package, not the checkout');

  // the installed program, run as a customer runs it (the node on PATH; nothing from the checkout)
  const env: NodeJS.ProcessEnv = { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: work, NODE_PATH: '' };
  const version = await run(bin, ['--version'], { env, cwd: work });
  t.equal(version.stdout.trim(), RELAY_AGENT_VERSION);
  stage('ran --version');

  const [db, srv] = await Promise.all([dbReady, srvReady]);
  await srv.svc.startTunnel();
  const a = await signupAgent(srv.url);
  const tok = await fetch(`${srv.url}/v1/relays/enroll-token`, { method: 'POST', headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' }, body: '{}' });
  t.equal(tok.status, 201);
  const token = ((await tok.json()) as { token: string }).token;
  stage('control plane and database ready');

  const configDir = path.join(work, 'etc-svc-relay');
  const enrolled = await run(bin, ['enroll', '--control-plane', srv.url, '--token', token, '--config-dir', configDir, '--name', 'packaged'], { env, cwd: work });
  stage('enrolled');
  // ids are base64url: '-' and '_' included (a CI run cut rly_…546-_ at the '-')
  const relayId = /enrolled relay (rly_[A-Za-z0-9_-]+)/.exec(enrolled.stdout)?.[1];
  t.ok(relayId, enrolled.stdout);
  const urlFile = path.join(configDir, 'database-url');
  writeFileSync(urlFile, `${db.url}\n`, { mode: 0o600 });
  chmodSync(urlFile, 0o600);

  const child = spawn(bin, ['run', '--config-dir', configDir, '--database-url-file', urlFile, '--health-port', '0'], { env, cwd: work, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  await waitStatus(srv.url, a.key, relayId as string, 'online').catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; svc-relay said:\n${stderr}`);
  });
  stage('online');
  t.match(stderr, /database URL from --database-url-file/);
  t.notMatch(stderr, new RegExp(db.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'the URL is not logged');

  const conn = await openConnection(srv.url, a.key, 'postgres-relay', [`relay:${relayId}`, 'read:public.orders', 'filter:public.orders.tenant_id=2']);
  const q = queryFn(srv.url, a.key, conn);
  const r = await q('SELECT count(*) AS n, min(tenant_id) AS lo, max(tenant_id) AS hi FROM orders');
  t.equal(r.status, 200, JSON.stringify(r.body));
  t.same(r.body.rows, [{ n: 1000, lo: 2, hi: 2 }], 'answered by the installed relay, scoped by the control plane');

  stage('answered');
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM drains and exits 0');
  t.match(stderr, /draining/);
  await until('the relay offline', async () => {
    const v = await fetch(`${srv.url}/v1/relays/${relayId}`, { headers: { authorization: `Bearer ${a.key}` } });
    return ((await v.json()) as { status: string }).status === 'offline';
  });
});
