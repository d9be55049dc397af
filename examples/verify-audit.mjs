#!/usr/bin/env node
// Verify an svc audit export offline: node verify-audit.mjs <export.jsonl | -> [audit_genesis_hash]
// Needs nothing but Node.js, and runs from any directory (the export's path is taken relative to
// the current one; - reads it from standard input). Implements the algorithm published in docs/audit.md.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

const canon = (v) =>
  v === null || typeof v !== 'object' ? JSON.stringify(v)
  : Array.isArray(v) ? `[${v.map(canon).join(',')}]`
  : `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}`;
const sha256 = (s) => createHash('sha256').update(s, 'utf8').digest('hex');

const [file, genesis] = process.argv.slice(2);
if (!file) { console.error('usage: node verify-audit.mjs <export.jsonl | -> [audit_genesis_hash]'); process.exit(2); }
const lines = readFileSync(file === '-' ? 0 : file, 'utf8').split(/\r?\n/).filter(Boolean);
let prev = genesis ?? JSON.parse(lines[0] ?? 'null')?.prev_hash;
for (const [i, line] of lines.entries()) {
  const { hash, ...event } = JSON.parse(line);
  // a line must be its event's canonical JSON: a duplicated key would show one value and hash another
  const ok = line === canon({ ...event, hash }) && event.seq === i + 1 && event.prev_hash === prev && sha256(`${prev}\n${canon(event)}`) === hash;
  if (!ok) { console.log(JSON.stringify({ verified: false, events_checked: i + 1, broken_at: i + 1 })); process.exit(1); }
  prev = hash;
}
console.log(JSON.stringify({ verified: true, events_checked: lines.length, broken_at: null, head: prev }));
