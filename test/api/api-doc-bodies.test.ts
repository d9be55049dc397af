/**
 * docs/api.md lists what each operation answers: every field of every success body the served
 * OpenAPI document describes (nested objects included) is named in the operation's row of the
 * endpoint table, or in the entry of "Objects in responses" for an object the row names (entries
 * name the objects they hold in turn). The audit event and the webhook envelope are described in
 * docs/audit.md and docs/webhooks.md, and the MCP paths speak JSON-RPC (docs/cli-and-mcp.md).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/root.js';
import { api, startServer, type TestServer } from '../helpers/server.js';

type Json = Record<string, unknown>;

/** objects described in other documents, and bodies that are not the API's own */
const ELSEWHERE = new Set(['AuditEvent', 'WebhookEnvelope', 'JsonRpcResponse', 'JsonRpcError', 'Error']);
const SKIP_PATHS = new Set(['/mcp', '/v1/mcp', '/openapi.json']);

let srv: TestServer;
let doc: { paths: Record<string, Record<string, Json>>; components: { schemas: Record<string, Json> } };
t.before(async () => {
  srv = await startServer();
  doc = (await api<typeof doc>(srv.url, 'GET', '/openapi.json')).body;
});
t.teardown(() => srv.close());

const normal = (p: string): string => p.split('?')[0]!.replace(/\{[^}]+\}/g, '{}');
const names = (text: string, word: string): boolean => new RegExp(`(?<![A-Za-z0-9_])${word}(?![A-Za-z0-9_])`).test(text);

/** the endpoint table's rows, by "METHOD /path" (path parameters as {}) */
function rows(md: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of md.split('\n')) {
    const m = /^\| (GET|POST|PUT|PATCH|DELETE) \| (.*?) \| (.*) \|$/.exec(line);
    if (!m) continue;
    for (const p of m[2]!.matchAll(/`([^`]+)`/g)) out.set(`${m[1]} ${normal(p[1]!)}`, m[3]!);
  }
  return out;
}

/** "Objects in responses": each `- **Name**: …` entry's text */
function objects(md: string): Map<string, string> {
  const out = new Map<string, string>();
  const start = md.indexOf('## Objects in responses');
  if (start < 0) return out;
  const section = md.slice(start).split(/\n## /)[0]!;
  for (const m of section.matchAll(/^- \*\*([A-Za-z]+)\*\*([\s\S]*?)(?=^- \*\*|^## |(?![\s\S]))/gm)) out.set(m[1]!, m[2]!);
  return out;
}

/** every field name in a schema, through references to components (but those described elsewhere) */
function fields(schema: unknown, out: Set<string>, seen: Set<string>): void {
  if (!schema || typeof schema !== 'object') return;
  const s = schema as Json;
  const ref = typeof s['$ref'] === 'string' ? (s['$ref'] as string).split('/').pop()! : undefined;
  if (ref !== undefined) {
    if (ELSEWHERE.has(ref) || seen.has(ref)) return;
    seen.add(ref);
    fields(doc.components.schemas[ref], out, seen);
    return;
  }
  for (const [name, p] of Object.entries((s['properties'] ?? {}) as Json)) {
    out.add(name);
    fields(p, out, seen);
  }
  if (s['items']) fields(s['items'], out, seen);
  for (const k of ['anyOf', 'oneOf', 'allOf']) for (const x of (s[k] as unknown[] | undefined) ?? []) fields(x, out, seen);
}

/** the row's text, and that of every object it names, and of those they name */
function described(row: string, objs: Map<string, string>): string {
  let text = row;
  const taken = new Set<string>();
  for (let grew = true; grew; ) {
    grew = false;
    for (const [name, entry] of objs) {
      if (!taken.has(name) && names(text, name)) {
        taken.add(name);
        text += `\n${entry}`;
        grew = true;
      }
    }
  }
  return text;
}

t.test('every field of every success body is named in docs/api.md', async (t) => {
  const md = readFileSync(path.join(ROOT, 'docs', 'api.md'), 'utf8');
  const table = rows(md);
  const objs = objects(md);
  let checked = 0;
  for (const [p, item] of Object.entries(doc.paths)) {
    if (SKIP_PATHS.has(p) || p === '/v1/auth/status') continue;
    for (const [method, op] of Object.entries(item)) {
      const key = `${method.toUpperCase()} ${normal(p)}`;
      for (const [status, res] of Object.entries((op['responses'] ?? {}) as Record<string, Json>)) {
        if (!status.startsWith('2')) continue;
        const schema = ((res['content'] as Json | undefined)?.['application/json'] as Json | undefined)?.['schema'];
        if (!schema) continue;
        const row = table.get(key);
        t.ok(row !== undefined, `${key} has a row in the endpoint table`);
        if (row === undefined) continue;
        const text = described(row, objs);
        const want = new Set<string>();
        fields(schema, want, new Set());
        const missing = [...want].filter((f) => !names(text, f));
        t.same(missing, [], `${key} ${status}: every field it answers is named`);
        checked++;
      }
    }
  }
  t.ok(checked >= 35, `${checked} success bodies checked`);
});
