import { Type } from 'typebox';
import { targetRecord } from '../catalogue/index.js';
import { ApiError } from '../errors.js';
import { type App, type Services, errors } from './context.js';

export function catalogueRoutes(app: App, s: Services): void {
  app.get(
    '/v1/connections/targets',
    {
      schema: {
        summary: 'The 20 targets with their scope grammar, tables and tiers',
        tags: ['catalogue'],
        querystring: Type.Object({ kind: Type.Optional(Type.Union([Type.Literal('demo'), Type.Literal('live')])), pack: Type.Optional(Type.String({ maxLength: 100 })) }, { additionalProperties: false }),
        response: { ...errors(400) },
      },
    },
    async (req) => {
      const { kind, pack } = req.query;
      const targets = s.catalogue.targets.filter((t) => (kind ? t.kind === kind : true) && (pack ? t.pack === pack : true));
      return { targets: targets.map(targetRecord), count: targets.length };
    },
  );

  app.get(
    '/v1/connections/targets/:target_id',
    {
      schema: {
        summary: 'One target, with its scope grammar, tables and tiers',
        tags: ['catalogue'],
        params: Type.Object({ target_id: Type.String({ maxLength: 200 }) }),
        response: { ...errors(404) },
      },
    },
    async (req) => {
      const t = s.catalogue.target(req.params.target_id);
      if (!t) throw new ApiError('not_found', `unknown target ${JSON.stringify(req.params.target_id)}; list targets with GET /v1/connections/targets`);
      return targetRecord(t);
    },
  );

  app.get(
    '/v1/connections/packs',
    { schema: { summary: 'The 6 packs (sandbox bundles of demo targets)', tags: ['catalogue'], response: { ...errors() } } },
    async () => ({ packs: s.catalogue.packs, count: s.catalogue.packs.length }),
  );
}
