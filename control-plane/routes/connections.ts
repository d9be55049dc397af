import { type Static, Type } from 'typebox';
import { connectionRecord, createConnection, getConnection, listConnections, revokeConnection, TTL_MAX, TTL_MIN } from '../connections/index.js';
import { principalOf } from '../http/auth.js';
import { clientKey, RefusalBudget } from '../http/rate-limit.js';
import { isApiError } from '../errors.js';
import { runQuery } from '../query/engine.js';
import { clientClosed } from '../query/errors.js';
import { whenCallerLeaves } from '../http/in-process.js';
import { describeSchema } from '../query/describe.js';
import { type App, type Services, ErrorSchema, errors, limitParam, pageLimit, queryDeps } from './context.js';

const ConnectionId = Type.Object({ connection_id: Type.String({ maxLength: 200 }) });

const Exact = { additionalProperties: false } as const;
/** GET /v1/connections/{id}/schema: what the connection may read (query/describe.ts) */
const SchemaListing = Type.Object(
  {
    connection_id: Type.String(),
    target_id: Type.String(),
    tables: Type.Array(
      Type.Object(
        {
          name: Type.String({ description: 'the name to write in SQL (schema-qualified on PostgreSQL, as in scope_applied)' }),
          columns: Type.Array(
            Type.Object(
              {
                name: Type.String(),
                type: Type.String({ description: 'a readable type name as the source spells it, e.g. integer, text, timestamp with time zone, varchar(255)' }),
                nullable: Type.Boolean(),
              },
              Exact,
            ),
          ),
          row_estimate: Type.Optional(Type.Integer({ minimum: 0, description: "the source's own estimate of the table's rows (PostgreSQL reltuples, MySQL table_rows); absent when unknown or when a filter: scope restricts the table's rows" })),
        },
        Exact,
      ),
    ),
    missing_tables: Type.Array(Type.String(), { description: 'scoped tables the source does not show: they do not exist, or the credential can read none of their columns' }),
    truncated: Type.Boolean({ description: "the source's catalog held more columns than one listing reads" }),
    audit_event_id: Type.String(),
  },
  Exact,
);

export function connectionRoutes(app: App, s: Services): void {
  const refusals = new RefusalBudget(s.config.refusedPerMinute, s.store);
  app.post(
    '/v1/connections',
    {
      schema: {
        summary: 'Open a scoped connection to a target',
        tags: ['connections'],
        body: Type.Object(
          {
            target_id: Type.String({ minLength: 1, maxLength: 200 }),
            scopes: Type.Array(Type.String({ minLength: 1, maxLength: 300 }), { minItems: 1, maxItems: 64 }),
            tier: Type.Optional(Type.String({ minLength: 1, maxLength: 50 })),
            ttl_seconds: Type.Optional(Type.Integer({ minimum: TTL_MIN, maximum: TTL_MAX })),
          },
          { additionalProperties: false },
        ),
        response: { 201: Type.Object({ connectionId: Type.String(), audit_genesis_hash: Type.String(), expires_at: Type.String() }, { additionalProperties: true }), ...errors(400, 404) },
      },
    },
    async (req, reply) => {
      const row = await createConnection(s.store, s.catalogue, principalOf(req).orgId, req.body);
      return reply.code(201).send(connectionRecord(row) as { connectionId: string; audit_genesis_hash: string; expires_at: string });
    },
  );

  app.get(
    '/v1/connections',
    {
      schema: {
        summary: 'List connections, newest first',
        tags: ['connections'],
        querystring: Type.Object(
          {
            status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('expired'), Type.Literal('revoked')])),
            limit: limitParam(500),
            cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
          },
          { additionalProperties: false },
        ),
        response: { ...errors(400) },
      },
    },
    async (req) => {
      const limit = pageLimit(req.query.limit, 500);
      const page = await listConnections(s.store, principalOf(req).orgId, { status: req.query.status, limit, before: req.query.cursor });
      return { connections: page.connections.map(connectionRecord), next_cursor: page.next_cursor };
    },
  );

  app.get(
    '/v1/connections/:connection_id',
    { schema: { summary: 'One connection', tags: ['connections'], params: ConnectionId, response: { ...errors(404) } } },
    async (req) => connectionRecord(await getConnection(s.store, principalOf(req).orgId, req.params.connection_id)),
  );

  app.post(
    '/v1/connections/:connection_id/revoke',
    { schema: { summary: 'Revoke a connection (idempotent)', tags: ['connections'], params: ConnectionId, response: { ...errors(404) } } },
    async (req) => {
      const p = principalOf(req);
      const revoked = await revokeConnection(s.store, s.connections, p.orgId, req.params.connection_id, p.keyId);
      // committed: the connection's running statements stop now, and answer before this does
      await s.running.revoke(revoked.id);
      return connectionRecord(revoked);
    },
  );

  app.get(
    '/v1/connections/:connection_id/schema',
    {
      schema: {
        summary: 'The tables and columns the connection may read, listed from the source; audited, not billed',
        description:
          "Only what the connection's scopes allow, read by the service itself (never through SQL of yours): the demo and API targets from their definitions, http-files from the registered files, PostgreSQL (postgres, postgres-relay) from its catalog and MySQL from information_schema, as the stored credential (or the relay's database role) may read them. Not billed, rate limited like every call, appended to the connection's audit chain as a `schema` event. 410 on a revoked or expired connection; 503 relay_unavailable when the relay has no live tunnel, cannot reach its database or is too old to be sent a statement (details.reason relay_outdated), 503 service_unavailable when the database cannot be reached or cannot list its tables.",
        tags: ['connections'],
        params: ConnectionId,
        response: { ...errors(400, 404, 410, 503, 504), 200: SchemaListing },
      },
    },
    async (req, reply) => {
      const { orgId, keyId } = principalOf(req);
      // the agent closing its connection before the answer stops the listing at its source
      const gone = new AbortController();
      const stopWatching = whenCallerLeaves(req, reply, () => gone.abort(clientClosed()));
      try {
        // the same shape, its arrays read-only
        return (await s.track(() => describeSchema(queryDeps(s), orgId, req.params.connection_id, { keyId, gone: gone.signal }))) as Static<typeof SchemaListing>;
      } finally {
        stopWatching();
      }
    },
  );

  app.post(
    '/v1/connections/:connection_id/query',
    {
      schema: {
        summary: 'Run one read statement, rewritten to the connection scopes; metered and audited',
        tags: ['queries'],
        params: ConnectionId,
        body: Type.Object({ sql: Type.String({ minLength: 1, maxLength: 100_000 }) }, { additionalProperties: false }),
        response: { ...errors(400, 402, 403, 404, 410, 413, 429, 503, 504) },
      },
      // runQuery reads the key's revocation from the store before anything runs or is charged
      config: { keyRereadByHandler: true },
    },
    async (req, reply) => {
      const { orgId, keyId } = principalOf(req);
      // refused() if the statement was refused, ended() once it has ended: meanwhile the key's next
      // queries here are let through only while its refusal budget covers them (http/rate-limit.ts RefusalBudget)
      const refusal = await refusals.check(keyId);
      // the agent closing its connection before the answer stops the statement at its source
      const gone = new AbortController();
      const stopWatching = whenCallerLeaves(req, reply, () => gone.abort(clientClosed()));
      try {
        return await s.track(() => runQuery(queryDeps(s), orgId, req.params.connection_id, req.body.sql, { address: clientKey(req.ip), keyId, keyCached: req.principalCached === true, gone: gone.signal }));
      } catch (err) {
        // runQuery read the key's revocation from the store before answering (http/auth.ts cachedKeyAnswer)
        req.principalCached = false;
        // refused statements cost nothing, so they count against the key's budget; a statement that
        // ran at its source before it failed was charged instead
        if (isApiError(err) && (err.code === 'invalid_sql' || err.code === 'scope_violation') && typeof err.details?.['cost_cents'] !== 'number') await refusal.refused().catch(() => undefined); // the refusal is the answer, whatever the budget's store says
        throw err;
      } finally {
        stopWatching();
        refusal.ended();
      }
    },
  );
}
