/**
 * demo-web-analytics: first-party product analytics for a SaaS marketing site and signup flow:
 * visitors, sessions (with traffic source and device), pageviews and custom events. Sessions
 * aggregate their pageviews exactly; a visitor's signup happens in a session that converted.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, at, col, iso } from '../rng.js';

const TARGET_ID = 'demo-web-analytics';
const N_VISITORS = 2500;

const BLOG_POSTS = [
  '/blog/how-we-cut-query-latency-in-half',
  '/blog/postgres-row-level-security-guide',
  '/blog/audit-logs-that-auditors-love',
  '/blog/ai-agents-and-least-privilege',
  '/blog/migrating-from-cron-to-workflows',
  '/blog/what-is-a-data-contract',
  '/blog/soc2-in-90-days',
  '/blog/release-notes-2024',
] as const;

const TITLES: Record<string, string> = {
  '/': 'Acme Data - Secure data access for teams',
  '/pricing': 'Pricing - Acme Data',
  '/features': 'Features - Acme Data',
  '/features/integrations': 'Integrations - Acme Data',
  '/customers': 'Customer stories - Acme Data',
  '/docs/getting-started': 'Getting started - Acme Data Docs',
  '/docs/api': 'API reference - Acme Data Docs',
  '/signup': 'Start your free trial - Acme Data',
  '/signup/complete': 'Welcome aboard - Acme Data',
  '/contact-sales': 'Talk to sales - Acme Data',
  '/about': 'About us - Acme Data',
  '/careers': 'Careers - Acme Data',
  '/blog': 'Blog - Acme Data',
};

/** Next-page transitions (page -> [next page, weight]); '' ends the session. */
const NEXT: Record<string, readonly (readonly [string, number])[]> = {
  '/': [['/pricing', 25], ['/features', 22], ['/customers', 8], ['/signup', 10], ['/blog', 6], ['/docs/getting-started', 6], ['/about', 3], ['', 18]],
  '/pricing': [['/signup', 22], ['/contact-sales', 8], ['/features', 10], ['/', 5], ['', 32]],
  '/features': [['/features/integrations', 20], ['/pricing', 25], ['/signup', 8], ['/docs/getting-started', 8], ['', 30]],
  '/features/integrations': [['/pricing', 20], ['/docs/api', 15], ['/signup', 8], ['', 55]],
  '/customers': [['/pricing', 20], ['/contact-sales', 10], ['/', 10], ['', 60]],
  '/docs/getting-started': [['/docs/api', 35], ['/signup', 10], ['/pricing', 8], ['', 47]],
  '/docs/api': [['/docs/getting-started', 15], ['/signup', 5], ['', 80]],
  '/signup': [['/signup/complete', 40], ['/pricing', 10], ['', 50]],
  '/signup/complete': [['/docs/getting-started', 40], ['', 60]],
  '/contact-sales': [['/', 5], ['', 95]],
  '/about': [['/careers', 25], ['/', 15], ['', 60]],
  '/careers': [['', 100]],
  '/blog': [['/blog/*', 60], ['/', 10], ['', 30]],
  '/blog/*': [['/blog/*', 15], ['/', 10], ['/pricing', 6], ['/signup', 4], ['', 45]],
};

const SOURCES: readonly (readonly [readonly [string, string, string | null, string], number])[] = [
  [['google', 'organic', null, '/blog/*'], 34],
  [['(direct)', '(none)', null, '/'], 22],
  [['google', 'cpc', 'brand-search', '/'], 8],
  [['google', 'cpc', 'generic-data-access', '/features'], 6],
  [['newsletter', 'email', 'monthly-digest', '/blog/*'], 7],
  [['linkedin', 'social', 'launch-week', '/'], 6],
  [['twitter', 'social', null, '/blog/*'], 4],
  [['github', 'referral', null, '/docs/getting-started'], 6],
  [['bing', 'organic', null, '/'], 3],
  [['partner-directory', 'referral', 'partner-listing', '/features/integrations'], 4],
];

const TABLES: readonly TableDef[] = [
  {
    name: 'visitors',
    description: 'Unique visitors (first-party cookie), with first-touch attribution and signup.',
    primaryKey: 'visitor_id',
    timeColumn: 'first_seen_at',
    columns: [
      col('visitor_id', 'text', 'Anonymous visitor id (cookie), e.g. v_8f3a...'),
      col('first_seen_at', 'timestamptz', 'Start of the first session.'),
      col('first_source', 'text', 'utm_source / referrer of the first session.'),
      col('first_medium', 'text', 'utm_medium of the first session.'),
      col('country', 'text', 'Country from IP geolocation (ISO 3166-1 alpha-2).'),
      col('signed_up_at', 'timestamptz', 'When the visitor completed signup, if they did.', true),
      col('session_count', 'integer', 'Sessions recorded for the visitor.'),
    ],
  },
  {
    name: 'sessions',
    description: 'Sessions (visits): traffic source, device, landing and exit page, engagement and conversion.',
    primaryKey: 'session_id',
    timeColumn: 'started_at',
    columns: [
      col('session_id', 'text', 'Session id, e.g. s_00012345; numbered in order of started_at.'),
      col('visitor_id', 'text', 'The visitor (visitors.visitor_id).'),
      col('started_at', 'timestamptz', 'First pageview time.'),
      col('ended_at', 'timestamptz', 'Last activity time.'),
      col('source', 'text', 'utm_source or referrer domain; (direct) when none.'),
      col('medium', 'text', 'utm_medium: organic | cpc | email | social | referral | (none).'),
      col('campaign', 'text', 'utm_campaign, when tagged.', true),
      col('landing_page', 'text', 'Path of the first pageview.'),
      col('exit_page', 'text', 'Path of the last pageview.'),
      col('device_type', 'text', 'desktop | mobile | tablet.'),
      col('browser', 'text', 'Browser family.'),
      col('os', 'text', 'Operating system family.'),
      col('country', 'text', 'Country from IP geolocation.'),
      col('pageviews', 'integer', 'Number of pageviews in the session.'),
      col('duration_seconds', 'integer', 'ended_at - started_at in seconds.'),
      col('is_bounce', 'boolean', 'Single-pageview session.'),
      col('converted', 'boolean', 'Whether the session completed signup.'),
    ],
  },
  {
    name: 'pageviews',
    description: 'Pageviews in time order within each session.',
    primaryKey: 'pageview_id',
    timeColumn: 'viewed_at',
    columns: [
      col('pageview_id', 'bigint', 'Pageview id, increasing with viewed_at.'),
      col('session_id', 'text', 'The session (sessions.session_id).'),
      col('visitor_id', 'text', 'The visitor (visitors.visitor_id).'),
      col('viewed_at', 'timestamptz', 'When the page was viewed.'),
      col('path', 'text', 'URL path.'),
      col('title', 'text', 'Document title.'),
      col('referrer_path', 'text', 'Previous page in the session; null for the landing page.', true),
      col('time_on_page_seconds', 'integer', 'Seconds until the next pageview; null for the exit page.', true),
      col('scroll_depth_pct', 'integer', 'Maximum scroll depth reached, percent.'),
    ],
  },
  {
    name: 'events',
    description: 'Custom analytics events (clicks, video plays, signup steps) with their properties.',
    primaryKey: 'event_id',
    timeColumn: 'occurred_at',
    columns: [
      col('event_id', 'bigint', 'Event id, increasing with occurred_at.'),
      col('session_id', 'text', 'The session (sessions.session_id).'),
      col('visitor_id', 'text', 'The visitor (visitors.visitor_id).'),
      col('occurred_at', 'timestamptz', 'When the event happened.'),
      col('event_name', 'text', 'cta_click | video_play | pricing_toggle | signup_started | signup_completed | demo_requested | docs_search | newsletter_subscribe.'),
      col('path', 'text', 'Page the event happened on.'),
      col('properties', 'jsonb', 'Event properties as a JSON object.'),
    ],
  },
];

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;
  let seq = 0;

  interface Pv { at: number; path: string; ref: string | null; top: number | null; scroll: number }
  interface Ev { at: number; name: string; path: string; props: Record<string, unknown> }
  interface Sess { start: number; seq: number; visitor: string; src: readonly [string, string, string | null, string]; device: string; browser: string; os: string; country: string; pvs: Pv[]; evs: Ev[]; converted: boolean; id: string }
  const sessions: Sess[] = [];
  const visitorRows: Cell[][] = [];

  const firstSeen = Array.from({ length: N_VISITORS }, () => rng.trendingTimeMs(SPAN_START_MS, END - HOUR, 1.2)).sort((a, b) => a - b);
  firstSeen.forEach((first) => {
    const visitor = `v_${rng.hex(16)}`;
    const country = rng.weighted<string>([['US', 45], ['GB', 9], ['DE', 8], ['IN', 8], ['CA', 6], ['FR', 4], ['NL', 3], ['BR', 3], ['AU', 3], ['JP', 2], ['ES', 2], ['SE', 2], ['PL', 2], ['SG', 3]]);
    const device = rng.weighted<string>([['desktop', 62], ['mobile', 34], ['tablet', 4]]);
    const [browser, os] =
      device === 'desktop' ? rng.weighted<readonly [string, string]>([[['Chrome', 'Windows'], 35], [['Chrome', 'macOS'], 22], [['Safari', 'macOS'], 14], [['Edge', 'Windows'], 12], [['Firefox', 'Windows'], 6], [['Firefox', 'Linux'], 4], [['Chrome', 'Linux'], 7]])
      : device === 'mobile' ? rng.weighted<readonly [string, string]>([[['Safari', 'iOS'], 52], [['Chrome', 'Android'], 38], [['Samsung Internet', 'Android'], 10]])
      : rng.weighted<readonly [string, string]>([[['Safari', 'iPadOS'], 80], [['Chrome', 'Android'], 20]]);
    const nSessions = 1 + (rng.chance(0.5) ? rng.poisson(2.2) : 0);
    let t = first;
    let signedUp: number | null = null;
    let firstSrc: readonly [string, string, string | null, string] | null = null;
    let count = 0;
    for (let k = 0; k < nSessions && t < END - HOUR; k++) {
      const src = k > 0 && rng.chance(0.5) ? SOURCES[1]?.[0] ?? rng.weighted(SOURCES) : rng.weighted(SOURCES);
      firstSrc ??= src;
      const s: Sess = { start: t, seq: seq++, visitor, src, device, browser, os, country, pvs: [], evs: [], converted: false, id: '' };
      // Walk the site.
      let path: string = src[3] === '/blog/*' ? rng.pick(BLOG_POSTS) : src[3];
      let now = t;
      let ref: string | null = null;
      const seen = new Set<string>();
      for (let step = 0; step < 12; step++) {
        const pv: Pv = { at: now, path, ref, top: null, scroll: rng.int(10, 100) };
        s.pvs.push(pv);
        seen.add(path);
        // Events on this page.
        if (path === '/' && rng.chance(0.25)) s.evs.push({ at: now + rng.int(5, 40) * 1000, name: 'cta_click', path, props: { button: rng.pick(['hero_start_trial', 'hero_book_demo', 'nav_pricing']), position: 'hero' } });
        if (path === '/features' && rng.chance(0.2)) s.evs.push({ at: now + rng.int(10, 90) * 1000, name: 'video_play', path, props: { video: 'product-tour-2min', autoplay: false } });
        if (path === '/pricing' && rng.chance(0.3)) s.evs.push({ at: now + rng.int(5, 60) * 1000, name: 'pricing_toggle', path, props: { billing: rng.pick(['annual', 'monthly']) } });
        if (path.startsWith('/docs') && rng.chance(0.3)) s.evs.push({ at: now + rng.int(5, 60) * 1000, name: 'docs_search', path, props: { query: rng.pick(['api key', 'scopes', 'audit log', 'webhooks', 'rate limits', 'postgres']), results: rng.int(0, 25) } });
        if (path.startsWith('/blog/') && rng.chance(0.05)) s.evs.push({ at: now + rng.int(30, 300) * 1000, name: 'newsletter_subscribe', path, props: { form: 'blog_footer' } });
        if (path === '/signup') s.evs.push({ at: now + rng.int(3, 20) * 1000, name: 'signup_started', path, props: { method: rng.pick(['email', 'google', 'github']) } });
        if (path === '/contact-sales' && rng.chance(0.6)) s.evs.push({ at: now + rng.int(30, 240) * 1000, name: 'demo_requested', path, props: { company_size: rng.pick(['1-10', '11-50', '51-200', '201-1000', '1000+']) } });
        let next = rng.weighted(NEXT[path.startsWith('/blog/') ? '/blog/*' : path] ?? [['', 1]]);
        if (next === '/signup/complete' && signedUp !== null) next = '/docs/getting-started';
        if (next === '') break;
        if (next === '/blog/*') next = rng.pick(BLOG_POSTS);
        const dwell = Math.round(rng.logNormal(path.startsWith('/blog/') ? 140 : path.startsWith('/docs') ? 110 : 45, 0.8, 4, 1500));
        if (now + dwell * 1000 >= END) break;
        pv.top = dwell;
        now += dwell * 1000;
        ref = path;
        path = next;
        if (path === '/signup/complete') {
          signedUp = now;
          s.converted = true;
          s.evs.push({ at: now + 1000, name: 'signup_completed', path, props: { plan: rng.weighted<string>([['trial-team', 70], ['trial-business', 20], ['free', 10]]) } });
        }
        if (seen.has(path) && rng.chance(0.5)) break;
      }
      s.evs = s.evs.filter((e) => e.at < END);
      sessions.push(s);
      count++;
      t = now + Math.round(rng.logNormal(6, 1.2, 0.05, 200) * 24 * HOUR / MINUTE) * MINUTE;
    }
    visitorRows.push([visitor, iso(first), firstSrc?.[0] ?? '(direct)', firstSrc?.[1] ?? '(none)', country, signedUp === null ? null : iso(signedUp), count]);
  });

  sessions.sort((a, b) => a.start - b.start || a.seq - b.seq);
  const sessionRows: Cell[][] = [];
  const pvDrafts: { at: number; seq: number; row: Cell[] }[] = [];
  const evDrafts: { at: number; seq: number; row: Cell[] }[] = [];
  sessions.forEach((s, i) => {
    s.id = `s_${String(i + 1).padStart(8, '0')}`;
    const last = at(s.pvs, s.pvs.length - 1);
    const lastEvent = s.evs.reduce((m, e) => Math.max(m, e.at), 0);
    const ended = Math.max(last.at, lastEvent);
    sessionRows.push([
      s.id, s.visitor, iso(s.start), iso(ended), s.src[0], s.src[1], s.src[2], at(s.pvs, 0).path, last.path, s.device, s.browser, s.os, s.country,
      s.pvs.length, Math.round((ended - s.start) / 1000), s.pvs.length === 1, s.converted,
    ]);
    for (const p of s.pvs) pvDrafts.push({ at: p.at, seq: seq++, row: [0, s.id, s.visitor, iso(p.at), p.path, TITLES[p.path] ?? `${p.path.slice(6).replace(/-/g, ' ')} - Acme Data Blog`, p.ref, p.top, p.scroll] });
    for (const e of s.evs) evDrafts.push({ at: e.at, seq: seq++, row: [0, s.id, s.visitor, iso(e.at), e.name, e.path, e.props] });
  });
  pvDrafts.sort((a, b) => a.at - b.at || a.seq - b.seq);
  evDrafts.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const pvRows = pvDrafts.map((d, i) => {
    d.row[0] = 70_000_001 + i;
    return d.row;
  });
  const evRows = evDrafts.map((d, i) => {
    d.row[0] = 80_000_001 + i;
    return d.row;
  });

  return new Map<string, Cell[][]>([
    ['visitors', visitorRows],
    ['sessions', sessionRows],
    ['pageviews', pvRows],
    ['events', evRows],
  ]);
}

export const webAnalytics: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'engineering',
  name: 'Web analytics',
  description:
    'Synthetic first-party web analytics for a SaaS marketing site, 2023-2025: visitors with first-touch attribution, sessions with source/medium/campaign and device, pageviews with dwell time and scroll depth, and custom events through the signup funnel.',
  schema: 'demo_web_analytics',
  tables: TABLES,
  generate,
};
