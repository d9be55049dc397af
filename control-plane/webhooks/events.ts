/**
 * Event kinds and their synthetic FHIR R4 resources. Domain events come from the healthcare demo
 * pack (ADT, prior authorization, claims, eligibility), chosen by scenario id; lifecycle events
 * (connection.*) carry an AuditEvent, reliability events (delivery.*) an OperationOutcome.
 * Every resource is valid FHIR R4: its required elements are present with values of their
 * bindings. Data is synthetic; ids are fresh per event.
 */
import { randomBytes } from 'node:crypto';

export type FhirResource = { readonly resourceType: string; readonly id: string } & Record<string, unknown>;

const rid = (): string => randomBytes(6).toString('hex');
const isoDate = (d: Date): string => d.toISOString().slice(0, 10);
const coding = (system: string, code: string, display: string): Record<string, string> => ({ system, code, display });
const concept = (system: string, code: string, display: string): Record<string, unknown> => ({ coding: [coding(system, code, display)], text: display });

const ENC_CLASS = 'http://terminology.hl7.org/CodeSystem/v3-ActCode';
const CLAIM_TYPE = 'http://terminology.hl7.org/CodeSystem/claim-type';
const PRIORITY = 'http://terminology.hl7.org/CodeSystem/processpriority';
const ADMIT_SOURCE = 'http://terminology.hl7.org/CodeSystem/admit-source';
const DISCHARGE = 'http://terminology.hl7.org/CodeSystem/discharge-disposition';
const CPT = 'http://www.ama-assn.org/go/cpt';
const ICD10 = 'http://hl7.org/fhir/sid/icd-10-cm';
const ADJUDICATION = 'http://terminology.hl7.org/CodeSystem/adjudication';
const BENEFIT = 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory';

interface Ctx {
  readonly now: Date;
  readonly patient: string;
  readonly payer: string;
  readonly provider: string;
}

const ref = (type: string, id: string, display?: string): Record<string, string> => ({ reference: `${type}/${id}`, ...(display ? { display } : {}) });
const money = (value: number): Record<string, unknown> => ({ value, currency: 'USD' });

function encounter(c: Ctx, status: 'in-progress' | 'finished', extra: Record<string, unknown>): FhirResource {
  const start = new Date(c.now.getTime() - (status === 'finished' ? 3 : 0) * 86_400_000);
  return {
    resourceType: 'Encounter',
    id: `enc-${rid()}`,
    status,
    class: coding(ENC_CLASS, 'IMP', 'inpatient encounter'),
    subject: ref('Patient', c.patient),
    serviceProvider: ref('Organization', c.provider, 'Synthetic General Hospital'),
    period: { start: start.toISOString(), ...(status === 'finished' ? { end: c.now.toISOString() } : {}) },
    ...extra,
  };
}

/** The elements Claim and ClaimResponse share (all required in R4). */
function claimHeader(resourceType: 'Claim' | 'ClaimResponse', prefix: string, c: Ctx, use: 'claim' | 'preauthorization'): FhirResource {
  return {
    resourceType,
    id: `${prefix}-${rid()}`,
    status: 'active',
    type: concept(CLAIM_TYPE, 'institutional', 'Institutional'),
    use,
    patient: ref('Patient', c.patient),
    created: c.now.toISOString(),
    insurer: ref('Organization', c.payer, 'Synthetic Health Plan'),
  };
}

function claim(c: Ctx, use: 'claim' | 'preauthorization'): FhirResource {
  return {
    ...claimHeader('Claim', 'clm', c, use),
    provider: ref('Organization', c.provider, 'Synthetic General Hospital'),
    priority: concept(PRIORITY, 'normal', 'Normal'),
    diagnosis: [{ sequence: 1, diagnosisCodeableConcept: concept(ICD10, 'M17.11', 'Unilateral primary osteoarthritis, right knee') }],
    insurance: [{ sequence: 1, focal: true, coverage: ref('Coverage', `cov-${c.patient}`) }],
    item: [{ sequence: 1, productOrService: concept(CPT, '27447', 'Total knee arthroplasty'), unitPrice: money(28_450), net: money(28_450) }],
    total: money(28_450),
  };
}

function claimResponse(c: Ctx, use: 'claim' | 'preauthorization', approved: boolean): FhirResource {
  const paid = approved ? 22_760 : 0;
  return {
    ...claimHeader('ClaimResponse', 'clr', c, use),
    request: ref('Claim', `clm-${rid()}`),
    outcome: 'complete',
    disposition: approved ? (use === 'preauthorization' ? 'Prior authorization approved' : 'Claim settled') : use === 'preauthorization' ? 'Prior authorization denied: not medically necessary' : 'Claim denied: service not covered',
    ...(use === 'preauthorization' && approved ? { preAuthRef: `PA-${rid().toUpperCase()}`, preAuthPeriod: { start: isoDate(c.now), end: isoDate(new Date(c.now.getTime() + 90 * 86_400_000)) } } : {}),
    item: [
      {
        itemSequence: 1,
        adjudication: [
          { category: concept(ADJUDICATION, 'submitted', 'Submitted Amount'), amount: money(28_450) },
          { category: concept(ADJUDICATION, 'benefit', 'Benefit Amount'), amount: money(paid) },
        ],
      },
    ],
    ...(use === 'claim' ? { total: [{ category: concept(ADJUDICATION, 'benefit', 'Benefit Amount'), amount: money(paid) }] } : {}),
    ...(use === 'claim' && approved ? { payment: { type: concept('http://terminology.hl7.org/CodeSystem/ex-paymenttype', 'complete', 'Complete'), amount: money(paid), date: isoDate(c.now) } } : {}),
  };
}

function eligibility(c: Ctx, inforce: boolean): FhirResource {
  return {
    resourceType: 'CoverageEligibilityResponse',
    id: `elr-${rid()}`,
    status: 'active',
    purpose: ['validation', 'benefits'],
    patient: ref('Patient', c.patient),
    created: c.now.toISOString(),
    request: ref('CoverageEligibilityRequest', `elq-${rid()}`),
    outcome: 'complete',
    disposition: inforce ? 'Coverage active' : 'Coverage not in force on the service date',
    insurer: ref('Organization', c.payer, 'Synthetic Health Plan'),
    insurance: [
      {
        coverage: ref('Coverage', `cov-${c.patient}`),
        inforce,
        ...(inforce ? { item: [{ category: concept(BENEFIT, '30', 'Health Benefit Plan Coverage'), benefit: [{ type: concept('http://terminology.hl7.org/CodeSystem/benefit-type', 'copay', 'Copayment per service'), allowedMoney: money(25) }] }] } : {}),
      },
    ],
  };
}

export interface Scenario {
  readonly id: string;
  readonly event: string;
  readonly description: string;
  readonly resource: (c: Ctx) => FhirResource;
}

/** The scenario ids of POST /v1/webhooks/trigger-mock-event; the event name equals the id. */
export const SCENARIOS: readonly Scenario[] = [
  { id: 'adt.admission', event: 'adt.admission', description: 'ADT A01: inpatient admitted (Encounter in-progress)', resource: (c) => encounter(c, 'in-progress', { hospitalization: { admitSource: concept(ADMIT_SOURCE, 'emd', 'From accident/emergency department') } }) },
  { id: 'adt.discharge', event: 'adt.discharge', description: 'ADT A03: inpatient discharged home (Encounter finished)', resource: (c) => encounter(c, 'finished', { hospitalization: { dischargeDisposition: concept(DISCHARGE, 'home', 'Home') } }) },
  { id: 'adt.transfer', event: 'adt.transfer', description: 'ADT A02: patient moved to another ward (Encounter with location history)', resource: (c) => encounter(c, 'in-progress', { location: [{ location: ref('Location', 'loc-ward-3a', 'Ward 3A'), status: 'completed' }, { location: ref('Location', 'loc-icu-1', 'ICU 1'), status: 'active' }] }) },
  { id: 'prior_authorization.requested', event: 'prior_authorization.requested', description: 'a prior authorization was requested (Claim, use preauthorization)', resource: (c) => claim(c, 'preauthorization') },
  { id: 'prior_authorization.approved', event: 'prior_authorization.approved', description: 'a prior authorization was approved (ClaimResponse with preAuthRef)', resource: (c) => claimResponse(c, 'preauthorization', true) },
  { id: 'prior_authorization.denied', event: 'prior_authorization.denied', description: 'a prior authorization was denied (ClaimResponse)', resource: (c) => claimResponse(c, 'preauthorization', false) },
  { id: 'claim.submitted', event: 'claim.submitted', description: 'a claim was submitted (Claim)', resource: (c) => claim(c, 'claim') },
  { id: 'claim.adjudicated', event: 'claim.adjudicated', description: 'a claim was adjudicated and paid (ClaimResponse with payment)', resource: (c) => claimResponse(c, 'claim', true) },
  { id: 'claim.denied', event: 'claim.denied', description: 'a claim was denied (ClaimResponse)', resource: (c) => claimResponse(c, 'claim', false) },
  { id: 'eligibility.verified', event: 'eligibility.verified', description: 'coverage eligibility verified, in force (CoverageEligibilityResponse)', resource: (c) => eligibility(c, true) },
  { id: 'eligibility.inactive', event: 'eligibility.inactive', description: 'coverage not in force (CoverageEligibilityResponse)', resource: (c) => eligibility(c, false) },
];

export const DEFAULT_SCENARIO = 'adt.admission';

export function scenario(id: string): Scenario | undefined {
  return SCENARIOS.find((s) => s.id === id);
}

export function scenarioResource(s: Scenario, now = new Date()): FhirResource {
  const n = (bytes: number): string => parseInt(randomBytes(bytes).toString('hex'), 16).toString().padStart(6, '0').slice(-6);
  return s.resource({ now, patient: `pat-${n(3)}`, payer: 'org-payer-1', provider: 'org-hospital-1' });
}

export type LifecycleEvent = 'connection.created' | 'connection.revoked' | 'connection.expired';

/** A FHIR AuditEvent for a connection's lifecycle. */
export function lifecycleResource(event: LifecycleEvent, c: { connectionId: string; orgId: string; targetId: string; at: Date }): FhirResource {
  const action = event === 'connection.created' ? 'C' : event === 'connection.revoked' ? 'D' : 'U';
  return {
    resourceType: 'AuditEvent',
    id: `aud-${rid()}`,
    type: coding('http://dicom.nema.org/resources/ontology/DCM', '110113', 'Security Alert'),
    subtype: [coding('urn:svc:event', event, event)],
    action,
    recorded: c.at.toISOString(),
    outcome: '0',
    outcomeDesc: `connection ${c.connectionId} to ${c.targetId}: ${event.split('.')[1]}`,
    agent: [{ requestor: event !== 'connection.expired', who: { identifier: { system: 'urn:svc:org', value: c.orgId } } }],
    source: { observer: { identifier: { system: 'urn:svc', value: 'svc-control-plane' } } },
    entity: [{ what: { identifier: { system: 'urn:svc:connection', value: c.connectionId } }, name: c.targetId }],
  };
}

/** A FHIR OperationOutcome saying a delivery finally failed. */
export function deliveryFailedResource(d: { deliveryId: string; event: string; attempts: number; lastError: string }): FhirResource {
  return {
    resourceType: 'OperationOutcome',
    id: `opo-${rid()}`,
    issue: [
      {
        severity: 'error',
        code: 'transient',
        details: { text: `delivery ${d.deliveryId} (${d.event}) failed after ${d.attempts} attempts` },
        diagnostics: d.lastError.slice(0, 500),
      },
    ],
  };
}
