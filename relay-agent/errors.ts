/**
 * Coded errors raised by relay-agent/ (`RELAY_ERR_*`): the codes a relay ends a stream with
 * (shared with the control plane: protocol/relay-contract.ts) and the relay's own.
 */
import { RELAY_STREAM_ERRORS } from '../protocol/relay-contract.js';

export const RELAY_ERRORS = [
  ...RELAY_STREAM_ERRORS,
  'RELAY_ERR_CONFIG_EXISTS',
  'RELAY_ERR_CONFIG_MISSING',
  'RELAY_ERR_CONFIG_INVALID',
  'RELAY_ERR_UNREACHABLE',
  'RELAY_ERR_REGISTER_REFUSED',
  'RELAY_ERR_BAD_RESPONSE',
  'RELAY_ERR_INVALID_ARGUMENT',
  'RELAY_ERR_PERMANENT_REFUSAL',
  'RELAY_ERR_STATE',
  'RELAY_ERR_RENEW_FAILED',
] as const;
export type RelayErrorCode = (typeof RELAY_ERRORS)[number];

export class RelayError extends Error {
  readonly code: RelayErrorCode;
  readonly detail: Record<string, unknown> | undefined;
  constructor(code: RelayErrorCode, message: string, opts: { cause?: unknown; detail?: Record<string, unknown> } = {}) {
    super(`${code}: ${message}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'RelayError';
    this.code = code;
    this.detail = opts.detail;
  }
}
