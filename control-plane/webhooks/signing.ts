/**
 * Webhook secrets and signatures. One secret, two ways to verify:
 *
 * - `X-Service-Signature: sha256=<lowercase hex HMAC-SHA256(key = the secret string as UTF-8, message = raw body)>`
 * - Standard Webhooks (https://www.standardwebhooks.com/): `webhook-id` (= the delivery id),
 *   `webhook-timestamp` (Unix seconds of this attempt), `webhook-signature: v1,<base64 HMAC-SHA256
 *   of "<id>.<timestamp>.<raw body>">`. Its key is the same bytes (the secret string as UTF-8), so
 *   the secret to give a Standard Webhooks library is `whsec_` + base64(UTF-8 bytes of the
 *   svcsec_ secret): `standardWebhooksSecret(secret)`.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const SECRET_PREFIX = 'svcsec_';
/** a customer-chosen secret: the prefix, then 24 to 200 visible ASCII characters */
export const SECRET_PATTERN = /^svcsec_[\x21-\x7e]{24,200}$/;

/** `svcsec_` + 32 random bytes, base64url (shown once). */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** The same key in the Standard Webhooks secret format (`whsec_` + base64 of the key bytes). */
export function standardWebhooksSecret(secret: string): string {
  return `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;
}

/** The last 4 characters, for listings (never the secret). */
export function secretHint(secret: string): string {
  return `…${secret.slice(-4)}`;
}

export function serviceSignature(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest('hex')}`;
}

export function standardSignature(secret: string, id: string, timestampSeconds: number, body: string | Buffer): string {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8'));
  mac.update(`${id}.${timestampSeconds}.`);
  mac.update(body);
  return `v1,${mac.digest('base64')}`;
}

/** Every header of one signed attempt. The body is sent as it is stored, byte for byte. */
export function signedHeaders(secret: string, deliveryId: string, event: string, body: string, now: Date = new Date()): Record<string, string> {
  const ts = Math.floor(now.getTime() / 1000);
  return {
    'content-type': 'application/json',
    'user-agent': 'svc-webhooks/1',
    'x-service-delivery-id': deliveryId,
    'x-service-event': event,
    'x-service-signature': serviceSignature(secret, body),
    'webhook-id': deliveryId,
    'webhook-timestamp': String(ts),
    'webhook-signature': standardSignature(secret, deliveryId, ts, body),
  };
}
