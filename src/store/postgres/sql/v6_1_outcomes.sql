-- delayq schema version 6: waiting for an outcome (SPEC §11.3, docs/http-api.md "Waiting for an
-- outcome"). A server that waits for a job's outcome notes it in delayq.waiting (_watch); the
-- job's final transition (an ack, a death, a cancel) deletes that row and announces
-- "outcome <state> <id> <queue>" on the delayq channel at commit, which every server's listener
-- hears (core/outcome_waiters.h answers the waits). An ack of a job someone waits for keeps it
-- completed, with keep_completed_ms 0 too, so the waiters read its result; the sweep deletes it
-- Limits::kOutcomeHoldMs after (the sweep's rule comes from C++: CompletedSweepAfterMs).
CREATE UNLOGGED TABLE delayq.waiting (
  queue text NOT NULL,
  id text NOT NULL,
  until_ms bigint NOT NULL,
  PRIMARY KEY (queue, id)
);
REVOKE ALL ON delayq.waiting FROM PUBLIC;

-- Notes that someone waits for job p_id's outcome for p_wait_ms (and 5 s more: a server's clock
-- and the database's differ), keeping the latest end; drops the queue's entries whose time is up.
-- It holds the queue's ack lock (1685550945, hashtext(queue)) exclusively, so an ack under way
-- commits first (the waiter's read after this sees it) and every later ack sees this row.
CREATE FUNCTION delayq._watch(q text, p_id text, p_wait_ms bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  now bigint := delayq.now_ms();
BEGIN
  PERFORM pg_advisory_xact_lock(1685550945, hashtext(q));
  DELETE FROM delayq.waiting w WHERE w.queue = q AND w.until_ms <= now;
  INSERT INTO delayq.waiting (queue, id, until_ms) VALUES (q, p_id, now + p_wait_ms + 5000)
    ON CONFLICT (queue, id) DO UPDATE SET until_ms = greatest(delayq.waiting.until_ms, excluded.until_ms);
END $$;
REVOKE ALL ON FUNCTION delayq._watch(text, text, bigint) FROM PUBLIC;

-- Announces the final transition of job p_id to p_state when someone waits for it.
CREATE FUNCTION delayq._outcome(q text, p_id text, p_state text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM delayq.waiting w WHERE w.queue = q AND w.id = p_id;
  IF FOUND THEN PERFORM pg_notify('delayq', 'outcome ' || p_state || ' ' || p_id || ' ' || q); END IF;
END $$;
REVOKE ALL ON FUNCTION delayq._outcome(text, text, text) FROM PUBLIC;

-- Acks each (id, token) as the version 2 _ack does, answering what it answers. Each job it acks is
-- first copied into delayq.completed with p_results[i] ('': none) as its result when p_keep_ms is
-- above 0 or someone waits for it; the copy locks the rows it copies (FOR UPDATE), so the _ack after
-- it deletes exactly them. Then the waited ones' outcomes are announced.
CREATE OR REPLACE FUNCTION delayq._ack(q text, p_ids text[], p_tokens text[], p_keep_ms bigint, p_results text[])
RETURNS TABLE (outcome text, state "char", attempt int, max_attempts int) LANGUAGE plpgsql AS $$
DECLARE
  waited boolean;
  w record;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(1685550945, hashtext(q));  -- _watch's lock
  waited := EXISTS (SELECT 1 FROM delayq.waiting x WHERE x.queue = q AND x.id = ANY (p_ids));
  IF p_keep_ms > 0 OR waited THEN
    INSERT INTO delayq.completed (queue, id, due_at_ms, attempt, max_attempts, key, payload, is_binary, headers,
                                  created_at_ms, last_error, priority, grp, completed_at_ms, result)
      SELECT j.queue, j.id, j.due_at_ms, j.attempt, j.max_attempts, j.key, j.payload, j.is_binary, j.headers,
             j.created_at_ms, j.last_error, j.priority, j.grp, delayq.now_ms(), nullif(a.result, '')::json
        FROM unnest(p_ids, p_tokens, p_results) AS a(id, token, result)
        JOIN delayq.jobs j ON j.queue = q AND j.id = a.id AND j.token = a.token AND j.state <> 'd'
        WHERE p_keep_ms > 0 OR EXISTS (SELECT 1 FROM delayq.waiting x WHERE x.queue = q AND x.id = a.id)
        FOR UPDATE OF j;
  END IF;
  RETURN QUERY SELECT * FROM delayq._ack(q, p_ids, p_tokens);
  IF waited THEN
    FOR w IN DELETE FROM delayq.waiting x WHERE x.queue = q AND x.id = ANY (p_ids)
               AND EXISTS (SELECT 1 FROM delayq.completed c WHERE c.queue = q AND c.id = x.id) RETURNING x.id LOOP
      PERFORM pg_notify('delayq', 'outcome completed ' || w.id || ' ' || q);
    END LOOP;
  END IF;
END $$;

-- Version 1's _cancel, announcing the cancel of a live job someone waits for.
CREATE OR REPLACE FUNCTION delayq._cancel(q text, p_id text, p_key text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  IF p_id IS NOT NULL THEN
    SELECT j.id, j.state, j.key, j.key_ttl_ms, j.due_at_ms INTO r FROM delayq.jobs j
      WHERE j.queue = q AND j.id = p_id FOR UPDATE;
  ELSE
    SELECT j.id, j.state, j.key, j.key_ttl_ms, j.due_at_ms INTO r FROM delayq.jobs j
      WHERE j.queue = q AND j.key = p_key AND j.state <> 'd' FOR UPDATE;
  END IF;
  IF NOT FOUND THEN RETURN 'N'; END IF;
  IF r.state = 'r' THEN RETURN 'R:' || r.id; END IF;
  DELETE FROM delayq.jobs j WHERE j.queue = q AND j.id = r.id;
  IF r.state <> 'd' THEN
    PERFORM delayq._keep_key(q, r.key, r.id, r.due_at_ms, r.key_ttl_ms, delayq.now_ms());
    PERFORM delayq._outcome(q, r.id, 'cancelled');
  END IF;
  RETURN 'O';
END $$;

-- Version 1's _reap, announcing each death.
CREATE OR REPLACE FUNCTION delayq._reap(lim int)
RETURNS TABLE (queue text, id text, died boolean, attempt int, last_error text) LANGUAGE plpgsql AS $$
DECLARE
  now bigint := delayq.now_ms();
  r record;
  why text;
BEGIN
  FOR r IN SELECT j.queue, j.id, j.attempt, j.max_attempts, j.key FROM delayq.jobs j
             WHERE j.state = 'r' AND j.lease_deadline_ms <= now
             ORDER BY j.lease_deadline_ms LIMIT lim FOR UPDATE SKIP LOCKED LOOP
    IF r.attempt >= r.max_attempts THEN
      why := format('lease expired without an ack on attempt %s of %s', r.attempt, r.max_attempts);
      UPDATE delayq.jobs j SET state = 'd', dead_at_ms = now, last_error = why, lease_deadline_ms = NULL
        WHERE j.queue = r.queue AND j.id = r.id;
      PERFORM delayq._outcome(r.queue, r.id, 'dead');
      RETURN QUERY SELECT r.queue, r.id, true, r.attempt, why;
    ELSE
      UPDATE delayq.jobs j SET state = 's', lease_deadline_ms = NULL WHERE j.queue = r.queue AND j.id = r.id;
      RETURN QUERY SELECT r.queue, r.id, false, r.attempt, NULL::text;
    END IF;
  END LOOP;
END $$;
