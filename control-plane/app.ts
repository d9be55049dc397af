/**
 * buildApp(config) assembles the control plane without listening: the store (migrated), the
 * catalogue, the demo engine (warming up in the background), and one route plugin per resource.
 */
import { setMaxListeners } from 'node:events';
import type { Socket } from 'node:net';
import Fastify from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Catalogue } from './catalogue/index.js';
import { randomId } from './ids.js';
import type { Config } from './config.js';
import { demoWorkersMax, startDemoEngine } from './demo/engine.js';
import { StoreDemoShares } from './demo/shares.js';
import type { DemoEngine } from './demo/query.js';
import { cachedKeyAnswer, registerAuth } from './http/auth.js';
import { clientErrorHandler, frameworkErrors, registerErrorHandling } from './http/errors.js';
import { registerJsonParser, registerStringGuard } from './http/strings.js';
import { registerBodyRules } from './http/body.js';
import { RunningQueries } from './query/running.js';
import { registerRateLimits } from './http/rate-limit.js';
import { ApiError } from './errors.js';
import { sweepReservations, sweepTopupKeys } from './billing/index.js';
import { accountRoutes } from './routes/accounts.js';
import { auditRoutes } from './routes/audit.js';
import { catalogueRoutes } from './routes/catalogue.js';
import { connectionRoutes } from './routes/connections.js';
import type { App, Services } from './routes/context.js';
import { systemRoutes } from './routes/system.js';
import { mcpRoutes } from './mcp/index.js';
import { openApiRoutes } from './openapi.js';
import { relayRoutes } from './routes/relays.js';
import { webhookRoutes } from './routes/webhooks.js';
import { DeliveryWorker, releaseLeftLeases, resealEndpointSecrets } from './webhooks/index.js';
import { loadOrCreateStoredCa, relayCa, resealStoredCa } from './relays/ca.js';
import { RELAY_DEFAULTS, type RelayCa, type RelayOptions } from './relays/index.js';
import { startTunnelListener, TunnelRegistry, type TunnelListener } from './tunnel/index.js';
import { replicaAddressOf, TunnelLeases } from './tunnel/leases.js';
import { RelayForwarder, servingForwards } from './tunnel/forward.js';
import { Metrics } from './metrics.js';
import { registerMetrics } from './routes/metrics.js';
import { runOnRelay } from './query/relay.js';
import { untilShutdown } from './query/backends.js';
import type { Ca } from '../pki/index.js';
import { loadMasterKeyRing, type MasterKey, type MasterKeyRing } from './secrets/index.js';
import { CredentialStore } from './credentials/index.js';
import { ConnectionCache } from './connections/index.js';
import { KeyCache } from './accounts/index.js';
import { liveRegistry } from './live/index.js';
import { EnginePool } from './live/rest/index.js';
import { credentialRoutes } from './routes/credentials.js';
import { initSqlParser, type CheckedQuery } from './query/sql/index.js';
import { shutdownStop } from './query/errors.js';
import { SqlChecker } from './query/sql/offload.js';
import { CheckCache } from './query/sql/check-cache.js';
import { openStore, type Store } from './store/index.js';
import { keptOnceLoaded } from './once.js';

/** The longest a client may take to send a whole request (headers and body). */
export const REQUEST_TIMEOUT_MS = 30_000;
/**
 * The router's limit on one path parameter, in characters as sent (percent-encoded). Above what
 * Node's HTTP parser lets through (16 KB of request line and headers), so the router never refuses
 * one: the routes' schemas do (their `maxLength`, also in the OpenAPI document), with a 400 that
 * names the parameter. The router's default, 100, refused ids the document allows (up to 200).
 */
export const MAX_PATH_PARAM_CHARS = 32_768;
/** At close, requests in flight are waited for up to the statement deadline plus this (unless SVC_SHUTDOWN_DRAIN_MS says otherwise). */
export const CLOSE_DRAIN_GRACE_MS = 5_000;

/** How long a close waits for the requests in flight before it stops their live statements. */
export function closeDrainMs(config: Config): number {
  return config.shutdownDrainMs ?? config.limits.queryTimeoutMs + CLOSE_DRAIN_GRACE_MS;
}
/** What a close hook may take besides the drain (closing the engines, the store, the workers). */
const CLOSE_HOOKS_GRACE_MS = 30_000;
/** How often money held by queries a crash or kill interrupted is looked for (and given back). */
const RESERVATION_SWEEP_MS = 60_000;
/** A hold is taken as interrupted once older than twice the statement deadline plus this. */
const RESERVATION_STALE_GRACE_MS = 60_000;

export interface BuildOptions {
  /** a dumped, migrated embedded store for a fresh data dir (tests) */
  readonly storeTemplate?: Uint8Array;
  /** a built embedded demo image (tests) */
  readonly demoImage?: Uint8Array;
  /** wait for the demo engine before resolving (tests); by default it warms up in the background */
  readonly awaitDemo?: boolean;
  /**
   * `eager` (default): the demo engine starts with the app. `lazy` (tests that may never query a
   * demo target): it starts on first use, so a server that serves only other targets never pays
   * for loading the demo datasets.
   */
  readonly demo?: 'eager' | 'lazy';
  /** where the log lines go (tests read them); default stdout */
  readonly logStream?: NodeJS.WritableStream;
  /** how long a connection may take to send its first whole request (tests); default REQUEST_TIMEOUT_MS */
  readonly firstRequestWithinMs?: number;
}

export interface SvcApp {
  readonly app: App;
  readonly store: Store;
  readonly services: Services;
  /** resolves when the demo engine is ready (reading it starts a lazy engine) */
  readonly demoReady: Promise<DemoEngine>;
  /** start the relay tunnel listener (mutual TLS) on config.tunnelPort; closed with the app */
  readonly startTunnel: () => Promise<TunnelListener>;
  /** the query engines of the live API and file targets (tests warm them); closed with the app */
  readonly restEngines: EnginePool;
}

export async function buildApp(config: Config, options: BuildOptions = {}): Promise<SvcApp> {
  const catalogue = new Catalogue();
  const app: App = Fastify({
    logger:
      config.logLevel === 'silent'
        ? false
        : { level: config.logLevel, redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' }, ...(options.logStream ? { stream: options.logStream } : {}) },
    bodyLimit: config.limits.bodyLimitBytes,
    genReqId: () => randomId('req', 9),
    // behind balancers named in SVC_TRUSTED_PROXIES, the client is the address they forward
    // (signup limits and the demo engines' free-trial share count client addresses)
    ...(config.trustedProxies.length > 0 ? { trustProxy: [...config.trustedProxies] } : {}),
    requestIdHeader: false,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    // requests in flight finish on close; idle keep-alive sockets are closed at once
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // a request Node's HTTP parser refuses (headers too large, a malformed request line) still gets
    // the contract's error body
    clientErrorHandler,
    frameworkErrors,
    // the whole request (headers and body) must arrive within this, else 408 (a body trickled
    // a byte at a time held its socket for Node's default 300 s)
    requestTimeout: REQUEST_TIMEOUT_MS,
    routerOptions: { maxParamLength: MAX_PATH_PARAM_CHARS },
    // Fastify gives each hook this long, close hooks included (10 s by default): the preClose drain
    // below waits up to closeDrainMs (the statement deadline + 5 s by default), so a close with a
    // statement still running failed with AVV_ERR_READY_TIMEOUT and closed nothing after it
    pluginTimeout: closeDrainMs(config) + CLOSE_HOOKS_GRACE_MS,
  }).withTypeProvider<TypeBoxTypeProvider>();
  type Fields = Readonly<Record<string, unknown>>;
  const warn = (message: string): void => app.log.warn(message);
  const info = (message: string, fields?: Fields): void => app.log.info(fields ?? {}, message);

  // the logger first: opening a new embedded store (made and migrated on a first start) takes
  // seconds, tens of them on a loaded machine, and the operator should see what is going on
  const opening = Date.now();
  info(config.databaseUrl ? 'opening the store (PostgreSQL)' : 'opening the store (embedded; made and migrated on a first start)', config.databaseUrl ? {} : { data_dir: config.dataDir });
  const [store] = await Promise.all([
    openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, ...(options.storeTemplate ? { template: options.storeTemplate } : {}), warn: (m) => warn(m) }),
    initSqlParser(),
  ]);
  info('store open', { ms: Date.now() - opening });

  // this process among the replicas sharing the store (tunnel leases and demo holds name it)
  const replicaId = randomId('rep', 9);
  let demoEngine: DemoEngine | undefined;
  let demoStarted: Promise<DemoEngine> | undefined;
  // replicas on one PostgreSQL store share each sender's share of the embedded demo engines (an
  // external demo database shares it on that database)
  const demoShares =
    config.databaseUrl && !config.demoDatabaseUrl ? new StoreDemoShares(config.databaseUrl, replicaId, demoWorkersMax(config.demoWorkers) + 2) : undefined;
  const demoReady = (): Promise<DemoEngine> => {
    if (!demoStarted) {
      demoStarted = startDemoEngine({
        shares: demoShares,
        demoDatabaseUrl: config.demoDatabaseUrl,
        dataDir: config.dataDir,
        workers: config.demoWorkers,
        datasets: catalogue.datasets,
        ...(options.demoImage ? { image: options.demoImage } : {}),
        warn: (m) => warn(m),
        info: (m, fields) => info(m, fields),
      }).then((e) => (demoEngine = e));
      demoStarted.catch(() => undefined); // reported to queries that wait for it, and at close
    }
    return demoStarted;
  };
  if (options.demo !== 'lazy') void demoReady();
  if (options.awaitDemo) await demoReady();

  // closing: new requests get the contract's 503; running queries are waited for
  let closing = false;
  let inflight = 0;
  let drained: (() => void) | undefined;
  // aborted after the drain: live statements still running are stopped at their source and
  // answered 503 (not charged; query/errors.ts shutdownStop)
  const shutdownController = new AbortController();
  // every live and relay statement running listens on it (query/backends.ts untilShutdown): not a leak
  setMaxListeners(0, shutdownController.signal);
  const track = async <T>(work: () => Promise<T>): Promise<T> => {
    inflight++;
    try {
      return await work();
    } finally {
      inflight--;
      if (inflight === 0) drained?.();
    }
  };
  app.addHook('onRequest', async (_req, reply) => {
    if (closing) {
      void reply.header('connection', 'close');
      throw new ApiError('service_unavailable', 'the service is shutting down; retry shortly', undefined, { 'Retry-After': '1' });
    }
  });
  // connections that have sent no request yet (e.g. the spare keep-alive connection Node's fetch
  // opens after an aborted request): Node's close ends only idle ones, after a request, and waits
  // for these until their client hangs up (70 s for fetch: Fastify's keep-alive hint less 2 s)
  const unused = new Set<Socket>();
  const firstRequestWithinMs = options.firstRequestWithinMs ?? REQUEST_TIMEOUT_MS;
  app.server.on('connection', (socket: Socket) => {
    unused.add(socket);
    // one that has not sent a whole request by then is ended (silent, or its headers trickled):
    // Node's own check of requestTimeout (every 30 s, by when each request began) was seen to
    // leave connections opened in one burst open for minutes
    const late = setTimeout(() => unused.has(socket) && socket.destroy(), firstRequestWithinMs).unref();
    socket.once('close', () => {
      unused.delete(socket);
      clearTimeout(late);
    });
  });
  app.server.on('request', (req: { socket: Socket }) => unused.delete(req.socket));
  // ended once the server stops accepting (Fastify calls its close after the preClose hooks, as
  // Node ends the idle ones there): nothing was asked on them, nothing is lost
  const serverClose = app.server.close.bind(app.server);
  app.server.close = (callback?: (err?: Error) => void) => {
    serverClose(callback);
    for (const socket of unused) socket.destroy();
    return app.server;
  };
  app.addHook('preClose', async () => {
    closing = true;
    if (inflight > 0) {
      await new Promise<void>((resolve) => {
        drained = resolve;
        setTimeout(resolve, closeDrainMs(config)).unref();
      });
    }
    // here, not in onClose: the HTTP server's close waits for the requests still in flight, so
    // their agents get the 503 rather than a statement run to its deadline
    shutdownController.abort(shutdownStop());
  });

  // JSON only: a text body is 415, not a string that fails validation
  app.removeContentTypeParser(['text/plain']);
  registerJsonParser(app);

  app.addHook('onSend', async (req, reply) => {
    void reply.header('x-request-id', String(req.id));
    // an answer sent while closing ends its keep-alive socket (else the close waits for its idle timeout)
    if (closing) void reply.header('connection', 'close');
  });

  const tunnels = new TunnelRegistry({ drainTimeoutMs: config.tunnelDrainMs });
  const metrics = new Metrics();
  // the master keys (current + previous), loaded on first use: credentials and the CA's key are sealed with them
  const keyRing: () => Promise<MasterKeyRing> = keptOnceLoaded(() => loadMasterKeyRing(config.masterKey, config.masterKeysPrevious, config.dataDir));
  // the live API and file targets' query engines (worker threads), this app's own
  const restEngines = new EnginePool(config.restApis.maxEngines, config.dataDir, (m) => app.log.warn(m));
  // large and MySQL-dialect statements are checked in this app's own worker thread
  const sqlChecker = new SqlChecker();
  // the shutdown also closes the API and file targets' gates: their waiters get its 503 at once
  const live = liveRegistry(config, restEngines, sqlChecker, shutdownController.signal);
  const services: Services = {
    config,
    store,
    catalogue,
    demo: demoReady,
    track,
    tunnels,
    // the CA is read when the first forward needs this replica's certificate
    forwarder: new RelayForwarder(store, replicaId, () => loadCa(), (outcome) => metrics.forwards.inc({ direction: 'sent', outcome })),
    metrics,
    live,
    credentials: new CredentialStore(store, keyRing, live.kinds, (kind, secret, options) => live.checkCredential(kind, secret, options)),
    shutdown: shutdownController.signal,
    // revocations made on other replicas (or of agent keys, by the dashboard) are read from the store
    running: new RunningQueries(store),
    sqlChecker,
    checkedStatements: new CheckCache<CheckedQuery>(),
    connections: new ConnectionCache(store),
    keys: new KeyCache(store),
  };
  // after a master-key rotation (or from the older unbound format), stored credentials and the relay CA's key move to
  // the current key before anything reads them, so a previous key can be dropped at the next restart
  const resealed = await Promise.all([
    services.credentials.reseal().catch((err: unknown) => (app.log.warn({ err: { message: (err as Error).message } }, 'credential re-seal failed'), 0)),
    resealStoredCa(store, keyRing).catch((err: unknown) => (app.log.warn({ err: { message: (err as Error).message } }, 'relay CA key re-seal failed'), false)),
  ]);
  if (resealed[0] > 0 || resealed[1]) app.log.info({ credentials: resealed[0], ca_key: resealed[1] }, 're-sealed with the current master key');

  // money held by queries that a crash or kill interrupted goes back: at start, then every minute.
  // On a store no other process uses (the embedded one, its data dir locked), every hold and
  // webhook lease there at start was left by a process that ended: all go back at once, not once stale
  const staleAfterMs = 2 * config.limits.queryTimeoutMs + RESERVATION_STALE_GRACE_MS;
  const released = await sweepReservations(store, store.soleProcess === true ? 0 : staleAfterMs);
  const leases = store.soleProcess === true ? await releaseLeftLeases(store) : 0;
  if (released > 0 || leases > 0) app.log.info({ reservations: released, webhook_leases: leases }, 'gave back what an ended process left held');
  const sweeper = setInterval(() => {
    sweepReservations(store, staleAfterMs).catch((err: unknown) => app.log.warn({ err: { message: (err as Error).message } }, 'reservation sweep failed'));
    // top-up idempotency keys past their day, of organizations that sent no keyed top-up since
    sweepTopupKeys(store).catch((err: unknown) => app.log.warn({ err: { message: (err as Error).message } }, 'top-up key sweep failed'));
  }, RESERVATION_SWEEP_MS);
  sweeper.unref();
  registerErrorHandling(app, cachedKeyAnswer(services.keys));
  registerStringGuard(app);
  registerBodyRules(app);
  registerAuth(app, services.keys);
  registerRateLimits(app, { perKeyPerSecond: config.rateLimitPerKey, signupsPerMinute: config.signupRateLimit }, store);
  openApiRoutes(app, services); // collects every route registered after it: keep it before the route plugins
  mcpRoutes(app, () => closing);
  accountRoutes(app, services);
  catalogueRoutes(app, services);
  connectionRoutes(app, services);
  credentialRoutes(app, services);
  auditRoutes(app, services);
  // the CA is made (or loaded) on first use: most test servers never sign anything
  const loadCa: () => Promise<Ca> = keptOnceLoaded(() => keyRing().then((ring) => loadOrCreateStoredCa(store, ring.all)));
  const ca = (): Promise<RelayCa> => loadCa().then(relayCa);
  let listener: TunnelListener | undefined;
  const relayOptions: RelayOptions = {
    // a derived URL with port 0 (SVC_TUNNEL_PORT=0) means: the port actually bound
    get tunnelUrl(): string {
      return listener && /:0$/.test(config.tunnelPublicUrl) ? config.tunnelPublicUrl.replace(/:0$/, `:${listener.port}`) : config.tunnelPublicUrl;
    },
    certValidityDays: config.relayCertDays,
    overlapMs: config.relayCertOverlapMs,
    tokenTtlSeconds: RELAY_DEFAULTS.tokenTtlSeconds,
    issued: (event) => metrics.relayCertificates.inc({ event }),
  };
  relayRoutes(app, services, ca, relayOptions);
  systemRoutes(app, services, () => ({ demo: demoEngine !== undefined }));
  registerMetrics(app, services, () => demoEngine);

  // webhooks: secrets sealed with the current master key, opened with any of the ring; the worker runs while the app is ready
  const sealingKey = async (): Promise<MasterKey> => (await keyRing()).current;
  const webhookWorker = new DeliveryWorker({
    store,
    keys: async () => (await keyRing()).all,
    retryDelaysMs: config.webhookRetryDelaysMs,
    timeoutMs: config.webhookTimeoutMs,
    allowPrivate: config.webhookAllowPrivate,
    perOrgConcurrency: config.webhookOrgConcurrency,
    log: app.log,
  });
  // after a master-key rotation, receiver secrets move to the current key before the worker reads them
  const resealedSecrets = await resealEndpointSecrets(store, keyRing).catch((err: unknown) => (app.log.warn({ err: { message: (err as Error).message } }, 'webhook secret re-seal failed'), 0));
  if (resealedSecrets > 0) app.log.info({ webhook_secrets: resealedSecrets }, 're-sealed with the current master key');
  webhookRoutes(app, services, { sealingKey, kick: () => webhookWorker.kick() });
  app.addHook('onReady', async () => webhookWorker.start());
  // stop claiming before the store closes; attempts in flight finish or are released
  app.addHook('preClose', async () => webhookWorker.stop());

  let tunnelStarting: Promise<TunnelListener> | undefined;
  // once per app: a second call answers the same listener (it would otherwise open a second port)
  const startTunnel = (): Promise<TunnelListener> => (tunnelStarting ??= openTunnel());
  const openTunnel = async (): Promise<TunnelListener> => {
    // the names relays dial (SVC_TUNNEL_PUBLIC_URL) and the one other replicas dial (SVC_REPLICA_ADDRESS)
    const hosts = [new URL(config.tunnelPublicUrl.replace(/^wss:/, 'https:')).hostname, ...(config.replicaAddress ? [config.replicaAddress.replace(/:\d+$/, '')] : [])].map((h) => h.replace(/^\[|\]$/g, ''));
    const isIp = (h: string): boolean => /^[\d.]+$|:/.test(h);
    listener = await startTunnelListener({
      host: config.host,
      port: config.tunnelPort,
      dnsNames: [...new Set(['localhost', ...hosts.filter((h) => !isIp(h))])],
      ipAddresses: [...new Set(['127.0.0.1', '::1', ...hosts.filter(isIp)])],
      store,
      ca: await loadCa(),
      registry: tunnels,
      relayOptions,
      log: app.log,
      leases: (port) => {
        const address = config.replicaAddress ?? replicaAddressOf(config.host, port);
        // listening on every interface with a shared store but telling the other replicas a
        // loopback address: replicas on other machines would forward relay queries to themselves
        if (config.databaseUrl && !config.replicaAddress && (config.host === '0.0.0.0' || config.host === '::')) {
          app.log.warn({ replica_address: address }, 'SVC_REPLICA_ADDRESS is not set: other replicas are told to reach this one at a loopback address, which only replicas on this machine can; set it to an address they reach (docs/deployment.md)');
        }
        return new TunnelLeases(store, replicaId, address, tunnels, app.log);
      },
      // relay queries other replicas send to tunnels held here: run locally, never forwarded again.
      // A shutdown drains them as it drains this replica's own requests (they are requests in
      // flight here too): waited for, then stopped at the relay's database and answered 503
      serveForwarded: servingForwards(store, { timeoutMs: config.limits.queryTimeoutMs, maxRows: config.limits.maxRows, maxBytes: config.limits.maxResultBytes }, (relayId, sql, limits, signal, onStart) =>
        track(async () => {
          const stop = untilShutdown(signal, shutdownController.signal);
          try {
            return await runOnRelay(tunnels, relayId, sql, limits, { signal: stop.signal, onStart });
          } finally {
            stop.release();
          }
        }).then(
          (r) => (metrics.forwards.inc({ direction: 'served', outcome: 'ok' }), r),
          (err: unknown) => {
            metrics.forwards.inc({ direction: 'served', outcome: 'error' });
            throw err;
          },
        ),
      ),
    });
    return listener;
  };

  app.addHook('onClose', async () => {
    clearInterval(sweeper);
    // each part closes even when one before it fails (logged); the first failure is the close's
    let failed: unknown;
    const closing = async (part: string, close: () => unknown): Promise<void> => {
      try {
        await close();
      } catch (err) {
        app.log.error({ err: { message: (err as Error).message }, part }, 'closing failed');
        failed ??= err;
      }
    };
    await closing('running queries', () => services.running.close());
    await closing('tunnel listener', () => listener?.close());
    await closing('relay forwarder', () => services.forwarder.close());
    await closing('demo engines', async () => (await demoStarted?.catch(() => undefined))?.close());
    await closing('demo shares', async () => demoShares?.close()); // this replica's holds end with it
    await closing('live API engines', () => restEngines.close()); // worker threads
    await closing('live connection pools', () => live.close()); // pooled connections to customers' databases
    await closing('SQL check worker', () => sqlChecker.close());
    await closing('store', () => store.close());
    if (failed !== undefined) throw failed;
  });

  return {
    app,
    store,
    services,
    get demoReady() {
      return demoReady();
    },
    startTunnel,
    restEngines,
  };
}
