#!/usr/bin/env node
// Verify an svc audit export offline: node verify-audit.mjs <export.jsonl | -> [audit_genesis_hash] [after_seq]
// Needs nothing but Node.js, and runs from any directory (the export's path is taken relative to
// the current one; - reads it from standard input). Implements the algorithm published in docs/audit.md.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

const canon = (v) =>
  v === null || typeof v !== 'object' ? JSON.stringify(v)
  : Array.isArray(v) ? `[${v.map(canon).join(',')}]`
  : `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}`;
const sha256 = (s) => createHash('sha256').update(s, 'utf8').digest('hex');

const [file, link, afterSeq = '0'] = process.argv.slice(2);
if (!file || !/^\d{1,15}$/.test(afterSeq)) { console.error('usage: node verify-audit.mjs <export.jsonl | -> [audit_genesis_hash | hash of event after_seq | -] [after_seq]'); process.exit(2); }
const lines = readFileSync(file === '-' ? 0 : file, 'utf8').split(/\r?\n/).filter(Boolean);
const first = Number(afterSeq) + 1; // the seq of the first line
let prev = link && link !== '-' ? link : undefined; // without it: the first event's own prev_hash
for (const [i, line] of lines.entries()) {
  let event, hash;
  try { ({ hash, ...event } = JSON.parse(line)); } catch { event = undefined; }
  if (i === 0) prev ??= event?.prev_hash;
  // a line must be its event's canonical JSON: a duplicated key would show one value and hash another
  const ok = event !== undefined && line === canon({ ...event, hash }) && event.seq === first + i && event.prev_hash === prev && sha256(`${prev}\n${canon(event)}`) === hash;
  if (!ok) { console.log(JSON.stringify({ verified: false, events_checked: i + 1, broken_at: first + i })); process.exit(1); }
  prev = hash;
}
console.log(JSON.stringify({ verified: true, events_checked: lines.length, broken_at: null, head: prev ?? null }));
