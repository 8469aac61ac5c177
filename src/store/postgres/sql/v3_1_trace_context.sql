-- delayq schema version 3: W3C Trace Context on jobs enqueued through the SQL API (SPEC §11.3,
-- docs/postgres.md). A job keeps its traceparent and tracestate in its headers under those names,
-- as the server keeps them (src/core/trace_context.h); delayq.enqueue takes them as arguments of
-- their own too, and checks them by the same rules as the server (tests/store/postgres/
-- sql_api_test.cc runs one table of values through both).
--   * Version 1's delayq.enqueue stays, renamed delayq._enqueue_v1: the new one checks the trace
--     context, puts it in the headers and calls it, so its other rules are not written twice.

-- NULL when traceparent and tracestate are W3C's, else what is wrong, naming the field first.
CREATE FUNCTION delayq._trace_problem(traceparent text, tracestate text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  member text;
  keys text[] := '{}';
  k text;
  n int := 0;
BEGIN
  IF traceparent IS NOT NULL AND NOT (
       traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?$'
       AND octet_length(traceparent) <= 256 AND left(traceparent, 2) <> 'ff'
       AND (octet_length(traceparent) = 55 OR (left(traceparent, 2) <> '00' AND substr(traceparent, 56, 1) = '-'))) THEN
    RETURN format('traceparent is %s; a W3C traceparent is 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, in '
                  'lower case, as 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 (a version after 00 may '
                  'add -fields of visible ASCII, up to 256 characters in all)',
                  quote_literal(left(traceparent, 80)));
  END IF;
  IF traceparent IS NOT NULL AND (substr(traceparent, 4, 32) = repeat('0', 32) OR substr(traceparent, 37, 16) = repeat('0', 16)) THEN
    RETURN format('traceparent is %s; its trace id and parent id may not be all zeros (W3C: an invalid context)',
                  quote_literal(traceparent));
  END IF;
  IF tracestate IS NULL THEN RETURN NULL; END IF;
  IF traceparent IS NULL THEN
    RETURN 'tracestate is given without a traceparent; W3C reads a tracestate only beside its traceparent';
  END IF;
  IF octet_length(tracestate) > 512 THEN
    RETURN format('tracestate has %s bytes; at most 512 are kept (W3C asks for 512)', octet_length(tracestate));
  END IF;
  FOREACH member IN ARRAY string_to_array(tracestate, ',') LOOP
    member := btrim(member, E' \t');
    CONTINUE WHEN member = '';
    IF member !~ '^([a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$' THEN
      RETURN format('tracestate has the member %s; a W3C tracestate member is key=value: the key a lower case '
                    'letter, then up to 255 of a-z 0-9 _-*/ (or tenant@system: up to 241 and 14), the value 1 to 256 '
                    'printable ASCII characters without , or =', quote_literal(left(member, 80)));
    END IF;
    k := split_part(member, '=', 1);
    IF k = ANY (keys) THEN
      RETURN format('tracestate names the key %s twice; each key appears once', quote_literal(k));
    END IF;
    keys := keys || k;
    n := n + 1;
    IF n > 32 THEN RETURN 'tracestate has more than 32 members; W3C allows 32'; END IF;
  END LOOP;
  RETURN NULL;
END $$;

-- headers with traceparent and tracestate put in (each given once: as an argument or as a header),
-- checked. The headers' text is kept as given and the two appended to it: a round trip through
-- jsonb would refuse the \u0000 that version 1 keeps. The headers are read as version 1 reads
-- them (\u0000 as \u0001), every entry: a name spelled with escapes, or given twice, is found.
CREATE FUNCTION delayq._with_trace(headers json, p_parent text, p_state text) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  h_parent text;
  h_state text;
  e record;
  text_out text;
  added text := '';
  problem text;
BEGIN
  IF headers IS NOT NULL THEN
    IF json_typeof(headers) <> 'object' OR delayq._has_lone_surrogate(headers::text) THEN
      RETURN headers;  -- _enqueue_v1 says what is wrong with them
    END IF;
    FOR e IN SELECT * FROM json_each_text(replace(headers::text, E'\\u0000', E'\\u0001')::json) LOOP
      IF e.key = 'traceparent' THEN
        IF h_parent IS DISTINCT FROM e.value AND h_parent IS NOT NULL THEN
          PERFORM delayq._bad('headers', 'name traceparent twice, with different values; give it once');
        END IF;
        h_parent := e.value;
      ELSIF e.key = 'tracestate' THEN
        IF h_state IS DISTINCT FROM e.value AND h_state IS NOT NULL THEN
          PERFORM delayq._bad('headers', 'name tracestate twice, with different values; give it once');
        END IF;
        h_state := e.value;
      END IF;
    END LOOP;
  END IF;
  IF p_parent IS NULL AND p_state IS NULL AND h_parent IS NULL AND h_state IS NULL THEN RETURN headers; END IF;
  IF p_parent IS NOT NULL AND h_parent IS NOT NULL AND p_parent <> h_parent THEN
    PERFORM delayq._bad('traceparent', 'and headers.traceparent are both given, and differ; give the trace context once');
  END IF;
  IF p_state IS NOT NULL AND h_state IS NOT NULL AND p_state <> h_state THEN
    PERFORM delayq._bad('tracestate', 'and headers.tracestate are both given, and differ; give the trace context once');
  END IF;
  problem := delayq._trace_problem(coalesce(p_parent, h_parent), coalesce(p_state, h_state));
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = problem,
      HINT = 'delayq.enqueue, cancel, cancel_job and reschedule: docs/postgres.md';
  END IF;
  IF p_parent IS NOT NULL AND h_parent IS NULL THEN added := added || ', "traceparent": ' || to_json(p_parent)::text; END IF;
  IF p_state IS NOT NULL AND h_state IS NULL THEN added := added || ', "tracestate": ' || to_json(p_state)::text; END IF;
  IF added = '' THEN RETURN headers; END IF;
  text_out := coalesce(headers::text, '{}');
  IF text_out ~ '^\s*\{\s*\}\s*$' THEN RETURN ('{' || substr(added, 3) || '}')::json; END IF;
  RETURN (regexp_replace(text_out, '\}\s*$', '') || added || '}')::json;
END $$;

ALTER FUNCTION delayq.enqueue(text, json, bigint, text, timestamptz, int, json, int, text, text) RENAME TO _enqueue_v1;
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'delayq_producer') THEN
    REVOKE EXECUTE ON FUNCTION delayq._enqueue_v1(text, json, bigint, text, timestamptz, int, json, int, text, text)
      FROM delayq_producer;
  END IF;
END $$;

-- Version 1's arguments, then traceparent and tracestate (W3C Trace Context; see above).
CREATE FUNCTION delayq.enqueue(queue text, payload json, delay_ms bigint DEFAULT 0, key text DEFAULT NULL,
                               deliver_at timestamptz DEFAULT NULL, max_attempts int DEFAULT NULL,
                               headers json DEFAULT NULL, priority int DEFAULT 0, "group" text DEFAULT NULL,
                               on_key text DEFAULT 'dedupe', traceparent text DEFAULT NULL, tracestate text DEFAULT NULL)
RETURNS TABLE (id text, due_at_ms bigint, duplicate boolean) LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  h json := headers;
BEGIN
  IF traceparent IS NOT NULL OR tracestate IS NOT NULL OR headers IS NOT NULL THEN
    h := delayq._with_trace(headers, traceparent, tracestate);
  END IF;
  RETURN QUERY SELECT * FROM delayq._enqueue_v1(queue, payload, delay_ms, key, deliver_at, max_attempts, h, priority,
                                                "group", on_key);
END $$;
REVOKE ALL ON FUNCTION delayq.enqueue(text, json, bigint, text, timestamptz, int, json, int, text, text, text, text)
  FROM PUBLIC;

-- As version 1's, with the SQL API found by its names (delayq.enqueue, cancel, cancel_job,
-- reschedule and now_ms, whatever their arguments), so that a later version that changes one
-- need not write this again.
CREATE OR REPLACE FUNCTION delayq._grant_producer() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  f regprocedure;
BEGIN
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'delayq_producer') THEN CREATE ROLE delayq_producer NOLOGIN; END IF;
  EXCEPTION WHEN insufficient_privilege THEN
    RETURN 'the role delayq_producer is missing and this role may not create it (no CREATEROLE): an administrator '
           'runs CREATE ROLE delayq_producer NOLOGIN, then delayq migrate again grants it the SQL API';
  END;
  GRANT USAGE ON SCHEMA delayq TO delayq_producer;
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
            WHERE p.pronamespace = 'delayq'::regnamespace
              AND p.proname IN ('enqueue', 'cancel', 'cancel_job', 'reschedule', 'now_ms') LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO delayq_producer', f);
  END LOOP;
  RETURN '';
END $$;
REVOKE ALL ON FUNCTION delayq._grant_producer() FROM PUBLIC;
REVOKE ALL ON FUNCTION delayq._trace_problem(text, text), delayq._with_trace(json, text, text) FROM PUBLIC;
