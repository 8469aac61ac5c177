-- delayq schema version 7: a queue may not be named "." or "..", as core/validate.cc's
-- ValidateQueueName refuses them (a URL's path cannot carry them: proxies and browsers take them,
-- and their %2E escapes, out of the path). sql_api_test's twin test holds the two rules together.
CREATE OR REPLACE FUNCTION delayq._queue_ok(q text) RETURNS boolean LANGUAGE sql IMMUTABLE
  AS $$ SELECT q IS NOT NULL AND octet_length(q) BETWEEN 1 AND 128 AND q ~ '^[A-Za-z0-9._:-]+$'
               AND q NOT IN ('.', '..') $$;

CREATE OR REPLACE FUNCTION delayq._check_queue(q text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF NOT delayq._queue_ok(q) THEN
    PERFORM delayq._bad('queue', format('%s must have 1 to 128 of [A-Za-z0-9._:-], and not be "." or ".."',
                                        coalesce(quote_literal(q), 'NULL')));
  END IF;
END $$;
