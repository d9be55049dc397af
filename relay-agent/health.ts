/** The relay's local health server: /healthz (200 only while connected, else 503) and /metrics (metrics.ts). */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { renderMetrics, type AgentMetricsSource } from './metrics.js';

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

/** local /healthz (200 only while connected, else 503) and /metrics (Prometheus text) */
export async function startHealthServer(agent: AgentMetricsSource, port: number, host = '127.0.0.1'): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
    } else if (path === '/healthz') {
      const up = agent.state === 'connected';
      res.writeHead(up ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: up ? 'ok' : 'unavailable', state: agent.state }));
    } else if (path === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(renderMetrics(agent));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
