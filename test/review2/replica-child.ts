/** A replica's demo workers directory, in a process of its own (worker-dirs-two-processes.test.ts). */
import fs from 'node:fs/promises';
import { WorkerDirs } from '../../control-plane/demo/engine.js';

const [root, imageFile] = process.argv.slice(2) as [string, string];
const image = new Uint8Array(await fs.readFile(imageFile));
const dirs = new WorkerDirs(root);
try {
  const w = await dirs.start(image);
  const rows = await w.query('SELECT tag FROM marker');
  await w.close();
  process.stdout.write(JSON.stringify({ ok: true, rows }));
} catch (err) {
  process.stdout.write(JSON.stringify({ ok: false, error: (err as Error).message }));
}
