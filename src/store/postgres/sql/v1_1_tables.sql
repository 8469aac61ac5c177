-- delayq schema version 1: the tables (docs/postgres.md draws them).
--
-- A job row is written when it is enqueued and deleted when it is acked, cancelled or swept
-- dead; in between it is updated in place. The table churns by the million, so:
--   * fillfactor 70 leaves room on each page for the updates (HOT where no indexed column moves);
--   * autovacuum looks at the table after 1 % of it changed (the default, 20 %, lets a churning
--     table grow to several times its live size between vacuums);
--   * every index is partial on the state it serves, so each holds the rows of one state only.
CREATE SCHEMA IF NOT EXISTS delayq;

CREATE TABLE delayq.meta (
  name text PRIMARY KEY,
  value text NOT NULL
);

-- One row per queue: its config (the columns of QueueConfig, with its defaults), whether it is
-- paused, and its flow-control bucket.
CREATE TABLE delayq.queues (
  name text PRIMARY KEY,
  max_attempts int NOT NULL DEFAULT 5,
  backoff_base_ms bigint NOT NULL DEFAULT 1000,
  backoff_factor float8 NOT NULL DEFAULT 2,
  backoff_max_ms bigint NOT NULL DEFAULT 3600000,
  backoff_jitter float8 NOT NULL DEFAULT 0.1,
  lease_ms bigint NOT NULL DEFAULT 30000,
  max_payload bigint NOT NULL DEFAULT 1048576,
  dead_retention_ms bigint NOT NULL DEFAULT 604800000,
  max_delay_ms bigint NOT NULL DEFAULT 31536000000,
  rate_per_s float8 NOT NULL DEFAULT 0,
  burst bigint NOT NULL DEFAULT 0,
  max_reserved bigint NOT NULL DEFAULT 0,
  group_max_reserved bigint NOT NULL DEFAULT 0,
  priority_aging_ms bigint NOT NULL DEFAULT 60000,
  paused boolean NOT NULL DEFAULT false,
  -- The token bucket (core/flow_control.h): tokens as of tokens_at_us (database µs).
  tokens float8,
  tokens_at_us bigint,
  -- Database µs since when flow control has held this queue's ready jobs back (NULL: it does not).
  held_since_us bigint,
  -- The next turn number a group gets (core/ready_order.h).
  next_turn bigint NOT NULL DEFAULT 1,
  -- A job of this queue has had a priority or a group: its reserves follow core/ready_order.h.
  ordered boolean NOT NULL DEFAULT false,
  created_at_ms bigint NOT NULL
);

-- state: 's' waits for its due time (scheduled; ready once due_at_ms has passed), 'r' reserved,
-- 'd' dead. token: the current delivery's (NULL: no receipt is valid). waited: the job came due
-- since its last delivery, so its next delivery is a first one (a lateness sample).
CREATE TABLE delayq.jobs (
  -- A job cannot outlive its queue: a queue deleted while a transaction enqueues into it waits for
  -- that transaction (the queue's advisory lock: delayq._queue_for_write), and is refused when it
  -- committed a job (docs/postgres.md).
  queue text NOT NULL,
  id text NOT NULL,
  state "char" NOT NULL,
  due_at_ms bigint NOT NULL,
  attempt int NOT NULL DEFAULT 0,
  max_attempts int NOT NULL,
  key text,
  key_ttl_ms bigint NOT NULL DEFAULT 0,
  payload bytea NOT NULL,
  is_binary boolean NOT NULL DEFAULT false,
  headers json,
  created_at_ms bigint NOT NULL,
  last_error text,
  token text,
  lease_deadline_ms bigint,
  dead_at_ms bigint,
  priority smallint NOT NULL DEFAULT 0,
  grp text NOT NULL DEFAULT '',
  waited boolean NOT NULL DEFAULT true,
  PRIMARY KEY (queue, id)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01,
        autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE delayq.jobs ALTER COLUMN payload SET STORAGE EXTERNAL;  -- no compression work on the hot path

CREATE INDEX jobs_waiting ON delayq.jobs (queue, due_at_ms, id) WHERE state = 's';
CREATE INDEX jobs_reserved ON delayq.jobs (queue, due_at_ms, id) WHERE state = 'r';
CREATE INDEX jobs_leases ON delayq.jobs (lease_deadline_ms) WHERE state = 'r';
-- The heads of each group's priority levels (core/ready_order.h), for queues that have them.
CREATE INDEX jobs_lanes ON delayq.jobs (queue, grp, priority, due_at_ms, id) WHERE state = 's' AND (grp <> '' OR priority <> 0);
CREATE INDEX jobs_dead ON delayq.jobs (queue, dead_at_ms, id) WHERE state = 'd';
-- No two live jobs share a key; a dead job released its key (it keeps it to show).
CREATE UNIQUE INDEX jobs_live_key ON delayq.jobs (queue, key) WHERE key IS NOT NULL AND state <> 'd';

-- Keys held after their job was acked or cancelled (EnqueueRequest::key_ttl_ms).
CREATE TABLE delayq.kept_keys (
  queue text NOT NULL,
  key text NOT NULL,
  id text NOT NULL,
  due_at_ms bigint NOT NULL,
  until_ms bigint NOT NULL,
  PRIMARY KEY (queue, key)
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02);
CREATE INDEX kept_keys_until ON delayq.kept_keys (until_ms);

-- Each group's turn (core/ready_order.h): the group whose turn is oldest goes next. held_since_us:
-- since when its group_max_reserved has held its ready jobs back (NULL: it does not).
CREATE TABLE delayq.group_turns (
  queue text NOT NULL,
  grp text NOT NULL,
  turn bigint NOT NULL,
  held_since_us bigint,
  PRIMARY KEY (queue, grp)
);

-- Recurring schedules (schedule/schedule_store.h): the encoded record and its generation.
CREATE TABLE delayq.schedules (
  queue text NOT NULL,
  name text NOT NULL,
  generation bigint NOT NULL,
  body bytea NOT NULL,
  PRIMARY KEY (queue, name)
);
