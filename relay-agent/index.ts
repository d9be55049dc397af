/**
 * relay-agent/ — the svc-relay daemon (enroll, tunnel, local read-only execution).
 * Built in the relay issues; nothing here yet.
 */
export {};
