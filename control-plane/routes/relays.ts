import { Type } from 'typebox';
import { principalOf } from '../http/auth.js';
import { createEnrollToken, deleteRelay, getRelay, listRelays, register, reissue, type RelayCa, type RelayOptions } from '../relays/index.js';
import { type App, type Services, errors } from './context.js';
import { TunnelRevocation } from '../../protocol/relay-contract.js';

const RelayId = Type.Object({ relay_id: Type.String({ maxLength: 200 }) });
const Csr = Type.String({ minLength: 1, maxLength: 20_000 });

export function relayRoutes(app: App, s: Services, ca: () => Promise<RelayCa>, options: RelayOptions): void {
  app.post(
    '/v1/relays/enroll-token',
    {
      schema: {
        summary: 'Get a single-use enrollment token for a new relay (expires in 1 h by default)',
        tags: ['relays'],
        body: Type.Optional(
          Type.Object(
            { ttl_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 86_400 })), name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) },
            { additionalProperties: false },
          ),
        ),
        response: { 201: Type.Object({ token: Type.String(), expires_at: Type.String() }), ...errors(400) },
      },
    },
    async (req, reply) => {
      const body = req.body ?? {};
      const token = await createEnrollToken(s.store, principalOf(req).orgId, { ttlSeconds: body.ttl_seconds ?? options.tokenTtlSeconds, name: body.name });
      return reply.code(201).send(token);
    },
  );

  app.post(
    '/v1/relays/register',
    {
      config: { public: true },
      schema: {
        summary: 'Register a relay with an enrollment token and a CSR (no agent key: the token authenticates)',
        tags: ['relays'],
        body: Type.Object(
          { enroll_token: Type.String({ minLength: 1, maxLength: 200 }), csr_pem: Csr, name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) },
          { additionalProperties: false },
        ),
        response: { ...errors(400, 409) },
      },
    },
    async (req, reply) => reply.code(201).send(await register(s.store, await ca(), options, req.body)),
  );

  app.get(
    '/v1/relays',
    { schema: { summary: 'List relays with status, last seen, certificate expiry and version', tags: ['relays'], response: { ...errors() } } },
    async (req) => ({ relays: await listRelays(s.store, principalOf(req).orgId, (id) => s.tunnels.online(id)) }),
  );

  app.get(
    '/v1/relays/:relay_id',
    { schema: { summary: 'One relay, with its certificates and lifecycle events', tags: ['relays'], params: RelayId, response: { ...errors(404) } } },
    async (req) => getRelay(s.store, principalOf(req).orgId, req.params.relay_id, (id) => s.tunnels.online(id)),
  );

  for (const [path, kind] of [
    ['/v1/relays/:relay_id/renew', 'renew'],
    ['/v1/relays/:relay_id/rotate-cert', 'rotate'],
  ] as const) {
    app.post(
      path,
      {
        schema: {
          summary:
            kind === 'renew'
              ? 'Renew the relay certificate from a CSR (the key may stay); the old one stays valid for the overlap window'
              : 'Rotate to a new key pair: a CSR for a key never used by this relay; the old certificate stays valid for the overlap window',
          tags: ['relays'],
          params: RelayId,
          body: Type.Object({ csr_pem: Csr }, { additionalProperties: false }),
          response: { ...errors(400, 404, 409) },
        },
      },
      async (req) => reissue(s.store, await ca(), options, principalOf(req).orgId, req.params.relay_id, req.body.csr_pem, kind),
    );
  }

  app.delete(
    '/v1/relays/:relay_id',
    { schema: { summary: 'Delete a relay: every certificate of it is revoked at once, and so is every active connection through it', tags: ['relays'], params: RelayId, response: { ...errors(404) } } },
    async (req) => {
      const { orgId, keyId } = principalOf(req);
      const { revokedConnections } = await deleteRelay(s.store, orgId, req.params.relay_id, keyId);
      // committed: its connections are revoked in the store; this app's query path reads them fresh from now on
      for (const id of revokedConnections) s.connections.drop(id);
      // its connections' running statements are stopped (and answer before this does), its live tunnel closes at once
      const stopping = s.running.relayDeleted(req.params.relay_id);
      s.tunnels.disconnect(req.params.relay_id, TunnelRevocation.RELAY_REVOKED);
      await stopping;
      return getRelay(s.store, orgId, req.params.relay_id);
    },
  );
}
