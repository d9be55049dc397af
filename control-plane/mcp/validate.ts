/**
 * A tool's arguments checked against its input schema, as the HTTP API checks a body: no argument
 * outside the schema, every required one there, each of the right type and range. A refusal is a
 * tool error shaped like an API error (`invalid_request`, the argument named in the message and in
 * `details`), so an agent reads it like every other failed call; nothing is called.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

/** A tool's input schema as advertised and enforced: its arguments and no others. */
export const inputSchema = (shape: z.ZodRawShape): z.ZodObject => z.object(shape).strict();

/** the most problems one refusal names */
const MAX_ISSUES = 20;

interface Issue {
  readonly field: string;
  readonly problem: string;
}

/** zod's issues in the API's words (http/errors.ts): `argument "sql" is required`. */
function issuesOf(error: z.ZodError, args: unknown): Issue[] {
  const out: Issue[] = [];
  // zod does not report the input it refused: whether the argument was sent at all is looked up
  const sent = (path: readonly PropertyKey[]): boolean => {
    let v: unknown = args;
    for (const k of path) {
      if (v === null || typeof v !== 'object' || !Object.hasOwn(v, k)) return false;
      v = (v as Record<PropertyKey, unknown>)[k];
    }
    return v !== undefined;
  };
  for (const issue of error.issues) {
    const at = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) out.push({ field: at ? `${at}.${key}` : key, problem: 'is not a known argument' });
    } else if (issue.code === 'invalid_type' && !sent(issue.path)) {
      out.push({ field: at || 'arguments', problem: 'is required' });
    } else {
      out.push({ field: at || 'arguments', problem: issue.message.replace(/^Invalid input: /, '').replace(/^[A-Z]/, (c) => c.toLowerCase()) });
    }
  }
  // missing arguments first, then unknown ones, then the rest, as a reader fixes them
  const rank = (i: Issue): number => (i.problem === 'is required' ? 0 : i.problem === 'is not a known argument' ? 1 : 2);
  return out.sort((a, b) => rank(a) - rank(b));
}

/** The arguments as parsed, or the tool error refusing them. */
export function checkArguments(tool: string, schema: z.ZodObject, args: unknown): { ok: true; args: Record<string, unknown> } | { ok: false; result: CallToolResult } {
  const parsed = schema.safeParse(args ?? {});
  if (parsed.success) return { ok: true, args: parsed.data as Record<string, unknown> };
  const all = issuesOf(parsed.error, args ?? {});
  // an agent sending a thousand unknown arguments gets the first ones named, not a thousand lines
  const issues = all.slice(0, MAX_ISSUES);
  const first = issues[0] ?? { field: 'arguments', problem: 'are invalid' };
  const more = all.length > issues.length ? `; and ${all.length - issues.length} more problem(s)` : '';
  const message = `${issues.map((i) => `argument ${JSON.stringify(i.field)} ${i.problem}`).join('; ')}${more}; the tool's input schema (tools/list) lists its arguments`;
  const error = { code: 'invalid_request', message, status: 400, details: { field: first.field, problem: first.problem, in: 'arguments', issues } };
  return { ok: false, result: { isError: true, content: [{ type: 'text', text: `${tool} failed: invalid_request: ${message}` }], structuredContent: { error } } };
}
