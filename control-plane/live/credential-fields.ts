/**
 * The decrypted credential of a kind, as a connector is given it (docs/decisions.md, "Secrets are
 * sealed and never leave"): `secret` is the connection URL for databases, the API key or token
 * for APIs; `options` are the kind's non-secret settings. Never log it. A module of its own,
 * importing nothing, so that the REST specs (./rest/spec.ts), which the catalogue reads, need not
 * import the connector contract (./types.ts), which imports the catalogue.
 */
export interface CredentialFields {
  readonly kind: string;
  readonly secret: string;
  readonly options: Readonly<Record<string, unknown>>;
  /** which registration of the credential this is (a credential registered again, even with the same secret, is another version) */
  readonly version?: string;
}
