/**
 * Store functions (migration 8): each phase of the query path is one statement, so a query costs
 * the store three round trips after its key and connection are read (reserve; run; settle with
 * its audit event), each its own transaction, instead of some twenty statements in three
 * transactions. The rules live beside their callers in TypeScript (control-plane/billing,
 * control-plane/audit); these functions take every price and limit as a parameter, so the SQL
 * holds no constant of its own.
 *
 * Lock order, everywhere: the connection row, then the organization row.
 */

/**
 * Append one audit event. The caller sends the event's canonical JSON (RFC 8785) cut around the
 * three values only the store knows at commit, `at`, `prev_hash` and `seq`: body = a ‖ at ‖ b ‖
 * prev_hash ‖ c ‖ seq ‖ d, and hash = sha256(prev_hash ‖ "\n" ‖ body), the chain's rule (docs:
 * audit chain). `at` is the store's clock read under the connection's row lock, so times never go
 * backwards along a chain; it has JavaScript's toISOString form (UTC, milliseconds).
 */
/** the event's link: its time, body and hash from o_prev and o_seq (the head, read under the connection's row lock), inserted */
const CHAIN_LINK = `  o_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
  v_body := p_a || o_at || p_b || o_prev || p_c || o_seq::text || p_d;
  o_hash := encode(sha256(convert_to(o_prev || chr(10) || v_body, 'UTF8')), 'hex');
  INSERT INTO audit_events (connection_id, seq, event_id, body, hash) VALUES (p_conn, o_seq, p_event_id, v_body, o_hash);
`;

const APPEND_EVENT = `
CREATE FUNCTION svc_append_event(p_conn text, p_event_id text, p_a text, p_b text, p_c text, p_d text,
  OUT o_seq integer, OUT o_prev text, OUT o_hash text, OUT o_at text)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_body text;
BEGIN
  SELECT c.head_hash, c.head_seq + 1 INTO o_prev, o_seq FROM connections c WHERE c.id = p_conn FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'connection % not found', p_conn USING ERRCODE = 'P0002';
  END IF;
${CHAIN_LINK}  UPDATE connections SET head_hash = o_hash, head_seq = o_seq WHERE id = p_conn;
END
$fn$`;

/**
 * Reserve one query's price: from the trial while it is open (its egress held up front), else a
 * hold on the wallet (auto-reloaded once when configured). Outcomes: 'trial' (o_grant: egress
 * held), 'wallet', 'held' (the trial is open but its egress is all held and the caller may wait),
 * 'trial_held' (the same, the caller may not wait, and the wallet cannot pay),
 * 'payment_required' (o_wallet: the balance), 'no_org'; and, read fresh before anything is held
 * (the caller may know the connection from a cache), 'connection_revoked' (p_conn revoked or not
 * this organization's) or 'key_revoked' (p_key).
 */
const RESERVE = `
CREATE FUNCTION svc_reserve(p_id text, p_org text, p_now timestamptz, p_max_bytes bigint, p_may_wait boolean,
  p_trial_queries integer, p_trial_egress bigint, p_trial_credit bigint, p_price bigint, p_share bigint,
  p_hold bigint, p_wallet_max bigint, p_conn text, p_key text,
  OUT o_outcome text, OUT o_grant bigint, OUT o_paying boolean, OUT o_wallet bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v orgs%ROWTYPE;
  v_free bigint;
  v_held boolean := false;
  v_reloaded boolean := false;
BEGIN
  IF p_conn IS NOT NULL AND NOT EXISTS (SELECT 1 FROM connections WHERE id = p_conn AND org_id = p_org AND revoked_at IS NULL) THEN
    o_outcome := 'connection_revoked';
    RETURN;
  END IF;
  IF p_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM agent_keys WHERE id = p_key AND revoked_at IS NULL) THEN
    o_outcome := 'key_revoked';
    RETURN;
  END IF;
  SELECT * INTO v FROM orgs WHERE id = p_org FOR UPDATE;
  IF NOT FOUND THEN
    o_outcome := 'no_org';
    RETURN;
  END IF;
  o_paying := v.wallet_nc + v.wallet_held_nc + v.wallet_spend_nc > 0;
  IF v.trial_queries_used < p_trial_queries AND v.trial_egress_used < p_trial_egress
     AND v.trial_expires_at > p_now AND v.trial_spent_nc + p_price <= p_trial_credit THEN
    v_free := p_trial_egress + p_max_bytes - v.trial_egress_used - v.trial_egress_held;
    IF v_free > 0 THEN
      o_grant := CASE WHEN v.trial_egress_held = 0 THEN least(p_max_bytes, v_free) ELSE least(p_max_bytes, v_free, p_share) END;
      UPDATE orgs SET trial_queries_used = trial_queries_used + 1, trial_spent_nc = trial_spent_nc + p_price,
                      trial_egress_held = trial_egress_held + o_grant
        WHERE id = p_org;
      INSERT INTO reservations (id, org_id, payer, held_nc, created_at, egress_held) VALUES (p_id, p_org, 'trial', p_price, p_now, o_grant);
      o_outcome := 'trial';
      RETURN;
    END IF;
    IF p_may_wait THEN
      o_outcome := 'held';
      RETURN;
    END IF;
    v_held := true;
  END IF;
  LOOP
    IF v.wallet_nc >= p_hold THEN
      UPDATE orgs SET wallet_nc = wallet_nc - p_hold, wallet_held_nc = wallet_held_nc + p_hold WHERE id = p_org;
      INSERT INTO reservations (id, org_id, payer, held_nc, created_at, egress_held) VALUES (p_id, p_org, 'wallet', p_hold, p_now, 0);
      o_outcome := 'wallet';
      o_grant := 0;
      RETURN;
    END IF;
    EXIT WHEN v_reloaded OR v.auto_reload_threshold_nc IS NULL OR v.auto_reload_amount_nc IS NULL
      OR v.wallet_nc >= v.auto_reload_threshold_nc
      OR v.wallet_nc + v.wallet_held_nc + v.auto_reload_amount_nc > p_wallet_max;
    UPDATE orgs SET wallet_nc = wallet_nc + v.auto_reload_amount_nc WHERE id = p_org RETURNING * INTO v;
    INSERT INTO ledger (org_id, kind, amount_nc, balance_after_nc, created_at, note) VALUES (p_org, 'auto_reload', v.auto_reload_amount_nc, v.wallet_nc, p_now, NULL);
    v_reloaded := true;
  END LOOP;
  o_outcome := CASE WHEN v_held THEN 'trial_held' ELSE 'payment_required' END;
  o_wallet := v.wallet_nc;
END
$fn$`;

/**
 * End a query: under the connection's row lock, optionally check it may still be answered
 * (p_check: not revoked, expired, its key revoked or its relay deleted; else o_outcome names
 * why and nothing is written), then settle (p_mode 'settle': charge p_cost, p_bytes of egress),
 * refund ('refund') or leave (`none`) its reservation, count it on the connection (p_count) and
 * append its audit event, all in one transaction. o_outcome 'swept': the reservation was given
 * back already (a sweep after a crash); nothing is written and the caller settles again with
 * 'none' and no charge.
 */
const SETTLE_SIGNATURE = `(p_mode text, p_rsv text, p_org text, p_payer text, p_held bigint, p_egress_held bigint,
  p_bytes bigint, p_cost bigint, p_egress_nc bigint,
  p_conn text, p_key text, p_relay text, p_check boolean, p_count boolean, p_now timestamptz, p_wallet_max bigint,
  p_event_id text, p_a text, p_b text, p_c text, p_d text,
  OUT o_outcome text, OUT o_seq integer, OUT o_prev text, OUT o_hash text, OUT o_at text)
LANGUAGE plpgsql AS $fn$`;

/** the settlement's checks (the connection's row in v_conn, read under its lock) */
const SETTLE_CHECKS = `
  IF NOT FOUND THEN
    RAISE EXCEPTION 'connection % not found', p_conn USING ERRCODE = 'P0002';
  END IF;
  IF p_check THEN
    o_outcome := CASE
      WHEN v_conn.revoked_at IS NOT NULL THEN 'revoked'
      WHEN v_conn.expires_at <= p_now THEN 'expired'
      WHEN v_conn.key_revoked THEN 'key_revoked'
      WHEN v_conn.relay_revoked THEN 'relay_deleted'
    END;
    IF o_outcome IS NOT NULL THEN
      RETURN;
    END IF;
  END IF;
`;

/** the settlement's money: the reservation settled, given back or left (p_mode) */
const SETTLE_MONEY = `  IF p_mode <> 'none' THEN
    DELETE FROM reservations WHERE id = p_rsv;
    IF NOT FOUND THEN
      IF p_mode = 'settle' THEN
        o_outcome := 'swept';
        RETURN;
      END IF;
    ELSIF p_mode = 'refund' THEN
      IF p_payer = 'trial' THEN
        UPDATE orgs SET trial_queries_used = trial_queries_used - 1, trial_spent_nc = trial_spent_nc - p_held,
                        trial_egress_held = trial_egress_held - p_egress_held
          WHERE id = p_org;
      ELSE
        UPDATE orgs SET wallet_held_nc = wallet_held_nc - p_held, wallet_nc = wallet_nc + p_held WHERE id = p_org;
      END IF;
    ELSIF p_payer = 'trial' THEN
      UPDATE orgs SET trial_egress_used = trial_egress_used + p_bytes, trial_spent_nc = trial_spent_nc + p_egress_nc,
                      trial_egress_held = trial_egress_held - p_egress_held, queries_total = queries_total + 1,
                      egress_total = egress_total + p_bytes, list_spend_nc = list_spend_nc + p_cost
        WHERE id = p_org;
    ELSE
      UPDATE orgs SET wallet_held_nc = wallet_held_nc - p_held, wallet_nc = wallet_nc + p_held - p_cost,
                      wallet_spend_nc = wallet_spend_nc + p_cost, queries_total = queries_total + 1,
                      egress_total = egress_total + p_bytes, list_spend_nc = list_spend_nc + p_cost
        WHERE id = p_org RETURNING * INTO v;
      INSERT INTO ledger (org_id, kind, amount_nc, balance_after_nc, created_at, note) VALUES (p_org, 'query', -p_cost, v.wallet_nc, p_now, NULL);
      IF v.auto_reload_threshold_nc IS NOT NULL AND v.auto_reload_amount_nc IS NOT NULL AND v.wallet_nc < v.auto_reload_threshold_nc
         AND v.wallet_nc + v.wallet_held_nc + v.auto_reload_amount_nc <= p_wallet_max THEN
        UPDATE orgs SET wallet_nc = wallet_nc + v.auto_reload_amount_nc WHERE id = p_org RETURNING * INTO v;
        INSERT INTO ledger (org_id, kind, amount_nc, balance_after_nc, created_at, note) VALUES (p_org, 'auto_reload', v.auto_reload_amount_nc, v.wallet_nc, p_now, NULL);
      END IF;
    END IF;
  END IF;
`;

const SETTLE = `
CREATE FUNCTION svc_settle${SETTLE_SIGNATURE}
DECLARE
  v_conn record;
  v orgs%ROWTYPE;
BEGIN
  SELECT c.revoked_at, c.expires_at,
         (SELECT k.revoked_at IS NOT NULL FROM agent_keys k WHERE k.id = p_key) AS key_revoked,
         (SELECT r.revoked_at IS NOT NULL FROM relays r WHERE r.id = p_relay) AS relay_revoked
    INTO v_conn FROM connections c WHERE c.id = p_conn FOR UPDATE OF c;${SETTLE_CHECKS}${SETTLE_MONEY}  IF p_count THEN
    UPDATE connections SET queries = queries + 1, bytes_egressed = bytes_egressed + p_bytes, last_query_at = p_now WHERE id = p_conn;
  END IF;
  SELECT a.o_seq, a.o_prev, a.o_hash, a.o_at INTO o_seq, o_prev, o_hash, o_at FROM svc_append_event(p_conn, p_event_id, p_a, p_b, p_c, p_d) a;
  o_outcome := 'ok';
END
$fn$`;

export const QUERY_PATH_FUNCTIONS: readonly string[] = [APPEND_EVENT, RESERVE, SETTLE];

/**
 * svc_settle as migration 14 replaces it, with the same parameters and answers: the connection's
 * row is locked and written once (its head read with its state, then its counters and head in one
 * UPDATE), where the first version locked it again and wrote it twice through svc_append_event.
 * About a third less of the store's time per settlement on the embedded engine.
 */
export const SETTLE_ONE_WRITE = `
CREATE OR REPLACE FUNCTION svc_settle${SETTLE_SIGNATURE}
DECLARE
  v_conn record;
  v orgs%ROWTYPE;
  v_body text;
BEGIN
  SELECT c.revoked_at, c.expires_at, c.head_hash, c.head_seq,
         (SELECT k.revoked_at IS NOT NULL FROM agent_keys k WHERE k.id = p_key) AS key_revoked,
         (SELECT r.revoked_at IS NOT NULL FROM relays r WHERE r.id = p_relay) AS relay_revoked
    INTO v_conn FROM connections c WHERE c.id = p_conn FOR UPDATE OF c;${SETTLE_CHECKS}${SETTLE_MONEY}  o_prev := v_conn.head_hash;
  o_seq := v_conn.head_seq + 1;
${CHAIN_LINK}  IF p_count THEN
    UPDATE connections SET head_hash = o_hash, head_seq = o_seq, queries = queries + 1, bytes_egressed = bytes_egressed + p_bytes, last_query_at = p_now
     WHERE id = p_conn;
  ELSE
    UPDATE connections SET head_hash = o_hash, head_seq = o_seq WHERE id = p_conn;
  END IF;
  o_outcome := 'ok';
END
$fn$`;

/**
 * svc_settle as migration 18 replaces it, with the same parameters and answers but one: a
 * connection is expired once its expiry has passed by the caller's clock (p_now) or by the
 * store's, whichever is later. Replicas judged expiry by their own clocks alone, so one whose
 * clock lagged the others' could answer a connection for up to that lag past its expiry.
 */
export const SETTLE_STORE_CLOCK = storeClockExpiry(SETTLE_ONE_WRITE);

function storeClockExpiry(settle: string): string {
  const before = "WHEN v_conn.expires_at <= p_now THEN 'expired'";
  if (!settle.includes(before)) throw new Error('svc_settle: its expiry check was not found');
  return settle.replace(before, "WHEN v_conn.expires_at <= greatest(p_now, clock_timestamp()) THEN 'expired'");
}
