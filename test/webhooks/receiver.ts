/**
 * A real webhook receiver on port 0 that verifies both signature schemes on its own, with
 * node:crypto only (no code of ours), the way a customer's receiver would. Plain HTTP, or HTTPS
 * when started with a key and certificate (it then records each handshake's SNI).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';

export interface Received {
  readonly at: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly raw: Buffer;
  readonly body: { id: string; event: string; connection_id: string | null; environment: string; timestamp: string; data: { resource: { resourceType: string; id: string } & Record<string, unknown> } & Record<string, unknown> };
  readonly deliveryId: string;
  /** X-Service-Signature verified */
  readonly serviceOk: boolean;
  /** webhook-signature verified with the whsec_ form of the secret, as a Standard Webhooks library does */
  readonly standardOk: boolean;
  /** HTTPS: the server name the sender asked for (SNI), false when it sent none; undefined over plain HTTP */
  readonly servername: string | false | null | undefined;
}

export interface Answer {
  readonly status: number;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** hold the answer this long */
  readonly delayMs?: number;
  /** hold the answer until this settles (a gate the test opens) */
  readonly gate?: Promise<unknown>;
}

const safeEqual = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** X-Service-Signature: sha256=<hex HMAC-SHA256(key = the secret string, message = raw body)> */
export function verifyService(secret: string, raw: Buffer, header: string | undefined): boolean {
  if (!header) return false;
  const want = `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
  return safeEqual(want, header);
}

/** Standard Webhooks: key = base64-decode(whsec secret without prefix); v1,<base64 HMAC of "id.ts.body"> */
export function verifyStandard(whsec: string, raw: Buffer, h: http.IncomingHttpHeaders, toleranceSeconds = 300): boolean {
  const id = h['webhook-id'];
  const ts = h['webhook-timestamp'];
  const sig = h['webhook-signature'];
  if (typeof id !== 'string' || typeof ts !== 'string' || typeof sig !== 'string') return false;
  if (Math.abs(Date.now() / 1000 - Number(ts)) > toleranceSeconds) return false;
  const key = Buffer.from(whsec.replace(/^whsec_/, ''), 'base64');
  const want = createHmac('sha256', key).update(`${id}.${ts}.`).update(raw).digest('base64');
  return sig.split(' ').some((s) => s.startsWith('v1,') && safeEqual(s.slice(3), want));
}

export class Receiver {
  readonly received: Received[] = [];
  secret = '';
  whsec = '';
  /** answers by delivery-attempt order for one event; default 200 */
  answer: (r: Received, nth: number) => Answer = () => ({ status: 200, body: 'ok' });
  /** requests received and not yet answered, now and at most */
  open = 0;
  maxOpen = 0;
  /** TCP connections accepted, whether or not a request (or a TLS handshake) followed */
  connections = 0;
  /** HTTPS: the SNI of every completed handshake (false: none sent) */
  readonly handshakes: Array<string | false | null> = [];
  private waiters: Array<() => void> = [];
  private readonly server: http.Server | https.Server;
  url = '';

  private constructor(tls?: https.ServerOptions) {
    const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const r: Received = {
          at: Date.now(),
          headers: req.headers,
          raw,
          body: JSON.parse(raw.toString('utf8')) as Received['body'],
          deliveryId: String(req.headers['x-service-delivery-id']),
          serviceOk: verifyService(this.secret, raw, req.headers['x-service-signature'] as string | undefined),
          standardOk: verifyStandard(this.whsec, raw, req.headers),
          servername: tls ? (req.socket as TLSSocket).servername : undefined,
        };
        this.received.push(r);
        this.open++;
        this.maxOpen = Math.max(this.maxOpen, this.open);
        const nth = this.received.filter((x) => x.deliveryId === r.deliveryId).length;
        const a = this.answer(r, nth);
        let answered = false;
        const finish = (): void => {
          if (!answered) (answered = true), this.open--;
        };
        res.on('close', finish); // the sender gave up (its deadline): no longer open
        const send = (): void => {
          finish();
          res.writeHead(a.status, a.headers ?? {});
          res.end(a.body ?? '');
          for (const w of this.waiters.splice(0)) w();
        };
        for (const w of this.waiters.splice(0)) w(); // a request arrived: conditions on received are looked at now
        const later = (): void => void (a.delayMs ? setTimeout(send, a.delayMs) : send());
        if (a.gate) void a.gate.then(later, later);
        else later();
      });
    };
    this.server = tls ? https.createServer(tls, onRequest) : http.createServer(onRequest);
    this.server.on('connection', () => this.connections++);
    if (tls) this.server.on('secureConnection', (socket: TLSSocket) => this.handshakes.push(socket.servername));
  }

  /** plain HTTP; with `tls` (at least `key` and `cert`), HTTPS. `url` names 127.0.0.1 either way. */
  static async start(tls?: https.ServerOptions): Promise<Receiver> {
    const r = new Receiver(tls);
    await new Promise<void>((resolve) => r.server.listen(0, '127.0.0.1', resolve));
    r.url = `${tls ? 'https' : 'http'}://127.0.0.1:${r.port}/hook`;
    return r;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  of(deliveryId: string): Received[] {
    return this.received.filter((x) => x.deliveryId === deliveryId);
  }

  events(event: string): Received[] {
    return this.received.filter((x) => x.body.event === event);
  }

  /** resolves when `pred` holds (checked after every request), or rejects after `ms` */
  async until(pred: () => boolean, ms = 15_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`receiver: condition not met within ${ms} ms (${this.received.length} requests seen)`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => (clearTimeout(t), resolve()));
      });
    }
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
