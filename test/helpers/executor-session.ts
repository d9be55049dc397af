/** A relay executor answering the streams of a control-plane session over an in-memory pair. */
import { Session, memoryTransportPair, type SessionOptions } from '../../protocol/index.js';
import { createExecutor, type Executor, type ExecutorOptions } from '../../relay-agent/executor.js';
import type { TapTest } from './tap.js';

/** the sessions and executor, closed when `t` ends */
export function executorSession(t: TapTest, options: ExecutorOptions, windows: Partial<Pick<SessionOptions, 'streamWindow' | 'sessionWindow'>> = {}): { server: Session; relay: Session; exec: Executor } {
  const [a, b] = memoryTransportPair();
  const server = new Session(a, { role: 'server', pingIntervalMs: 0, ...windows });
  const relay = new Session(b, { role: 'client', pingIntervalMs: 0 });
  const exec = createExecutor(options);
  relay.onStream(exec.handle);
  t.teardown(async () => {
    server.close();
    relay.close();
    await exec.close();
  });
  return { server, relay, exec };
}
