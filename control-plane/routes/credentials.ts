import { Type } from 'typebox';
import { kindRecord, SECRET_MAX_CHARS } from '../credentials/index.js';
import { principalOf } from '../http/auth.js';
import { type App, type Services, errors } from './context.js';

const Meta = Type.Object({
  connector_kind: Type.String(),
  created_at: Type.String(),
  last_used_at: Type.Union([Type.String(), Type.Null()]),
  hint: Type.String(),
});

export function credentialRoutes(app: App, s: Services): void {
  app.get(
    '/v1/connections/credentials/kinds',
    { schema: { summary: 'Kinds of credentials that can be registered: the targets that use each, its fields and how it is validated', tags: ['credentials'], response: { ...errors() } } },
    async () => ({ kinds: s.credentials.kinds.map(kindRecord) }),
  );

  app.get(
    '/v1/connections/credentials',
    {
      schema: {
        summary: "The organization's registered credentials: metadata only, never the secret",
        tags: ['credentials'],
        response: { 200: Type.Object({ credentials: Type.Array(Meta) }), ...errors() },
      },
    },
    async (req) => ({ credentials: await s.credentials.list(principalOf(req).orgId) }),
  );

  app.post(
    '/v1/connections/credentials',
    {
      schema: {
        summary: 'Register the credential of a connector kind (replaces the earlier one of that kind); stored encrypted, answered with metadata only',
        tags: ['credentials'],
        body: Type.Object(
          {
            connector_kind: Type.String({ minLength: 1, maxLength: 100 }),
            // may be empty only for a kind that needs no secret (http-files with public files): checked per kind by the store
            secret: Type.String({ maxLength: SECRET_MAX_CHARS }),
            options: Type.Optional(Type.Record(Type.String({ maxLength: 100 }), Type.Unknown())),
          },
          { additionalProperties: false },
        ),
        response: { 201: Type.Object({ ...Meta.properties, replaced: Type.Boolean() }), ...errors(400) },
      },
    },
    async (req, reply) => {
      const orgId = principalOf(req).orgId;
      const r = await s.credentials.put(orgId, req.body.connector_kind, req.body.secret, req.body.options ?? {});
      s.live.forget(orgId, req.body.connector_kind); // connections pooled under the old one end now
      return reply.code(201).send(r);
    },
  );

  app.delete(
    '/v1/connections/credentials/:connector_kind',
    {
      schema: {
        summary: 'Remove the credential of a connector kind; open connections of its targets then fail with 400 naming the kind',
        tags: ['credentials'],
        params: Type.Object({ connector_kind: Type.String({ maxLength: 100 }) }),
        response: { 200: Type.Object({ connector_kind: Type.String(), deleted: Type.Boolean() }), ...errors(404) },
      },
    },
    async (req) => {
      const orgId = principalOf(req).orgId;
      await s.credentials.remove(orgId, req.params.connector_kind);
      s.live.forget(orgId, req.params.connector_kind);
      return { connector_kind: req.params.connector_kind, deleted: true };
    },
  );
}
