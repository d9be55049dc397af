/**
 * The relay bench's measurements (bench/relay.ts): closed-loop throughput and latency, medians
 * over interleaved rounds, the bytes a result weighs, and a process's CPU time and memory read
 * from /proc.
 */
import fs from 'node:fs/promises';

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

export interface Run {
  readonly qps: number;
  /** latencies, ms */
  readonly lat: number[];
}

/** several rounds of one path, with its throughput ratio to the baseline measured in each round */
export interface Summary {
  /** median over rounds */
  readonly qps: number;
  /** median over rounds of (this path / the baseline in the same round) */
  readonly ratio: number;
  readonly p50: number;
  readonly p99: number;
  readonly n: number;
}

export function median(xs: number[]): number {
  return quantile([...xs].sort((a, b) => a - b), 0.5);
}

export function summarize(runs: Run[], baseline: Run[]): Summary {
  const lat = runs.flatMap((r) => r.lat).sort((a, b) => a - b);
  return {
    qps: median(runs.map((r) => r.qps)),
    ratio: median(runs.map((r, i) => r.qps / (baseline[i]?.qps ?? Number.NaN))),
    p50: quantile(lat, 0.5),
    p99: quantile(lat, 0.99),
    n: lat.length,
  };
}

/** `concurrency` workers call `one(k)` back to back for `seconds`; latencies in ms */
export async function closedLoop(concurrency: number, seconds: number, one: (k: number) => Promise<void>): Promise<Run> {
  const lat: number[] = [];
  const end = performance.now() + seconds * 1000;
  let k = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const s = performance.now();
        await one(k++);
        lat.push(performance.now() - s);
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  return { qps: lat.length / elapsed, lat };
}

/** the bytes a result's values weigh, counted the same way on every path */
export function valueBytes(v: unknown): number {
  if (typeof v === 'string') return Buffer.byteLength(v);
  if (v instanceof Uint8Array) return v.length;
  return 8;
}

export function rowBytes(row: readonly unknown[]): number {
  let b = 0;
  for (const v of row) b += valueBytes(v);
  return b;
}

/** user + system CPU seconds a process has used so far */
export async function cpuSecondsOf(pid: number): Promise<number> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

/** VmHWM / VmRSS of a process, MB */
export async function memoryOf(pid: number): Promise<{ hwm: number; rss: number }> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { hwm: kb('VmHWM') / 1024, rss: kb('VmRSS') / 1024 };
}

/** The highest RSS of a process, sampled every 100 ms until `stop()` (which samples once more). */
export function rssSampler(pid: number, start: number): { stop(): Promise<number> } {
  let max = start;
  const timer = setInterval(() => {
    void memoryOf(pid).then(
      (m) => (max = Math.max(max, m.rss)),
      () => undefined,
    );
  }, 100);
  return {
    async stop() {
      clearInterval(timer);
      return Math.max(max, (await memoryOf(pid)).rss);
    },
  };
}
