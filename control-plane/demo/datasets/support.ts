/**
 * demo-support: a customer support help desk: agents, customer organizations, tickets with SLA
 * tracking, the conversation on each ticket, and satisfaction ratings. First responses follow
 * ticket creation, solved tickets have a solved time, and only solved tickets are rated.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, WeightedIndex, at, col, iso, isoDate } from '../rng.js';

const TARGET_ID = 'demo-support';
const N_CUSTOMERS = 1500;
const N_TICKETS = 3600;

interface Category {
  readonly key: string;
  readonly team: string;
  readonly subjects: readonly string[];
  readonly weight: number;
}

const CATEGORIES: readonly Category[] = [
  { key: 'billing', team: 'billing', weight: 18, subjects: ['Charged twice this month', 'Need a copy of my invoice', 'How do I change my payment method?', 'Refund request', 'VAT number missing on invoice', 'Upgrade pricing question'] },
  { key: 'account_access', team: 'tier1', weight: 15, subjects: ['Cannot log in after password reset', 'SSO login loop', 'Locked out of my account', '2FA device lost', 'Invite email never arrived'] },
  { key: 'how_to', team: 'tier1', weight: 22, subjects: ['How do I export my data?', 'Setting up user roles', 'Where can I find the audit log?', 'How to schedule a report', 'Bulk import of users'] },
  { key: 'bug', team: 'technical', weight: 17, subjects: ['Dashboard not loading', 'Export produces an empty file', 'Error 500 when saving settings', 'Charts show wrong totals', 'Mobile app crashes on launch'] },
  { key: 'integration', team: 'technical', weight: 12, subjects: ['Webhook deliveries failing', 'Salesforce sync stopped', 'API returns 429 too often', 'OAuth token expired unexpectedly', 'Slack notifications not arriving'] },
  { key: 'performance', team: 'technical', weight: 7, subjects: ['App very slow today', 'Queries timing out', 'Report generation takes minutes'] },
  { key: 'feature_request', team: 'tier1', weight: 9, subjects: ['Dark mode please', 'Support for SAML group mapping', 'Custom fields on reports', 'Export to Parquet'] },
];

const TEAMS = ['tier1', 'technical', 'billing'] as const;

const AGENT_REPLIES = [
  'Thanks for reaching out! I am looking into this now.',
  'Could you share a screenshot and the approximate time this happened?',
  'I have reproduced the issue and escalated it to our engineering team.',
  'This should be fixed now. Could you confirm on your side?',
  'Here is a link to the relevant help center article.',
  'I have applied the change to your account.',
  'Following up on this: were you able to try the steps above?',
] as const;

const CUSTOMER_REPLIES = [
  'Thanks, here are the details you asked for.',
  'Still seeing the problem, unfortunately.',
  'That worked, thank you!',
  'Any update on this?',
  'Attaching the screenshot now.',
] as const;

const TABLES: readonly TableDef[] = [
  {
    name: 'agents',
    description: 'Support agents. No event time of their own.',
    primaryKey: 'agent_id',
    columns: [
      col('agent_id', 'integer', 'Agent id.'),
      col('full_name', 'text', 'Full name.'),
      col('email', 'text', 'Work e-mail.'),
      col('team', 'text', 'tier1 | technical | billing.'),
      col('role', 'text', 'agent | senior_agent | team_lead.'),
      col('hired_on', 'date', 'Hire date (may precede the data span).'),
      col('active', 'boolean', 'Whether the agent still works in support.'),
    ],
  },
  {
    name: 'customers',
    description: 'Customer organizations that contact support.',
    primaryKey: 'customer_id',
    timeColumn: 'created_at',
    columns: [
      col('customer_id', 'integer', 'Customer (organization) id.'),
      col('name', 'text', 'Organization name.'),
      col('plan', 'text', 'free | pro | business | enterprise.'),
      col('region', 'text', 'Region: amer | emea | apac.'),
      col('created_at', 'timestamptz', 'When the organization signed up.'),
    ],
  },
  {
    name: 'tickets',
    description: 'Support tickets with assignment, priority, status and SLA timestamps.',
    primaryKey: 'ticket_id',
    timeColumn: 'created_at',
    columns: [
      col('ticket_id', 'integer', 'Ticket id, increasing with created_at.'),
      col('customer_id', 'integer', 'Requesting organization (customers.customer_id).'),
      col('requester_email', 'text', 'Requester e-mail.'),
      col('assignee_id', 'integer', 'Assigned agent (agents.agent_id); null while unassigned.', true),
      col('subject', 'text', 'Subject line.'),
      col('category', 'text', 'billing | account_access | how_to | bug | integration | performance | feature_request.'),
      col('channel', 'text', 'email | chat | phone | web_form.'),
      col('priority', 'text', 'low | normal | high | urgent.'),
      col('status', 'text', 'new | open | pending | solved | closed.'),
      col('created_at', 'timestamptz', 'When the ticket was created.'),
      col('first_response_at', 'timestamptz', 'First public agent reply.', true),
      col('solved_at', 'timestamptz', 'When the ticket was solved.', true),
      col('reopen_count', 'integer', 'Times the ticket was reopened.'),
      col('first_response_sla_breached', 'boolean', 'Whether the first reply came after the SLA target for the plan and priority.'),
      col('tags', 'jsonb', 'Tags as a JSON array of strings.'),
    ],
  },
  {
    name: 'ticket_comments',
    description: 'The conversation on each ticket: customer messages, agent replies and internal notes.',
    primaryKey: 'comment_id',
    timeColumn: 'created_at',
    columns: [
      col('comment_id', 'bigint', 'Comment id, increasing with created_at.'),
      col('ticket_id', 'integer', 'The ticket (tickets.ticket_id).'),
      col('author_type', 'text', 'customer | agent.'),
      col('agent_id', 'integer', 'Authoring agent (agents.agent_id) for agent comments.', true),
      col('public', 'boolean', 'false for internal notes.'),
      col('created_at', 'timestamptz', 'When the comment was posted.'),
      col('body', 'text', 'Comment text.'),
    ],
  },
  {
    name: 'satisfaction_ratings',
    description: 'CSAT survey answers sent after a ticket is solved.',
    primaryKey: 'rating_id',
    timeColumn: 'rated_at',
    columns: [
      col('rating_id', 'integer', 'Rating id.'),
      col('ticket_id', 'integer', 'The rated ticket (tickets.ticket_id).'),
      col('agent_id', 'integer', 'Agent who solved it (agents.agent_id).'),
      col('score', 'text', 'good | bad.'),
      col('reason', 'text', 'Reason picked for a bad rating.', true),
      col('comment', 'text', 'Free-text comment.', true),
      col('rated_at', 'timestamptz', 'When the survey was answered.'),
    ],
  },
];

/** First-response SLA target in minutes by plan and priority. */
function slaMinutes(plan: string, priority: string): number {
  const base = plan === 'enterprise' ? 60 : plan === 'business' ? 240 : plan === 'pro' ? 480 : 1440;
  return priority === 'urgent' ? base / 4 : priority === 'high' ? base / 2 : priority === 'low' ? base * 2 : base;
}

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;
  let seq = 0;

  // --- agents -------------------------------------------------------------------------------
  interface Agent { id: number; team: string; hired: number; left: number | null }
  const agents: Agent[] = [];
  const agentRows: Cell[][] = [];
  const counts = { tier1: 14, technical: 10, billing: 6 } as const;
  for (const team of TEAMS) {
    for (let k = 0; k < counts[team]; k++) {
      const id = agents.length + 1;
      const first = rng.firstName();
      const last = rng.lastName();
      const hired = rng.chance(0.6) ? Date.UTC(2018, 0, 1) + rng.int(0, 1800) * DAY : SPAN_START_MS + rng.int(0, 900) * DAY;
      const left = rng.chance(0.15) ? Math.max(hired, SPAN_START_MS) + rng.int(150, 700) * DAY : null;
      const a: Agent = { id, team, hired, left: left !== null && left < END ? left : null };
      agents.push(a);
      agentRows.push([id, `${first} ${last}`, `${first}.${last}`.toLowerCase().replace(/[^a-z.]/g, '') + '@support.acme-data.example', team, k === 0 ? 'team_lead' : rng.chance(0.3) ? 'senior_agent' : 'agent', isoDate(hired), a.left === null]);
    }
  }
  const agentFor = (team: string, t: number): Agent | null => {
    const list = agents.filter((a) => a.team === team && a.hired <= t && (a.left === null || a.left > t));
    return list.length > 0 ? rng.pick(list) : null;
  };

  // --- customers ------------------------------------------------------------------------------
  interface Customer { id: number; created: number; plan: string; name: string; domain: string }
  const customers: Customer[] = [];
  const customerRows: Cell[][] = [];
  const created = Array.from({ length: N_CUSTOMERS }, () => rng.trendingTimeMs(SPAN_START_MS, END - 30 * DAY, 0.5)).sort((a, b) => a - b);
  created.forEach((t, i) => {
    const name = rng.companyName();
    const plan = rng.weighted<string>([['free', 35], ['pro', 35], ['business', 22], ['enterprise', 8]]);
    const c: Customer = { id: i + 1, created: t, plan, name, domain: `${name.toLowerCase().replace(/\b(inc|llc|corp|ltd|group|co)\.?$/g, '').replace(/[^a-z0-9]+/g, '')}.example` };
    customers.push(c);
    customerRows.push([c.id, name, plan, rng.weighted<string>([['amer', 55], ['emea', 30], ['apac', 15]]), iso(t)]);
  });
  const customerPick = new WeightedIndex(customers.map((c) => (c.plan === 'enterprise' ? 5 : c.plan === 'business' ? 2.5 : c.plan === 'pro' ? 1.2 : 0.5) * rng.logNormal(1, 0.7)));

  // --- tickets -------------------------------------------------------------------------------
  interface Draft { at: number; c: Customer }
  const drafts: Draft[] = [];
  while (drafts.length < N_TICKETS) {
    const c = at(customers, customerPick.pick(rng));
    if (c.created >= END - DAY) continue;
    drafts.push({ at: rng.businessTimeMs(c.created + HOUR, END, 0.2, 0.25), c });
  }
  drafts.sort((a, b) => a.at - b.at);

  const ticketRows: Cell[][] = [];
  interface Comment { at: number; seq: number; ticket: number; author: 'customer' | 'agent'; agent: number | null; pub: boolean; body: string }
  const comments: Comment[] = [];
  const ratings: { at: number; seq: number; ticket: number; agent: number; score: string; reason: string | null; comment: string | null }[] = [];
  drafts.forEach((d, i) => {
    const id = 100_001 + i;
    const c = d.c;
    const cat = rng.weighted(CATEGORIES.map((x) => [x, x.weight] as const));
    const channel = rng.weighted<string>([['email', 45], ['chat', 25], ['web_form', 22], ['phone', 8]]);
    const priority = cat.key === 'performance' || (cat.key === 'bug' && c.plan === 'enterprise') ? rng.weighted<string>([['high', 50], ['urgent', 30], ['normal', 20]]) : rng.weighted<string>([['low', 15], ['normal', 65], ['high', 17], ['urgent', 3]]);
    const subject = rng.pick(cat.subjects);
    const requester = `${rng.firstName()}.${rng.lastName()}`.toLowerCase().replace(/[^a-z.]/g, '') + '@' + c.domain;
    comments.push({ at: d.at, seq: seq++, ticket: id, author: 'customer', agent: null, pub: true, body: subject });

    const agent = agentFor(cat.team, d.at) ?? agentFor('tier1', d.at);
    const target = slaMinutes(c.plan, priority);
    const respMin = Math.round(rng.logNormal(channel === 'chat' ? 4 : target * 0.45, 0.9, 1, 7 * 24 * 60));
    const firstResp = d.at + respMin * MINUTE;
    let status: string;
    let assignee: number | null = agent ? agent.id : null;
    let first: number | null = null;
    let solved: number | null = null;
    let reopens = 0;
    if (!agent || firstResp >= END) {
      status = 'new';
      assignee = firstResp >= END && agent && rng.chance(0.5) ? agent.id : null;
    } else {
      first = firstResp;
      comments.push({ at: firstResp, seq: seq++, ticket: id, author: 'agent', agent: agent.id, pub: true, body: at(AGENT_REPLIES, 0) });
      const rounds = rng.weighted<number>([[0, 45], [1, 35], [2, 14], [3, 5], [4, 1]]);
      let t = firstResp;
      let live = true;
      for (let r = 0; r < rounds && live; r++) {
        const custT = t + Math.round(rng.logNormal(180, 1.1, 5, 6 * 24 * 60)) * MINUTE;
        if (custT >= END) {
          live = false;
          break;
        }
        comments.push({ at: custT, seq: seq++, ticket: id, author: 'customer', agent: null, pub: true, body: rng.pick(CUSTOMER_REPLIES) });
        if (rng.chance(0.25)) {
          const note = custT + rng.int(5, 90) * MINUTE;
          if (note < END) comments.push({ at: note, seq: seq++, ticket: id, author: 'agent', agent: agent.id, pub: false, body: 'Internal: checked logs, see linked engineering issue.' });
        }
        const agT = custT + Math.round(rng.logNormal(target * 0.5, 0.9, 2, 5 * 24 * 60)) * MINUTE;
        if (agT >= END) {
          live = false;
          break;
        }
        comments.push({ at: agT, seq: seq++, ticket: id, author: 'agent', agent: agent.id, pub: true, body: rng.pick(AGENT_REPLIES.slice(1)) });
        t = agT;
      }
      if (!live) status = 'open';
      else {
        const solveT = t + rng.int(5, 240) * MINUTE;
        if (solveT >= END) status = 'pending';
        else {
          solved = solveT;
          if (rng.chance(0.06)) reopens = 1;
          status = solved < END - 4 * DAY ? 'closed' : 'solved';
          // CSAT survey.
          if (rng.chance(0.35)) {
            const rt = solved + rng.int(30, 3 * 24 * 60) * MINUTE;
            if (rt < END) {
              const slow = respMin > target;
              const good = rng.chance(slow ? 0.72 : 0.9);
              ratings.push({
                at: rt, seq: seq++, ticket: id, agent: agent.id, score: good ? 'good' : 'bad',
                reason: good ? null : rng.pick(['issue_not_resolved', 'took_too_long', 'agent_knowledge', 'product_limitation']),
                comment: rng.chance(0.35) ? (good ? rng.pick(['Quick and helpful, thanks!', 'Great support as always.', 'Solved my problem.']) : rng.pick(['Took too long to get an answer.', 'Still not fixed.', 'Had to explain the problem twice.'])) : null,
              });
            }
          }
        }
      }
    }
    const tags = [cat.key, c.plan, ...(priority === 'urgent' ? ['escalated'] : []), ...(channel === 'chat' ? ['live_chat'] : [])];
    ticketRows.push([
      id, c.id, requester, assignee, subject, cat.key, channel, priority, status, iso(d.at), first === null ? null : iso(first), solved === null ? null : iso(solved),
      reopens, first === null ? d.at + target * MINUTE < END : respMin > target, tags,
    ]);
  });

  comments.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const commentRows: Cell[][] = comments.map((c, i) => [5_000_001 + i, c.ticket, c.author, c.agent, c.pub, iso(c.at), c.body]);
  ratings.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const ratingRows: Cell[][] = ratings.map((r, i) => [i + 1, r.ticket, r.agent, r.score, r.reason, r.comment, iso(r.at)]);

  return new Map<string, Cell[][]>([
    ['agents', agentRows],
    ['customers', customerRows],
    ['tickets', ticketRows],
    ['ticket_comments', commentRows],
    ['satisfaction_ratings', ratingRows],
  ]);
}

export const support: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'go-to-market',
  name: 'Customer support help desk',
  description:
    'A synthetic customer support help desk, 2023-2025: agents by team, customer organizations by plan, tickets with priority, channel, SLA targets and outcomes, the full conversation on each ticket and CSAT ratings.',
  schema: 'demo_support',
  tables: TABLES,
  generate,
};
