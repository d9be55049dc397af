/**
 * The control plane's own Prometheus metrics (`GET /metrics`, text format 0.0.4): HTTP requests by
 * route and status, request and query latency (queries by backend and outcome), relay tunnels and
 * forwards between replicas, the webhook queue, the store's connection pool, and the process's
 * memory. Labels never carry an organization, key, connection or statement: their values are
 * route templates, backend kinds, outcomes and status codes, so their number stays bounded.
 * Counters and histograms are per process (each replica is scraped on its own).
 */

/** seconds */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;

type Labels = Readonly<Record<string, string>>;

const escapeLabel = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const labelText = (labels: Labels, extra?: [string, string]): string => {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  if (extra) parts.push(`${extra[0]}="${escapeLabel(extra[1])}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
};
const keyOf = (labels: Labels): string => JSON.stringify(Object.entries(labels));

class Counter {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  inc(labels: Labels = {}, by = 1): void {
    const k = keyOf(labels);
    const v = this.values.get(k);
    if (v) v.value += by;
    else this.values.set(k, { labels, value: by });
  }

  render(out: string[]): void {
    out.push(`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`);
    for (const { labels, value } of this.values.values()) out.push(`${this.name}${labelText(labels)} ${value}`);
  }
}

class Histogram {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[] = LATENCY_BUCKETS,
  ) {}

  observe(labels: Labels, value: number): void {
    const k = keyOf(labels);
    let s = this.series.get(k);
    if (!s) {
      s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(k, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= (this.buckets[i] as number)) (s.counts[i] as number)++;
    s.sum += value;
    s.count++;
  }

  render(out: string[]): void {
    out.push(`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`);
    for (const s of this.series.values()) {
      this.buckets.forEach((b, i) => out.push(`${this.name}_bucket${labelText(s.labels, ['le', String(b)])} ${s.counts[i]}`));
      out.push(`${this.name}_bucket${labelText(s.labels, ['le', '+Inf'])} ${s.count}`, `${this.name}_sum${labelText(s.labels)} ${s.sum}`, `${this.name}_count${labelText(s.labels)} ${s.count}`);
    }
  }
}

/** A value read when scraped (a gauge, or a counter kept elsewhere); undefined leaves it out. */
export interface GaugeSource {
  readonly name: string;
  readonly help: string;
  /** `counter` for a running total someone else keeps (default `gauge`) */
  readonly type?: 'gauge' | 'counter';
  read(): Promise<readonly { labels?: Labels; value: number }[] | undefined>;
}

export class Metrics {
  readonly requests = new Counter('svc_http_requests_total', 'HTTP requests answered, by method, route template and status code.');
  readonly requestSeconds = new Histogram('svc_http_request_duration_seconds', 'HTTP request latency in seconds, by method and route template.');
  readonly querySeconds = new Histogram('svc_query_duration_seconds', 'Statement latency at its backend in seconds (after the check, before settlement), by backend (demo, relay, connector) and outcome (ok, error).');
  readonly forwards = new Counter('svc_relay_forwards_total', 'Relay queries forwarded between replicas: direction sent (to the replica holding the tunnel) or served (for another replica), outcome ok or error.');
  readonly relayCertificates = new Counter(
    'svc_relay_certificates_issued_total',
    "Relay certificates issued by this replica, by the relay event that records it: relay.registered (enrollment), certificate.renewed (the renew endpoint), certificate.rotated (rotate-cert, or a relay's own renewal over its tunnel).",
  );
  private readonly gauges: GaugeSource[] = [];
  private readonly started = Date.now();

  gauge(g: GaugeSource): void {
    this.gauges.push(g);
  }

  async render(): Promise<string> {
    const out: string[] = [];
    this.requests.render(out);
    this.requestSeconds.render(out);
    this.querySeconds.render(out);
    this.forwards.render(out);
    this.relayCertificates.render(out);
    for (const g of this.gauges) {
      const values = await g.read().catch(() => undefined);
      if (!values) continue;
      out.push(`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} ${g.type ?? 'gauge'}`);
      for (const v of values) out.push(`${g.name}${labelText(v.labels ?? {})} ${v.value}`);
    }
    const mem = process.memoryUsage();
    out.push(
      '# HELP process_resident_memory_bytes Resident memory size in bytes.',
      '# TYPE process_resident_memory_bytes gauge',
      `process_resident_memory_bytes ${mem.rss}`,
      '# HELP nodejs_heap_used_bytes V8 heap in use in bytes.',
      '# TYPE nodejs_heap_used_bytes gauge',
      `nodejs_heap_used_bytes ${mem.heapUsed}`,
      '# HELP process_start_time_seconds Start time of the process since the Unix epoch in seconds.',
      '# TYPE process_start_time_seconds gauge',
      `process_start_time_seconds ${Math.floor(this.started / 1000)}`,
    );
    return `${out.join('\n')}\n`;
  }
}
