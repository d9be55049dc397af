/**
 * demo-crm: a B2B sales CRM: sales reps, companies, contacts, deals through a pipeline, and the
 * sales activities (calls, e-mails, meetings) logged against them. Deals close after they are
 * created, activities happen while the deal is open, and closed-won deals make their company a
 * customer.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, at, col, iso, round2 } from '../rng.js';

const TARGET_ID = 'demo-crm';
const N_COMPANIES = 900;

const REPS: readonly (readonly [string, 'SDR' | 'AE' | 'AM', string])[] = [
  ['Avery Collins', 'AE', 'North America'], ['Blake Morgan', 'AE', 'North America'], ['Casey Patel', 'AE', 'North America'],
  ['Dana Whitfield', 'AE', 'EMEA'], ['Elliot Brandt', 'AE', 'EMEA'], ['Frankie Osei', 'AE', 'APAC'],
  ['Gabriel Ortiz', 'SDR', 'North America'], ['Harper Quinn', 'SDR', 'North America'], ['Indira Rao', 'SDR', 'EMEA'],
  ['Jules Moreau', 'SDR', 'EMEA'], ['Kai Nakamura', 'SDR', 'APAC'],
  ['Logan Reyes', 'AM', 'North America'], ['Morgan Blake', 'AM', 'EMEA'], ['Noel Fischer', 'AM', 'APAC'],
];

const INDUSTRIES = ['Software', 'Financial Services', 'Healthcare', 'Retail', 'Manufacturing', 'Education', 'Media', 'Professional Services', 'Logistics', 'Energy', 'Government', 'Telecommunications'] as const;

const TITLES: readonly (readonly [string, number])[] = [
  ['VP of Engineering', 8], ['Head of Data', 8], ['Director of IT', 8], ['CTO', 5], ['Data Engineer', 10], ['Security Engineer', 7],
  ['Engineering Manager', 9], ['CISO', 3], ['Analytics Lead', 7], ['Procurement Manager', 4], ['CFO', 2], ['Software Engineer', 12],
  ['Platform Engineer', 8], ['COO', 2],
];

const STAGES = ['appointment_scheduled', 'qualified', 'demo_completed', 'proposal_sent', 'negotiation', 'closed_won', 'closed_lost'] as const;
const STAGE_PROBABILITY: Record<string, number> = {
  appointment_scheduled: 0.1, qualified: 0.2, demo_completed: 0.4, proposal_sent: 0.6, negotiation: 0.8, closed_won: 1, closed_lost: 0,
};

const LOST_REASONS: readonly (readonly [string, number])[] = [
  ['no_budget', 25], ['chose_competitor', 22], ['no_decision', 25], ['timing', 12], ['missing_feature', 10], ['security_review_failed', 6],
];

const SUBJECTS: Record<string, readonly string[]> = {
  call: ['Discovery call', 'Follow-up call', 'Pricing discussion', 'Check-in call', 'Cold call'],
  email: ['Intro and next steps', 'Proposal attached', 'Following up', 'Security questionnaire', 'Recap of our meeting', 'Outreach: quick question'],
  meeting: ['Product demo', 'Technical deep dive', 'Executive alignment', 'Contract review', 'Kickoff'],
  note: ['Champion identified', 'Budget confirmed for next quarter', 'Competitor in the deal', 'Legal redlines received'],
  task: ['Send proposal', 'Schedule demo', 'Prepare mutual action plan', 'Update close date'],
};

const TABLES: readonly TableDef[] = [
  {
    name: 'users',
    description: 'Sales team members who own records (SDRs, account executives, account managers). No event time.',
    primaryKey: 'user_id',
    columns: [
      col('user_id', 'integer', 'User id.'),
      col('full_name', 'text', 'Full name.'),
      col('email', 'text', 'Work e-mail.'),
      col('role', 'text', 'SDR (sales development) | AE (account executive) | AM (account manager).'),
      col('region', 'text', 'Sales region: North America | EMEA | APAC.'),
    ],
  },
  {
    name: 'companies',
    description: 'Companies (accounts) in the CRM.',
    primaryKey: 'company_id',
    timeColumn: 'created_at',
    columns: [
      col('company_id', 'integer', 'Company id.'),
      col('name', 'text', 'Company name.'),
      col('domain', 'text', 'Web domain.'),
      col('industry', 'text', 'Industry.'),
      col('employee_count', 'integer', 'Number of employees.'),
      col('annual_revenue', 'numeric', 'Estimated annual revenue, USD.'),
      col('country', 'text', 'Headquarters country (ISO 3166-1 alpha-2).'),
      col('region', 'text', 'Sales region.'),
      col('owner_id', 'integer', 'Owning rep (users.user_id).'),
      col('lifecycle_stage', 'text', 'lead | opportunity | customer.'),
      col('created_at', 'timestamptz', 'When the company record was created.'),
    ],
  },
  {
    name: 'contacts',
    description: 'People at the companies.',
    primaryKey: 'contact_id',
    timeColumn: 'created_at',
    columns: [
      col('contact_id', 'integer', 'Contact id.'),
      col('company_id', 'integer', 'Employer (companies.company_id).'),
      col('first_name', 'text', 'First name.'),
      col('last_name', 'text', 'Last name.'),
      col('email', 'text', 'Work e-mail.'),
      col('job_title', 'text', 'Job title.'),
      col('lead_source', 'text', 'How the contact entered the CRM: inbound_demo_request | webinar | content_download | outbound | event | referral.'),
      col('lifecycle_stage', 'text', 'subscriber | lead | marketing_qualified_lead | sales_qualified_lead | opportunity | customer.'),
      col('created_at', 'timestamptz', 'When the contact was created.'),
    ],
  },
  {
    name: 'deals',
    description: 'Sales opportunities moving through the pipeline.',
    primaryKey: 'deal_id',
    timeColumn: 'created_at',
    columns: [
      col('deal_id', 'integer', 'Deal id.'),
      col('name', 'text', 'Deal name.'),
      col('company_id', 'integer', 'The company (companies.company_id).'),
      col('primary_contact_id', 'integer', 'Main contact (contacts.contact_id).'),
      col('owner_id', 'integer', 'Account executive / manager owning the deal (users.user_id).'),
      col('pipeline', 'text', 'new_business | expansion.'),
      col('stage', 'text', 'appointment_scheduled | qualified | demo_completed | proposal_sent | negotiation | closed_won | closed_lost.'),
      col('probability', 'numeric', 'Win probability of the stage (0-1).'),
      col('amount', 'numeric', 'Annual contract value, USD.'),
      col('created_at', 'timestamptz', 'When the deal was created.'),
      col('closed_at', 'timestamptz', 'When the deal was closed (won or lost).', true),
      col('lost_reason', 'text', 'Why a deal was lost.', true),
    ],
  },
  {
    name: 'activities',
    description: 'Sales activities logged against contacts and deals.',
    primaryKey: 'activity_id',
    timeColumn: 'occurred_at',
    columns: [
      col('activity_id', 'integer', 'Activity id, increasing with occurred_at.'),
      col('activity_type', 'text', 'call | email | meeting | note | task.'),
      col('subject', 'text', 'Subject line.'),
      col('contact_id', 'integer', 'Contact involved (contacts.contact_id).'),
      col('company_id', 'integer', 'The company (companies.company_id).'),
      col('deal_id', 'integer', 'Related deal (deals.deal_id), if any.', true),
      col('owner_id', 'integer', 'Rep who logged it (users.user_id).'),
      col('occurred_at', 'timestamptz', 'When it happened.'),
      col('duration_minutes', 'integer', 'Length of calls and meetings.', true),
      col('outcome', 'text', 'Call outcome: connected | left_voicemail | no_answer | wrong_number; meeting: held | no_show.', true),
    ],
  },
];

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;
  let seq = 0;

  const userRows: Cell[][] = REPS.map(([name, role, region], i) => [i + 1, name, `${name.toLowerCase().replace(/[^a-z]+/g, '.')}@acme-data.example`, role, region]);
  const repsBy = (role: string, region: string): number[] => REPS.map((r, i) => [r, i + 1] as const).filter(([r]) => r[1] === role && r[2] === region).map(([, id]) => id);

  interface Company { id: number; name: string; created: number; region: string; domain: string; size: number; owner: number; stage: string; contacts: Contact[] }
  interface Contact { id: number; company: Company; created: number; stage: string; first: string; last: string }
  const companies: Company[] = [];
  const companyRows: Cell[][] = [];
  const contacts: Contact[] = [];
  const contactDrafts: { c: Contact; title: string; source: string; email: string }[] = [];

  const created = Array.from({ length: N_COMPANIES }, () => rng.businessTimeMs(SPAN_START_MS, END - 10 * DAY, 0.5, 0.05)).sort((a, b) => a - b);
  created.forEach((t, i) => {
    const name = rng.companyName();
    const country = rng.weighted<string>([['US', 50], ['CA', 6], ['GB', 10], ['DE', 7], ['FR', 5], ['NL', 3], ['SE', 2], ['AU', 5], ['JP', 3], ['SG', 3], ['IN', 6]]);
    const region = ['US', 'CA'].includes(country) ? 'North America' : ['AU', 'JP', 'SG', 'IN'].includes(country) ? 'APAC' : 'EMEA';
    const size = Math.round(rng.logNormal(220, 1.4, 5, 120000));
    const domain = `${name.toLowerCase().replace(/\b(inc|llc|corp|ltd|group|co)\.?$/g, '').replace(/[^a-z0-9]+/g, '')}${i}.example`;
    const c: Company = { id: i + 1, name, created: t, region, domain, size, owner: rng.pick(repsBy('SDR', region)), stage: 'lead', contacts: [] };
    companies.push(c);
    companyRows.push([c.id, name, domain, rng.pick(INDUSTRIES), size, round2(size * rng.logNormal(180000, 0.5)), country, region, c.owner, 'lead', iso(t)]);
    const nContacts = Math.min(12, 1 + rng.poisson(size > 1000 ? 3.5 : 1.6));
    for (let k = 0; k < nContacts; k++) {
      const ct = k === 0 ? t : rng.businessTimeMs(t, END, 0, 0.05);
      const first = rng.firstName();
      const last = rng.lastName();
      const contact: Contact = { id: 0, company: c, created: ct, stage: rng.weighted<string>([['subscriber', 25], ['lead', 45], ['marketing_qualified_lead', 20], ['sales_qualified_lead', 10]]), first, last };
      c.contacts.push(contact);
      contacts.push(contact);
      contactDrafts.push({
        c: contact, title: rng.weighted(TITLES), source: rng.weighted<string>([['inbound_demo_request', 15], ['webinar', 15], ['content_download', 25], ['outbound', 30], ['event', 8], ['referral', 7]]),
        email: `${first}.${last}`.toLowerCase().replace(/[^a-z.]/g, '') + '@' + domain,
      });
    }
  });
  contactDrafts.sort((a, b) => a.c.created - b.c.created);
  contactDrafts.forEach((d, i) => {
    d.c.id = i + 1;
  });

  // --- deals ---------------------------------------------------------------------------------
  interface Deal { id: number; company: Company; contact: Contact; owner: number; pipeline: string; stage: string; amount: number; created: number; closed: number | null; lost: string | null; seq: number }
  const deals: Deal[] = [];
  interface Act { at: number; seq: number; type: string; subject: string; contact: Contact; deal: Deal | null; owner: number; dur: number | null; outcome: string | null }
  const acts: Act[] = [];
  const act = (t: number, type: string, contact: Contact, deal: Deal | null, owner: number): void => {
    if (t >= END || t < SPAN_START_MS) return;
    const dur = type === 'call' ? rng.int(2, 45) : type === 'meeting' ? rng.pick([30, 30, 45, 60, 60, 90]) : null;
    const outcome = type === 'call' ? rng.weighted<string>([['connected', 45], ['left_voicemail', 30], ['no_answer', 22], ['wrong_number', 3]]) : type === 'meeting' ? (rng.chance(0.92) ? 'held' : 'no_show') : null;
    acts.push({ at: t, seq: seq++, type, subject: rng.pick(SUBJECTS[type] ?? ['Touchpoint']), contact, deal, owner, dur: type === 'call' && outcome !== 'connected' ? rng.int(0, 1) : dur, outcome });
  };

  /** A contact of the company who already existed at time t. */
  const contactAt = (c: Company, t: number): Contact => {
    const known = c.contacts.filter((x) => x.created <= t);
    return known.length > 0 ? rng.pick(known) : at(c.contacts, 0);
  };

  for (const c of companies) {
    // SDR outreach before any deal.
    const first = at(c.contacts, 0);
    const nTouches = rng.int(1, 6);
    for (let k = 0; k < nTouches; k++) {
      const t = Math.floor(c.created / DAY) * DAY + rng.int(1, 60) * DAY + rng.int(8, 17) * HOUR + rng.int(0, 59) * MINUTE;
      act(t, rng.weighted<string>([['email', 60], ['call', 35], ['task', 5]]), contactAt(c, t), null, c.owner);
    }
    if (!rng.chance(0.55)) continue;
    // New-business deal.
    let t = Math.floor(c.created / DAY) * DAY + rng.int(7, 120) * DAY + rng.int(13, 21) * HOUR + rng.int(0, 59) * MINUTE;
    const ae = rng.pick(repsBy('AE', c.region));
    let won = false;
    for (let attempt = 0; attempt < 2 && t < END; attempt++) {
      const d = makeDeal(c, attempt === 0 ? first : contactAt(c, t), ae, 'new_business', t);
      if (d.stage === 'closed_won') {
        won = true;
        // Expansions with the account manager.
        const am = rng.pick(repsBy('AM', c.region));
        let et = (d.closed ?? t) + rng.int(90, 400) * DAY;
        while (et < END - 30 * DAY && rng.chance(0.45)) {
          const e = makeDeal(c, contactAt(c, et), am, 'expansion', et);
          et = (e.closed ?? et) + rng.int(120, 400) * DAY;
        }
        break;
      }
      t = (d.closed ?? END) + rng.int(120, 360) * DAY;
    }
    c.stage = won ? 'customer' : 'opportunity';
  }

  function makeDeal(c: Company, contact: Contact, owner: number, pipeline: string, createdAt: number): Deal {
    const base = pipeline === 'expansion' ? rng.logNormal(18000, 0.7) : rng.logNormal(c.size > 1000 ? 90000 : c.size > 200 ? 36000 : 12000, 0.6);
    const amount = Math.round(base / 100) * 100;
    // How far it gets.
    const reach = rng.weighted<number>(pipeline === 'expansion' ? [[5, 55], [6, 30], [3, 10], [4, 5]] : [[0, 14], [1, 20], [2, 18], [3, 14], [4, 8], [5, 26]]);
    const cycleDays = Math.round(rng.logNormal(pipeline === 'expansion' ? 35 : c.size > 1000 ? 110 : 60, 0.5, 7, 400));
    let closed: number | null = createdAt + cycleDays * DAY;
    let stage: string;
    let lost: string | null = null;
    if (reach === 5) stage = 'closed_won';
    else {
      stage = 'closed_lost';
      lost = rng.weighted(LOST_REASONS);
      closed = createdAt + Math.round(cycleDays * ((reach + 1) / 6)) * DAY;
    }
    if (closed >= END) {
      // Still open at the end of the data: it sits in the stage it has reached by now.
      const progressed = Math.min(4, Math.floor(((END - createdAt) / (cycleDays * DAY)) * 5));
      stage = at(STAGES, Math.max(0, Math.min(progressed, reach === 5 ? 4 : reach)));
      closed = null;
      lost = null;
    }
    const d: Deal = { id: 0, company: c, contact, owner, pipeline, stage, amount, created: createdAt, closed, lost, seq: seq++ };
    deals.push(d);
    // Activities while the deal is open.
    const until = closed ?? END;
    const n = Math.max(2, Math.round(((until - createdAt) / DAY) / rng.float(4, 9)));
    for (let k = 0; k < n; k++) {
      const t = createdAt + Math.round(rng.next() * (until - createdAt));
      const when = Math.max(createdAt, Math.floor(t / DAY) * DAY + rng.int(13, 22) * HOUR + rng.int(0, 59) * MINUTE);
      const who = rng.chance(0.75) ? contact : contactAt(c, when);
      act(when, rng.weighted<string>([['email', 45], ['call', 22], ['meeting', 18], ['note', 10], ['task', 5]]), who, d, owner);
    }
    if (closed !== null) act(closed - rng.int(1, 60) * MINUTE, 'note', contact, d, owner);
    return d;
  }

  deals.sort((a, b) => a.created - b.created || a.seq - b.seq);
  const dealRows: Cell[][] = deals.map((d, i) => {
    d.id = 3001 + i;
    return [
      d.id, `${d.company.name} - ${d.pipeline === 'expansion' ? 'Expansion' : 'New business'}`, d.company.id, d.contact.id, d.owner,
      d.pipeline, d.stage, STAGE_PROBABILITY[d.stage] ?? 0, d.amount, iso(d.created), d.closed === null ? null : iso(d.closed), d.lost,
    ];
  });

  // Lifecycle stages follow the deals.
  for (const d of deals) {
    if (d.stage === 'closed_won') d.contact.stage = 'customer';
    else if (d.contact.stage !== 'customer') d.contact.stage = 'opportunity';
  }
  for (const c of companies) {
    const row = companyRows[c.id - 1];
    if (row) row[9] = c.stage;
    if (c.stage === 'customer') for (const ct of c.contacts) if (ct.stage !== 'opportunity' && ct.stage !== 'customer' && rng.chance(0.5)) ct.stage = 'customer';
  }
  const contactRows: Cell[][] = contactDrafts.map((d) => [d.c.id, d.c.company.id, d.c.first, d.c.last, d.email, d.title, d.source, d.c.stage, iso(d.c.created)]);

  acts.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const activityRows: Cell[][] = acts.map((a, i) => [
    i + 1, a.type, a.subject, a.contact.id, a.contact.company.id, a.deal ? a.deal.id : null, a.owner, iso(a.at), a.dur, a.outcome,
  ]);

  return new Map<string, Cell[][]>([
    ['users', userRows],
    ['companies', companyRows],
    ['contacts', contactRows],
    ['deals', dealRows],
    ['activities', activityRows],
  ]);
}

export const crm: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'go-to-market',
  name: 'Sales CRM',
  description:
    'A synthetic B2B sales CRM, 2023-2025: sales reps, companies, contacts, new-business and expansion deals through a staged pipeline (won, lost with reasons, or still open) and the calls, e-mails and meetings logged against them.',
  schema: 'demo_crm',
  tables: TABLES,
  generate,
};
