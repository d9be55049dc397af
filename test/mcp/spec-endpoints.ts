/**
 * The API's agent operations (docs/api.md; the webhook delivery list and replay paths included,
 * docs/decisions.md "Every agent operation on three surfaces"), each mapped to the `svc` CLI
 * command and the MCP tool that perform it. test/mcp/surfaces.test.ts checks every entry on all three surfaces.
 */
export interface SpecEndpoint {
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  readonly path: string;
  /** the CLI command words (before arguments), e.g. ['audit', 'verify']; the relay registration is svc-relay's */
  readonly cli: readonly string[];
  /** which program offers the CLI command */
  readonly bin: 'svc' | 'svc-relay';
  readonly mcp: string;
}

export const SPEC_ENDPOINTS: readonly SpecEndpoint[] = [
  { method: 'POST', path: '/v1/agent/account', bin: 'svc', cli: ['signup'], mcp: 'create_account' },
  { method: 'GET', path: '/v1/connections/targets', bin: 'svc', cli: ['targets'], mcp: 'list_targets' },
  { method: 'POST', path: '/v1/connections', bin: 'svc', cli: ['connect'], mcp: 'open_connection' },
  { method: 'POST', path: '/v1/connections/{connection_id}/query', bin: 'svc', cli: ['query'], mcp: 'query' },
  { method: 'GET', path: '/v1/audit/verify', bin: 'svc', cli: ['audit', 'verify'], mcp: 'verify_audit' },
  { method: 'POST', path: '/v1/webhooks/trigger-mock-event', bin: 'svc', cli: ['webhook', 'test'], mcp: 'trigger_mock_event' },
  { method: 'PATCH', path: '/v1/sandbox/webhook-reliability', bin: 'svc', cli: ['webhook', 'chaos'], mcp: 'set_webhook_reliability' },
  { method: 'GET', path: '/v1/agent/account/usage', bin: 'svc', cli: ['usage'], mcp: 'get_usage' },
  { method: 'GET', path: '/v1/agent/billing/config', bin: 'svc', cli: ['billing'], mcp: 'get_billing_config' },
  { method: 'POST', path: '/v1/agent/topup', bin: 'svc', cli: ['topup'], mcp: 'top_up_wallet' },
  { method: 'POST', path: '/v1/agent/webhook', bin: 'svc', cli: ['webhook', 'set'], mcp: 'set_webhook' },
  { method: 'GET', path: '/v1/connections/targets/{target_id}', bin: 'svc', cli: ['target'], mcp: 'describe_target' },
  { method: 'GET', path: '/v1/connections/packs', bin: 'svc', cli: ['packs'], mcp: 'list_packs' },
  { method: 'GET', path: '/v1/connections', bin: 'svc', cli: ['connections'], mcp: 'list_connections' },
  { method: 'GET', path: '/v1/connections/{connection_id}', bin: 'svc', cli: ['connection'], mcp: 'describe_connection' },
  { method: 'POST', path: '/v1/connections/{connection_id}/revoke', bin: 'svc', cli: ['revoke'], mcp: 'revoke_connection' },
  { method: 'GET', path: '/v1/connections/{connection_id}/audit', bin: 'svc', cli: ['audit', 'export'], mcp: 'export_audit' },
  { method: 'GET', path: '/v1/connections/credentials/kinds', bin: 'svc', cli: ['credentials', 'kinds'], mcp: 'list_credential_kinds' },
  { method: 'GET', path: '/v1/connections/credentials', bin: 'svc', cli: ['credentials', 'list'], mcp: 'list_credentials' },
  { method: 'POST', path: '/v1/connections/credentials', bin: 'svc', cli: ['credentials', 'add'], mcp: 'add_credential' },
  { method: 'DELETE', path: '/v1/connections/credentials/{connector_kind}', bin: 'svc', cli: ['credentials', 'delete'], mcp: 'delete_credential' },
  { method: 'POST', path: '/v1/relays/enroll-token', bin: 'svc', cli: ['relay', 'token'], mcp: 'create_relay_enroll_token' },
  { method: 'POST', path: '/v1/relays/register', bin: 'svc-relay', cli: ['enroll'], mcp: 'register_relay' },
  { method: 'GET', path: '/v1/relays', bin: 'svc', cli: ['relay', 'list'], mcp: 'list_relays' },
  { method: 'POST', path: '/v1/relays/{relay_id}/renew', bin: 'svc', cli: ['relay', 'renew'], mcp: 'renew_relay' },
  { method: 'POST', path: '/v1/relays/{relay_id}/rotate-cert', bin: 'svc', cli: ['relay', 'rotate'], mcp: 'rotate_relay_certificate' },
  { method: 'DELETE', path: '/v1/relays/{relay_id}', bin: 'svc', cli: ['relay', 'delete'], mcp: 'delete_relay' },
  // the schema listing, which an agent needs before it can write a query on a database target
  { method: 'GET', path: '/v1/connections/{connection_id}/schema', bin: 'svc', cli: ['schema'], mcp: 'describe_schema' },
  // delivery list and replay (docs/webhooks.md, "Retries, failure, replay")
  { method: 'GET', path: '/v1/webhooks/deliveries', bin: 'svc', cli: ['webhook', 'deliveries'], mcp: 'list_webhook_deliveries' },
  { method: 'POST', path: '/v1/webhooks/deliveries/{delivery_id}/replay', bin: 'svc', cli: ['webhook', 'replay'], mcp: 'replay_webhook_delivery' },
  // the rest of the webhook operations (docs/webhooks.md); test/mcp/webhook-operations.test.ts walks /openapi.json for any missing
  { method: 'GET', path: '/v1/agent/webhook', bin: 'svc', cli: ['webhook', 'show'], mcp: 'get_webhook' },
  { method: 'DELETE', path: '/v1/agent/webhook', bin: 'svc', cli: ['webhook', 'delete'], mcp: 'delete_webhook' },
  { method: 'GET', path: '/v1/webhooks/deliveries/{delivery_id}', bin: 'svc', cli: ['webhook', 'delivery'], mcp: 'describe_webhook_delivery' },
  { method: 'GET', path: '/v1/webhooks/scenarios', bin: 'svc', cli: ['webhook', 'scenarios'], mcp: 'list_webhook_scenarios' },
  { method: 'GET', path: '/v1/sandbox/webhook-reliability', bin: 'svc', cli: ['webhook', 'chaos'], mcp: 'get_webhook_reliability' },
];
