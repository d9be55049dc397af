/**
 * `GET /metrics`: the control plane's Prometheus metrics (metrics.ts). Unauthenticated unless
 * SVC_METRICS_TOKEN is set (then `Authorization: Bearer <token>`); not in the OpenAPI document.
 * Every request is counted here by route template and status, with its latency; the gauges are
 * read when scraped: relay tunnels held by this replica, the webhook queue, the demo engines'
 * admissions and queue, agent-key lookups, the store's pool.
 */
import { timingSafeEqual } from 'node:crypto';
import { ApiError } from '../errors.js';
import { severalAuthorizations } from '../http/auth.js';
import type { DemoEngine } from '../demo/query.js';
import type { App, Services } from './context.js';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** how long the gauges read from the store are kept (a scrape storm costs the store one read per period) */
const GAUGE_CACHE_MS = 2000;

/** `read`, cached for GAUGE_CACHE_MS */
function cached<T>(read: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    if (!last || Date.now() - last.at > GAUGE_CACHE_MS) {
      const value = read();
      value.catch(() => (last = undefined));
      last = { at: Date.now(), value };
    }
    return last.value;
  };
}

/** `demo` gives the demo engine once it has started (undefined before: a scrape never starts it) */
export function registerMetrics(app: App, s: Services, demo: () => DemoEngine | undefined): void {
  const m = s.metrics;
  const webhookDepth = cached(() =>
    s.store.query<{ pending: number; due: number }>("SELECT count(*)::int AS pending, count(*) FILTER (WHERE next_attempt_at <= now())::int AS due FROM webhook_deliveries WHERE status = 'pending'"),
  );
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    // label values from a closed set: any other method is `other`, an unmatched path's status its class
    const method = METHODS.has(req.method) ? req.method : 'other';
    const status = route === 'unmatched' ? `${Math.floor(reply.statusCode / 100)}xx` : String(reply.statusCode);
    m.requests.inc({ method, route, status });
    m.requestSeconds.observe({ method, route }, reply.elapsedTime / 1000);
  });
  m.gauge({
    name: 'svc_relay_tunnels',
    help: 'Relay tunnels this replica holds: current, and replaced ones still draining their streams.',
    read: async () => [
      { labels: { state: 'current' }, value: s.tunnels.size },
      { labels: { state: 'draining' }, value: s.tunnels.drainingCount },
    ],
  });
  m.gauge({
    name: 'svc_webhook_queue_depth',
    help: 'Webhook deliveries waiting for an attempt (all replicas sharing the store), and those of them already due.',
    read: async () => {
      const [row] = await webhookDepth();
      return [
        { labels: { state: 'pending' }, value: row?.pending ?? 0 },
        { labels: { state: 'due' }, value: row?.due ?? 0 },
      ];
    },
  });
  m.gauge({
    name: 'svc_demo_admissions_total',
    help: "Demo statements admitted to this replica's engines, by class (paid, trial) and whether a place was free at once (waited no) or the statement queued first (waited yes).",
    type: 'counter',
    read: async () => {
      const a = demo()?.admissions();
      return a
        ? (['paid', 'trial'] as const).flatMap((cls) => [
            { labels: { class: cls, waited: 'no' }, value: a[cls].atOnce },
            { labels: { class: cls, waited: 'yes' }, value: a[cls].queued },
          ])
        : undefined;
    },
  });
  m.gauge({
    name: 'svc_demo_admission_timeouts_total',
    help: "Demo statements whose wait for a place in this replica's engines ran past their deadline (answered 503, never run), by class (paid, trial).",
    type: 'counter',
    read: async () => {
      const a = demo()?.admissions();
      return a ? (['paid', 'trial'] as const).map((cls) => ({ labels: { class: cls }, value: a[cls].timedOut })) : undefined;
    },
  });
  m.gauge({
    name: 'svc_demo_engine_statements',
    help: "Demo statements in this replica's engines: running, and waiting for a place.",
    read: async () => {
      const stats = demo()?.stats();
      return stats
        ? [
            { labels: { state: 'running' }, value: stats.running },
            { labels: { state: 'waiting' }, value: stats.waiting },
          ]
        : undefined;
    },
  });
  m.gauge({
    name: 'svc_key_lookups_total',
    help: "Agent keys looked up by this replica: read from the store (source store), or from its memory of keys read in the last minute (source cache; the query route only).",
    type: 'counter',
    read: async () => {
      const k = s.keys.stats();
      return [
        { labels: { source: 'store' }, value: k.misses },
        { labels: { source: 'cache' }, value: k.hits },
      ];
    },
  });
  m.gauge({
    name: 'svc_store_pool_connections',
    help: "The PostgreSQL store's connection pool in this replica: open, idle, and callers waiting for a connection.",
    read: async () => {
      const p = s.store.pool?.();
      return p
        ? [
            { labels: { state: 'open' }, value: p.total },
            { labels: { state: 'idle' }, value: p.idle },
            { labels: { state: 'waiting' }, value: p.waiting },
          ]
        : undefined;
    },
  });

  const token = s.config.metricsToken;
  app.get('/metrics', { config: { public: true }, schema: { hide: true } as Record<string, unknown> }, async (req, reply) => {
    if (token !== undefined) {
      const given = Buffer.from(/^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '');
      const wanted = Buffer.from(token);
      if (given.length !== wanted.length || !timingSafeEqual(given, wanted) || severalAuthorizations(req)) {
        throw new ApiError('unauthorized', 'GET /metrics needs Authorization: Bearer <SVC_METRICS_TOKEN>');
      }
    }
    return reply.type('text/plain; version=0.0.4; charset=utf-8').send(await m.render());
  });
}
