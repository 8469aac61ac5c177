-- delayq schema version 8: delayq.waiting is an ordinary (logged) table. Unlogged, a crash of
-- PostgreSQL emptied it: an ack after the restart then deleted a waited job without keeping it
-- completed, and the wait answered "cancelled" for a job that was acked with a result (hostile
-- pass; postgres_store_test's ACrashOfPostgresKeepsAWaitForAnOutcome). A wait now costs its
-- _watch a WAL write.
ALTER TABLE delayq.waiting SET LOGGED;

