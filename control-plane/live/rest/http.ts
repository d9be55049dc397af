/**
 * Requests to a provider on behalf of one live query: through the SSRF guard (../../net), under
 * the query's deadline, with rate limits respected (429 / GitHub's exhausted quota: wait
 * `Retry-After` or the reset time when it fits in the deadline), transient failures retried with
 * full-jitter backoff (bounded), and every provider failure turned into a contract error whose
 * message never carries the credential or the provider's free text (which may echo it).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { guardedRequest, NetError, type GuardedResponse } from '../../net/index.js';
import { ApiError } from '../../errors.js';
import { abortAnswer } from '../../query/errors.js';

export interface RequestPolicy {
  /** provider name in messages, e.g. "Stripe" */
  readonly provider: string;
  /** credential kind to register again when the provider refuses the credential */
  readonly kind: string;
  /** permit private/loopback addresses (an operator-configured base URL, or SVC_HTTP_FILES_ALLOW_PRIVATE) */
  readonly allowPrivate: boolean;
  /** extra trusted CA (PEM), e.g. a test CA */
  readonly ca?: string | undefined;
  readonly signal: AbortSignal;
  /** epoch ms by which everything must be done */
  readonly deadline: number;
  /** most bytes of one response body */
  readonly maxBytes: number;
  /** what a body over maxBytes means */
  readonly tooLarge?: () => ApiError;
  /** short provider error code from an error body (never free text) */
  readonly errorCode?: (body: unknown) => string | undefined;
  /** what a TLS failure (`reason`: Node's code and message) means, when not the provider being unreachable */
  readonly tlsFailure?: (reason: string) => ApiError;
  /** retries after the first attempt (default 4) */
  readonly retries?: number;
  /** counts requests made (tests and metrics) */
  readonly onRequest?: (method: string, url: URL) => void;
}

export interface HttpCall {
  readonly method: 'GET' | 'POST';
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /** reads a success's body as it arrives instead of keeping it (see guardedRequest's `sink`); asked again for each attempt */
  readonly sink?: (status: number) => ((piece: Buffer) => void) | undefined;
}

const MAX_WAIT_MS = 60_000;
const BASE_BACKOFF_MS = 250;

export function timeoutError(): ApiError {
  return new ApiError('query_timeout', 'the statement ran past its deadline while fetching from the provider and was stopped; narrow the scopes (period:, fewer tables) or the query');
}

/** milliseconds the provider asks us to wait, or undefined */
function waitHint(res: GuardedResponse): number | undefined {
  const ra = res.headers['retry-after'];
  const text = Array.isArray(ra) ? ra[0] : ra;
  if (text !== undefined) {
    if (/^\d+(\.\d+)?$/.test(text.trim())) return Math.round(Number(text) * 1000);
    const at = Date.parse(text);
    if (Number.isFinite(at)) return Math.max(0, at - Date.now());
  }
  const reset = res.headers['x-ratelimit-reset'];
  const remaining = res.headers['x-ratelimit-remaining'];
  if (remaining === '0' && typeof reset === 'string' && /^\d+$/.test(reset)) return Math.max(0, Number(reset) * 1000 - Date.now());
  return undefined;
}

function rateLimited(res: GuardedResponse): boolean {
  if (res.status === 429) return true;
  // GitHub signals an exhausted (primary or secondary) rate limit with 403 as well
  return res.status === 403 && (res.headers['x-ratelimit-remaining'] === '0' || res.headers['retry-after'] !== undefined);
}

function parseJson(buf: Buffer): unknown {
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** The ApiError for a final (non-retried) provider answer that is not a success. */
function failure(p: RequestPolicy, res: GuardedResponse): ApiError {
  const code = p.errorCode?.(parseJson(res.body));
  const detail = { provider_status: res.status, ...(code ? { provider_code: code } : {}) };
  if (res.status === 401) {
    return new ApiError(
      'invalid_request',
      `${p.provider} refused the stored ${p.kind} credential (HTTP 401: expired, revoked or wrong); register a valid one again with POST /v1/connections/credentials {"connector_kind": "${p.kind}", …}`,
      { reason: 'credential_rejected', connector_kind: p.kind, ...detail },
    );
  }
  if (res.status === 403 || res.status === 404) {
    return new ApiError(
      'scope_violation',
      `${p.provider} refused access with the stored ${p.kind} credential (HTTP ${res.status}${code ? ` ${code}` : ''}); give the key or token read access to this data, or narrow the scopes`,
      { reason: 'provider_refused', connector_kind: p.kind, ...detail },
    );
  }
  return new ApiError('service_unavailable', `${p.provider} answered HTTP ${res.status}${code ? ` (${code})` : ''}; retry shortly`, { reason: 'provider_error', ...detail });
}

function netFailure(p: RequestPolicy, err: NetError): ApiError {
  if (err.code === 'NET_ERR_ABORTED') return abortAnswer(p.signal, timeoutError);
  if (err.code === 'NET_ERR_TIMEOUT') return timeoutError();
  if (err.code === 'NET_ERR_FORBIDDEN_ADDRESS' || err.code === 'NET_ERR_SCHEME' || err.code === 'NET_ERR_CREDENTIALS' || err.code === 'NET_ERR_INVALID_URL' || err.code === 'NET_ERR_URL_TOO_LONG') {
    return new ApiError('invalid_request', `the ${p.kind} address cannot be contacted: ${err.message}`, { reason: 'address_not_allowed', connector_kind: p.kind, net_code: err.code });
  }
  if (err.code === 'NET_ERR_TLS' && p.tlsFailure) return p.tlsFailure(err.message);
  if (err.code === 'NET_ERR_RESPONSE_TOO_LARGE') {
    return p.tooLarge?.() ?? new ApiError('service_unavailable', `a ${p.provider} response was larger than ${p.maxBytes} bytes`, { reason: 'response_too_large' });
  }
  return new ApiError('service_unavailable', `${p.provider} cannot be reached (${err.code === 'NET_ERR_TLS' ? 'TLS failure' : err.code === 'NET_ERR_DNS' ? 'DNS failure' : 'connection failure'}); retry shortly`, {
    reason: 'provider_unreachable',
    net_code: err.code,
  });
}

async function pause(ms: number, p: RequestPolicy): Promise<void> {
  try {
    await sleep(ms, undefined, { signal: p.signal });
  } catch {
    throw abortAnswer(p.signal, timeoutError);
  }
}

/**
 * One provider call with retries. Returns the 2xx (or, with `acceptRedirect`, 3xx) response;
 * throws ApiError otherwise.
 */
export async function call(p: RequestPolicy, c: HttpCall, acceptRedirect = false): Promise<GuardedResponse> {
  const retries = p.retries ?? 4;
  for (let attempt = 0; ; attempt++) {
    const left = p.deadline - Date.now();
    if (p.signal.aborted) throw abortAnswer(p.signal, timeoutError);
    if (left <= 0) throw timeoutError();
    p.onRequest?.(c.method, c.url);
    let res: GuardedResponse;
    try {
      res = await guardedRequest(c.url, {
        method: c.method,
        headers: c.headers,
        ...(c.body !== undefined ? { body: c.body } : {}),
        ...(c.sink ? { sink: c.sink } : {}),
        timeoutMs: left,
        maxResponseBytes: p.maxBytes,
        onOverflow: 'error',
        signal: p.signal,
        allowPrivate: p.allowPrivate,
        ...(p.ca ? { tls: { ca: p.ca } } : {}),
      });
    } catch (err) {
      if (!(err instanceof NetError)) throw err;
      const transient = err.code === 'NET_ERR_CONNECT' || err.code === 'NET_ERR_DNS';
      if (!transient || attempt >= retries) throw netFailure(p, err);
      await pause(backoff(attempt, p), p);
      continue;
    }
    if (res.status >= 200 && res.status < 300) return res;
    if (acceptRedirect && res.status >= 300 && res.status < 400) return res;
    if (rateLimited(res)) {
      const hint = waitHint(res);
      const wait = Math.min(MAX_WAIT_MS, hint ?? backoff(attempt, p));
      if (attempt >= retries || Date.now() + wait >= p.deadline) {
        const seconds = Math.max(1, Math.ceil((hint ?? wait) / 1000));
        throw new ApiError('rate_limited', `${p.provider} is rate limiting requests made with this ${p.kind} credential; retry after ${seconds} s`, { reason: 'provider_rate_limited', retry_after_seconds: seconds }, { 'Retry-After': String(seconds) });
      }
      await pause(wait, p);
      continue;
    }
    if ((res.status >= 500 || res.status === 408) && attempt < retries) {
      await pause(backoff(attempt, p), p);
      continue;
    }
    throw failure(p, res);
  }
}

/** full jitter: uniform in [0, base·2^attempt], never past the deadline */
function backoff(attempt: number, p: RequestPolicy): number {
  const ceiling = BASE_BACKOFF_MS * 2 ** attempt;
  return Math.max(0, Math.min(Math.random() * ceiling, p.deadline - Date.now() - 1));
}

/** The JSON of a 2xx body, or service_unavailable. */
export function jsonBody(p: Pick<RequestPolicy, 'provider'>, res: GuardedResponse): unknown {
  const v = parseJson(res.body);
  if (v === undefined) throw new ApiError('service_unavailable', `${p.provider} answered with a body that is not JSON`, { reason: 'unexpected_response' });
  return v;
}
