"""Client.wait against a real server: the outcome at the ack (with its result, nothing kept),
death, cancel, the timeout, hostile input, waits from many threads at once, and a server killed
and started again under a wait."""
from __future__ import annotations

import re
import threading
import time
import urllib.request

import pytest

import delayq
from delayq import Client


def open_waits(url: str) -> int:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    m = re.search(r"^delayq_reserve_waiting (\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def await_open_waits(url: str, n: int) -> None:
    """Returns once the server holds n waits (its /metrics), so what follows comes after them."""
    for _ in range(1000):
        if open_waits(url) >= n:
            return
        time.sleep(0.01)  # a poll of the server's state
    raise AssertionError(f"{n} waits did not open on the server")


def in_thread(fn, *args, **kwargs):
    box = {}

    def run():
        try:
            box["value"] = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, box


def test_a_wait_answers_at_the_ack_with_its_result_though_nothing_is_kept(server):
    c = Client(server.url)
    made = c.enqueue("w", {"order": 7}, key="order-7")
    job = c.reserve("w")[0]
    t1, by_id = in_thread(c.wait, "w", made, "30s")
    t2, by_key = in_thread(c.wait, "w", key="order-7", timeout=30_000)
    await_open_waits(server.url, 2)
    assert c.ack("w", job.receipt, result={"paid": 1999}) == 1
    t1.join()
    t2.join()
    for box in (by_id, by_key):
        info = box["value"]
        assert info.state == "completed" and info.result == {"paid": 1999} and info.id == made.id
        assert info.payload == {"order": 7} and info.completed_at >= info.created_at
    assert c.stats("w")["completed"] == 1  # kept for the waiters a while, as documented


def test_dead_cancelled_and_the_timeout(server):
    c = Client(server.url)
    later = c.enqueue("w2", "later", delay="1h")
    doomed = c.enqueue("w2", "doomed", max_attempts=1)
    t1, cancelled = in_thread(c.wait, "w2", later.id, 30_000)
    t2, dead = in_thread(c.wait, "w2", doomed.id, 30_000)
    await_open_waits(server.url, 2)
    assert c.cancel("w2", later.id)
    c.nack("w2", c.reserve("w2")[0].receipt, error="card declined")
    t1.join()
    t2.join()
    assert cancelled["value"].state == "cancelled" and cancelled["value"].payload == "later"
    assert dead["value"].state == "dead" and dead["value"].last_error == "card declined"

    still = c.enqueue("w2", "still", delay="1h")
    start = time.monotonic()
    info = c.wait("w2", still.id, timeout="300ms")
    assert info.state == "scheduled" and time.monotonic() - start >= 0.3


def test_hostile_waits_are_refused_with_a_clear_error(server):
    c = Client(server.url)
    c.enqueue("w3", 1)
    with pytest.raises(delayq.InvalidArgument, match="id"):
        c.wait("w3", "../../etc", 10)
    with pytest.raises(delayq.NotFound):
        c.wait("w3", "01HZZZZZZZZZZZZZZZZZZZZZZZ", 10)
    with pytest.raises(delayq.NotFound):
        c.wait("no-such-queue", "01HZZZZZZZZZZZZZZZZZZZZZZZ", 10)
    with pytest.raises(ValueError):
        c.wait("w3", "01HZZZZZZZZZZZZZZZZZZZZZZZ", -1)
    with pytest.raises(ValueError):
        c.wait("w3")  # neither id nor key
    for raw in ("wait_ms=-1", "wait_ms=60001", "wait_ms=9223372036854775808", "wait_ms=", "wait_ms=1e3"):
        with pytest.raises(delayq.InvalidArgument, match="wait_ms"):
            c._call("GET", "/v1/queues/w3/jobs/01HZZZZZZZZZZZZZZZZZZZZZZZ?" + raw)
    with pytest.raises(delayq.InvalidArgument, match="not a listing"):
        c._call("GET", "/v1/queues/w3/jobs?state=ready&wait_ms=10")


def test_many_threads_wait_while_others_ack_nack_and_cancel(server):
    c = Client(server.url)
    ids = [c.enqueue("w4", i, max_attempts=1).id for i in range(30)]
    waits = [in_thread(Client(server.url).wait, "w4", i, 30_000) for i in ids]
    await_open_waits(server.url, len(ids))
    for i in ids[::3]:
        c.cancel("w4", i)
    for job in c.reserve("w4", max=30):
        if job.payload % 2 == 0:
            c.ack("w4", job.receipt, result=job.payload)
        else:
            c.nack("w4", job.receipt, error="odd")
    for n, (t, box) in enumerate(waits):
        t.join()
        info = box["value"]
        want = "cancelled" if n % 3 == 0 else "completed" if n % 2 == 0 else "dead"
        assert info.state == want, (n, info)
        if want == "completed":
            assert info.result == n
    assert open_waits(server.url) == 0


def test_a_wait_by_key_waits_for_the_job_the_key_named_when_it_began(server, monkeypatch):
    # Found by a hostile try: each 60 s turn (and each retry) looked the key up again, so a wait
    # whose job was cancelled and whose key was taken by a new job meanwhile answered the new one.
    import delayq.client as client_module

    monkeypatch.setattr(client_module, "WAIT_MAX_MS", 100)  # turns of 100 ms instead of 60 s
    c = Client(server.url)
    made = c.enqueue("w6", "first", key="K", delay="1h")
    asked = []
    real_call = c._call

    def recording_call(method, path, body=None, **kw):
        asked.append((path, dict(kw.get("query") or {})))
        return real_call(method, path, body, **kw)

    monkeypatch.setattr(c, "_call", recording_call)
    info = c.wait("w6", key="K", timeout="350ms")
    assert info.id == made.id and info.state == "scheduled"
    assert len(asked) >= 3 and asked[0][1].get("key") == "K"
    assert all(path.endswith("/jobs/" + made.id) and "key" not in q for path, q in asked[1:]), asked


def test_a_wait_outlives_a_server_killed_and_started_again(tmp_path):
    from conftest import Server

    s = Server(tmp_path / "data", ["--durability", "sync"])
    try:
        c = Client(s.url)
        made = c.enqueue("w5", "x")
        job = c.reserve("w5", lease="10m")[0]
        t, box = in_thread(c.wait, "w5", made.id, "30s")
        await_open_waits(s.url, 1)
        s.kill()
        s.restart()
        await_open_waits(s.url, 1)  # the client asked the new server again
        Client(s.url).ack("w5", job.receipt, result="after the restart")
        t.join()
        assert box["value"].state == "completed" and box["value"].result == "after the restart"
    finally:
        s.stop()


def test_a_wait_on_a_full_server_answers_the_job_as_it_is_at_its_timeout(tmp_path):
    # Found by a hostile try of the Go client (the same rule): the wait gave up with Overloaded
    # before its timeout; asked again until then, its last turn a plain read (never a 429).
    from conftest import Server

    s = Server(tmp_path / "data", ["--max-waiting", "1"])
    try:
        c = Client(s.url)
        made = c.enqueue("full", 1, delay="1h")
        in_thread(Client(s.url).reserve, "other", wait="15s")  # takes the one room
        await_open_waits(s.url, 1)
        start = time.monotonic()
        info = c.wait("full", made.id, "1500ms")
        assert info.state == "scheduled" and time.monotonic() - start >= 1.4
    finally:
        s.stop()


def test_a_proxys_bad_gateway_is_unavailable_and_a_wait_asks_again():
    """A stand-in for a reverse proxy (docs/security.md) in front of a delayq that restarts: 502
    twice, then the job, completed. A 502 or 504 was a plain DelayqError: a wait gave up at once
    and a worker's ack was not sent again."""
    import http.server
    import json

    asked = []

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(self.path)
            if len(asked) <= 2:
                self._answer(502, b"<html><title>502 Bad Gateway</title></html>", "text/html")
                return
            job = {"id": "01HZZZZZZZZZZZZZZZZZZZZZZZ", "queue": "p", "state": "completed", "payload": 1, "result": 7}
            self._answer(200, json.dumps(job).encode(), "application/json")

        def do_POST(self):  # noqa: N802
            self._answer(504, b"", "text/plain")

        def _answer(self, status, body, kind):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        c = Client(f"http://127.0.0.1:{proxy.server_address[1]}")
        job = c.wait("p", "01HZZZZZZZZZZZZZZZZZZZZZZZ", timeout="30s")
        assert (job.state, job.result, len(asked)) == ("completed", 7, 3)
        with pytest.raises(delayq.Unavailable) as gateway_timeout:
            c.ack("p", "a-receipt")
        assert gateway_timeout.value.status == 504
    finally:
        proxy.shutdown()
        proxy.server_close()
