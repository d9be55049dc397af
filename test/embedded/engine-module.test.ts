/**
 * PGlite's engine is compiled once per process and handed to every engine thread, which then
 * neither reads the 9 MB `pglite.wasm` nor compiles it again (each thread's copy of the file
 * stayed in its allocator: about 10 MB per engine thread).
 */
import t from 'tap';
import { EmbeddedPostgres } from '../../control-plane/embedded/index.js';

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
