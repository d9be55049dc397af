#!/usr/bin/env node
/**
 * `svc` — the command-line client. The full command set arrives with the CLI issue; until then
 * this entry point says so instead of pretending.
 */
process.stderr.write(
  'svc: the command-line client is not available in this version yet.\n' +
    'Use the HTTP API meanwhile (see README.md), e.g.\n' +
    '  curl -s -X POST http://127.0.0.1:8080/v1/agent/account -H "content-type: application/json" \\\n' +
    '       -d \'{"orgName":"Acme","agentName":"bot","headless":true}\'\n',
);
process.exit(2);
