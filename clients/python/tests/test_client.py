"""The Python client against a real server: every operation, the typed errors, hostile input,
concurrent mixed traffic, and a server killed with SIGKILL under the client."""
from __future__ import annotations

import datetime
import threading

import pytest

import delayq
from delayq import Client, job_body


def test_enqueue_reserve_ack_round_trip(server):
    c = Client(server.url)
    r = c.enqueue("orders", {"orderId": 42}, key="order-42", headers={"version": "2"}, max_attempts=3)
    assert r.id and not r.duplicate
    dup = c.enqueue("orders", {"orderId": 43}, delay="30m", key="order-42")
    assert dup.duplicate and dup.id == r.id, "a key names one live job"
    info = c.get("orders", key="order-42")
    assert (info.id, info.state, info.payload, info.headers, info.max_attempts) == (
        r.id, "ready", {"orderId": 42}, {"version": "2"}, 3)
    jobs = c.reserve("orders", max=10, wait="1s", lease="30s")
    assert [j.id for j in jobs] == [r.id]
    job = jobs[0]
    assert (job.payload, job.attempt, job.key, job.headers) == ({"orderId": 42}, 1, "order-42", {"version": "2"})
    assert job.lease_deadline > job.due_at
    assert c.touch("orders", job.receipt, lease="60s") >= job.lease_deadline
    assert c.ack("orders", job.receipt) == 1
    with pytest.raises(delayq.NotFound):
        c.get("orders", r.id)
    stats = c.stats("orders")
    assert stats["counters"]["acked"] == 1


def test_delay_forms_reschedule_cancel_and_binary_payloads(server):
    c = Client(server.url)
    now_ms = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
    a = c.enqueue("d", "x", delay="1h30m")
    assert a.due_at >= now_ms + 5_400_000
    b = c.enqueue("d", "x", delay=datetime.timedelta(minutes=5))
    assert b.due_at >= now_ms + 300_000
    at = datetime.datetime(2027, 6, 1, tzinfo=datetime.timezone.utc)
    d = c.enqueue("d", "x", deliver_at=at)
    assert d.due_at == int(at.timestamp() * 1000)
    assert c.enqueue("d", "x", deliver_at="2027-06-01T00:00:00Z").due_at == d.due_at
    moved = c.reschedule("d", a.id, delay="10m")
    assert moved.due_at < a.due_at
    assert c.cancel("d", a.id)
    with pytest.raises(delayq.NotFound):
        c.cancel("d", a.id)
    blob = bytes(range(256))
    e = c.enqueue("bin", blob)
    assert c.get("bin", e.id).payload == blob
    results = c.enqueue_batch("batch", [job_body(i, delay_ms=0, key=f"k{i}") for i in range(5)])
    assert len(results) == 5 and not any(r.duplicate for r in results)
    assert len(c.reserve("batch", max=10)) == 5


def test_nack_retries_then_dead_then_replay(server):
    c = Client(server.url)
    c.set_config("p", max_attempts=2, backoff={"base_ms": 1, "jitter": 0})
    r = c.enqueue("p", {"poison": True})
    job = c.reserve("p", wait="2s")[0]
    n = c.nack("p", job.receipt, retry_in=0, error="boom")
    assert n.state == "scheduled"
    job = c.reserve("p", wait="2s")[0]
    assert job.attempt == 2
    n = c.nack("p", job.receipt, error="boom again")
    assert n.state == "dead"
    dead = c.dead("p")
    assert [j.id for j in dead] == [r.id] and dead[0].last_error == "boom again"
    assert c.replay("p") == 1
    again = c.reserve("p", wait="2s")
    assert [j.id for j in again] == [r.id] and again[0].attempt == 1
    assert c.nack("p", again[0].receipt, dead=True).state == "dead"
    assert c.purge("p") == 1


def test_typed_errors(server, token_server):
    c = Client(server.url)
    with pytest.raises(delayq.NotFound) as e:
        c.get("nope", "01JDQ8Z3K6T6V3W1C9X2N4M5PQ")
    assert e.value.status == 404 and e.value.code == "not_found"
    with pytest.raises(delayq.NotFound, match="does not exist"):
        c.stats("never-used")
    with pytest.raises(delayq.InvalidArgument, match="delay"):
        c.enqueue("q", 1, delay="5 minutes")
    with pytest.raises(delayq.NotFound, match="does not exist"):
        c.ack("q", "not-a-receipt")  # no queue q yet
    c.enqueue("q", 0, delay="1h")
    with pytest.raises(delayq.InvalidArgument, match="receipt"):
        c.ack("q", "not-a-receipt")
    with pytest.raises(delayq.TooLarge):
        c.enqueue_batch("q", [{"payload": i} for i in range(1001)])
    c.enqueue("q", 1)
    job = c.reserve("q")[0]
    with pytest.raises(delayq.Conflict):
        c.cancel("q", job.id)  # reserved
    c.ack("q", job.receipt)
    with pytest.raises(delayq.NotFound):
        c.ack("q", job.receipt)
    with pytest.raises(delayq.Unauthorized):
        Client(token_server.url).stats("q")
    assert Client(token_server.url, token="s3cret-token-for-tests").enqueue("q", 1).id
    with pytest.raises(delayq.Unavailable):
        Client("http://127.0.0.1:1").stats("q")
    # The mapping of codes the server rarely sends here.
    assert isinstance(delayq.errors.error_for(429, "resource_exhausted", "x"), delayq.Overloaded)
    assert isinstance(delayq.errors.error_for(409, "lease_expired", "x"), delayq.LeaseExpired)
    assert isinstance(delayq.errors.error_for(502, None, "x"), delayq.DelayqError)


def test_an_old_receipt_is_lease_expired_after_redelivery(server):
    c = Client(server.url)
    c.enqueue("l", 1)
    first = c.reserve("l", lease="1s")[0]
    second = c.reserve("l", wait="5s")  # the long poll answers once the 1 s lease runs out
    assert [j.id for j in second] == [first.id] and second[0].attempt == 2
    with pytest.raises(delayq.LeaseExpired):
        c.ack("l", first.receipt)
    batch = c.ack("l", [second[0].receipt, first.receipt])
    assert batch.done == 1 and isinstance(batch.failed[0], delayq.LeaseExpired)
    assert batch.failed_receipts == [first.receipt]


def test_hostile_and_malformed_input_is_refused_with_a_clear_error(server):
    c = Client(server.url)
    with pytest.raises(ValueError, match="one of delay"):
        c.enqueue("q", 1, delay="5s", deliver_at=1)
    with pytest.raises(ValueError, match="timezone"):
        c.enqueue("q", 1, deliver_at=datetime.datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="not a duration"):
        c.reserve("q", wait="soon")
    with pytest.raises(ValueError):
        c.get("q")  # neither id nor key
    with pytest.raises(delayq.InvalidArgument, match='did you mean "delay_ms"'):
        c.enqueue_batch("q", [{"payload": 1, "dealy_ms": 5}])  # the server names the typo
    with pytest.raises(delayq.InvalidArgument, match="queue name"):
        c.enqueue("bad name\n", 1)
    with pytest.raises(delayq.NotFound):
        c.get("q", "../../etc/passwd")  # quoted into one path segment
    with pytest.raises(ValueError):
        Client("ftp://example")
    assert c.queues() == [] or all(q["name"] != "bad name\n" for q in c.queues())


def test_concurrent_mixed_traffic_delivers_every_job_once(server):
    c = Client(server.url)
    n_producers, per = 4, 50
    acked, errors = [], []
    lock = threading.Lock()

    def produce(p):
        for i in range(per):
            c.enqueue("mix", {"p": p, "i": i}, key=f"{p}-{i}")
            try:
                c.enqueue("mix", 1, delay="nonsense")  # an error path, interleaved
            except delayq.InvalidArgument as e:
                with lock:
                    errors.append(e)

    def consume():
        while True:
            with lock:
                if len(acked) >= n_producers * per:
                    return
            for job in c.reserve("mix", max=8, wait="200ms"):
                try:
                    c.ack("mix", "garbage")
                except delayq.InvalidArgument:
                    pass
                c.ack("mix", job.receipt)
                with lock:
                    acked.append((job.payload["p"], job.payload["i"]))

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(n_producers)]
    threads += [threading.Thread(target=consume) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(acked) == sorted((p, i) for p in range(n_producers) for i in range(per))
    assert len(errors) == n_producers * per
    s = c.stats("mix")
    assert s["counters"]["acked"] == n_producers * per and s["ready"] == 0 and s["reserved"] == 0


def test_a_server_killed_with_sigkill_loses_nothing_and_the_client_reconnects(tmp_path):
    from conftest import Server

    s = Server(tmp_path / "data", ["--durability", "sync"])
    try:
        c = Client(s.url)
        ids = [c.enqueue("k", i).id for i in range(20)]
        s.kill()
        with pytest.raises(delayq.Unavailable):
            c.stats("k")
        s.restart()
        assert c.stats("k")["ready"] == 20, "every acknowledged enqueue survived kill -9"
        got = []
        while len(got) < 20:
            for job in c.reserve("k", max=20, wait="1s"):
                c.ack("k", job.receipt)
                got.append(job.id)
        assert sorted(got) == sorted(ids)
    finally:
        s.stop()


def test_version(server):
    v = Client(server.url).version()
    assert v["version"].startswith("0.") and v["store"] == "embedded" and v["durability"] == "interval"


def test_browsing_pages_through_a_state_and_refuses_a_bad_cursor(server):
    c = Client(server.url)
    ids = [c.enqueue("browse", {"n": i}, delay=f"{10 + i}m").id for i in range(7)]
    first = c.jobs("browse", "scheduled", limit=3)
    assert [j.id for j in first.jobs] == ids[:3] and first.next_cursor
    assert [j.id for j in c.iter_jobs("browse", "scheduled", page_size=2)] == ids, "due order, each once"
    assert c.jobs("browse", "ready").jobs == [] and c.jobs("browse", "ready").next_cursor is None
    with pytest.raises(delayq.InvalidArgument, match="state=scheduled"):
        c.jobs("browse", "dead", cursor=first.next_cursor)
    with pytest.raises(delayq.InvalidArgument, match="not a job state"):
        c.jobs("browse", "sheduled")
    with pytest.raises(delayq.NotFound):
        c.jobs("no-such-queue", "ready")


def test_key_ttl_keeps_the_key_after_the_ack(server):
    c = Client(server.url)
    first = c.enqueue("ttl", {"pay": 1}, key="pay-1", key_ttl="1h")
    [job] = c.reserve("ttl")
    c.ack("ttl", job.receipt)
    again = c.enqueue("ttl", {"pay": 1}, key="pay-1", key_ttl="1h")
    assert again.duplicate and again.id == first.id, "a retried enqueue after the ack makes no second job"
    with pytest.raises(delayq.InvalidArgument, match="key_ttl_ms is set without a key"):
        c.enqueue("ttl", 1, key_ttl="1m")


def test_debounce_pushes_the_job_back_never_earlier(server):
    c = Client(server.url)
    first = c.enqueue("edits", {"doc": 1}, key="doc-1", delay="1h", debounce=True)
    later = c.enqueue("edits", {"doc": 2}, key="doc-1", delay="2h", debounce=True)
    assert later.id == first.id and later.replaced and later.due_at > first.due_at
    shorter = c.enqueue("edits", {"doc": 3}, key="doc-1", delay="1m", debounce=True)
    assert shorter.due_at == later.due_at, "a shorter delay does not bring it forward"
    assert c.get("edits", key="doc-1").payload == {"doc": 3}
    with pytest.raises(delayq.InvalidArgument, match="debounce is set without a key"):
        c.enqueue("edits", 1, debounce=True)


def test_priorities_and_groups_order_the_ready_jobs(server):
    c = Client(server.url)
    c.enqueue("tenants", {"n": 1}, group="big")
    c.enqueue("tenants", {"n": 2}, group="big")
    c.enqueue("tenants", {"n": 3}, group="small", priority=9)
    got = c.reserve("tenants", max=3)
    assert [j.group for j in got] == ["big", "small", "big"], "the groups take turns"
    assert got[1].priority == 9 and got[0].priority == 0
    assert c.stats("tenants")["groups"][0]["group"] in ("big", "small")
    with pytest.raises(delayq.InvalidArgument, match="priority is 10"):
        c.enqueue("tenants", 1, priority=10)


def test_schedules_make_their_runs_into_jobs(server):
    c = Client(server.url)
    s = c.put_schedule("reports", "morning", cron="0 9 * * MON-FRI", timezone="Europe/Berlin",
                       payload={"report": "sales"}, misfire="skip")
    assert s["name"] == "morning" and len(s["next_runs"]) == 5 and s["misfire"] == "skip"
    job = c.get("reports", key=f"schedule:morning:{s['next_runs'][0]}")
    assert job.payload == {"report": "sales"} and job.headers["delayq-schedule"] == "morning"
    assert [x["name"] for x in c.schedules("reports")] == ["morning"]
    assert c.pause_schedule("reports", "morning")["paused"] is True
    assert c.resume_schedule("reports", "morning")["paused"] is False
    every = c.put_schedule("reports", "tick", every="15m")
    assert every["every"] == "15m" and every["next_runs"][1] - every["next_runs"][0] == 900_000
    with pytest.raises(delayq.InvalidArgument, match="hour"):
        c.put_schedule("reports", "bad", cron="0 25 * * *")
    c.delete_schedule("reports", "morning")
    with pytest.raises(delayq.NotFound):
        c.schedule("reports", "morning")


def test_a_malformed_trace_context_is_refused_and_a_missing_one_is_none(server):
    c = Client(server.url)
    with pytest.raises(delayq.InvalidArgument) as e:
        c.enqueue("traced-bad", 1, traceparent="00-not-a-trace-01")
    assert "a W3C traceparent is 00-" in str(e.value)
    with pytest.raises(delayq.InvalidArgument) as e:
        c.enqueue("traced-bad", 1, tracestate="a=1")
    assert "without a traceparent" in str(e.value)
    plain = c.enqueue("traced-bad", 1)
    assert c.get("traced-bad", plain.id).traceparent is None
    assert c.reserve("traced-bad", max=1)[0].traceparent is None


def test_a_touch_reports_progress_shown_on_the_job_while_it_is_reserved(server):
    c = Client(server.url)
    made = c.enqueue("progress", {"rows": 1000})
    job = c.reserve("progress", max=1)[0]
    assert c.get("progress", made.id).progress is None
    c.touch("progress", job.receipt, progress={"rows": 120, "of": 1000})
    assert c.get("progress", made.id).progress == {"rows": 120, "of": 1000}
    c.touch("progress", job.receipt, lease="1m")  # no progress: the last one stays
    assert c.jobs("progress", state="reserved").jobs[0].progress == {"rows": 120, "of": 1000}
    with pytest.raises(delayq.InvalidArgument, match="at most 4096"):
        c.touch("progress", job.receipt, progress="x" * 5000)
    assert c.get("progress", made.id).progress == {"rows": 120, "of": 1000}
    c.ack("progress", job.receipt)
    with pytest.raises(delayq.NotFound):
        c.touch("progress", job.receipt, progress=1)


def test_an_ack_keeps_its_result_on_a_completed_job(server):
    c = Client(server.url)
    c.set_config("results", keep_completed_ms=3_600_000)
    made = [c.enqueue("results", {"n": i}) for i in range(3)]
    jobs = c.reserve("results", max=3)
    assert len(jobs) == 3
    with pytest.raises(delayq.InvalidArgument, match="at most 65536"):
        c.ack("results", jobs[0].receipt, result="x" * 70_000)
    with pytest.raises(ValueError, match="JSON"):
        c.ack("results", jobs[0].receipt, result=float("nan"))
    assert c.get("results", jobs[0].id).state == "reserved"  # refused before anything was acked
    assert c.ack("results", jobs[0].receipt, result={"charged": 1999, "note": "é"}) == 1
    batch = c.ack("results", [(jobs[1].receipt, [1, 2]), jobs[2].receipt, "bogus"])
    assert batch.done == 2 and batch.failed_receipts == ["bogus"]
    first = c.get("results", jobs[0].id)
    assert first.state == "completed" and first.result == {"charged": 1999, "note": "é"}
    assert first.completed_at and first.completed_at >= first.created_at
    assert c.get("results", jobs[1].id).result == [1, 2]
    assert c.get("results", jobs[2].id).result is None
    listed = c.jobs("results", state="completed")
    assert sorted(j.id for j in listed.jobs) == sorted(m.id for m in made)
    assert c.stats("results")["completed"] == 3
    with pytest.raises(delayq.NotFound):
        c.ack("results", jobs[0].receipt)  # a completed job's receipt acts on nothing


def test_a_progress_counts_its_utf8_bytes_and_nan_is_refused_before_sending(server):
    c = Client(server.url)
    c.enqueue("progress-utf8", 1)
    job = c.reserve("progress-utf8", max=1)[0]
    largest = "é" * 2047  # 4 094 bytes of UTF-8, 4 096 with its quotes
    c.touch("progress-utf8", job.receipt, progress=largest)
    assert c.get("progress-utf8", job.id).progress == largest
    with pytest.raises(ValueError, match="JSON"):
        c.touch("progress-utf8", job.receipt, progress=float("nan"))
    assert c.get("progress-utf8", job.id).progress == largest


def test_a_queue_named_like_a_dot_segment_is_refused(server):
    """A queue named "." or ".." could be made and then not reached through a proxy, curl or a
    browser (they take dot segments out of a path): the server refuses the name."""
    c = Client(server.url)
    for dots in (".", ".."):
        with pytest.raises(delayq.InvalidArgument, match="dot segment"):
            c.enqueue(dots, 1)
