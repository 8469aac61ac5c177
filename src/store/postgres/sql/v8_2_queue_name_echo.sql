-- delayq schema version 8 (continued).
-- A bad queue name is echoed back cut to 200 characters, as the server's errors cut it (a 100 000
-- character name came back whole in the 22023's message).
CREATE OR REPLACE FUNCTION delayq._check_queue(q text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF NOT delayq._queue_ok(q) THEN
    PERFORM delayq._bad('queue', format('%s must have 1 to 128 of [A-Za-z0-9._:-], and not be "." or ".."',
                                        coalesce(quote_literal(left(q, 200)) || CASE WHEN length(q) > 200 THEN '…'
                                                                                      ELSE '' END, 'NULL')));
  END IF;
END $$;
