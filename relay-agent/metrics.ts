/** The relay's Prometheus text (`GET /metrics` on the health server, health.ts). */
import { memoryUsage } from 'node:process';
import { TUNNEL_STATES, type TunnelState } from './supervisor.js';

/** What /metrics reads of the agent (RelayAgent). */
export interface AgentMetricsSource {
  readonly state: TunnelState;
  readonly reconnects: number;
  readonly inflight: number;
  readonly renewals: number;
  readonly renewalFailures: number;
  certificateExpirySeconds(): number | null;
  renewAt(): number | null;
}

export function renderMetrics(agent: AgentMetricsSource): string {
  const lines: string[] = [];
  lines.push('# HELP svc_relay_tunnel_state Tunnel state (1 for the current state).', '# TYPE svc_relay_tunnel_state gauge');
  for (const s of TUNNEL_STATES) lines.push(`svc_relay_tunnel_state{state="${s}"} ${agent.state === s ? 1 : 0}`);
  lines.push('# HELP svc_relay_reconnects_total Reconnect attempts since start.', '# TYPE svc_relay_reconnects_total counter', `svc_relay_reconnects_total ${agent.reconnects}`);
  lines.push('# HELP svc_relay_inflight_streams Queries running now.', '# TYPE svc_relay_inflight_streams gauge', `svc_relay_inflight_streams ${agent.inflight}`);
  const exp = agent.certificateExpirySeconds();
  if (exp !== null) lines.push('# HELP svc_relay_certificate_expiry_seconds Seconds until the relay certificate expires.', '# TYPE svc_relay_certificate_expiry_seconds gauge', `svc_relay_certificate_expiry_seconds ${exp}`);
  const renewAt = agent.renewAt();
  if (renewAt !== null) {
    lines.push('# HELP svc_relay_certificate_renewal_seconds Seconds until the relay renews its certificate (negative: overdue).', '# TYPE svc_relay_certificate_renewal_seconds gauge', `svc_relay_certificate_renewal_seconds ${Math.floor((renewAt - Date.now()) / 1000)}`);
  }
  lines.push('# HELP svc_relay_certificate_renewals_total Certificates renewed since start.', '# TYPE svc_relay_certificate_renewals_total counter', `svc_relay_certificate_renewals_total ${agent.renewals}`);
  lines.push('# HELP svc_relay_certificate_renewal_failures Renewal attempts failed since the last success.', '# TYPE svc_relay_certificate_renewal_failures gauge', `svc_relay_certificate_renewal_failures ${agent.renewalFailures}`);
  lines.push('# HELP process_resident_memory_bytes Resident memory size in bytes.', '# TYPE process_resident_memory_bytes gauge', `process_resident_memory_bytes ${memoryUsage.rss()}`);
  const mem = memoryUsage();
  lines.push('# HELP nodejs_memory_bytes V8 heap and off-heap memory of the relay process.', '# TYPE nodejs_memory_bytes gauge');
  for (const [k, v] of [['heap_total', mem.heapTotal], ['heap_used', mem.heapUsed], ['external', mem.external], ['array_buffers', mem.arrayBuffers]] as const) lines.push(`nodejs_memory_bytes{kind="${k}"} ${v}`);
  return lines.join('\n') + '\n';
}
