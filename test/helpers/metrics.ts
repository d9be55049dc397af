/** Reading one sample of a control plane's GET /metrics (the Prometheus text format). */

/** the value of `name{labels}` (labels as written, e.g. `{event="relay.registered"}`) on `baseUrl`'s GET /metrics; 0 before its first sample */
export async function metricSample(baseUrl: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? 0 : Number(line.slice(name.length + labels.length + 1));
}
