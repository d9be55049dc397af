/**
 * PGlite's engine is compiled once per process and handed to every engine thread, which then
 * neither reads the 9 MB `pglite.wasm` nor compiles it again (each thread's copy of the file
 * stayed in its allocator: about 10 MB per engine thread).
 */
import t from 'tap';
import { EmbeddedPostgres } from '../../control-plane/embedded/index.js';
import { runModuleScript } from '../helpers/node-script.js';

const EMBEDDED = new URL('../../control-plane/embedded/index.js', import.meta.url).href;

t.test('engines started one after another and at once share one compiled engine', async (t) => {
  const wasm = (globalThis as unknown as { WebAssembly: { compile: (bytes: Uint8Array) => Promise<object> } }).WebAssembly;
  const compile = wasm.compile.bind(wasm);
  const compiled: number[] = [];
  wasm.compile = (bytes: Uint8Array) => {
    compiled.push(bytes.byteLength);
    return compile(bytes);
  };
  t.teardown(() => {
    wasm.compile = compile;
  });
  const first = await EmbeddedPostgres.start({ settings: { shared_buffers: '1MB' } });
  t.teardown(() => first.terminate());
  const more = await Promise.all([EmbeddedPostgres.start(), EmbeddedPostgres.start()]);
  t.teardown(() => Promise.all(more.map((e) => e.terminate())));
  for (const [i, e] of [first, ...more].entries()) t.same(await e.query('SELECT 40 + 2 AS n'), [{ n: 42 }], `engine ${i + 1} runs`);
  t.equal(compiled.length, 1, 'compiled once, in this thread');
  t.ok((compiled[0] ?? 0) > 1_000_000, `the engine itself (${compiled[0] ?? 0} bytes)`);
});

t.test('an engine thread runs on the engine it is handed, not on a pglite.wasm of its own', async (t) => {
  // a process of its own (the compiled engine is kept for the process's life), whose host hands
  // its threads the smallest valid module instead of PGlite's: a thread that used it cannot start;
  // one that read and compiled pglite.wasm itself would start (what the count above cannot see)
  const script = [
    'const compile = WebAssembly.compile.bind(WebAssembly);',
    'WebAssembly.compile = () => compile(new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]));',
    `const { EmbeddedPostgres } = await import(${JSON.stringify(EMBEDDED)});`,
    'try {',
    '  const e = await EmbeddedPostgres.start();',
    "  console.log('started on its own engine');",
    '  await e.terminate();',
    '} catch (err) {',
    "  console.log('refused: ' + err.message);",
    '}',
  ].join('\n');
  const { code, out } = await runModuleScript(script);
  t.equal(code, 0, out);
  t.match(out, /^refused: /, 'the thread instantiated the module it was handed');
});
