#!/usr/bin/env node
/** `npm start`: validate config, build, listen; drain and close on SIGTERM/SIGINT. */
import { buildApp, closeDrainMs } from './app.js';
import { ConfigError, loadConfig, unknownSettings } from './config.js';
import { boundUrl } from './openapi.js';

/** A shutdown still not done this long after the app's own drain may have ended exits 1. */
const SHUTDOWN_DEADLINE_GRACE_MS = 10_000;

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`svc: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const started = Date.now();
  const { app, demoReady, startTunnel } = await buildApp(config);
  for (const u of unknownSettings(process.env)) {
    app.log.warn({ variable: u.name, ...(u.suggestion ? { did_you_mean: u.suggestion } : {}) }, 'an SVC_ environment variable svc does not read: ignored (docs/configuration.md lists every setting)');
  }
  // the tunnel listener first: once the API answers (GET /healthz 200, what balancers route by),
  // relays can reach the tunnel too (its start, a server certificate issued, takes up to seconds)
  const tunnel = await startTunnel();
  await app.listen({ host: config.host, port: config.port });
  // a derived URL with port 0 (PORT=0 or SVC_TUNNEL_PORT=0) is logged with the port bound
  app.log.info({ port: tunnel.port, tunnel_url: config.tunnelPublicUrl.replace(/:0$/, `:${tunnel.port}`) }, 'relay tunnel listener ready');
  const addr = app.server.address();
  const listening = addr && typeof addr === 'object' ? `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}` : config.publicUrl;
  app.log.info({ listening, public_url: boundUrl(config.publicUrl, addr), ms: Date.now() - started }, 'svc control plane ready');
  if (config.logLevel === 'silent') process.stdout.write(`svc control plane ready on ${listening}\n`);
  demoReady.then(
    () => app.log.info({ ms: Date.now() - started }, 'demo datasets ready'),
    (err: unknown) => app.log.error({ err: { message: (err as Error).message } }, 'demo datasets failed to load'),
  );

  let closing = false;
  const shutdown = (signal: string): void => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), closeDrainMs(config) + SHUTDOWN_DEADLINE_GRACE_MS);
    force.unref();
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`svc: failed to start: ${(err as Error).message}\n`);
  process.exit(1);
});
