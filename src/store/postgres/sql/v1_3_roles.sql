-- delayq schema version 1: who may do what. The role delayq_producer may call the SQL API and
-- nothing else: the four functions run as their owner (SECURITY DEFINER, with a fixed
-- search_path), so a producer needs no right on the tables. Grant it to the application's role:
--   GRANT delayq_producer TO app;
-- Roles belong to the whole cluster: a migrating role that may not create roles leaves it to an
-- administrator (delayq migrate says so).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'delayq_producer') THEN
    BEGIN
      CREATE ROLE delayq_producer NOLOGIN;
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE NOTICE 'delayq: could not create the role delayq_producer (no CREATEROLE); create it, then run delayq migrate again';
    END;
  END IF;
END $$;

REVOKE ALL ON SCHEMA delayq FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA delayq FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA delayq FROM PUBLIC;

ALTER FUNCTION delayq.enqueue(text, json, bigint, text, timestamptz, int, json, int, text, text)
  SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION delayq.cancel(text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION delayq.cancel_job(text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION delayq.reschedule(text, text, bigint, timestamptz) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'delayq_producer') THEN
    GRANT USAGE ON SCHEMA delayq TO delayq_producer;
    GRANT EXECUTE ON FUNCTION delayq.enqueue(text, json, bigint, text, timestamptz, int, json, int, text, text),
      delayq.cancel(text, text), delayq.cancel_job(text, text), delayq.reschedule(text, text, bigint, timestamptz),
      delayq.now_ms() TO delayq_producer;
  END IF;
END $$;
