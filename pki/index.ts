/**
 * pki/ — the control plane's certificate authority (create/load, sign CSRs, revocation).
 * Built in the relay issues; nothing here yet.
 */
export {};
