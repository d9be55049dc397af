/**
 * The demo catalogue: 12 synthetic datasets (one per demo target) in 6 packs.
 * Order is stable: packs in the order below, each pack's targets in the order listed.
 */

import type { DatasetDef, PackDef } from '../types.js';
import { banking } from './banking.js';
import { crm } from './crm.js';
import { ecommerce } from './ecommerce.js';
import { fleet } from './fleet.js';
import { healthcare } from './healthcare.js';
import { incidents } from './incidents.js';
import { logistics } from './logistics.js';
import { payments } from './payments.js';
import { pharmacy } from './pharmacy.js';
import { subscriptions } from './subscriptions.js';
import { support } from './support.js';
import { webAnalytics } from './web-analytics.js';

export const PACKS: readonly PackDef[] = [
  {
    id: 'healthcare',
    name: 'Healthcare',
    description: 'FHIR-shaped clinical and payer data (patients, encounters, claims, prior authorizations, eligibility, HL7 v2 ADT) and a pharmacy prescription / dispensing feed.',
    targets: ['demo-healthcare', 'demo-pharmacy'],
  },
  {
    id: 'commerce',
    name: 'Commerce',
    description: 'An online store (customers, catalogue, orders, reviews) and a SaaS subscription business (plans, subscriptions, invoices, MRR events).',
    targets: ['demo-ecommerce', 'demo-subscriptions'],
  },
  {
    id: 'finance',
    name: 'Finance',
    description: 'Retail banking (accounts, transactions, statements, fraud alerts) and payment processing (charges, refunds, disputes, payouts).',
    targets: ['demo-banking', 'demo-payments'],
  },
  {
    id: 'logistics',
    name: 'Logistics',
    description: 'Shipments with carrier tracking scans, and a trucking fleet with telematics trips, fuel and maintenance.',
    targets: ['demo-logistics', 'demo-fleet'],
  },
  {
    id: 'engineering',
    name: 'Engineering',
    description: 'Production operations (deployments, alerts, incidents) and product web analytics (visitors, sessions, pageviews, events).',
    targets: ['demo-incidents', 'demo-web-analytics'],
  },
  {
    id: 'go-to-market',
    name: 'Go-to-market',
    description: 'A B2B sales CRM (companies, contacts, deals, activities) and a customer support help desk (tickets, conversations, CSAT).',
    targets: ['demo-crm', 'demo-support'],
  },
];

export const DATASETS: readonly DatasetDef[] = [
  healthcare,
  pharmacy,
  ecommerce,
  subscriptions,
  banking,
  payments,
  logistics,
  fleet,
  incidents,
  webAnalytics,
  crm,
  support,
];

/** The dataset of a demo target, if any. */
export function datasetFor(targetId: string): DatasetDef | undefined {
  return DATASETS.find((d) => d.targetId === targetId);
}
