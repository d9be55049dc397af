import { ApiError } from '../errors.js';
import { sendError } from '../http/errors.js';
import type { App, Services } from './context.js';

/** Paths owned by the dashboard: the service answers them with 501 dashboard_only. */
export const DASHBOARD_PATHS = ['/v1/auth', '/v1/auth/*', '/v1/keys', '/v1/keys/*', '/v1/agent/keys', '/v1/agent/keys/*', '/v1/api-keys', '/v1/api-keys/*', '/v1/sessions', '/v1/sessions/*'];

export function systemRoutes(app: App, s: Services, ready: () => { demo: boolean }): void {
  for (const url of DASHBOARD_PATHS) {
    app.route({
      method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      url,
      config: { public: true },
      schema: { hide: true } as Record<string, unknown>,
      handler: async (req, reply) =>
        sendError(
          reply,
          req,
          new ApiError('dashboard_only', `${req.url.split('?')[0]} belongs to the dashboard at ${s.config.dashboardUrl}; agent keys are issued by POST /v1/agent/account`, {
            dashboard_url: s.config.dashboardUrl,
          }),
        ),
    });
  }

  // probed every few seconds by load balancers and orchestrators: fastify's own request lines
  // (info) are not written for it (errors still are), and each probe is one debug line instead
  app.get(
    '/healthz',
    {
      config: { public: true },
      logLevel: 'warn',
      schema: { hide: true } as Record<string, unknown>,
      onResponse: async (req, reply) => app.log.debug({ reqId: req.id, url: req.url, statusCode: reply.statusCode, responseTime: reply.elapsedTime }, 'health probe answered'),
    },
    async () => ({ status: 'ok', demo_ready: ready().demo }),
  );
}
