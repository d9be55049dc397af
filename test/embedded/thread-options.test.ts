/**
 * Engine threads and the SQL check worker do not run the process's preloads (`--import` on the
 * command line or in NODE_OPTIONS): an APM agent or a test runner's process tracker given to the control plane would
 * otherwise load again in each of them, and an engine is started again after every statement
 * stopped at its deadline (embedded/index.ts threadOptions).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { threadOptions } from '../../control-plane/embedded/index.js';
import { tempDir } from '../helpers/server.js';
import type { TapTest } from '../helpers/tap.js';

t.test('compiled, a thread gets no command-line options; from TypeScript sources it keeps its loader', async (t) => {
  const compiled = threadOptions(new URL('file:///app/dist/control-plane/embedded/worker.js'), ['--import=file:///apm.mjs'], { NODE_OPTIONS: '--import=file:///tracker.mjs', PATH: '/usr/bin' });
  t.same(compiled.execArgv, []);
  t.equal(compiled.env?.['NODE_OPTIONS'], undefined, 'nor NODE_OPTIONS');
  t.equal(compiled.env?.['PATH'], '/usr/bin', 'the rest of the environment is kept');
  t.equal(threadOptions(new URL('file:///app/dist/control-plane/embedded/worker.js')).env?.['PATH'], process.env['PATH'], "by default, this process's");
  t.same(threadOptions(new URL('file:///app/control-plane/embedded/worker.ts')), {});
});

t.test('a thread keeps how warnings and stack traces read, from the command line and NODE_OPTIONS, and no preload', async (t) => {
  const url = new URL('file:///app/dist/control-plane/embedded/worker.js');
  const o = threadOptions(url, ['--enable-source-maps', '--import=file:///apm.mjs', '--require', '/apm.cjs', '--max-old-space-size=512'], {
    NODE_OPTIONS: '--no-warnings  --import=file:///tracker.mjs --enable-source-maps',
    PATH: '/bin',
  });
  t.same(o.execArgv, ['--enable-source-maps', '--no-warnings']);
  t.same(o.env, { PATH: '/bin' });
});

/**
 * Runs an engine and a check in a child process whose preload is given by `how`; the threads
 * (main or not) that loaded the preload.
 */
async function preloadedIn(t: TapTest, how: (preload: string) => { args: string[]; env: NodeJS.ProcessEnv }): Promise<string[]> {
  const dir = await tempDir('svc-thread-options-');
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const marks = path.join(dir, 'loaded.txt');
  const preload = path.join(dir, 'preload.mjs');
  await fs.writeFile(preload, `import fs from 'node:fs';\nimport { isMainThread } from 'node:worker_threads';\nfs.appendFileSync(${JSON.stringify(marks)}, isMainThread ? 'main\\n' : 'thread\\n');\n`);
  const embedded = new URL('../../control-plane/embedded/index.js', import.meta.url).href;
  const sql = new URL('../../control-plane/query/sql/offload.js', import.meta.url).href;
  const engineHelper = new URL('../helpers/engine.js', import.meta.url).href;
  const script = path.join(dir, 'child.mjs');
  await fs.writeFile(
    script,
    [
      `import { blankEngine } from ${JSON.stringify(engineHelper)};`,
      `import { SqlChecker } from ${JSON.stringify(sql)};`,
      `await import(${JSON.stringify(embedded)});`,
      'const engine = await blankEngine();',
      "const rows = await engine.query('SELECT 41 + 1 AS n');",
      'const checker = new SqlChecker();',
      // the MySQL check always runs in the worker; any answer (a refusal too) means the worker ran
      "const checked = await checker.checkMysql('SELECT 1', { allowed: new Map(), periods: [] }).then(() => 'answered', (err) => 'answered: ' + err.code);",
      'await checker.close();',
      'await engine.close();',
      'console.log(JSON.stringify({ n: rows[0].n, checked }));',
    ].join('\n'),
  );
  const { args, env } = how(pathToFileURL(preload).href);
  const child = spawn(process.execPath, [...args, script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  t.equal(code, 0, `the child ran an engine and a check: ${out.slice(-2000)}`);
  const answer = JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as { n?: number; checked?: string };
  t.equal(answer.n, 42, 'the engine answered');
  t.match(answer.checked, /^answered/, 'the check worker answered');
  return (await fs.readFile(marks, 'utf8')).trim().split('\n');
}

t.test('a preload given with --import runs in the main thread only, not in an engine or the check worker', async (t) => {
  const loaded = await preloadedIn(t, (preload) => ({ args: [`--import=${preload}`], env: process.env }));
  t.same(loaded, ['main'], 'the preload ran once, in the main thread');
});

// how APM agents are usually given, and how tap's process tracker reaches the control planes the tests start
t.test('a preload given in NODE_OPTIONS runs in the main thread only, too', async (t) => {
  const loaded = await preloadedIn(t, (preload) => ({ args: [], env: { ...process.env, NODE_OPTIONS: `--import=${preload}` } }));
  t.same(loaded, ['main'], 'the preload ran once, in the main thread');
});
