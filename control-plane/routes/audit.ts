import { Readable } from 'node:stream';
import { Type } from 'typebox';
import { canon, eventsOf, pageOf, toEvent, verifyConnection } from '../audit/index.js';
import { getConnection } from '../connections/index.js';
import { principalOf } from '../http/auth.js';
import { type App, type Services, errors, limitParam, pageLimit } from './context.js';

export function auditRoutes(app: App, s: Services): void {
  app.get(
    '/v1/connections/:connection_id/audit',
    {
      schema: {
        summary: 'Audit events of a connection, oldest first (JSON, or JSONL with ?format=jsonl or Accept: application/x-ndjson)',
        tags: ['audit'],
        params: Type.Object({ connection_id: Type.String({ maxLength: 200 }) }),
        querystring: Type.Object(
          {
            format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('jsonl')])),
            after_seq: Type.Optional(Type.String({ pattern: '^[0-9]{1,9}$' })),
            limit: limitParam(1000),
          },
          { additionalProperties: false },
        ),
        response: { ...errors(400, 404) },
      },
    },
    async (req, reply) => {
      // refused before anything is read, and with ?format=jsonl too (which streams every event)
      const limit = pageLimit(req.query.limit, 1000);
      const conn = await getConnection(s.store, principalOf(req).orgId, req.params.connection_id);
      const after = Number(req.query.after_seq ?? 0);
      const jsonl = req.query.format === 'jsonl' || (req.query.format === undefined && (req.headers.accept ?? '').includes('application/x-ndjson'));
      if (jsonl) {
        reply.type('application/x-ndjson; charset=utf-8');
        reply.header('content-disposition', `attachment; filename="${conn.id}.audit.jsonl"`);
        const store = s.store;
        async function* lines(): AsyncGenerator<string> {
          for await (const e of eventsOf(store, conn.id, after)) yield `${canon(toEvent(e))}\n`;
        }
        return reply.send(Readable.from(lines()));
      }
      const { head, events } = await pageOf(s.store, conn.id, after, limit);
      const last = events[events.length - 1];
      return {
        connection_id: conn.id,
        audit_genesis_hash: conn.genesis_hash,
        head,
        events,
        next_after_seq: last && last.seq < head.seq ? last.seq : null,
      };
    },
  );

  app.get(
    '/v1/audit/verify',
    {
      schema: {
        summary: "Verify a connection's hash chain",
        tags: ['audit'],
        querystring: Type.Object({ connection_id: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
        response: {
          200: Type.Object({
            verified: Type.Boolean(),
            events_checked: Type.Integer(),
            broken_at: Type.Union([Type.Integer(), Type.Null()]),
            connection_id: Type.String(),
            audit_genesis_hash: Type.String(),
            head_hash: Type.String(),
            reason: Type.Optional(Type.String()),
          }),
          ...errors(400, 404),
        },
      },
    },
    async (req) => {
      const conn = await getConnection(s.store, principalOf(req).orgId, req.query.connection_id);
      const r = await verifyConnection(s.store, conn.id);
      return {
        verified: r.verified,
        events_checked: r.events_checked,
        broken_at: r.broken_at,
        connection_id: conn.id,
        audit_genesis_hash: conn.genesis_hash,
        head_hash: conn.head_hash,
        ...(r.reason ? { reason: r.reason } : {}),
      };
    },
  );
}
