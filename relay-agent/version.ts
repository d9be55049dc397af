/**
 * The relay's version as it announces itself (`user-agent`, the session's HELLO, `svc-relay
 * --version`). relay-agent/pack.mjs refuses to pack when relay-agent/package.json's version is
 * not the `<version>` of `svc-relay/<version>` here.
 */
export const RELAY_AGENT_VERSION = 'svc-relay/0.2.0';
