/** `svc audit verify` and `svc audit export`: a connection's audit chain, on the server or offline. */
import fs from 'node:fs';
import type { Command } from 'commander';
import { canon, ChainVerifier, type VerifyResult } from '../../../control-plane/audit/index.js';
import { CliFailure, EXIT, request } from '../http.js';
import { withSpinner } from '../output.js';
import { type CommandKit, type Obj, tool } from './kit.js';

/**
 * Verify an export offline with the published algorithm (docs/audit.md; control-plane/audit/chain.ts):
 * the first event has seq `afterSeq + 1` (an export after `after_seq`; 1 for a whole one) and links
 * to `link` (the connection's audit_genesis_hash, or for an export after `after_seq` the hash of
 * event `after_seq`; default: its own prev_hash), each next one to the previous.
 */
export function verifyExport(text: string, o: { readonly link?: string | undefined; readonly afterSeq?: number | undefined } = {}): VerifyResult & { head: string | null } {
  const genesis = o.link;
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  const events: Obj[] = [];
  const firstSeq = (o.afterSeq ?? 0) + 1;
  const broken = (i: number, reason: string) => ({ verified: false, events_checked: i + 1, broken_at: firstSeq + i, reason, head: null });
  for (const [i, line] of lines.entries()) {
    let e: unknown;
    try {
      e = JSON.parse(line) as unknown;
    } catch {
      e = undefined;
    }
    if (!e || typeof e !== 'object' || Array.isArray(e)) return broken(i, `line ${i + 1} is not a JSON event`);
    events.push(e as Obj);
  }
  const first = events[0];
  const v = new ChainVerifier(genesis ?? (typeof first?.['prev_hash'] === 'string' ? first['prev_hash'] : ''), firstSeq);
  let head: string | null = genesis ?? null;
  for (const [i, e] of events.entries()) {
    // the export writes each event as its canonical JSON: any other line (a key given twice shows
    // one value and parses to another) is not the event that was hashed, even if it verifies
    if (canon(e) !== lines[i]) return broken(i, `line ${i + 1} is not its event's canonical JSON as the export writes it (a key given twice, or the line rewritten)`);
    const { hash, ...body } = e;
    if (!v.push({ seq: typeof body['seq'] === 'number' ? body['seq'] : -1, body, hash: typeof hash === 'string' ? hash : '' })) break;
    head = typeof hash === 'string' ? hash : null;
  }
  const r = v.finish();
  return { ...r, head: r.verified ? head : null };
}

/** `s` as one word of a shell command: quoted when it holds anything but plain path characters */
const shellWord = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

function afterSeqOption(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d{1,15}$/.test(v)) throw new CliFailure(EXIT.usage, `--after-seq must be a whole number of 0 or more, not ${JSON.stringify(v)}`);
  return Number(v);
}

export function registerAuditCommands(program: Command, kit: CommandKit): void {
  const audit = program.command('audit').description('verify or export a connection’s audit chain');
  audit
    .command('verify')
    .description('verify a chain on the server, or an exported JSONL file offline (--offline)')
    .argument('[connection_id]')
    .option('--offline <file>', 'verify an export (svc audit export) with the published algorithm, without the server')
    .option('--genesis <hash>', 'with --offline: the hash the first event links to, to pin it: the connection’s audit_genesis_hash, or with --after-seq the hash of that event')
    .option('--after-seq <n>', 'with --offline: the export starts after this seq (GET …/audit?format=jsonl&after_seq=n)')
    .action(
      kit.action(async (c, id: string | undefined, o: { offline?: string; genesis?: string; afterSeq?: string }) => {
        let r: Obj;
        if (o.offline !== undefined) {
          if (id !== undefined) throw new CliFailure(EXIT.usage, 'give either a connection id or --offline <file>, not both');
          let text: string;
          try {
            text = fs.readFileSync(o.offline, 'utf8');
          } catch (err) {
            throw new CliFailure(EXIT.usage, `cannot read ${o.offline}: ${(err as Error).message}`);
          }
          r = { file: o.offline, ...verifyExport(text, { link: o.genesis, afterSeq: afterSeqOption(o.afterSeq) }) };
        } else {
          if (o.genesis !== undefined || o.afterSeq !== undefined) throw new CliFailure(EXIT.usage, '--genesis and --after-seq go with --offline <file>');
          if (id === undefined) throw new CliFailure(EXIT.usage, 'give a connection id (svc audit verify <connection_id>) or --offline <file>');
          r = await kit.call(c, 'verifying', tool('verify_audit')({ connection_id: id }));
        }
        kit.show(c, r, (x) =>
          x['verified'] === true
            ? `verified: ${String(x['events_checked'])} event(s) intact; head ${String(x['head'] ?? x['head_hash'])}\n`
            : `BROKEN at seq ${String(x['broken_at'])} (${String(x['events_checked'])} event(s) checked)${x['reason'] ? `: ${String(x['reason'])}` : ''}\n`,
        );
        if (r['verified'] !== true) kit.status = EXIT.verifyFailed;
      }),
    );
  audit
    .command('export')
    .description('export the chain as JSONL (one canonical event per line, oldest first)')
    .argument('<connection_id>')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(
      kit.action(async (c, id: string, o: { output?: string }) => {
        const r = await withSpinner(kit.io, 'exporting', () => request(c.client, tool('export_audit')({ connection_id: id })));
        const count = r.text.split('\n').filter(Boolean).length;
        if (o.output !== undefined) {
          try {
            fs.writeFileSync(o.output, r.text);
          } catch (err) {
            // as an unreadable --offline file is: the user's path, not a failure of the server
            throw new CliFailure(EXIT.usage, `cannot write ${o.output}: ${(err as Error).message}`);
          }
          // the export holds no genesis: the connection's own pins the first event (docs/audit.md)
          const genesis = await request(c.client, tool('describe_connection')({ connection_id: id })).then(
            (d) => (d.body as { audit_genesis_hash?: unknown } | undefined)?.audit_genesis_hash,
            () => undefined,
          );
          const pin = typeof genesis === 'string' ? shellWord(genesis) : `<audit_genesis_hash> (svc connection ${shellWord(id)} shows it)`;
          kit.show(c, { connection_id: id, events: count, file: o.output }, () => `${count} event(s) written to ${o.output}\nverify offline: svc audit verify --offline ${shellWord(o.output ?? '')} --genesis ${pin}\n`);
        } else kit.io.out(r.text);
      }),
    );
}
