/**
 * relay-agent/ — the svc-relay daemon: enroll (key made locally, CSR registered), local
 * read-only execution of tunnel queries, and the tunnel agent (supervisor with state machine,
 * backoff and drain; connections; certificate renewal; /healthz and /metrics).
 */
export { RELAY_ERRORS, RelayError, type RelayErrorCode } from './errors.js';
export { CA_FILE, CERT_FILE, KEY_FILE, RELAY_JSON, enroll, loadConfig, type EnrollOptions, type EnrollResult, type LoadedConfig, type RelayConfig } from './enroll.js';
export { RENEW_PATH, RelayCredentials, RenewError, renewUrl, requestRenewal, validityOf, writeFileAtomic, type CertificateValidity, type RenewedCertificate, type RequestRenewalOptions } from './renew.js';
export { DEFAULT_HTTP_RETRY, retryAfterMs, transientNetworkError, transientStatus, type HttpRetryOptions } from './retry.js';
export { DEFAULT_EXECUTOR_LIMITS, createExecutor, firstKeyword, type Executor, type ExecutorLimits, type ExecutorOptions } from './executor.js';
export { RELAY_AGENT_VERSION } from './version.js';
export { RelayAgent, type AgentOptions } from './agent.js';
export { TUNNEL_STATES, backoffDelay, canTransition, realAgentClock, type AgentClock, type AgentExit, type BackoffOptions, type TunnelState } from './supervisor.js';
export { DialError, TunnelConnection, wsDialer, type Dialer, type WsDialerOptions } from './connection.js';
export { certificateNotAfter, type RenewalOptions } from './renewer.js';
export { renderMetrics } from './metrics.js';
export { startHealthServer, type HealthServer } from './health.js';
export { PERMANENT_TUNNEL_CLOSES, isPermanentClose, isPermanentRefusal } from '../protocol/relay-contract.js';
