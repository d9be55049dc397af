import { createHash } from 'node:crypto';
import { Type } from 'typebox';
import { signup } from '../accounts/index.js';
import { billingConfig, centsFromNc, topup, usage, IDEMPOTENCY_KEY_PATTERN, TOPUP_IDEMPOTENCY_HOURS, TOPUP_MAX_CENTS, TOPUP_MIN_CENTS, TRIAL } from '../billing/index.js';
import { ApiError } from '../errors.js';
import { principalOf } from '../http/auth.js';
import { type App, type Services, ErrorSchema, errors } from './context.js';

const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });

export function accountRoutes(app: App, s: Services): void {
  app.post(
    '/v1/agent/account',
    {
      config: { public: true },
      schema: {
        summary: 'Create an account headlessly and receive an agent key (shown once)',
        tags: ['accounts'],
        body: Type.Object({ orgName: Name, agentName: Name, headless: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
        response: {
          201: Type.Object({
            apiKey: Type.String(),
            orgId: Type.String(),
            agentId: Type.String(),
            trial: Type.Object({ queries: Type.Integer(), egressBytes: Type.Integer(), days: Type.Integer(), creditCents: Type.Number() }),
            expiresAt: Type.String(),
            note: Type.String(),
          }),
          400: ErrorSchema,
          429: ErrorSchema, // signups per client address (SVC_SIGNUP_RATE_LIMIT)
        },
      },
    },
    async (req, reply) => {
      const r = await signup(s.store, req.body.orgName.trim(), req.body.agentName.trim());
      return reply.code(201).send({
        apiKey: r.apiKey,
        orgId: r.orgId,
        agentId: r.agentId,
        trial: { queries: TRIAL.queries, egressBytes: TRIAL.egressBytes, days: TRIAL.days, creditCents: centsFromNc(TRIAL.creditNc) },
        expiresAt: r.trialExpiresAt,
        note: 'Store apiKey now: it is shown once and only its hash is kept. Send it as "Authorization: Bearer <apiKey>".',
      });
    },
  );

  app.get(
    '/v1/agent/account/usage',
    { schema: { summary: 'Usage metering of the account', tags: ['billing'], response: { ...errors() } } },
    async (req) => usage(s.store, principalOf(req).orgId),
  );

  app.get(
    '/v1/agent/billing/config',
    { schema: { summary: 'Prices and trial limits', tags: ['billing'], response: { ...errors() } } },
    async () => billingConfig(s.config.limits.maxResultBytes),
  );

  app.post(
    '/v1/agent/topup',
    {
      schema: {
        summary: 'Credit the prepaid wallet (sandbox: no card processor) and optionally set auto-reload',
        tags: ['billing'],
        body: Type.Object(
          {
            amount_cents: Type.Integer({ minimum: 0, maximum: TOPUP_MAX_CENTS }),
            auto_reload: Type.Optional(
              Type.Union([
                Type.Object(
                  {
                    threshold_cents: Type.Integer({ minimum: 1, maximum: TOPUP_MAX_CENTS }),
                    amount_cents: Type.Integer({ minimum: TOPUP_MIN_CENTS, maximum: TOPUP_MAX_CENTS }),
                  },
                  { additionalProperties: false },
                ),
                Type.Null(),
              ]),
            ),
          },
          { additionalProperties: false },
        ),
        headers: Type.Object({
          'idempotency-key': Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: 255,
              pattern: IDEMPOTENCY_KEY_PATTERN,
              description: `A key of your choosing (1–255 printable ASCII characters, no space at either end: HTTP strips those) that makes the request safe to send again: the same key with the same body within ${TOPUP_IDEMPOTENCY_HOURS} hours credits once and answers the first answer again, with Idempotent-Replayed: true; with another body it is 409 conflict`,
            }),
          ),
        }),
        response: { ...errors(400, 409) },
      },
    },
    async (req, reply) => {
      const { amount_cents: amount, auto_reload: autoReload } = req.body;
      if (amount !== 0 && amount < TOPUP_MIN_CENTS) {
        throw new ApiError('invalid_request', `amount_cents must be at least ${TOPUP_MIN_CENTS} (or 0 to only change auto_reload)`, { field: 'amount_cents' });
      }
      if (amount === 0 && autoReload === undefined) {
        throw new ApiError(
          'invalid_request',
          `amount_cents must be at least ${TOPUP_MIN_CENTS} to top up; 0 is accepted only together with auto_reload, to change auto-reload without paying (e.g. {"amount_cents": 0, "auto_reload": null} turns it off)`,
          { field: 'amount_cents' },
        );
      }
      const orgId = principalOf(req).orgId;
      const key = req.headers['idempotency-key'];
      // sent twice, node joins the two ("a, a"): a key no retry sending it once would match
      if (req.raw.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === 'idempotency-key').length > 1) {
        throw new ApiError('invalid_request', 'the Idempotency-Key header was sent more than once; send it once', { field: 'Idempotency-Key', in: 'header' });
      }
      // the body as it was understood: one digest for every spelling of one request (auto_reload's
      // fields in a fixed order, not the order they were sent in)
      const understood = autoReload === undefined ? 'unchanged' : autoReload === null ? null : [autoReload.threshold_cents, autoReload.amount_cents];
      const requestHash = createHash('sha256').update(JSON.stringify([amount, understood])).digest('hex');
      const { answer, replayed } = await topup(s.store, orgId, amount, autoReload, typeof key === 'string' ? { key, requestHash } : undefined);
      if (replayed) void reply.header('idempotent-replayed', 'true');
      return answer;
    },
  );
}
