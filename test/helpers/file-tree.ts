/** Small file trees for tests that read folders (the import checker, `npm test`'s script). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TapTest } from './tap.js';

/** `files` (relative path → text) in a new temporary folder, removed after the test `t`; returns the folder. */
export function fileTree(t: TapTest, files: Record<string, string>, prefix = 'svc-tree-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  return dir;
}
