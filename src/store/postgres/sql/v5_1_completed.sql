-- delayq schema version 5: completed jobs kept, with their results (SPEC §11.3, docs/http-api.md
-- "ack"). With a queue's keep_completed_ms above 0, an ack moves its job out of delayq.jobs into
-- delayq.completed with the ack's result, for that long; the sweep deletes it then. A completed
-- job is never live: it lives in a table of its own, so no function that acts on live jobs (and
-- none of delayq.jobs's partial indexes, the unique live key among them) ever meets it. Its key
-- was released by the ack (kept for its key_ttl_ms as before: delayq.kept_keys), and it shows
-- the key it had.
ALTER TABLE delayq.queues ADD COLUMN keep_completed_ms bigint NOT NULL DEFAULT 0;

CREATE TABLE delayq.completed (
  queue text NOT NULL,
  id text NOT NULL,
  due_at_ms bigint NOT NULL,
  attempt int NOT NULL,
  max_attempts int NOT NULL,
  key text,
  payload bytea NOT NULL,
  is_binary boolean NOT NULL,
  headers json,
  created_at_ms bigint NOT NULL,
  last_error text,
  priority smallint NOT NULL,
  grp text NOT NULL,
  completed_at_ms bigint NOT NULL,
  result json,
  PRIMARY KEY (queue, id)
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02);
ALTER TABLE delayq.completed ALTER COLUMN payload SET STORAGE EXTERNAL;
CREATE INDEX completed_at ON delayq.completed (queue, completed_at_ms, id);
REVOKE ALL ON delayq.completed FROM PUBLIC;

-- Acks each (id, token) as the version 2 _ack does, answering what it answers; with p_keep_ms above
-- 0 each job it acks is first copied into delayq.completed with p_results[i] ('': none) as its
-- result. The copy locks the rows it copies (FOR UPDATE), so the _ack after it deletes exactly them.
CREATE FUNCTION delayq._ack(q text, p_ids text[], p_tokens text[], p_keep_ms bigint, p_results text[])
RETURNS TABLE (outcome text, state "char", attempt int, max_attempts int) LANGUAGE plpgsql AS $$
BEGIN
  IF p_keep_ms > 0 THEN
    INSERT INTO delayq.completed (queue, id, due_at_ms, attempt, max_attempts, key, payload, is_binary, headers,
                                  created_at_ms, last_error, priority, grp, completed_at_ms, result)
      SELECT j.queue, j.id, j.due_at_ms, j.attempt, j.max_attempts, j.key, j.payload, j.is_binary, j.headers,
             j.created_at_ms, j.last_error, j.priority, j.grp, delayq.now_ms(), nullif(a.result, '')::json
        FROM unnest(p_ids, p_tokens, p_results) AS a(id, token, result)
        JOIN delayq.jobs j ON j.queue = q AND j.id = a.id AND j.token = a.token AND j.state <> 'd'
        FOR UPDATE OF j;
  END IF;
  RETURN QUERY SELECT * FROM delayq._ack(q, p_ids, p_tokens);
END $$;
REVOKE ALL ON FUNCTION delayq._ack(text, text[], text[], bigint, text[]) FROM PUBLIC;
