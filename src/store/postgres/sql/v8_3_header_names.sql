-- delayq schema version 8 (continued). A header named twice is refused, as the server refuses it
-- (wire/json_read.cc: 'the field "headers.a" is given twice'); the json argument kept both and
-- the job got the last (a hostile pass). As version 3's enqueue otherwise.
CREATE OR REPLACE FUNCTION delayq.enqueue(queue text, payload json, delay_ms bigint DEFAULT 0, key text DEFAULT NULL,
                               deliver_at timestamptz DEFAULT NULL, max_attempts int DEFAULT NULL,
                               headers json DEFAULT NULL, priority int DEFAULT 0, "group" text DEFAULT NULL,
                               on_key text DEFAULT 'dedupe', traceparent text DEFAULT NULL, tracestate text DEFAULT NULL)
RETURNS TABLE (id text, due_at_ms bigint, duplicate boolean) LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  h json := headers;
  twice text;
BEGIN
  -- Read as _enqueue_v1 reads them (\u0000, which text cannot hold, as \u0001), after the checks
  -- it makes first (a lone surrogate is its 22023, not a parse error here).
  IF headers IS NOT NULL AND json_typeof(headers) = 'object' AND NOT delayq._has_lone_surrogate(headers::text) THEN
    SELECT k INTO twice FROM json_object_keys(replace(headers::text, E'\\u0000', E'\\u0001')::json) AS k
      GROUP BY k HAVING count(*) > 1 LIMIT 1;
    IF twice IS NOT NULL THEN
      PERFORM delayq._bad('headers', format('name the header %s twice; give each header once',
                                            quote_literal(left(twice, 200))));
    END IF;
  END IF;
  IF traceparent IS NOT NULL OR tracestate IS NOT NULL OR headers IS NOT NULL THEN
    h := delayq._with_trace(headers, traceparent, tracestate);
  END IF;
  RETURN QUERY SELECT * FROM delayq._enqueue_v1(queue, payload, delay_ms, key, deliver_at, max_attempts, h, priority,
                                                "group", on_key);
END $$;
REVOKE ALL ON FUNCTION delayq.enqueue(text, json, bigint, text, timestamptz, int, json, int, text, text, text, text)
  FROM PUBLIC;
