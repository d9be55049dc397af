/** Signed webhooks with a durable outbox (issue #6). */
export { DEFAULT_SCENARIO, SCENARIOS, scenario, scenarioResource, lifecycleResource, deliveryFailedResource, type FhirResource, type LifecycleEvent, type Scenario } from './events.js';
export {
  CHAOS_MODES,
  CHAOS_OFF,
  DELIVERY_STATUSES,
  chaosProfile,
  checkReceiverUrl,
  deleteEndpoint,
  enqueue,
  enqueueLifecycle,
  enqueueLifecycleMany,
  environmentOf,
  getChaos,
  getDelivery,
  hasEndpoint,
  listDeliveries,
  listEndpoints,
  replayDelivery,
  resealEndpointSecrets,
  setChaos,
  setEndpoint,
  type ChaosMode,
  type ChaosProfile,
  type Enqueued,
  type EnqueueEvent,
  type Environment,
} from './outbox.js';
export { generateSecret, SECRET_PATTERN, serviceSignature, signedHeaders, standardSignature, standardWebhooksSecret } from './signing.js';
export { assertMockRoom, claimDue, mockReplayAdmission, holdClaim, jittered, recordAttempt, releaseClaims, releaseLeftLeases, type Claim, type ClaimOptions, type Outcome, type Recorded } from './claims.js';
export { DeliveryWorker, parseRetryAfter, type WorkerOptions } from './worker.js';
