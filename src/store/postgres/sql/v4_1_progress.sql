-- delayq schema version 4: a reserved job's progress (SPEC §11.3, docs/http-api.md "touch").
-- A touch may report how far its consumer has got; the job shows it while that delivery holds it.
-- progress_token names the delivery that reported it (delayq.jobs.token): a later delivery of the
-- job shows none until it reports its own, so no other function has to clear it. Both columns
-- are NULL for a job no touch reported on: adding them rewrites no row.
ALTER TABLE delayq.jobs ADD COLUMN progress json, ADD COLUMN progress_token text;
