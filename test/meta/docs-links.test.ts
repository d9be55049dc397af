/**
 * The manual's links stay true: in every Markdown file of the repository (README.md, docs/, the
 * READMEs of protocol/, pki/ and relay-agent/), every relative link names a file that exists,
 * and every `#anchor` names a heading of its target (GitHub's anchors: lower case, punctuation
 * dropped, spaces as hyphens, `-1`, `-2` … for repeated headings). Links inside code are not
 * links. Every page of docs/ is reachable from README.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/root.js';

const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', '.svc-data', '.tap']);

/** Markdown files: tracked or new (not ignored) ones, from git; a walk of the tree without it. */
function markdownFiles(): string[] {
  try {
    const out = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', '*.md'], { cwd: ROOT, encoding: 'utf8' });
    return [...new Set(out.split('\0').filter((f) => f !== '' && existsSync(path.join(ROOT, f))))].sort();
  } catch {
    const walk = (dir: string): string[] =>
      readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
        const rel = dir === '' ? e.name : `${dir}/${e.name}`;
        if (e.isDirectory()) return SKIP_DIRS.has(e.name) ? [] : walk(rel);
        return e.name.endsWith('.md') ? [rel] : [];
      });
    return walk('').sort();
  }
}

/** The text outside fenced code blocks, line by line (fenced lines become empty, so line numbers hold). */
function prose(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === null && m) {
      fence = (m[1] as string)[0] as string;
      return '';
    }
    if (fence !== null) {
      if (m && (m[1] as string)[0] === fence) fence = null;
      return '';
    }
    return line;
  });
}

/** GitHub's anchor of a heading's text. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text
    .replace(/<[^>]+>/g, '') // HTML tags
    .replace(/`/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of prose(readFileSync(path.join(ROOT, file), 'utf8'))) {
    const m = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of readFileSync(path.join(ROOT, file), 'utf8').matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1] as string);
  return anchors;
}

interface Link {
  readonly file: string;
  readonly line: number;
  readonly target: string;
}

/** Inline links `[text](target)` and reference definitions `[label]: target`, outside code. */
function linksOf(file: string): Link[] {
  const lines = prose(readFileSync(path.join(ROOT, file), 'utf8'));
  // code spans may cross line ends: blank them over the whole text, keeping the line breaks
  const text = lines.join('\n').replace(/(`+)([\s\S]*?[^`])\1(?!`)/g, (span) => span.replace(/[^\n]/g, ' '));
  const at = (index: number): number => text.slice(0, index).split('\n').length;
  const links: Link[] = [];
  for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ file, line: at(m.index), target: m[1] as string });
  for (const m of text.matchAll(/^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$/gm)) links.push({ file, line: at(m.index), target: m[1] as string });
  return links;
}

const files = markdownFiles();
const anchorCache = new Map<string, Set<string>>();
const anchors = (file: string): Set<string> => {
  let a = anchorCache.get(file);
  if (!a) anchorCache.set(file, (a = anchorsOf(file)));
  return a;
};

t.test('the slug rule gives GitHub’s anchors', async (t) => {
  t.equal(slug('What a connection may read (`GET /v1/connections/{id}/schema`)'), 'what-a-connection-may-read-get-v1connectionsidschema');
  t.equal(slug('The audit chain — verify it yourself'), 'the-audit-chain--verify-it-yourself');
  t.equal(slug('`svc-relay run` options'), 'svc-relay-run-options');
  t.equal(slug('API and file targets: `stripe`, `github`, `http-files`'), 'api-and-file-targets-stripe-github-http-files');
});

t.test('every relative link and anchor of the Markdown files exists', async (t) => {
  t.ok(files.includes('README.md') && files.some((f) => f.startsWith('docs/')), `${files.length} Markdown files: ${files.join(', ')}`);
  const broken: string[] = [];
  let checked = 0;
  for (const file of files) {
    for (const link of linksOf(file)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) continue; // https:, mailto: …
      checked++;
      const hash = link.target.indexOf('#');
      const pathPart = decodeURI(hash < 0 ? link.target : link.target.slice(0, hash));
      const anchor = hash < 0 ? null : decodeURIComponent(link.target.slice(hash + 1));
      const target = pathPart === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), pathPart));
      const where = `${link.file}:${link.line}: ${link.target}`;
      if (target.startsWith('../') || !existsSync(path.join(ROOT, target))) {
        broken.push(`${where} (no file ${target})`);
        continue;
      }
      if (anchor === null) continue;
      if (!target.endsWith('.md')) broken.push(`${where} (an anchor in a file that is not Markdown)`);
      else if (!anchors(target).has(anchor)) broken.push(`${where} (no heading #${anchor} in ${target})`);
    }
  }
  t.ok(checked > 50, `${checked} relative links checked`);
  t.same(broken, [], 'every link target and anchor exists');
});

t.test('every page of docs/ is linked from README.md', async (t) => {
  const linked = new Set(linksOf('README.md').map((l) => l.target.split('#')[0]));
  const pages = files.filter((f) => /^docs\/[^/]+\.md$/.test(f));
  t.ok(pages.length >= 10, `${pages.length} pages in docs/`);
  for (const page of pages) t.ok(linked.has(page), `README.md links ${page}`);
});
