/**
 * Bring-your-own credentials (docs/credentials-and-live-targets.md): one per connector kind per
 * organization, posting again replaces it. The secret and its options are sealed together with
 * AES-256-GCM under the current master key (the key id is kept with the ciphertext, so earlier
 * keys listed in SVC_MASTER_KEY_PREVIOUS still open what they sealed), bound to the row's
 * organization and kind (associated data: a sealed value copied into another row does not open),
 * and opened only at query time, by `resolve`. Nothing here logs, and no error message carries the secret or any part of
 * it: what leaves this module is metadata (kind, times, a hint of at most the last 4 characters).
 */
import { ApiError } from '../errors.js';
import type { CredentialFields, CredentialKindDef } from '../live/types.js';
import { open, seal, sealedWithPattern, SecretsError, type MasterKeyRing } from '../secrets/index.js';
import type { Store } from '../store/index.js';

export interface CredentialMeta {
  readonly connector_kind: string;
  readonly created_at: string;
  readonly last_used_at: string | null;
  /** at most the last 4 characters of the secret ('' for secrets shorter than 12 characters) */
  readonly hint: string;
}

interface CredentialRow {
  connector_kind: string;
  sealed: string;
  key_id: string;
  hint: string;
  created_at: Date | string;
  last_used_at: Date | string | null;
}

export const SECRET_MAX_CHARS = 8192;
const HINT_MIN_SECRET = 12;
/** kinds whose secret may be empty: http-files with public files (no bearer token) */
const EMPTY_SECRET_KINDS: ReadonlySet<string> = new Set(['http-files']);

/** The associated data a credential is sealed with: the row it belongs to. */
const sealContext = (orgId: string, kind: string): string => `credential\n${orgId}\n${kind}`;

const iso = (d: Date | string | null): string | null => (d === null ? null : new Date(d).toISOString());

function meta(r: CredentialRow): CredentialMeta {
  return { connector_kind: r.connector_kind, created_at: iso(r.created_at) as string, last_used_at: iso(r.last_used_at), hint: r.hint };
}

export function hintOf(secret: string): string {
  return secret.length >= HINT_MIN_SECRET ? secret.slice(-4) : '';
}

/** What `POST /v1/connections/credentials` must do next when a kind has no credential. */
export function registerHint(kind: string): string {
  return `register one with POST /v1/connections/credentials {"connector_kind": "${kind}", "secret": …} (GET /v1/connections/credentials/kinds describes it)`;
}

/** Whether the organization has a credential of this kind (no decryption). */
export async function hasCredential(store: Store, orgId: string, kind: string): Promise<boolean> {
  const rows = await store.query('SELECT 1 FROM credentials WHERE org_id = $1 AND connector_kind = $2', [orgId, kind]);
  return rows.length > 0;
}

/** The public record of a kind (what `GET /v1/connections/credentials/kinds` returns). */
export function kindRecord(k: CredentialKindDef): Record<string, unknown> {
  return { connector_kind: k.kind, targets: k.targets, description: k.description, secret: k.secret, options: k.options, validation: k.validation };
}

export class CredentialStore {
  private readonly byKind: ReadonlyMap<string, CredentialKindDef>;

  constructor(
    private readonly store: Store,
    private readonly keys: () => Promise<MasterKeyRing>,
    kinds: readonly CredentialKindDef[],
    /** checks made at registration once the kind validated the credential (live/index.ts `checkCredential`); throws ApiError to refuse it */
    private readonly check: (kind: string, secret: string, options: Readonly<Record<string, unknown>>) => Promise<void> = async () => undefined,
  ) {
    this.byKind = new Map(kinds.map((k) => [k.kind, k]));
  }

  get kinds(): readonly CredentialKindDef[] {
    return [...this.byKind.values()];
  }

  private kindOf(kind: string, field: string): CredentialKindDef {
    const def = this.byKind.get(kind);
    if (!def) {
      throw new ApiError('invalid_request', `unknown connector_kind ${JSON.stringify(kind.slice(0, 100))}; kinds: ${[...this.byKind.keys()].join(', ')}`, {
        field,
        allowed: [...this.byKind.keys()],
        kinds: [...this.byKind.keys()],
      });
    }
    return def;
  }

  /** Validate and store (replacing any earlier credential of the kind). */
  async put(orgId: string, kind: string, secret: string, options: Readonly<Record<string, unknown>> = {}): Promise<CredentialMeta & { replaced: boolean }> {
    const def = this.kindOf(kind, 'connector_kind');
    const mayBeEmpty = EMPTY_SECRET_KINDS.has(def.kind);
    if (typeof secret !== 'string' || (secret.length === 0 && !mayBeEmpty) || secret.length > SECRET_MAX_CHARS) {
      throw new ApiError('invalid_request', `secret must be a ${mayBeEmpty ? '' : 'non-empty '}string of at most ${SECRET_MAX_CHARS} characters: ${def.secret.description}`, { field: 'secret' });
    }
    if (secret !== secret.trim() || /[\u0000-\u001f\u007f]/.test(secret)) {
      throw new ApiError('invalid_request', `secret must not contain control characters or surrounding whitespace: ${def.secret.description}`, { field: 'secret' });
    }
    const normalized = def.validate(secret, options);
    await this.check(def.kind, secret, normalized);
    const ring = await this.keys();
    const sealed = seal(ring.current, JSON.stringify({ secret, options: normalized }), sealContext(orgId, def.kind));
    const now = new Date().toISOString();
    const rows = await this.store.query<CredentialRow & { replaced: boolean }>(
      `INSERT INTO credentials (org_id, connector_kind, sealed, key_id, hint, created_at, last_used_at)
       VALUES ($1, $2, $3, $4, $5, $6, NULL)
       ON CONFLICT (org_id, connector_kind) DO UPDATE SET sealed = EXCLUDED.sealed, key_id = EXCLUDED.key_id, hint = EXCLUDED.hint,
         created_at = EXCLUDED.created_at, last_used_at = NULL
       RETURNING connector_kind, sealed, key_id, hint, created_at, last_used_at, (xmax <> 0) AS replaced`,
      [orgId, def.kind, sealed, ring.current.id, hintOf(secret), now],
    );
    const row = rows[0] as CredentialRow & { replaced: boolean };
    return { ...meta(row), replaced: row.replaced === true };
  }

  async list(orgId: string): Promise<CredentialMeta[]> {
    const rows = await this.store.query<CredentialRow>(
      'SELECT connector_kind, sealed, key_id, hint, created_at, last_used_at FROM credentials WHERE org_id = $1 ORDER BY connector_kind',
      [orgId],
    );
    return rows.map(meta);
  }

  /** Delete; 404 when the organization has none of that kind. */
  async remove(orgId: string, kind: string): Promise<void> {
    const rows = await this.store.query('DELETE FROM credentials WHERE org_id = $1 AND connector_kind = $2 RETURNING connector_kind', [orgId, kind]);
    if (rows.length === 0) {
      throw new ApiError('not_found', `no ${JSON.stringify(kind.slice(0, 100))} credential is registered; list yours with GET /v1/connections/credentials`);
    }
  }

  /**
   * Open the organization's credential of `kind` for one query and record its use. Throws 400
   * invalid_request (details.reason `credential_missing` / `credential_unreadable`) naming the
   * kind to register.
   */
  async resolve(orgId: string, kind: string): Promise<CredentialFields> {
    const rows = await this.store.query<CredentialRow>(
      `UPDATE credentials SET last_used_at = $3 WHERE org_id = $1 AND connector_kind = $2
       RETURNING connector_kind, sealed, key_id, hint, created_at, last_used_at`,
      [orgId, kind, new Date().toISOString()],
    );
    const row = rows[0];
    if (!row) {
      throw new ApiError('invalid_request', `this connection needs a ${kind} credential, and the organization has none (it was deleted or never registered); ${registerHint(kind)}`, {
        reason: 'credential_missing',
        connector_kind: kind,
      });
    }
    let plain: { secret?: unknown; options?: unknown };
    try {
      plain = JSON.parse(open((await this.keys()).all, row.sealed, sealContext(orgId, kind)).toString('utf8')) as { secret?: unknown; options?: unknown };
    } catch (err) {
      const why =
        err instanceof SecretsError && err.code === 'SECRETS_ERR_UNKNOWN_KEY'
          ? `it was sealed with master key ${row.key_id}, which this control plane no longer has (SVC_MASTER_KEY / SVC_MASTER_KEY_PREVIOUS)`
          : 'it does not open with the configured master keys';
      throw new ApiError('invalid_request', `the stored ${kind} credential cannot be read: ${why}; ${registerHint(kind)} again`, {
        reason: 'credential_unreadable',
        connector_kind: kind,
      });
    }
    const options = typeof plain.options === 'object' && plain.options !== null ? (plain.options as Record<string, unknown>) : {};
    return { kind, secret: String(plain.secret ?? ''), options, version: new Date(row.created_at).toISOString() };
  }

  /**
   * Re-seal every credential not yet in the current form (sealed with an earlier master key, or
   * in the v1 format that is not bound to its row) with the current key, bound to its row; run
   * at start-up. Returns how many were re-sealed. Loads no key when nothing is stored.
   */
  async reseal(): Promise<number> {
    const any = await this.store.query('SELECT 1 FROM credentials LIMIT 1');
    if (any.length === 0) return 0;
    const ring = await this.keys();
    const rows = await this.store.query<{ org_id: string; connector_kind: string; sealed: string }>(
      'SELECT org_id, connector_kind, sealed FROM credentials WHERE sealed NOT LIKE $1',
      [sealedWithPattern(ring.current)],
    );
    let n = 0;
    for (const r of rows) {
      const context = sealContext(r.org_id, r.connector_kind);
      let plain: Buffer;
      try {
        plain = open(ring.all, r.sealed, context);
      } catch {
        continue; // unreadable with every key we have: left as it is, resolve() says so
      }
      const updated = await this.store.query(
        'UPDATE credentials SET sealed = $4, key_id = $5 WHERE org_id = $1 AND connector_kind = $2 AND sealed = $3 RETURNING connector_kind',
        [r.org_id, r.connector_kind, r.sealed, seal(ring.current, plain, context), ring.current.id],
      );
      n += updated.length;
    }
    return n;
  }
}
