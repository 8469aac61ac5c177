-- delayq schema version 2: a delivery's work in the database made cheaper (docs/postgres.md,
-- "Measured here"; scripts/bench-pg-reserve.sh measures it).
--   * _reserve takes the delivery tokens from the server, which draws them for less than the three
--     gen_random_uuid() a job that version 1 spent. It is a new overload: a version-1 server still
--     running during a rolling upgrade keeps calling the old one, which stays.
--   * _ack deletes the delivery's job in one statement and reads the job only when that found
--     nothing, to say why (version 1 locked it with a SELECT first, then deleted it). Its answers
--     are version 1's, so a version-1 server calls it unchanged.

-- Reserves up to n ready jobs of q, due first (then by id), for lease_ms (NULL: the queue's),
-- stopping before the job that would take the answer's stored bytes over max_bytes (the first
-- always comes). The k-th job taken gets p_tokens[k]: the server draws them (128 random bits each,
-- core/delivery_token.h), where they cost less than three gen_random_uuid() a job did here; at
-- most cardinality(p_tokens) jobs are taken. Skips rows another reserve has locked: two servers
-- never hand out one job. first: the job came due since its last delivery. A queue with flow
-- control or with priorities or groups answers one row with a NULL id instead: the server
-- reserves those with the C++ rules (pg_controlled_reserve.cc).
--
-- The lease starts from the clock read again once the row is locked: a reaper that ended the
-- job's last lease committed before this statement's snapshot, at or after that lease's end,
-- which `now` (read before the snapshot) may precede. The history checker saw the new lease start
-- 2 ms before the old one ended.
CREATE FUNCTION delayq._reserve(q text, n int, p_lease_ms bigint, p_max_bytes bigint, p_tokens text[])
RETURNS TABLE (id text, payload bytea, is_binary boolean, headers json, attempt int, max_attempts int,
               due_at_ms bigint, key text, lease_deadline_ms bigint, priority int, grp text, first boolean,
               now_ms bigint, token text) LANGUAGE plpgsql AS $$
DECLARE
  now bigint := delayq.now_ms();
  cfg record;
  lease bigint;
  taken int := 0;
  bytes bigint := 0;
  size bigint;
  r record;
BEGIN
  SELECT c.paused, c.lease_ms, c.ordered OR c.rate_per_s > 0 OR c.max_reserved > 0 OR c.group_max_reserved > 0
         AS controlled INTO cfg FROM delayq.queues c WHERE c.name = q;
  IF NOT FOUND OR cfg.paused THEN RETURN; END IF;
  IF cfg.controlled THEN
    now_ms := now;
    RETURN NEXT;
    RETURN;
  END IF;
  IF array_lower(p_tokens, 1) IS DISTINCT FROM 1 OR array_position(p_tokens, NULL) IS NOT NULL THEN
    RAISE EXCEPTION 'p_tokens must be a non-empty array from index 1 with no NULL' USING ERRCODE = '22023';
  END IF;
  lease := coalesce(p_lease_ms, cfg.lease_ms);
  FOR r IN SELECT j.id, j.payload, j.is_binary, j.headers, j.attempt, j.max_attempts, j.due_at_ms, j.key,
                  j.priority, j.grp, j.waited
             FROM delayq.jobs j WHERE j.queue = q AND j.state = 's' AND j.due_at_ms <= now
             ORDER BY j.due_at_ms, j.id LIMIT least(n, cardinality(p_tokens)) FOR UPDATE SKIP LOCKED LOOP
    size := octet_length(r.payload) + coalesce(octet_length(r.headers::text), 0) + coalesce(octet_length(r.key), 0)
            + octet_length(r.grp) + 64;
    EXIT WHEN taken > 0 AND bytes + size > p_max_bytes;
    bytes := bytes + size;
    taken := taken + 1;
    now_ms := delayq.now_ms();
    UPDATE delayq.jobs j SET state = 'r', attempt = r.attempt + 1, token = p_tokens[taken],
                             lease_deadline_ms = now_ms + lease, waited = false
      WHERE j.queue = q AND j.id = r.id;
    id := r.id; payload := r.payload; is_binary := r.is_binary; headers := r.headers; attempt := r.attempt + 1;
    max_attempts := r.max_attempts; due_at_ms := r.due_at_ms; key := r.key; lease_deadline_ms := now_ms + lease;
    priority := r.priority; grp := r.grp; first := r.waited; token := p_tokens[taken];
    RETURN NEXT;
  END LOOP;
END $$;
REVOKE ALL ON FUNCTION delayq._reserve(text, int, bigint, bigint, text[]) FROM PUBLIC;

-- Acks each (id, token): the job is deleted (its key kept for its key_ttl_ms). Answers per entry
-- 'O' (acked), 'N' (no such job) or 'E' with the job's state and attempts (the delivery is over).
-- A receipt stays valid after its lease ran out until the job is delivered again. An entry is one
-- DELETE of the delivery's job; the job is read only when that found nothing, to say why (a
-- SELECT ... FOR UPDATE before each DELETE was nearly half of an ack's cost:
-- scripts/bench-pg-reserve.sh).
CREATE OR REPLACE FUNCTION delayq._ack(q text, p_ids text[], p_tokens text[])
RETURNS TABLE (outcome text, state "char", attempt int, max_attempts int) LANGUAGE plpgsql AS $$
DECLARE
  now bigint := delayq.now_ms();
  r record;
BEGIN
  FOR i IN 1..coalesce(array_length(p_ids, 1), 0) LOOP
    DELETE FROM delayq.jobs j WHERE j.queue = q AND j.id = p_ids[i] AND j.token = p_tokens[i] AND j.state <> 'd'
      RETURNING j.state, j.attempt, j.max_attempts, j.key, j.key_ttl_ms, j.due_at_ms INTO r;
    IF FOUND THEN
      IF r.key IS NOT NULL AND r.key_ttl_ms > 0 THEN
        PERFORM delayq._keep_key(q, r.key, p_ids[i], r.due_at_ms, r.key_ttl_ms, now);
      END IF;
      outcome := 'O';
    ELSE
      SELECT j.state, j.attempt, j.max_attempts INTO r FROM delayq.jobs j WHERE j.queue = q AND j.id = p_ids[i];
      outcome := CASE WHEN FOUND THEN 'E' ELSE 'N' END;
    END IF;
    state := r.state; attempt := coalesce(r.attempt, 0); max_attempts := coalesce(r.max_attempts, 0);
    RETURN NEXT;
  END LOOP;
END $$;
