/**
 * relay-agent/ — the svc-relay daemon: enroll (key made locally, CSR registered), local
 * read-only execution of tunnel queries, and the tunnel agent (state machine, backoff,
 * drain, /healthz and /metrics).
 */
export { RELAY_ERRORS, RelayError, type RelayErrorCode } from './errors.js';
export { CA_FILE, CERT_FILE, KEY_FILE, RELAY_JSON, enroll, loadConfig, type EnrollOptions, type EnrollResult, type LoadedConfig, type RelayConfig } from './enroll.js';
export { RENEW_PATH, RelayCredentials, RenewError, renewUrl, requestRenewal, validityOf, writeFileAtomic, type CertificateValidity, type RenewedCertificate, type RequestRenewalOptions } from './renew.js';
export { DEFAULT_HTTP_RETRY, retryAfterMs, transientNetworkError, transientStatus, type HttpRetryOptions } from './retry.js';
export { DEFAULT_EXECUTOR_LIMITS, createExecutor, firstKeyword, type Executor, type ExecutorLimits, type ExecutorOptions } from './executor.js';
export {
  DialError,
  PERMANENT_CLOSE_CODES,
  PERMANENT_REASONS,
  RELAY_AGENT_VERSION,
  RelayAgent,
  TUNNEL_STATES,
  backoffDelay,
  canTransition,
  certificateNotAfter,
  realAgentClock,
  renderMetrics,
  startHealthServer,
  wsDialer,
  wsTransport,
  type AgentClock,
  type AgentExit,
  type AgentOptions,
  type BackoffOptions,
  type Dialer,
  type HealthServer,
  type RenewalOptions,
  type TunnelState,
  type WsDialerOptions,
} from './agent.js';
