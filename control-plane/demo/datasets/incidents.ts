/**
 * demo-incidents: an engineering organization's production operations: services, deployments,
 * monitoring alerts, incidents (some caused by bad deployments) and their status updates.
 * Incident timestamps are ordered (opened <= acknowledged <= mitigated <= resolved) and the
 * alerts that paged for an incident fire just before it opens.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, WeightedIndex, at, col, iso, isoDate, round2 } from '../rng.js';

const TARGET_ID = 'demo-incidents';

const SERVICES: readonly (readonly [string, string, 'tier-1' | 'tier-2' | 'tier-3', string])[] = [
  ['api-gateway', 'platform', 'tier-1', 'go'],
  ['auth', 'identity', 'tier-1', 'go'],
  ['checkout', 'payments', 'tier-1', 'java'],
  ['payments', 'payments', 'tier-1', 'java'],
  ['orders', 'commerce', 'tier-1', 'kotlin'],
  ['inventory', 'commerce', 'tier-2', 'kotlin'],
  ['catalog', 'commerce', 'tier-2', 'typescript'],
  ['search', 'discovery', 'tier-1', 'java'],
  ['recommendations', 'discovery', 'tier-3', 'python'],
  ['notifications', 'engagement', 'tier-2', 'typescript'],
  ['email-sender', 'engagement', 'tier-3', 'python'],
  ['user-profile', 'identity', 'tier-2', 'go'],
  ['web-frontend', 'web', 'tier-1', 'typescript'],
  ['mobile-bff', 'mobile', 'tier-1', 'typescript'],
  ['pricing', 'commerce', 'tier-2', 'kotlin'],
  ['shipping-quotes', 'fulfillment', 'tier-2', 'python'],
  ['warehouse-sync', 'fulfillment', 'tier-3', 'python'],
  ['fraud-scoring', 'payments', 'tier-2', 'python'],
  ['ledger', 'payments', 'tier-1', 'java'],
  ['reporting', 'data', 'tier-3', 'python'],
  ['event-ingest', 'data', 'tier-2', 'go'],
  ['feature-flags', 'platform', 'tier-1', 'go'],
  ['image-resizer', 'web', 'tier-3', 'rust'],
  ['session-store', 'platform', 'tier-1', 'go'],
  ['billing', 'payments', 'tier-2', 'java'],
  ['support-widget', 'engagement', 'tier-3', 'typescript'],
  ['audit-log', 'platform', 'tier-2', 'go'],
  ['geo-ip', 'platform', 'tier-3', 'rust'],
];

const ALERTS: readonly (readonly [string, 'critical' | 'warning' | 'info', string, number])[] = [
  ['HighErrorRate', 'critical', 'prometheus', 14],
  ['SLOBurnRateFast', 'critical', 'prometheus', 8],
  ['LatencyP99High', 'warning', 'prometheus', 16],
  ['PodCrashLooping', 'critical', 'prometheus', 7],
  ['CPUThrottlingHigh', 'warning', 'prometheus', 10],
  ['MemoryNearLimit', 'warning', 'prometheus', 9],
  ['QueueBacklogGrowing', 'warning', 'prometheus', 6],
  ['DiskUsageHigh', 'warning', 'cloudwatch', 5],
  ['RDSConnectionsHigh', 'warning', 'cloudwatch', 5],
  ['SyntheticCheckFailed', 'critical', 'synthetics', 6],
  ['CertificateExpiringSoon', 'info', 'blackbox', 2],
  ['DeploymentReplicasMismatch', 'info', 'prometheus', 4],
];

const ROOT_CAUSES: readonly (readonly [string, number])[] = [
  ['config_change', 18], ['dependency_failure', 20], ['capacity', 14], ['infrastructure', 14], ['data_issue', 8], ['third_party', 10], ['unknown', 6],
];

const TITLES: Record<string, readonly string[]> = {
  deploy: ['Elevated 5xx after release of {s}', 'Regression in {s} after deploy', '{s} pods crash-looping after rollout'],
  config_change: ['{s} misconfigured feature flag rollout', 'Bad config push to {s}', '{s} rate limits set too low after config change'],
  dependency_failure: ['{s} degraded: upstream dependency timing out', 'Cascading failures from {s} dependency', '{s} unable to reach database'],
  capacity: ['{s} saturated during traffic spike', '{s} latency high under load', '{s} autoscaling lagging demand'],
  infrastructure: ['Node pool failure affecting {s}', 'Network partition in one AZ impacting {s}', 'Disk full on {s} hosts'],
  data_issue: ['Corrupted records processed by {s}', '{s} backfill produced duplicate rows', 'Schema mismatch broke {s} consumers'],
  third_party: ['Third-party provider outage affecting {s}', 'Payment processor errors surfacing in {s}', 'CDN incident degrading {s}'],
  unknown: ['Intermittent errors in {s}', 'Unexplained latency spikes in {s}'],
};

const ENGINEERS = ['Alex Rivera', 'Sam Okafor', 'Priya Shah', 'Jordan Lee', 'Mei Chen', 'Diego Santos', 'Hannah Novak', 'Omar Haddad', 'Grace Kim', 'Lucas Silva', 'Nora Walsh', 'Ivan Petrov', 'Aisha Bello', 'Tom Becker', 'Yuki Tanaka', 'Ruth Adler'] as const;

const TABLES: readonly TableDef[] = [
  {
    name: 'services',
    description: 'Production services with their owning team and criticality tier. No event time of their own.',
    primaryKey: 'service_id',
    columns: [
      col('service_id', 'text', 'Service id (its name), e.g. checkout.'),
      col('team', 'text', 'Owning team.'),
      col('tier', 'text', 'Criticality: tier-1 (customer-facing, paged 24x7) | tier-2 | tier-3.'),
      col('language', 'text', 'Main implementation language.'),
      col('repository', 'text', 'Source repository.'),
      col('created_on', 'date', 'Date the service was created (may precede the data span).'),
    ],
  },
  {
    name: 'deployments',
    description: 'Production deployments (CI/CD rollouts) of the services.',
    primaryKey: 'deployment_id',
    timeColumn: 'deployed_at',
    columns: [
      col('deployment_id', 'integer', 'Deployment id, increasing with deployed_at.'),
      col('service_id', 'text', 'The service (services.service_id).'),
      col('deployed_at', 'timestamptz', 'When the rollout started.'),
      col('version', 'text', 'Semantic version deployed.'),
      col('commit_sha', 'text', 'Git commit deployed (40 hex digits).'),
      col('status', 'text', 'succeeded | failed (rollout aborted) | rolled_back (reverted after release).'),
      col('duration_seconds', 'integer', 'Rollout duration.'),
      col('triggered_by', 'text', 'Engineer who triggered it, or ci-bot for automated releases.'),
      col('lines_changed', 'integer', 'Lines added + removed since the previous deployment.'),
    ],
  },
  {
    name: 'incidents',
    description: 'Incidents declared for production problems, with timeline and root cause.',
    primaryKey: 'incident_id',
    timeColumn: 'opened_at',
    columns: [
      col('incident_id', 'text', 'Incident id, e.g. INC-1042; numbered in order of opened_at.'),
      col('title', 'text', 'Incident title.'),
      col('service_id', 'text', 'Primary affected service (services.service_id).'),
      col('severity', 'text', 'SEV1 (critical, customer-facing outage) .. SEV4 (minor).'),
      col('status', 'text', 'investigating | mitigated | resolved.'),
      col('opened_at', 'timestamptz', 'When the incident was declared.'),
      col('acknowledged_at', 'timestamptz', 'When the on-call acknowledged the page.'),
      col('mitigated_at', 'timestamptz', 'When customer impact stopped.', true),
      col('resolved_at', 'timestamptz', 'When the incident was closed.', true),
      col('root_cause', 'text', 'deploy | config_change | dependency_failure | capacity | infrastructure | data_issue | third_party | unknown.'),
      col('caused_by_deployment_id', 'integer', 'The deployment that caused it (deployments.deployment_id), for root_cause = deploy.', true),
      col('customer_impact', 'boolean', 'Whether customers were affected.'),
      col('commander', 'text', 'Incident commander.'),
      col('postmortem_url', 'text', 'Link to the postmortem (SEV1/SEV2).', true),
    ],
  },
  {
    name: 'alerts',
    description: 'Monitoring alerts that fired; those that paged for an incident reference it.',
    primaryKey: 'alert_id',
    timeColumn: 'fired_at',
    columns: [
      col('alert_id', 'bigint', 'Alert id, increasing with fired_at.'),
      col('service_id', 'text', 'The service (services.service_id).'),
      col('incident_id', 'text', 'Incident the alert belongs to (incidents.incident_id), if any.', true),
      col('alert_name', 'text', 'Alert rule name.'),
      col('severity', 'text', 'critical | warning | info.'),
      col('source', 'text', 'Monitoring system: prometheus | cloudwatch | synthetics | blackbox.'),
      col('fired_at', 'timestamptz', 'When the alert started firing.'),
      col('resolved_at', 'timestamptz', 'When it stopped firing.', true),
      col('value', 'numeric', 'Metric value at firing time (unit depends on the rule).'),
      col('labels', 'jsonb', 'Alert labels (env, region, cluster, ...).'),
    ],
  },
  {
    name: 'incident_updates',
    description: 'Status updates posted during incidents.',
    primaryKey: 'update_id',
    timeColumn: 'posted_at',
    columns: [
      col('update_id', 'integer', 'Update id, increasing with posted_at.'),
      col('incident_id', 'text', 'The incident (incidents.incident_id).'),
      col('posted_at', 'timestamptz', 'When the update was posted.'),
      col('status', 'text', 'investigating | identified | monitoring | resolved.'),
      col('author', 'text', 'Who posted it.'),
      col('message', 'text', 'Update text.'),
    ],
  },
];

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;
  let seq = 0;

  const serviceRows: Cell[][] = SERVICES.map(([id, team, tier, lang]) => [
    id, team, tier, lang, `git.example.com/acme/${id}`, isoDate(Date.UTC(2017, 0, 1) + rng.int(0, 2300) * DAY),
  ]);

  // --- deployments -----------------------------------------------------------------------------
  interface Deploy { at: number; seq: number; svc: string; status: string; version: string; id: number }
  const deploys: Deploy[] = [];
  for (const [svc, , tier] of SERVICES) {
    const perWeek = (tier === 'tier-1' ? 2.2 : tier === 'tier-2' ? 1.5 : 0.8) * rng.float(0.6, 1.4);
    let major = rng.int(1, 4);
    let minor = rng.int(0, 20);
    let patch = 0;
    let t = SPAN_START_MS + rng.int(0, 3) * DAY;
    while (t < END) {
      t += Math.max(HOUR, Math.round(-Math.log(1 - rng.next()) * (7 / perWeek) * DAY));
      // Deploys happen in working hours on weekdays, with a December freeze.
      const d = new Date(t);
      const dow = d.getUTCDay();
      if (dow === 0 || dow === 6) continue;
      if (d.getUTCMonth() === 11 && d.getUTCDate() >= 20 && rng.chance(0.85)) continue;
      const at0 = Math.floor(t / DAY) * DAY + rng.int(14, 22) * HOUR + rng.int(0, 59) * MINUTE;
      if (at0 >= END) break;
      if (rng.chance(0.04)) {
        major++;
        minor = 0;
        patch = 0;
      } else if (rng.chance(0.3)) {
        minor++;
        patch = 0;
      } else patch++;
      const status = rng.weighted<string>([['succeeded', 93], ['failed', 4], ['rolled_back', 3]]);
      deploys.push({ at: at0, seq: seq++, svc, status, version: `${major}.${minor}.${patch}`, id: 0 });
    }
  }
  deploys.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const deployRows: Cell[][] = deploys.map((d, i) => {
    d.id = 50_001 + i;
    return [d.id, d.svc, iso(d.at), d.version, rng.hex(40), d.status, rng.int(90, 1500), rng.chance(0.35) ? 'ci-bot' : rng.pick(ENGINEERS), Math.round(rng.logNormal(120, 1.2, 1, 20000))];
  });

  // --- incidents ------------------------------------------------------------------------------
  interface Inc { opened: number; seq: number; svc: string; cause: string; deploy: Deploy | null; sev: string; id: string }
  const incs: Inc[] = [];
  for (const d of deploys) {
    if (d.status === 'rolled_back' && rng.chance(0.75)) incs.push({ opened: d.at + rng.int(5, 90) * MINUTE, seq: seq++, svc: d.svc, cause: 'deploy', deploy: d, sev: '', id: '' });
    else if (d.status === 'succeeded' && rng.chance(0.015)) incs.push({ opened: d.at + rng.int(30, 48 * 60) * MINUTE, seq: seq++, svc: d.svc, cause: 'deploy', deploy: d, sev: '', id: '' });
  }
  const svcWeights = new WeightedIndex(SERVICES.map((s) => (s[2] === 'tier-1' ? 3 : s[2] === 'tier-2' ? 2 : 1)));
  for (let i = 0; i < 960; i++) {
    const svc = at(SERVICES, svcWeights.pick(rng))[0];
    incs.push({ opened: rng.timeMs(SPAN_START_MS, END - 10 * MINUTE), seq: seq++, svc, cause: rng.weighted(ROOT_CAUSES), deploy: null, sev: '', id: '' });
  }
  const kept = incs.filter((x) => x.opened < END - 5 * MINUTE).sort((a, b) => a.opened - b.opened || a.seq - b.seq);
  const incidentRows: Cell[][] = [];
  const updateDrafts: { at: number; seq: number; inc: string; status: string; author: string; msg: string }[] = [];
  interface AlertDraft { at: number; seq: number; svc: string; inc: string | null; alert: (typeof ALERTS)[number]; resolved: number | null }
  const alertDrafts: AlertDraft[] = [];
  const tierOf = new Map(SERVICES.map((s) => [s[0], s[2]] as const));
  kept.forEach((x, i) => {
    x.id = `INC-${1001 + i}`;
    const tier = tierOf.get(x.svc) ?? 'tier-3';
    const sev = rng.weighted<string>(tier === 'tier-1' ? [['SEV1', 8], ['SEV2', 25], ['SEV3', 45], ['SEV4', 22]] : [['SEV1', 2], ['SEV2', 12], ['SEV3', 50], ['SEV4', 36]]);
    x.sev = sev;
    const commander = rng.pick(ENGINEERS);
    const ack = x.opened + rng.int(1, sev === 'SEV1' ? 6 : 25) * MINUTE;
    const mitigateMin = Math.round(rng.logNormal(sev === 'SEV1' ? 55 : sev === 'SEV2' ? 80 : 140, 0.8, 5, 3000));
    let mitigated: number | null = ack + mitigateMin * MINUTE;
    let resolved: number | null = mitigated + Math.round(rng.logNormal(sev === 'SEV4' ? 600 : 240, 1, 10, 20000)) * MINUTE;
    let status = 'resolved';
    if (mitigated >= END) {
      mitigated = null;
      resolved = null;
      status = 'investigating';
    } else if (resolved >= END) {
      resolved = null;
      status = 'mitigated';
    }
    const title = rng.pick(TITLES[x.cause] ?? TITLES['unknown'] ?? ['Incident in {s}']).replace('{s}', x.svc);
    incidentRows.push([
      x.id, title, x.svc, sev, status, iso(x.opened), iso(Math.min(ack, END)), mitigated === null ? null : iso(mitigated), resolved === null ? null : iso(resolved),
      x.cause === 'deploy' ? 'deploy' : x.cause, x.deploy ? x.deploy.id : null, sev === 'SEV1' || sev === 'SEV2' || rng.chance(0.3), commander,
      (sev === 'SEV1' || sev === 'SEV2') && status === 'resolved' ? `https://wiki.example.com/postmortems/${x.id.toLowerCase()}` : null,
    ]);
    // Status updates.
    const up = (t: number, st: string, msg: string, who = commander): void => {
      if (t < END) updateDrafts.push({ at: t, seq: seq++, inc: x.id, status: st, author: who, msg });
    };
    up(ack + rng.int(1, 10) * MINUTE, 'investigating', `We are investigating elevated errors in ${x.svc}.`);
    if (mitigated !== null) {
      const identified = ack + Math.round((mitigated - ack) * rng.float(0.3, 0.8));
      up(identified, 'identified', x.cause === 'deploy' ? `Identified a faulty release (${x.deploy?.version ?? 'latest'}); rolling back.` : `Root cause identified (${x.cause.replace('_', ' ')}); applying a fix.`);
      up(mitigated, 'monitoring', 'A fix has been applied and we are monitoring the results.');
    }
    if (resolved !== null) up(resolved, 'resolved', 'This incident has been resolved.');
    // Alerts that paged.
    const nAlerts = rng.int(1, sev === 'SEV1' ? 6 : 3);
    for (let k = 0; k < nAlerts; k++) {
      const a = rng.weighted(ALERTS.filter((al) => al[1] !== 'info').map((al) => [al, al[3]] as const));
      const fired = x.opened - rng.int(1, 15) * MINUTE;
      const res = (mitigated ?? END) + rng.int(1, 30) * MINUTE;
      alertDrafts.push({ at: Math.max(SPAN_START_MS, fired), seq: seq++, svc: x.svc, inc: x.id, alert: a, resolved: res < END ? res : null });
    }
  });

  // Noise: alerts that resolved on their own.
  const alertPick = ALERTS.map((a) => [a, a[3]] as const);
  for (let i = 0; i < 5200; i++) {
    const a = rng.weighted(alertPick);
    const svc = at(SERVICES, svcWeights.pick(rng))[0];
    const fired = rng.timeMs(SPAN_START_MS, END - MINUTE);
    const res = fired + Math.round(rng.logNormal(a[1] === 'info' ? 600 : 12, 1, 1, 5000)) * MINUTE;
    alertDrafts.push({ at: fired, seq: seq++, svc, inc: null, alert: a, resolved: res < END ? res : null });
  }
  alertDrafts.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const alertRows: Cell[][] = alertDrafts.map((a, i) => {
    const name = a.alert[0];
    const value =
      name === 'HighErrorRate' ? round2(rng.float(2, 35)) // percent
      : name === 'LatencyP99High' ? round2(rng.float(800, 6000)) // ms
      : name === 'SLOBurnRateFast' ? round2(rng.float(14.4, 60)) // burn rate
      : name === 'CertificateExpiringSoon' ? rng.int(3, 14) // days
      : name === 'QueueBacklogGrowing' ? rng.int(5000, 250000) // messages
      : round2(rng.float(80, 100)); // percent of limit
    return [
      9_000_001 + i, a.svc, a.inc, name, a.alert[1], a.alert[2], iso(a.at), a.resolved === null ? null : iso(a.resolved), value,
      { env: 'production', region: rng.pick(['us-east-1', 'us-east-1', 'us-west-2', 'eu-west-1']), cluster: `prod-${rng.int(1, 3)}`, service: a.svc, team: at(SERVICES, SERVICES.findIndex((s) => s[0] === a.svc))[1] },
    ];
  });
  updateDrafts.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const updateRows: Cell[][] = updateDrafts.map((u, i) => [i + 1, u.inc, iso(u.at), u.status, u.author, u.msg]);

  return new Map<string, Cell[][]>([
    ['services', serviceRows],
    ['deployments', deployRows],
    ['incidents', incidentRows],
    ['alerts', alertRows],
    ['incident_updates', updateRows],
  ]);
}

export const incidents: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'engineering',
  name: 'Incidents and deployments',
  description:
    'A synthetic engineering organization, 2023-2025: services, production deployments (with failures and rollbacks), monitoring alerts, incidents with severities, timelines and root causes (linked to the deployments that caused them) and status updates.',
  schema: 'demo_incidents',
  tables: TABLES,
  generate,
};
