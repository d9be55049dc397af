/**
 * http/errors.ts on a bare fastify with the app's validator options: a value that is none of a
 * field's literals is refused naming them (details.allowed), and only then: a field that also
 * takes something other than those literals (a number, an object of another shape) is not said to
 * take only them.
 */
import Fastify from 'fastify';
import t from 'tap';
import { Type, type TSchema } from 'typebox';
import { registerErrorHandling } from '../../control-plane/http/errors.js';
import type { TapTest } from '../helpers/tap.js';

interface Refusal {
  status: number;
  message: string;
  details: Record<string, unknown>;
}

async function refusal(t: TapTest, body: TSchema, payload: unknown): Promise<Refusal> {
  const app = Fastify({ ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } } });
  t.teardown(() => app.close());
  registerErrorHandling(app);
  app.post('/x', { schema: { body } }, async () => ({ ok: true }));
  const r = await app.inject({ method: 'POST', url: '/x', payload: payload as Record<string, unknown> });
  const e = (r.json() as { error: { message: string; details: Record<string, unknown> } }).error;
  return { status: r.statusCode, message: e.message, details: e.details };
}

const AB = Type.Union([Type.Literal('a'), Type.Literal('b')]);

t.test('a union of literals: the values are named', async (t) => {
  const r = await refusal(t, Type.Object({ mode: AB }), { mode: 'c' });
  t.equal(r.status, 400);
  t.equal(r.message, 'body field "mode" must be one of "a", "b"');
  t.same(r.details['allowed'], ['a', 'b']);
  const mixed = await refusal(t, Type.Object({ mode: Type.Union([Type.Literal('a'), Type.Literal(1)]) }), { mode: 'c' });
  t.same(mixed.details['allowed'], ['a', 1], 'literals of two types');
  const listed = await refusal(t, Type.Object({ modes: Type.Array(AB) }), { modes: ['a', 'z'] });
  t.equal(listed.message, 'body field "modes.1" must be one of "a", "b"', 'an item of an array');
  const e = await refusal(t, Type.Object({ mode: Type.Unsafe<string>({ type: 'string', enum: ['x', 'y'] }) }), { mode: 'z' });
  t.same(e.details['allowed'], ['x', 'y'], 'an enum');
});

t.test('a union of a literal and a number: not said to take only the literal', async (t) => {
  const r = await refusal(t, Type.Object({ limit: Type.Union([Type.Literal('all'), Type.Integer()]) }), { limit: 'some' });
  t.equal(r.status, 400);
  t.equal(r.details['allowed'], undefined, 'no list of allowed values: a number is allowed too');
  t.notMatch(r.message, /must be one of/);
  const e = await refusal(t, Type.Object({ limit: Type.Union([Type.Unsafe<string>({ type: 'string', enum: ['all', 'none'] }), Type.Integer()]) }), { limit: 'some' });
  t.equal(e.details['allowed'], undefined, 'nor with an enum beside the number');
});

t.test('a literal inside one shape of a union of objects: not said to be the only value', async (t) => {
  const shapes = Type.Union([
    Type.Object({ kind: Type.Literal('a'), x: Type.Integer() }),
    Type.Object({ kind: Type.Literal('b'), y: Type.Integer() }),
  ]);
  // kind "b" is right; y is what is wrong, and the first issue ajv reports is kind ≠ "a"
  const r = await refusal(t, Type.Object({ spec: shapes }), { spec: { kind: 'b', x: 1, y: 'no' } });
  t.equal(r.status, 400);
  t.equal(r.details['allowed'], undefined);
  t.notMatch(r.message, /must be one of "a"/);
});
