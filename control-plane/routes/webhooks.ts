/**
 * Webhooks (docs/webhooks.md): receiver configuration, delivery history and replay, the
 * mock-event trigger and the sandbox chaos profile.
 */
import { Type } from 'typebox';
import { ApiError } from '../errors.js';
import { principalOf } from '../http/auth.js';
import type { MasterKey } from '../secrets/index.js';
import {
  assertMockRoom,
  CHAOS_MODES,
  chaosProfile,
  DEFAULT_SCENARIO,
  DELIVERY_STATUSES,
  deleteEndpoint,
  enqueue,
  getChaos,
  getDelivery,
  hasEndpoint,
  listDeliveries,
  listEndpoints,
  mockReplayAdmission,
  replayDelivery,
  SCENARIOS,
  scenario,
  scenarioResource,
  setChaos,
  setEndpoint,
  type ChaosMode,
} from '../webhooks/index.js';
import { type App, type Services, errors, limitParam, pageLimit } from './context.js';

export interface WebhookHooks {
  /** the master key that seals new secrets */
  readonly sealingKey: () => Promise<MasterKey>;
  /** wake the delivery worker after a commit that enqueued something */
  readonly kick: () => void;
}

const Id = Type.String({ minLength: 1, maxLength: 200 });
const Open = { additionalProperties: true };

export function webhookRoutes(app: App, s: Services, hooks: WebhookHooks): void {
  const allowPrivate = s.config.webhookAllowPrivate;

  app.post(
    '/v1/agent/webhook',
    {
      schema: {
        summary: 'Set the organization default webhook receiver, or a connection override (with connection_id); a generated secret is shown once',
        tags: ['webhooks'],
        body: Type.Object(
          {
            url: Type.String({ minLength: 1, maxLength: 8192 }),
            secret: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
            connection_id: Type.Optional(Id),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ url: Type.String() }, Open), ...errors(400, 404) },
      },
    },
    async (req) => setEndpoint(s.store, await hooks.sealingKey(), principalOf(req).orgId, req.body, allowPrivate) as Promise<{ url: string }>,
  );

  app.get(
    '/v1/agent/webhook',
    { schema: { summary: 'The webhook receivers: the organization default and the connection overrides (never the secrets)', tags: ['webhooks'], response: { ...errors() } } },
    async (req) => listEndpoints(s.store, principalOf(req).orgId),
  );

  app.delete(
    '/v1/agent/webhook',
    {
      schema: {
        summary: 'Remove the organization default webhook, or a connection override (with connection_id)',
        tags: ['webhooks'],
        querystring: Type.Object({ connection_id: Type.Optional(Id) }, { additionalProperties: false }),
        response: { 204: Type.Null(), ...errors(400, 404) },
      },
    },
    async (req, reply) => {
      await deleteEndpoint(s.store, principalOf(req).orgId, req.query.connection_id);
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/v1/webhooks/deliveries',
    {
      schema: {
        summary: 'Deliveries, newest first, each with every attempt (time, status code, duration, error class, first bytes of the answer)',
        tags: ['webhooks'],
        querystring: Type.Object(
          {
            connection_id: Type.Optional(Id),
            status: Type.Optional(Type.Union(DELIVERY_STATUSES.map((x) => Type.Literal(x)))),
            event: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
            limit: limitParam(500),
          },
          { additionalProperties: false },
        ),
        response: { ...errors(400, 404) },
      },
    },
    async (req) => listDeliveries(s.store, principalOf(req).orgId, { connectionId: req.query.connection_id, status: req.query.status, event: req.query.event, limit: pageLimit(req.query.limit, 500) }),
  );

  app.get(
    '/v1/webhooks/deliveries/:delivery_id',
    { schema: { summary: 'One delivery with its attempts and the envelope as sent', tags: ['webhooks'], params: Type.Object({ delivery_id: Id }), response: { ...errors(404) } } },
    async (req) => getDelivery(s.store, principalOf(req).orgId, req.params.delivery_id),
  );

  app.post(
    '/v1/webhooks/deliveries/:delivery_id/replay',
    {
      schema: {
        summary: 'Send a delivery again: same delivery id, same bytes, a fresh attempt (and retry schedule); a mock event counts against the pending bound again (429)',
        tags: ['webhooks'],
        params: Type.Object({ delivery_id: Id }),
        response: { 202: Type.Object({ delivery_id: Type.String() }, Open), ...errors(404, 409, 429) },
      },
    },
    async (req, reply) => {
      const orgId = principalOf(req).orgId;
      const out = await replayDelivery(s.store, orgId, req.params.delivery_id, mockReplayAdmission(orgId, s.config.webhookMockPendingMax));
      hooks.kick();
      return reply.code(202).send(out as { delivery_id: string });
    },
  );

  app.get(
    '/v1/webhooks/scenarios',
    { schema: { summary: 'Scenario ids of the mock events (healthcare demo pack)', tags: ['webhooks'], response: { ...errors() } } },
    async () => ({ default: DEFAULT_SCENARIO, scenarios: SCENARIOS.map((x) => ({ id: x.id, event: x.event, description: x.description })) }),
  );

  app.post(
    '/v1/webhooks/trigger-mock-event',
    {
      schema: {
        summary: 'Send a mock healthcare event through the signed pipeline (same queue, signing and retries as real events); 429 while the organization has too many mock events pending',
        tags: ['webhooks'],
        body: Type.Optional(Type.Object({ scenario_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })), connection_id: Type.Optional(Id) }, { additionalProperties: false })),
        response: { 202: Type.Object({ delivery_id: Type.String(), event: Type.String() }, Open), ...errors(400, 404, 429) },
      },
    },
    async (req, reply) => {
      const orgId = principalOf(req).orgId;
      const body = req.body ?? {};
      const sc = scenario(body.scenario_id ?? DEFAULT_SCENARIO);
      if (!sc) {
        throw new ApiError('invalid_request', `unknown scenario_id ${JSON.stringify(body.scenario_id)}; one of: ${SCENARIOS.map((x) => x.id).join(', ')}`, {
          field: 'scenario_id',
          allowed: SCENARIOS.map((x) => x.id),
          scenarios: SCENARIOS.map((x) => x.id),
        });
      }
      const connectionId = body.connection_id ?? null;
      const queued = await s.store.tx(async (sql) => {
        if (connectionId !== null) {
          const owned = await sql.query('SELECT 1 FROM connections WHERE id = $1 AND org_id = $2', [connectionId, orgId]);
          if (owned.length === 0) throw new ApiError('not_found', `connection ${JSON.stringify(connectionId)} not found; list yours with GET /v1/connections`, { field: 'connection_id' });
        }
        await assertMockRoom(sql, orgId, s.config.webhookMockPendingMax);
        // queued even before a receiver is configured: its attempts fail as no_endpoint (the
        // delivery's history says so) and are retried, so one configured meanwhile receives it
        const receiver = await hasEndpoint(sql, orgId, connectionId);
        const q = await enqueue(sql, { orgId, connectionId, event: sc.event, environment: 'sandbox', resource: scenarioResource(sc), data: { scenario_id: sc.id } }, { always: true });
        return q && { ...q, receiver };
      });
      if (!queued) throw new Error('svc: the mock event was not queued');
      hooks.kick();
      const { receiver, ...answer } = queued;
      return reply.code(202).send({
        ...answer,
        scenario_id: sc.id,
        receiver_configured: receiver,
        ...(receiver ? {} : { note: 'no webhook receiver is configured: the delivery is retried on its schedule and arrives once one is set (POST /v1/agent/webhook), or replay it then' }),
      } as { delivery_id: string; event: string });
    },
  );

  const ChaosBody = Type.Object(
    {
      mode: Type.Union(CHAOS_MODES.map((m) => Type.Literal(m))),
      failures: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 })),
      retry_after_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
      delay_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 60_000 })),
    },
    { additionalProperties: false },
  );

  app.patch(
    '/v1/sandbox/webhook-reliability',
    {
      schema: {
        summary: "Inject a fault into this organization's own deliveries: transient_503, slow, rate_limit, or off",
        tags: ['webhooks'],
        body: ChaosBody,
        response: { 200: Type.Object({ mode: Type.String() }, Open), ...errors(400) },
      },
    },
    async (req) => setChaos(s.store, principalOf(req).orgId, chaosProfile({ ...req.body, mode: req.body.mode as ChaosMode })) as Promise<{ mode: string }>,
  );

  app.get(
    '/v1/sandbox/webhook-reliability',
    { schema: { summary: 'The chaos profile applied to this organization’s deliveries', tags: ['webhooks'], response: { ...errors() } } },
    async (req) => getChaos(s.store, principalOf(req).orgId),
  );
}
