/**
 * Many `http-files` queries of one big file at once, through the real API of the compiled control
 * plane run as a child process (so its memory is its own): an HTTPS file server on port 0 (a CA
 * made here, trusted by the child through NODE_EXTRA_CA_CERTS) that counts the downloads it is
 * serving at once, in all and per bearer token (one token per organization), and the child's peak
 * resident memory while the queries run (its high-water mark, reset before they start).
 */
import fs from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createCa, issueServerCertificate } from '../../../pki/index.js';
import { api, openConnection, signupAgent, tempDir } from '../../helpers/server.js';
import { exitOf, startControlPlane } from '../../helpers/control-plane-process.js';

export interface LoadOptions {
  /** size of the CSV served, bytes (about) */
  readonly fileBytes: number;
  /** queries sent at once, per organization */
  readonly queriesPerOrg: number;
  readonly orgs: number;
  /** queries sent at once before the measured ones (default 1) */
  readonly warm?: number;
  /** extra environment of the control plane (e.g. SVC_LIVE_REST_ENGINES) */
  readonly env?: Record<string, string>;
}

export interface Answer {
  readonly status: number;
  readonly code: string | undefined;
  readonly reason: string | undefined;
  readonly retryAfter: string | null;
  readonly rows: unknown;
}

export interface LoadOutcome {
  readonly answers: Answer[];
  /** downloads the file server served at once, at most: in all, and for one token */
  readonly maxDownloads: number;
  readonly maxDownloadsPerOrg: number;
  /** GET requests for the file, in all */
  readonly downloads: number;
  /** the control plane's resident memory before the queries, and its peak while they ran, bytes */
  readonly rssBefore: number;
  readonly peakRss: number;
}

/** `rows` data lines of a CSV, each about 100 bytes, the first column numbering them */
export function bigCsv(bytes: number): Buffer {
  const line = (i: number): string => `${i},customer_${i % 1000},${(i % 997) + 0.25},${'note '.repeat(14)}${i % 7}\n`;
  const parts: string[] = ['id,customer,amount,note\n'];
  let size = parts[0]!.length;
  for (let i = 1; size < bytes; i++) {
    const l = line(i);
    parts.push(l);
    size += l.length;
  }
  return Buffer.from(parts.join(''), 'latin1');
}

async function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const text = await fs.readFile(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) * 1024 : 0;
}

/** Reset the process's peak RSS (Linux: 5 to clear_refs); falls back to sampling when that is not allowed. */
async function resetPeak(pid: number): Promise<boolean> {
  try {
    await fs.writeFile(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

export async function runLoad(o: LoadOptions): Promise<LoadOutcome> {
  const ca = createCa({ keyBits: 2048 });
  const cert = issueServerCertificate(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  const dir = await tempDir('svc-files-load-');
  const caFile = path.join(dir, 'ca.pem');
  await fs.writeFile(caFile, ca.certPem);
  const body = bigCsv(o.fileBytes);

  let active = 0;
  let maxDownloads = 0;
  let downloads = 0;
  const activeBy = new Map<string, number>();
  let maxDownloadsPerOrg = 0;
  const chunk = 256 * 1024;
  const files = https.createServer({ key: cert.keyPem, cert: cert.certPem }, (req, res) => {
    const token = req.headers['authorization'] ?? '';
    if (!token.startsWith('Bearer ')) {
      res.writeHead(401).end();
      return;
    }
    downloads++;
    active++;
    maxDownloads = Math.max(maxDownloads, active);
    const mine = (activeBy.get(token) ?? 0) + 1;
    activeBy.set(token, mine);
    maxDownloadsPerOrg = Math.max(maxDownloadsPerOrg, mine);
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      active--;
      activeBy.set(token, (activeBy.get(token) ?? 1) - 1);
    };
    res.on('close', end);
    res.writeHead(200, { 'content-type': 'text/csv', 'content-length': String(body.length) });
    // in pieces, as a real server sends a big file: each download stays open while it is read
    let at = 0;
    const more = (): void => {
      while (at < body.length) {
        const piece = body.subarray(at, at + chunk);
        at += piece.length;
        if (!res.write(piece)) return void res.once('drain', () => setImmediate(more));
      }
      res.end();
    };
    more();
  });
  await new Promise<void>((r) => files.listen(0, '127.0.0.1', r));
  const fileUrl = `https://127.0.0.1:${(files.address() as AddressInfo).port}/big.csv`;

  const cp = await startControlPlane({
    SVC_DATA_DIR: dir,
    PORT: '0',
    SVC_TUNNEL_PORT: '0',
    LOG_LEVEL: 'info',
    SVC_RATE_LIMIT: '100000',
    SVC_SIGNUP_RATE_LIMIT: '100000',
    SVC_DEMO_WORKERS: '1',
    SVC_HTTP_FILES_ALLOW_PRIVATE: '1',
    SVC_QUERY_TIMEOUT_MS: '60000',
    NODE_EXTRA_CA_CERTS: caFile,
    ...(o.env ?? {}),
  });
  const pid = cp.child.pid as number;
  try {
    const orgs = await Promise.all(
      Array.from({ length: o.orgs }, async (_, i) => {
        const a = await signupAgent(cp.url, `Files Org ${i}`);
        const cred = await api(cp.url, 'POST', '/v1/connections/credentials', {
          key: a.key,
          body: { connector_kind: 'http-files', secret: `files-token-org-${i}-0123456789`, options: { files: [{ table: 'big', url: fileUrl }] } },
        });
        if (cred.status !== 201) throw new Error(`credential: ${cred.status} ${cred.text}`);
        return { key: a.key, conn: await openConnection(cp.url, a.key, 'http-files', ['read:big']) };
      }),
    );
    const ask = async (org: { key: string; conn: string }): Promise<Answer> => {
      const r = await api<{ rows?: unknown; error?: { code?: string; details?: { reason?: string } } }>(cp.url, 'POST', `/v1/connections/${org.conn}/query`, {
        key: org.key,
        body: { sql: 'SELECT count(*)::int AS n, max(id)::int AS last FROM big' },
      });
      return { status: r.status, code: r.body.error?.code, reason: r.body.error?.details?.reason, retryAfter: r.headers.get('retry-after'), rows: r.body.rows };
    };
    // one query first: the query engine's one-off start (its image made once per process) is not what is measured
    // first as many queries as there are engines: the engines' one-off start (and the image they
    // share, made once per process) is not what is measured
    const t0 = Date.now();
    for (const first of await Promise.all(Array.from({ length: o.warm ?? 1 }, () => ask(orgs[0]!)))) {
      if (first.status !== 200) throw new Error(`warm-up query: ${JSON.stringify(first)}`);
    }
    if (process.env['FILES_LOAD_DEBUG']) console.error(`warm-up ${Date.now() - t0} ms`);
    maxDownloads = 0;
    maxDownloadsPerOrg = 0;
    downloads = 0;

    const rssBefore = await procStatus(pid, 'VmRSS');
    const exact = await resetPeak(pid);
    let sampled = rssBefore;
    const sampler = setInterval(() => {
      procStatus(pid, 'VmRSS').then(
        (v) => (sampled = Math.max(sampled, v)),
        () => undefined,
      );
    }, 25);
    let answers: Answer[];
    try {
      answers = await Promise.all(orgs.flatMap((org) => Array.from({ length: o.queriesPerOrg }, () => ask(org))));
    } finally {
      clearInterval(sampler);
    }
    if (process.env['FILES_LOAD_DEBUG']) console.error(`queries ${Date.now() - t0} ms`);
    const peakRss = exact ? Math.max(sampled, await procStatus(pid, 'VmHWM')) : sampled;
    return { answers, maxDownloads, maxDownloadsPerOrg, downloads, rssBefore, peakRss };
  } finally {
    cp.child.kill('SIGTERM');
    await exitOf(cp.child);
    await new Promise<void>((r) => {
      files.closeAllConnections();
      files.close(() => r());
    });
    await fs.rm(dir, { recursive: true, force: true });
  }
}

export const MB = 1024 * 1024;
