-- delayq schema version 1: the functions every write goes through (docs/postgres.md).
--
-- delayq._* are the store's own (the server calls them; the role delayq_producer may not).
-- delayq.enqueue, cancel, cancel_job and reschedule are the SQL API of SPEC §11.2, for the
-- application's own connection and transaction: they validate as the HTTP API does (SQLSTATE
-- 22023 naming the field) and call the same _put, _cancel and _reschedule the server calls, so a
-- job enqueued either way is the same row.
--
-- Errors the server reads (the C++ side words them with the messages every store shares):
--   DQ409 with DETAIL '<id>': the key names a reserved job (replace or debounce);
--   22023 with DETAIL 'TOO_FAR:<now ms>': a deliver_at past the queue's max_delay_ms;
--   DQ413: a payload over the queue's max_payload;
--   DQ429: one queue more than the store's max_queues.

-- The database's clock, in ms (µs) since the epoch: every due time and lease is on it.
CREATE FUNCTION delayq.now_ms() RETURNS bigint LANGUAGE sql VOLATILE
  AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
CREATE FUNCTION delayq.now_us() RETURNS bigint LANGUAGE sql VOLATILE
  AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;

-- n Crockford base-32 digits of the low 5n bits of v.
CREATE FUNCTION delayq._b32(v bigint, n int) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  s text := '';
BEGIN
  FOR i IN 1..n LOOP
    s := substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', (v & 31)::int + 1, 1) || s;
    v := v >> 5;
  END LOOP;
  RETURN s;
END $$;

-- A ULID for a job enqueued through SQL: 48 bits of ms, then 80 random bits of a v4 UUID's
-- (PostgreSQL draws those from its strong random source). The server makes its own (core/ulid.h).
CREATE FUNCTION delayq._ulid(ms bigint) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  u bytea := uuid_send(gen_random_uuid());
  a bigint := 0;
  b bigint := 0;
BEGIN
  -- Bytes 0-4 and 10-14: none of the UUID's fixed version or variant bits.
  FOR i IN 0..4 LOOP
    a := (a << 8) | get_byte(u, i);
    b := (b << 8) | get_byte(u, i + 10);
  END LOOP;
  RETURN delayq._b32(ms, 10) || delayq._b32(a, 8) || delayq._b32(b, 8);
END $$;

-- The queue's row, made when it is new (within the store's max_queues, kept in delayq.meta). Two
-- transactions making new queues at the same moment may both take the last place: the limit is
-- then passed by those few, never by more.
--
-- Every enqueue into a queue holds its advisory lock (1685222757, hashtext(queue)) shared until the
-- transaction ends, and a queue is deleted under it exclusive (PostgresQueue::DeleteQueue): the
-- delete waits for the transactions enqueuing into it, and an enqueue that waited for a delete
-- makes the queue again, so no job outlives its queue. A lock rather than a foreign key: the key's
-- check locked the queue's row FOR KEY SHARE in every enqueue, a multixact per job among
-- concurrent producers (docs/postgres.md).
CREATE FUNCTION delayq._queue_for_write(q text) RETURNS delayq.queues LANGUAGE plpgsql AS $$
DECLARE
  cfg delayq.queues;
  lim bigint;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(1685222757, hashtext(q));
  SELECT * INTO cfg FROM delayq.queues WHERE name = q;
  -- Read committed: this statement's snapshot is after any delete the lock waited for. A
  -- transaction's older snapshot (REPEATABLE READ) may still show a queue deleted meanwhile: the
  -- insert below makes it again then.
  IF FOUND AND current_setting('transaction_isolation') = 'read committed' THEN RETURN cfg; END IF;
  IF NOT FOUND THEN
    SELECT value::bigint INTO lim FROM delayq.meta WHERE name = 'max_queues';
    IF lim IS NOT NULL AND (SELECT count(*) FROM delayq.queues) >= lim THEN
      RAISE EXCEPTION USING ERRCODE = 'DQ429', DETAIL = lim::text,
        MESSAGE = format('queue %s would be queue %s of at most %s (the store''s max_queues); delete a queue first',
                         q, lim + 1, lim);
    END IF;
  END IF;
  -- A queue made meanwhile by a transaction that committed: that one (under REPEATABLE READ, a
  -- serialization failure: retry the transaction).
  INSERT INTO delayq.queues (name, created_at_ms) VALUES (q, delayq.now_ms()) ON CONFLICT (name) DO NOTHING;
  SELECT * INTO cfg FROM delayq.queues WHERE name = q;
  RETURN cfg;
END $$;

-- Tells the servers (LISTEN delayq) that a job of q comes due at `due`: one waiting for it wakes
-- then. Sent at commit; nothing is sent for a job due more than a minute on (no reserve waits
-- that long: one that starts later looks for it itself).
CREATE FUNCTION delayq._wakes(due bigint, now bigint) RETURNS boolean LANGUAGE sql IMMUTABLE
  AS $$ SELECT due <= now + 60000 $$;
CREATE FUNCTION delayq._wake(q text, due bigint, now bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF delayq._wakes(due, now) THEN
    PERFORM pg_notify('delayq', q || ' ' || due::text);
  END IF;
END $$;

-- Stores one job, or finds the live job its key names (on_key: dedupe, replace, debounce), as
-- every store does (the C++ twin of the key rules is EngineImpl::PlanEnqueueLocked). Due time:
-- now + delay_ms, or at_ms (at least now), or now. Validated by the caller, except what needs the
-- queue's config or the clock: max_payload, max_delay_ms for at_ms.
CREATE FUNCTION delayq._put(q text, p_id text, p_payload bytea, p_binary boolean, p_headers json,
                            p_delay_ms bigint, p_at_ms bigint, p_max_attempts int, p_key text,
                            p_on_key text, p_key_ttl_ms bigint, p_priority int, p_group text,
                            p_notify boolean)
RETURNS TABLE (id text, due_at_ms bigint, duplicate boolean, replaced boolean) LANGUAGE plpgsql AS $$
DECLARE
  now bigint := delayq.now_ms();
  cfg delayq.queues := delayq._queue_for_write(q);
  due bigint := now;
  ex record;
BEGIN
  IF NOT cfg.ordered AND (p_priority <> 0 OR p_group <> '') THEN
    UPDATE delayq.queues SET ordered = true WHERE name = q;
  END IF;
  IF octet_length(p_payload) > cfg.max_payload THEN
    RAISE EXCEPTION USING ERRCODE = 'DQ413',
      MESSAGE = format('payload has %s bytes; this queue accepts at most %s (its config max_payload)',
                       octet_length(p_payload), cfg.max_payload);
  END IF;
  IF p_delay_ms IS NOT NULL THEN
    IF p_delay_ms > cfg.max_delay_ms THEN
      RAISE EXCEPTION USING ERRCODE = '22023',
        MESSAGE = format('delay_ms is %s; this queue accepts at most %s (its config max_delay_ms)',
                         p_delay_ms, cfg.max_delay_ms);
    END IF;
    due := now + p_delay_ms;
  ELSIF p_at_ms IS NOT NULL THEN
    IF p_at_ms > now + cfg.max_delay_ms THEN
      RAISE EXCEPTION USING ERRCODE = '22023', DETAIL = 'TOO_FAR:' || now::text,
        MESSAGE = format('deliver_at is %s ms from now; this queue accepts at most %s (its config max_delay_ms)',
                         p_at_ms - now, cfg.max_delay_ms);
    END IF;
    due := greatest(p_at_ms, now);
  END IF;
  -- Twice at most: a transaction that takes the key between our look and our insert makes the
  -- insert do nothing (it waited for that transaction), and the second look finds its job.
  FOR try IN 1..2 LOOP
    IF p_key IS NOT NULL THEN
      -- A dedupe only reads (it must not hold the job's row until the caller commits: a worker's
      -- ack or touch of it would wait); a replace locks the row it rewrites.
      SELECT j.id, j.state, j.due_at_ms INTO ex FROM delayq.jobs j
        WHERE j.queue = q AND j.key = p_key AND j.state <> 'd';
      IF FOUND AND p_on_key = 'dedupe' THEN
        RETURN QUERY SELECT ex.id, ex.due_at_ms, true, false;
        RETURN;
      END IF;
      IF FOUND THEN
        SELECT j.id, j.state, j.due_at_ms INTO ex FROM delayq.jobs j
          WHERE j.queue = q AND j.id = ex.id AND j.state <> 'd' FOR UPDATE;
      END IF;
      IF FOUND THEN
        IF ex.state = 'r' THEN
          RAISE EXCEPTION USING ERRCODE = 'DQ409', DETAIL = ex.id,
            MESSAGE = format('key %s names job %s, which is reserved (being delivered); it cannot be replaced now',
                             p_key, ex.id);
        END IF;
        -- A debounce never moves the job earlier. Replaced: new content in the old job's place,
        -- so its attempts start again.
        IF p_on_key = 'debounce' AND ex.due_at_ms > due THEN due := ex.due_at_ms; END IF;
        UPDATE delayq.jobs j SET payload = p_payload, is_binary = p_binary, headers = p_headers, due_at_ms = due,
          attempt = 0, max_attempts = coalesce(p_max_attempts, j.max_attempts), key_ttl_ms = p_key_ttl_ms,
          priority = p_priority, grp = p_group, token = NULL, waited = true
          WHERE j.queue = q AND j.id = ex.id;
        IF p_notify AND delayq._wakes(due, now) THEN PERFORM delayq._wake(q, due, now); END IF;
        RETURN QUERY SELECT ex.id, due, true, true;
        RETURN;
      END IF;
      -- Done, and its key still kept: a duplicate of the finished job, even with replace.
      SELECT k.id, k.due_at_ms, k.until_ms INTO ex FROM delayq.kept_keys k WHERE k.queue = q AND k.key = p_key;
      IF FOUND THEN
        IF ex.until_ms > now THEN
          RETURN QUERY SELECT ex.id, ex.due_at_ms, true, false;
          RETURN;
        END IF;
        DELETE FROM delayq.kept_keys k WHERE k.queue = q AND k.key = p_key;
      END IF;
    END IF;
    INSERT INTO delayq.jobs AS j (queue, id, state, due_at_ms, max_attempts, key, key_ttl_ms, payload, is_binary,
                                  headers, created_at_ms, priority, grp)
      VALUES (q, p_id, 's', due, coalesce(p_max_attempts, cfg.max_attempts), p_key, p_key_ttl_ms, p_payload,
              p_binary, p_headers, now, p_priority, p_group)
      ON CONFLICT (queue, key) WHERE key IS NOT NULL AND state <> 'd' DO NOTHING;
    IF FOUND THEN
      IF p_notify AND delayq._wakes(due, now) THEN PERFORM delayq._wake(q, due, now); END IF;
      RETURN QUERY SELECT p_id, due, false, false;
      RETURN;
    END IF;
  END LOOP;
  RAISE EXCEPTION USING ERRCODE = '40001',
    MESSAGE = format('key %s of queue %s was taken and released meanwhile; try again', p_key, q);
END $$;

-- Jobs without a key, many in one statement (an HTTP batch's path): what _put does for each, with
-- one INSERT instead of a call per job, which the burst's profile showed as most of the enqueue's
-- time (docs/postgres.md). The payloads come as one bytea, cut by p_lengths. Answers no row when a
-- job breaks its queue's limits: the caller then puts them one by one through _put, which names
-- the job and the limit.
CREATE FUNCTION delayq._put_many(q text, p_ids text[], p_payloads bytea, p_lengths int[], p_binary boolean[],
                                 p_headers text[], p_delay_ms bigint[], p_at_ms bigint[], p_max_attempts int[],
                                 p_key_ttl_ms bigint[], p_priority int[], p_group text[])
RETURNS TABLE (id text, due_at_ms bigint) LANGUAGE plpgsql AS $$
DECLARE
  now bigint := delayq.now_ms();
  cfg delayq.queues := delayq._queue_for_write(q);
BEGIN
  IF EXISTS (SELECT 1 FROM unnest(p_lengths, p_delay_ms, p_at_ms) AS x(len, d, a)
               WHERE x.len > cfg.max_payload OR x.d > cfg.max_delay_ms OR x.a > now + cfg.max_delay_ms) THEN
    RETURN;
  END IF;
  IF NOT cfg.ordered AND EXISTS (SELECT 1 FROM unnest(p_priority, p_group) AS x(pr, g) WHERE x.pr <> 0 OR x.g <> '') THEN
    UPDATE delayq.queues SET ordered = true WHERE name = q;
  END IF;
  RETURN QUERY
  WITH x AS (
    SELECT v.*, sum(v.len) OVER (ORDER BY v.i) - v.len AS off
      FROM unnest(p_ids, p_lengths, p_binary, p_headers, p_delay_ms, p_at_ms, p_max_attempts, p_key_ttl_ms,
                  p_priority, p_group) WITH ORDINALITY AS v(id, len, bin, h, d, a, ma, ttl, pr, g, i)
  ), ins AS (
    INSERT INTO delayq.jobs AS j (queue, id, state, due_at_ms, max_attempts, key, key_ttl_ms, payload, is_binary,
                                  headers, created_at_ms, priority, grp)
      SELECT q, x.id, 's',
             CASE WHEN x.d IS NOT NULL THEN now + x.d WHEN x.a IS NOT NULL THEN greatest(x.a, now) ELSE now END,
             coalesce(x.ma, cfg.max_attempts), NULL, x.ttl, substring(p_payloads FROM x.off::int + 1 FOR x.len),
             x.bin, x.h::json, now, x.pr, x.g
        FROM x ORDER BY x.i
      RETURNING j.id, j.due_at_ms
  )
  SELECT ins.id, ins.due_at_ms FROM ins;
END $$;

-- Keeps a finished job's key taken for its key_ttl_ms.
CREATE FUNCTION delayq._keep_key(q text, p_key text, p_id text, p_due bigint, p_ttl bigint, now bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_key IS NOT NULL AND p_ttl > 0 THEN
    INSERT INTO delayq.kept_keys (queue, key, id, due_at_ms, until_ms) VALUES (q, p_key, p_id, p_due, now + p_ttl)
      ON CONFLICT (queue, key) DO UPDATE SET id = excluded.id, due_at_ms = excluded.due_at_ms,
                                             until_ms = excluded.until_ms;
  END IF;
END $$;

-- Deletes a scheduled, ready or dead job by id, or the live job of a key. Answers 'O' (done),
-- 'N' (no such job) or 'R:<id>' (reserved: it cannot be cancelled).
CREATE FUNCTION delayq._cancel(q text, p_id text, p_key text) RETURNS text LANGUAGE plpgsql AS $$
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
  IF r.state <> 'd' THEN PERFORM delayq._keep_key(q, r.key, r.id, r.due_at_ms, r.key_ttl_ms, delayq.now_ms()); END IF;
  RETURN 'O';
END $$;

-- Gives a scheduled or ready job a new due time (now + delay_ms, or at_ms, at least now).
-- Answers ('O', due), ('N', NULL), ('R', NULL) reserved, ('D', NULL) dead, or
-- ('F', now) when at_ms is past the queue's max_delay_ms.
CREATE FUNCTION delayq._reschedule(q text, p_id text, p_key text, p_delay_ms bigint, p_at_ms bigint,
                                   p_notify boolean)
RETURNS TABLE (outcome text, id text, due_at_ms bigint) LANGUAGE plpgsql AS $$
DECLARE
  now bigint := delayq.now_ms();
  r record;
  due bigint := now;
  lim bigint;
BEGIN
  IF p_id IS NOT NULL THEN
    SELECT j.id, j.state INTO r FROM delayq.jobs j WHERE j.queue = q AND j.id = p_id FOR UPDATE;
  ELSE
    SELECT j.id, j.state INTO r FROM delayq.jobs j WHERE j.queue = q AND j.key = p_key AND j.state <> 'd' FOR UPDATE;
  END IF;
  IF NOT FOUND THEN RETURN QUERY SELECT 'N', NULL::text, NULL::bigint; RETURN; END IF;
  IF r.state <> 's' THEN RETURN QUERY SELECT upper(r.state::text), r.id, NULL::bigint; RETURN; END IF;
  SELECT c.max_delay_ms INTO lim FROM delayq.queues c WHERE c.name = q;
  IF p_delay_ms IS NOT NULL THEN
    due := now + p_delay_ms;
  ELSIF p_at_ms IS NOT NULL THEN
    IF p_at_ms > now + coalesce(lim, 31536000000) THEN RETURN QUERY SELECT 'F', r.id, now; RETURN; END IF;
    due := greatest(p_at_ms, now);
  END IF;
  UPDATE delayq.jobs j SET due_at_ms = due, token = NULL, waited = true WHERE j.queue = q AND j.id = r.id;
  IF p_notify AND delayq._wakes(due, now) THEN PERFORM delayq._wake(q, due, now); END IF;
  RETURN QUERY SELECT 'O', r.id, due;
END $$;

-- Acks each (id, token): the job is deleted (its key kept for its key_ttl_ms). Answers per entry
-- 'O' (acked), 'N' (no such job) or 'E' with the job's state and attempts (the delivery is over).
-- A receipt stays valid after its lease ran out until the job is delivered again.
CREATE FUNCTION delayq._ack(q text, p_ids text[], p_tokens text[])
RETURNS TABLE (outcome text, state "char", attempt int, max_attempts int) LANGUAGE plpgsql AS $$
DECLARE
  now bigint := delayq.now_ms();
  r record;
BEGIN
  FOR i IN 1..coalesce(array_length(p_ids, 1), 0) LOOP
    SELECT j.state, j.token, j.attempt, j.max_attempts, j.key, j.key_ttl_ms, j.due_at_ms INTO r
      FROM delayq.jobs j WHERE j.queue = q AND j.id = p_ids[i] FOR UPDATE;
    IF NOT FOUND THEN
      RETURN QUERY SELECT 'N', NULL::"char", 0, 0;
    ELSIF r.state = 'd' OR r.token IS DISTINCT FROM p_tokens[i] THEN
      RETURN QUERY SELECT 'E', r.state, r.attempt, r.max_attempts;
    ELSE
      DELETE FROM delayq.jobs j WHERE j.queue = q AND j.id = p_ids[i];
      PERFORM delayq._keep_key(q, r.key, p_ids[i], r.due_at_ms, r.key_ttl_ms, now);
      RETURN QUERY SELECT 'O', r.state, r.attempt, r.max_attempts;
    END IF;
  END LOOP;
END $$;

-- A delivery's token: 128 bits of PostgreSQL's strong random source (two v4 UUIDs' random
-- bytes), as 32 hex digits (core/delivery_token.h).
CREATE FUNCTION delayq._token() RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT encode(substring(uuid_send(gen_random_uuid()) FROM 1 FOR 6) || substring(uuid_send(gen_random_uuid()) FROM 11 FOR 6)
                || substring(uuid_send(gen_random_uuid()) FROM 1 FOR 4), 'hex')
$$;

-- Reserves up to n ready jobs of q, due first (then by id), for lease_ms (NULL: the queue's),
-- stopping before the job that would take the answer's stored bytes over max_bytes (the first
-- always comes). Each delivery gets a fresh token. Skips rows another reserve has locked: two
-- servers never hand out one job. first: the job came due since its last delivery. A queue with
-- flow control or with priorities or groups answers one row with a NULL id instead: the server
-- reserves those with the C++ rules (pg_controlled_reserve.cc).
CREATE FUNCTION delayq._reserve(q text, n int, p_lease_ms bigint, p_max_bytes bigint)
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
  t text;
  at bigint;
  r record;
BEGIN
  SELECT c.paused, c.lease_ms, c.ordered OR c.rate_per_s > 0 OR c.max_reserved > 0 OR c.group_max_reserved > 0
         AS controlled INTO cfg FROM delayq.queues c WHERE c.name = q;
  IF NOT FOUND OR cfg.paused THEN RETURN; END IF;
  IF cfg.controlled THEN
    RETURN QUERY SELECT NULL::text, NULL::bytea, NULL::boolean, NULL::json, NULL::int, NULL::int, NULL::bigint,
                        NULL::text, NULL::bigint, NULL::int, NULL::text, NULL::boolean, now, NULL::text;
    RETURN;
  END IF;
  lease := coalesce(p_lease_ms, cfg.lease_ms);
  FOR r IN SELECT j.id, j.payload, j.is_binary, j.headers, j.attempt, j.max_attempts, j.due_at_ms, j.key,
                  j.priority, j.grp, j.waited
             FROM delayq.jobs j WHERE j.queue = q AND j.state = 's' AND j.due_at_ms <= now
             ORDER BY j.due_at_ms, j.id LIMIT n FOR UPDATE SKIP LOCKED LOOP
    size := octet_length(r.payload) + coalesce(octet_length(r.headers::text), 0) + coalesce(octet_length(r.key), 0)
            + octet_length(r.grp) + 64;
    EXIT WHEN taken > 0 AND bytes + size > p_max_bytes;
    bytes := bytes + size;
    taken := taken + 1;
    t := delayq._token();
    -- The clock read again, now that the row is locked: a reaper that ended the job's last lease
    -- committed before this statement's snapshot, at or after that lease's end, which `now` (read
    -- before the snapshot) may precede. The history checker saw the new lease start 2 ms before
    -- the old one ended.
    at := delayq.now_ms();
    UPDATE delayq.jobs j SET state = 'r', attempt = r.attempt + 1, token = t,
                             lease_deadline_ms = at + lease, waited = false
      WHERE j.queue = q AND j.id = r.id;
    RETURN QUERY SELECT r.id, r.payload, r.is_binary, r.headers, r.attempt + 1, r.max_attempts, r.due_at_ms, r.key,
                        at + lease, r.priority::int, r.grp, r.waited, at, t;
  END LOOP;
END $$;

-- Ends the leases that ran out, at most `lim` of them: a job on its last attempt goes dead, the
-- others wait again in their place (their receipt stays valid until the next delivery).
-- Answers one row per job: its queue, id, whether it died, its attempts and error.
CREATE FUNCTION delayq._reap(lim int)
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
      RETURN QUERY SELECT r.queue, r.id, true, r.attempt, why;
    ELSE
      UPDATE delayq.jobs j SET state = 's', lease_deadline_ms = NULL WHERE j.queue = r.queue AND j.id = r.id;
      RETURN QUERY SELECT r.queue, r.id, false, r.attempt, NULL::text;
    END IF;
  END LOOP;
END $$;

-- The SQL API (SPEC §11.2) ------------------------------------------------------------------

CREATE FUNCTION delayq._bad(field text, what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = field || ' ' || what, HINT = 'delayq.enqueue, cancel, cancel_job and reschedule: docs/postgres.md';
END $$;

-- The rules of the arguments as predicates, and checks that raise naming the rule broken. Callers
-- on the hot path (enqueue) call a check only when its predicate fails: a call is a statement,
-- and the enqueue's statements were most of its cost (docs/postgres.md).
CREATE FUNCTION delayq._queue_ok(q text) RETURNS boolean LANGUAGE sql IMMUTABLE
  AS $$ SELECT q IS NOT NULL AND octet_length(q) BETWEEN 1 AND 128 AND q ~ '^[A-Za-z0-9._:-]+$' $$;
CREATE FUNCTION delayq._key_ok(k text) RETURNS boolean LANGUAGE sql IMMUTABLE
  AS $$ SELECT k IS NULL OR octet_length(k) <= 512 $$;
CREATE FUNCTION delayq._when_ok(delay_ms bigint, deliver_at timestamptz) RETURNS boolean LANGUAGE sql IMMUTABLE
  AS $$ SELECT (delay_ms IS NULL OR delay_ms >= 0)
               AND (deliver_at IS NULL OR (coalesce(delay_ms, 0) = 0 AND isfinite(deliver_at))) $$;

CREATE FUNCTION delayq._check_queue(q text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF NOT delayq._queue_ok(q) THEN
    PERFORM delayq._bad('queue', format('%s must have 1 to 128 of [A-Za-z0-9._:-]', coalesce(quote_literal(q), 'NULL')));
  END IF;
END $$;

CREATE FUNCTION delayq._check_key(k text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF NOT delayq._key_ok(k) THEN
    PERFORM delayq._bad('key', format('has %s bytes; at most 512 are allowed', octet_length(k)));
  END IF;
END $$;

-- The delay of a call: delay_ms from now, or deliver_at (one of them).
CREATE FUNCTION delayq._check_when(delay_ms bigint, deliver_at timestamptz, neither_is_now boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF delay_ms IS NOT NULL AND delay_ms < 0 THEN
    PERFORM delayq._bad('delay_ms', format('is %s ms; it must not be negative', delay_ms));
  END IF;
  IF deliver_at IS NOT NULL AND delay_ms IS NOT NULL AND delay_ms <> 0 THEN
    PERFORM delayq._bad('delay_ms', 'and deliver_at are both given; give one of them'
                                    || CASE WHEN neither_is_now THEN ' (or neither for now)' ELSE '' END);
  END IF;
  IF deliver_at IS NOT NULL AND NOT isfinite(deliver_at) THEN
    PERFORM delayq._bad('deliver_at', 'is infinite; give a time');
  END IF;
END $$;

-- Whether JSON text t has a lone UTF-16 surrogate escape (\ud800 without its pair): PostgreSQL's
-- json type keeps it, the HTTP API refuses it as JSON that is not valid. Valid pairs are taken out
-- first, once every escaped backslash is out of the way (so that "\\ud800\udc00" is not taken for
-- a pair: a review found that). (E'' strings here:
-- they mean the same whatever a session's standard_conforming_strings.)
CREATE FUNCTION delayq._has_lone_surrogate(t text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT regexp_replace(replace(t, E'\\\\', '__'),
                        E'\\\\u[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}', '', 'g')
         ~ E'\\\\u[dD][89a-fA-F][0-9a-fA-F]{2}' $$;

CREATE FUNCTION delayq._at_ms(deliver_at timestamptz) RETURNS bigint LANGUAGE sql IMMUTABLE
  AS $$ SELECT floor(extract(epoch FROM deliver_at) * 1000)::bigint $$;

-- The rules of delayq.enqueue's arguments, each raising 22023 naming the argument (the first
-- broken, in this order); delayq.enqueue calls it only when its one-expression form of them fails.
CREATE FUNCTION delayq._check_enqueue(queue text, payload json, delay_ms bigint, key text, deliver_at timestamptz,
                                      max_attempts int, priority int, "group" text, on_key text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM delayq._check_queue(queue);
  IF payload IS NULL THEN
    PERFORM delayq._bad('payload', 'is NULL; a job needs a payload of JSON');
  END IF;
  PERFORM delayq._check_when(delay_ms, deliver_at);
  PERFORM delayq._check_key(key);
  IF max_attempts IS NOT NULL AND (max_attempts < 1 OR max_attempts > 1000) THEN
    PERFORM delayq._bad('max_attempts', format('is %s; it must be between 1 and 1000', max_attempts));
  END IF;
  IF priority IS NULL OR priority < 0 OR priority > 9 THEN
    PERFORM delayq._bad('priority', format('is %s; it must be between 0 (the default) and 9 (first)',
                                           coalesce(priority::text, 'NULL')));
  END IF;
  IF "group" IS NOT NULL AND octet_length("group") > 128 THEN
    PERFORM delayq._bad('group', format('has %s bytes; at most 128 are allowed', octet_length("group")));
  END IF;
  IF on_key IS NULL OR on_key NOT IN ('dedupe', 'replace', 'debounce') THEN
    PERFORM delayq._bad('on_key', format('is %s; it must be dedupe, replace or debounce',
                                         coalesce(quote_literal(on_key), 'NULL')));
  END IF;
  IF on_key <> 'dedupe' AND nullif(key, '') IS NULL THEN
    PERFORM delayq._bad('on_key', format('is %s without a key; it needs the key of the job to change', on_key));
  END IF;
END $$;

CREATE FUNCTION delayq.enqueue(queue text, payload json, delay_ms bigint DEFAULT 0, key text DEFAULT NULL,
                               deliver_at timestamptz DEFAULT NULL, max_attempts int DEFAULT NULL,
                               headers json DEFAULT NULL, priority int DEFAULT 0, "group" text DEFAULT NULL,
                               on_key text DEFAULT 'dedupe')
RETURNS TABLE (id text, due_at_ms bigint, duplicate boolean) LANGUAGE plpgsql AS $$
DECLARE
  body bytea;
  h json;
  header_bytes bigint := 0;
  e record;
  n int := 0;
BEGIN
  -- One expression for every rule at once (each IF is an expression plpgsql readies again in
  -- every transaction: with one job per transaction that was most of the enqueue's cost); the
  -- checks, which name the rule broken, run only when it fails.
  IF NOT coalesce(delayq._queue_ok(queue) AND payload IS NOT NULL AND delayq._when_ok(delay_ms, deliver_at)
                  AND delayq._key_ok(key) AND (max_attempts IS NULL OR max_attempts BETWEEN 1 AND 1000)
                  AND priority BETWEEN 0 AND 9 AND ("group" IS NULL OR octet_length("group") <= 128)
                  AND on_key IN ('dedupe', 'replace', 'debounce') AND (on_key = 'dedupe' OR nullif(key, '') IS NOT NULL),
                  false) THEN
    PERFORM delayq._check_enqueue(queue, payload, delay_ms, key, deliver_at, max_attempts, priority, "group", on_key);
  END IF;
  IF delayq._has_lone_surrogate(payload::text) THEN
    PERFORM delayq._bad('payload', 'has a lone UTF-16 surrogate (an escape of U+D800 to U+DFFF without its pair); it is not valid JSON text');
  END IF;
  body := convert_to(payload::text, 'UTF8');
  IF headers IS NOT NULL THEN
    IF json_typeof(headers) <> 'object' THEN
      PERFORM delayq._bad('headers', 'is not a JSON object; give {"name": "value", ...}');
    END IF;
    IF delayq._has_lone_surrogate(headers::text) THEN
      PERFORM delayq._bad('headers', 'have a lone UTF-16 surrogate (an escape of U+D800 to U+DFFF without its pair); it is not valid JSON text');
    END IF;
    -- \u0000, which HTTP takes, has no text form in PostgreSQL: the names and values are measured
    -- with it as \u0001 (one byte, as it is), and headers are kept as given.
    FOR e IN SELECT * FROM json_each(replace(headers::text, E'\\u0000', E'\\u0001')::json) LOOP
      n := n + 1;
      IF json_typeof(e.value) <> 'string' THEN
        PERFORM delayq._bad('headers', format('value of %s is not a string', quote_literal(e.key)));
      END IF;
      IF e.key = '' THEN PERFORM delayq._bad('headers', 'has an empty name'); END IF;
      header_bytes := header_bytes + octet_length(e.key) + octet_length(e.value #>> '{}');
    END LOOP;
    IF n > 64 THEN PERFORM delayq._bad('headers', format('has %s entries; at most 64 are allowed', n)); END IF;
    IF header_bytes > 16384 THEN
      PERFORM delayq._bad('headers', format('have %s bytes in all; at most 16384 are allowed', header_bytes));
    END IF;
    IF n > 0 THEN h := headers; END IF;
  END IF;
  RETURN QUERY SELECT p.id, p.due_at_ms, p.duplicate FROM delayq._put(
    queue, delayq._ulid(delayq.now_ms()), body, false, h,
    CASE WHEN deliver_at IS NULL THEN coalesce(delay_ms, 0) END,
    CASE WHEN deliver_at IS NOT NULL THEN delayq._at_ms(deliver_at) END,
    max_attempts, nullif(key, ''), on_key, 0, priority, coalesce("group", ''), true) p;
END $$;

CREATE FUNCTION delayq.cancel(queue text, key text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  outcome text;
BEGIN
  PERFORM delayq._check_queue(queue);
  IF key IS NULL THEN PERFORM delayq._bad('key', 'is NULL; give the key the job was enqueued with'); END IF;
  PERFORM delayq._check_key(key);
  outcome := delayq._cancel(queue, NULL, key);
  IF outcome LIKE 'R:%' THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = format('the job of key %s in queue %s is reserved (being delivered); it cannot be cancelled now',
                       key, queue);
  END IF;
  RETURN outcome = 'O';
END $$;

CREATE FUNCTION delayq.cancel_job(queue text, id text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  outcome text;
BEGIN
  PERFORM delayq._check_queue(queue);
  IF id IS NULL OR id !~ '^[0-9A-Za-z]{26}$' THEN
    PERFORM delayq._bad('id', format('%s is not a job id (26 characters of a ULID)',
                                     coalesce(quote_literal(left(id, 40) || CASE WHEN length(id) > 40 THEN '...' ELSE '' END), 'NULL')));
  END IF;
  outcome := delayq._cancel(queue, upper(id), NULL);
  IF outcome LIKE 'R:%' THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = format('job %s in queue %s is reserved (being delivered); it cannot be cancelled now', id, queue);
  END IF;
  RETURN outcome = 'O';
END $$;

CREATE FUNCTION delayq.reschedule(queue text, key text, delay_ms bigint DEFAULT NULL,
                                  deliver_at timestamptz DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  PERFORM delayq._check_queue(queue);
  IF key IS NULL THEN PERFORM delayq._bad('key', 'is NULL; give the key the job was enqueued with'); END IF;
  PERFORM delayq._check_key(key);
  PERFORM delayq._check_when(delay_ms, deliver_at, false);
  IF delay_ms IS NULL AND deliver_at IS NULL THEN
    PERFORM delayq._bad('delay_ms', 'and deliver_at are both missing; give the new due time as one of them');
  END IF;
  IF delay_ms IS NOT NULL AND delay_ms > (SELECT c.max_delay_ms FROM delayq.queues c WHERE c.name = queue) THEN
    PERFORM delayq._bad('delay_ms', format('is %s ms; this queue accepts at most %s ms (its config max_delay_ms)', delay_ms,
                                           (SELECT c.max_delay_ms FROM delayq.queues c WHERE c.name = queue)));
  END IF;
  SELECT * INTO r FROM delayq._reschedule(queue, NULL, key, CASE WHEN deliver_at IS NULL THEN coalesce(delay_ms, 0) END,
                                          delayq._at_ms(deliver_at), true);
  IF r.outcome = 'F' THEN
    PERFORM delayq._bad('deliver_at', 'is further from now than this queue''s config max_delay_ms');
  ELSIF r.outcome IN ('R', 'D') THEN
    RAISE EXCEPTION USING ERRCODE = '55000',
      MESSAGE = format('the job of key %s in queue %s is %s; only a scheduled or ready job can be rescheduled', key,
                       queue, CASE r.outcome WHEN 'R' THEN 'reserved' ELSE 'dead' END);
  END IF;
  RETURN r.due_at_ms;
END $$;

-- Makes dead jobs of q ready again (due now) with attempt 0 (ids NULL: all of them; unknown ids are
-- skipped). A replayed job takes its key back unless a live job holds it by then (then it comes
-- back without one; a key kept after its job finished holds as a live job's does). Answers how
-- many were replayed.
CREATE FUNCTION delayq._replay(q text, p_ids text[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n bigint := 0;
BEGIN
  FOR r IN SELECT j.id, j.key FROM delayq.jobs j
             WHERE j.queue = q AND j.state = 'd' AND (p_ids IS NULL OR j.id = ANY (p_ids))
             ORDER BY j.dead_at_ms, j.id FOR UPDATE LOOP
    BEGIN
    UPDATE delayq.jobs j SET state = 's', attempt = 0, dead_at_ms = NULL, token = NULL, waited = true,
      due_at_ms = delayq.now_ms(),
      key = CASE WHEN EXISTS (SELECT 1 FROM delayq.jobs o WHERE o.queue = q AND o.key = r.key AND o.state <> 'd')
                   OR EXISTS (SELECT 1 FROM delayq.kept_keys k WHERE k.queue = q AND k.key = r.key
                                AND k.until_ms > delayq.now_ms())
                 THEN NULL ELSE r.key END
      WHERE j.queue = q AND j.id = r.id;
    EXCEPTION WHEN unique_violation THEN  -- a live job took the key meanwhile: back without it
      UPDATE delayq.jobs j SET state = 's', attempt = 0, dead_at_ms = NULL, token = NULL, waited = true,
        due_at_ms = delayq.now_ms(), key = NULL WHERE j.queue = q AND j.id = r.id;
    END;
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;
