"""Enqueue and cancel inside your own PostgreSQL transaction (a delayq server on the PostgreSQL
store, docs/postgres.md).

    import psycopg
    from delayq.postgres import enqueue_in, cancel_in

    with psycopg.connect(DATABASE_URL) as conn, conn.transaction():
        conn.execute("INSERT INTO orders (id, state) VALUES (%s, 'unpaid')", (42,))
        enqueue_in(conn, "order-timeouts", {"orderId": 42}, delay="30m", key="order-42")
    # committed: the order and its timeout exist together; a rollback leaves neither.

    with psycopg.connect(DATABASE_URL) as conn, conn.transaction():
        conn.execute("UPDATE orders SET state = 'paid' WHERE id = %s", (42,))
        cancel_in(conn, "order-timeouts", "order-42")

Each function is one call of the SQL API (delayq.enqueue, cancel, cancel_job, reschedule) on the
connection you pass, inside whatever transaction it is in: nothing is visible or delivered
before that transaction commits. Any DB-API connection with %(name)s parameters works (psycopg
3, psycopg2). A refusal raises the driver's error with SQLSTATE 22023 and a message naming the
field.
"""
from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .durations import Duration, to_ms


@dataclass(frozen=True)
class Enqueued:
    id: str
    due_at_ms: int
    duplicate: bool


def _one(conn: Any, sql: str, params: Mapping[str, Any]) -> tuple:
    """The first row as a tuple, whatever row factory the connection uses (tuples, dicts)."""
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        row = cur.fetchone()
    finally:
        cur.close()
    if isinstance(row, Mapping):
        return tuple(row.values())
    return tuple(row)


def _aware(at: Optional[datetime.datetime]) -> Optional[datetime.datetime]:
    if at is not None and at.tzinfo is None:
        raise ValueError("deliver_at has no time zone; give an aware datetime "
                         "(datetime.now(timezone.utc) + timedelta(minutes=30))")
    return at


def enqueue_in(conn: Any, queue: str, payload: Any, *, delay: Optional[Duration] = None,
               deliver_at: Optional[datetime.datetime] = None, key: Optional[str] = None,
               max_attempts: Optional[int] = None, headers: Optional[Mapping[str, str]] = None,
               priority: int = 0, group: Optional[str] = None, on_key: str = "dedupe",
               traceparent: Optional[str] = None, tracestate: Optional[str] = None) -> Enqueued:
    """Enqueues `payload` (any JSON value; a str is a JSON string) on `conn`'s transaction.
    delay: "30m", "1h", a timedelta, or a number of milliseconds; or deliver_at, an aware datetime.
    on_key: dedupe (a live job with `key` is returned as is), replace or debounce.
    traceparent, tracestate: the producer's W3C Trace Context (schema version 3)."""
    row = _one(conn,
               "SELECT id, due_at_ms, duplicate FROM delayq.enqueue(%(queue)s, %(payload)s::json, "
               "delay_ms => %(delay)s, key => %(key)s, deliver_at => %(at)s, max_attempts => %(max)s, "
               "headers => %(headers)s::json, priority => %(priority)s, \"group\" => %(group)s, on_key => %(on_key)s"
               + (", traceparent => %(tp)s, tracestate => %(ts)s" if traceparent or tracestate else "") + ")",
               {"queue": queue, "payload": json.dumps(payload), "delay": to_ms(delay, "delay") if delay is not None else
                (None if deliver_at is not None else 0), "key": key, "at": _aware(deliver_at), "max": max_attempts,
                "headers": json.dumps(dict(headers)) if headers is not None else None, "priority": priority,
                "group": group, "on_key": on_key, "tp": traceparent, "ts": tracestate})
    return Enqueued(row[0], int(row[1]), bool(row[2]))


def cancel_in(conn: Any, queue: str, key: str) -> bool:
    """Cancels the live job of `key` when the transaction commits; False when there is none.
    A job being delivered (reserved) cannot be cancelled: that raises (SQLSTATE 55000)."""
    return bool(_one(conn, "SELECT delayq.cancel(%(queue)s, %(key)s)", {"queue": queue, "key": key})[0])


def cancel_job_in(conn: Any, queue: str, job_id: str) -> bool:
    """cancel_in by job id."""
    return bool(_one(conn, "SELECT delayq.cancel_job(%(queue)s, %(id)s)", {"queue": queue, "id": job_id})[0])


def reschedule_in(conn: Any, queue: str, key: str, *, delay: Optional[Duration] = None,
                  deliver_at: Optional[datetime.datetime] = None) -> Optional[int]:
    """Moves the job of `key` to now + delay (or deliver_at, one of them); returns its new due
    time in ms, or None when no live job has that key."""
    due = _one(conn, "SELECT delayq.reschedule(%(queue)s, %(key)s, delay_ms => %(delay)s, deliver_at => %(at)s)",
               {"queue": queue, "key": key, "delay": to_ms(delay, "delay") if delay is not None else None,
                "at": _aware(deliver_at)})[0]
    return None if due is None else int(due)
