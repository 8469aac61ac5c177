-- delayq schema version 1: who may do what. The role delayq_producer may call the SQL API and
-- nothing else: the four functions run as their owner (SECURITY DEFINER, with a fixed
-- search_path), so a producer needs no right on the tables. Grant it to the application's role:
--   GRANT delayq_producer TO app;
-- Roles belong to the whole cluster: a migrating role that may not create roles leaves it to an
-- administrator (delayq migrate says so; _grant_producer below).
REVOKE ALL ON SCHEMA delayq FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA delayq FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA delayq FROM PUBLIC;

ALTER FUNCTION delayq.enqueue(text, json, bigint, text, timestamptz, int, json, int, text, text)
  SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION delayq.cancel(text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION delayq.cancel_job(text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION delayq.reschedule(text, text, bigint, timestamptz) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Makes the role delayq_producer when it is missing and this role may (CREATEROLE), and grants it
-- the SQL API. delayq migrate runs it every time, after the versions: a role an administrator made
-- after a first migrate gets its grants at the next. Answers '' when the role has them, else what
-- to do.
CREATE FUNCTION delayq._grant_producer() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'delayq_producer') THEN
    BEGIN
      CREATE ROLE delayq_producer NOLOGIN;
    EXCEPTION WHEN insufficient_privilege THEN
      RETURN 'the role delayq_producer is missing and this role may not create it (no CREATEROLE): an administrator '
             'runs CREATE ROLE delayq_producer NOLOGIN, then delayq migrate again grants it the SQL API';
    END;
  END IF;
  GRANT USAGE ON SCHEMA delayq TO delayq_producer;
  GRANT EXECUTE ON FUNCTION delayq.enqueue(text, json, bigint, text, timestamptz, int, json, int, text, text),
    delayq.cancel(text, text), delayq.cancel_job(text, text), delayq.reschedule(text, text, bigint, timestamptz),
    delayq.now_ms() TO delayq_producer;
  RETURN '';
END $$;
REVOKE ALL ON FUNCTION delayq._grant_producer() FROM PUBLIC;
