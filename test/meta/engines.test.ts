/**
 * The Node.js versions package.json's `engines` allows are the ones every installed package
 * allows (`npm ci` warns EBADENGINE otherwise), this run's Node.js is one of them, the README
 * names them and the version the suite is tested on, and every version the README and docs/ name
 * is one the package it speaks of allows (docs/relay.md speaks of the relay's own package).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../cli/dist.js';

// npm's own version-range library (in the tree through fastify and tap)
const semver = createRequire(import.meta.url)('semver') as {
  satisfies(version: string, range: string): boolean;
  subset(sub: string, dom: string): boolean;
  minVersion(range: string): { version: string } | null;
};

const read = (file: string): unknown => JSON.parse(fs.readFileSync(path.join(ROOT, file), 'utf8'));
const pkg = read('package.json') as { engines: { node: string } };
const lock = read('package-lock.json') as { packages: Record<string, { version?: string; engines?: { node?: string } | string[] }> };
const engines = pkg.engines.node;

t.test('this run’s Node.js is one engines allows', async (t) => {
  t.ok(semver.satisfies(process.versions.node, engines), `Node.js ${process.versions.node} satisfies ${engines}`);
});

t.test('no package in the lockfile declares engines that exclude a version engines allows', async (t) => {
  t.equal((lock.packages[''] as { engines?: { node?: string } }).engines?.node, engines, 'the lockfile has package.json’s engines');
  let checked = 0;
  for (const [where, entry] of Object.entries(lock.packages)) {
    const node = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
    if (where === '' || node === undefined) continue;
    checked++;
    if (!semver.subset(engines, node)) t.fail(`${where}@${entry.version ?? '?'} needs Node.js ${node}, narrower than ${engines}`);
  }
  t.ok(checked > 50, `${checked} packages declare engines`);
  t.notOk(lock.packages['node_modules/cookie']?.version?.startsWith('2.'), 'cookie 2 (Node.js >= 22) is not installed');
});

t.test('the README names the versions engines allows and the one the suite is tested on', async (t) => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const m = /^Node\.js (\d+\.\d+) or newer[\s\S]*?`engines`:\s+`([^`]+)`[\s\S]*?tested on Node\.js (\d+\.\d+)\./m.exec(readme);
  t.ok(m, 'the README says which Node.js it needs');
  t.equal(m?.[2], engines, 'the range it quotes is package.json’s');
  t.equal(`${m?.[1]}.0`, semver.minVersion(engines)?.version, 'the oldest version it names is the oldest engines allows');
  t.ok(semver.satisfies(`${m?.[3]}.0`, engines), `the tested version (${m?.[3]}) is one engines allows`);
});

t.test('every Node.js version the README and docs/ name is one the package it is about allows', async (t) => {
  const relay = (read('relay-agent/package.json') as { engines: { node: string } }).engines.node;
  // the relay's page speaks of the relay package (its own engines); the other pages of this one
  const RELAY_PAGE = 'docs/relay.md';
  const pages = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  t.ok(pages.includes(RELAY_PAGE), 'the docs have the svc-relay page');
  let named = 0;
  for (const page of pages) {
    const text = fs.readFileSync(path.join(ROOT, page), 'utf8');
    const inRelay = page === RELAY_PAGE;
    const range = inRelay ? relay : engines;
    for (const m of text.matchAll(/Node\.js (\d+)\.(\d+)/g)) {
      named++;
      const version = `${m[1]}.${m[2]}.0`;
      const line = text.slice(0, m.index).split('\n').length;
      t.ok(semver.satisfies(version, range), `${page} line ${line}: Node.js ${m[1]}.${m[2]} is allowed by ${inRelay ? 'relay-agent/package.json' : 'package.json'} (${range})`);
    }
  }
  t.ok(named >= 3, `${named} versions named`);
});
