#!/usr/bin/env node
/**
 * `svc-relay` — the relay daemon customers run beside their PostgreSQL. It arrives with the relay
 * issues; until then this entry point says so instead of pretending.
 */
process.stderr.write('svc-relay: the relay daemon is not available in this version yet.\n');
process.exit(2);
