"""Push delivery from Python: Client.stream, and the Worker on a stream (its default), against a
real server; its fallback to reserve, a server killed under it, a stopped worker's prefetched
jobs, and hostile stream lines from a fake server."""
from __future__ import annotations

import re
import socket
import threading
import time
import urllib.request

import pytest

from delayq import Client, DelayqError, NotFound, Unauthorized, Worker


def requests_to(server, suffix: str) -> int:
    text = urllib.request.urlopen(server.url + "/metrics").read().decode()
    return sum(int(float(m.group(1))) for m in
               re.finditer(r'delayq_http_requests_total\{route="[^"]*' + re.escape(suffix) + r'"[^}]*\} (\S+)', text))


def test_a_stream_yields_due_jobs_and_closing_it_gives_the_unacked_back_unused(server):
    c = Client(server.url)
    ids = [c.enqueue("s", {"n": n}).id for n in range(3)]
    with c.stream("s", max_in_flight=2) as jobs:
        it = iter(jobs)
        first, second = next(it), next(it)
        assert [first.id, second.id] == ids[:2] and first.attempt == 1
        assert c.stats("s")["reserved"] == 2  # the window: the third waits for room
        assert c.ack("s", first.receipt) == 1
        third = next(it)  # the ack made room
        assert third.id == ids[2]
    # Closed with two unacked: ready again, no attempt used (once the server saw the close).
    wait_for(lambda: c.stats("s")["ready"] == 2, "the server to take the deliveries back")
    assert c.stats("s")["reserved"] == 0
    again = c.reserve("s", max=2)
    assert sorted(j.id for j in again) == sorted(ids[1:]) and all(j.attempt == 1 for j in again)


def test_the_worker_streams_by_default_and_acks_in_batches(server):
    c = Client(server.url)
    c.enqueue_batch("b", [{"payload": n} for n in range(300)])
    seen = []
    lock = threading.Lock()
    worker = None

    def handle(job):
        with lock:
            seen.append(job.payload)
            if len(seen) == 300:
                worker.stop()

    worker = Worker(c, "b", handle, concurrency=4)
    worker.run()
    assert worker.delivery == "stream"
    assert sorted(seen) == list(range(300))
    assert worker.acked == 300 and worker.errors == 0
    s = c.stats("b")
    assert s["counters"]["acked"] == 300 and s["ready"] == 0 and s["reserved"] == 0
    assert requests_to(server, "/reserve") == 0
    assert requests_to(server, "/ack") < 300  # batched


def test_a_stopped_worker_settles_what_ran_and_gives_back_what_it_prefetched(server):
    c = Client(server.url)
    c.enqueue_batch("p", [{"payload": n} for n in range(10)])
    worker = None
    ran = []

    def handle(job):
        ran.append(job.payload)
        worker.stop()

    worker = Worker(c, "p", handle, concurrency=1, prefetch=5)
    worker.run()
    assert len(ran) == 1 and worker.acked == 1
    s = c.stats("p")
    assert s["counters"]["acked"] == 1 and s["reserved"] == 0 and s["ready"] == 9
    assert all(j.attempt == 1 for j in c.reserve("p", max=9))  # given back unused


def test_a_server_without_streams_gets_reserves(server):
    class OldServer(Client):
        def stream(self, *args, **kwargs):
            raise NotFound("POST /v1/queues/q/stream is not a route", "not_found", 404)

    c = OldServer(server.url)
    c.enqueue_batch("o", [{"payload": n} for n in range(5)])
    seen = []
    worker = None

    def handle(job):
        seen.append(job.payload)
        if len(seen) == 5:
            worker.stop()

    worker = Worker(c, "o", handle, concurrency=2, wait="200ms")
    worker.run()
    assert worker.delivery == "reserve" and sorted(seen) == list(range(5))
    assert c.stats("o")["counters"]["acked"] == 5


def test_the_worker_streams_again_after_its_server_is_killed(server):
    c = Client(server.url)
    c.enqueue_batch("k", [{"payload": n} for n in range(20)])
    seen = set()
    lock = threading.Lock()
    killed = threading.Event()
    worker = None

    def handle(job):
        with lock:
            seen.add(job.payload)
            if len(seen) == 5 and not killed.is_set():
                killed.set()
                server.kill()
                server.restart()  # the same port and data
            if len(seen) == 20:
                worker.stop()

    worker = Worker(c, "k", handle, concurrency=2, lease="2s")
    t = threading.Thread(target=worker.run)
    t.start()
    t.join(120)
    assert not t.is_alive(), f"the worker saw {sorted(seen)}"
    assert seen == set(range(20))
    assert worker.errors >= 1  # the broken stream (and acks sent to a dead server)
    s = c.stats("k")
    assert s["ready"] == 0 and s["scheduled"] == 0


def listen(on_connection) -> tuple:
    """A loopback listener that hands each connection to `on_connection` on a thread of its own;
    its socket and URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            on_connection(conn)

    threading.Thread(target=accept, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


class FakeServer:
    """Answers every request with `head` and `body`, then closes: a hostile or broken server."""

    def __init__(self, body: bytes, head: bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                 b"Content-Type: application/x-ndjson\r\n\r\n") -> None:
        self.answer = head + body
        self.sock, self.url = listen(self._answer)

    def _answer(self, conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(self.answer)
        conn.close()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@pytest.mark.parametrize("body", [
    chunk(b"not json\n"),
    chunk(b"[1,2,3]\n"),
    chunk(b'{"id": "x"}\n'),  # no receipt
    chunk(b'{"error": {"code": "unavailable", "message": "the store is down"}}\n') + b"0\r\n\r\n",
    chunk(b'{"heartbeat": 1}\n') + b"0\r\n\r\n",  # ends without an error: the server stopped
    chunk(b'{"heartbeat": 1}') + b"zz\r\n",  # a broken chunk
    b"",  # closed before a line
], ids=["not-json", "not-object", "no-receipt", "error-line", "ended", "broken-chunk", "closed"])
def test_hostile_stream_lines_are_errors_not_jobs(body):
    fake = FakeServer(body)
    with pytest.raises(DelayqError) as caught:
        with Client(fake.url).stream("q") as jobs:
            list(jobs)
    assert fake.url in str(caught.value) or "store is down" in str(caught.value)


def test_a_refused_stream_raises_the_server_error():
    body = b'{"error":{"code":"resource_exhausted","message":"too many waiting"}}'
    fake = FakeServer(body, head=b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: %d\r\n\r\n" % len(body))
    with pytest.raises(DelayqError) as caught:
        Client(fake.url).stream("q")
    assert caught.value.code == "resource_exhausted"


def test_the_worker_counts_a_hostile_stream_and_keeps_trying():
    fake = FakeServer(chunk(b"not json\n"))
    worker = Worker(Client(fake.url), "q", lambda job: None)
    t = threading.Thread(target=worker.run)
    t.start()
    deadline = time.monotonic() + 30
    while worker.errors < 2 and time.monotonic() < deadline:
        t.join(0.05)  # waits for the worker's count, with a deadline
    assert worker.errors >= 2
    worker.stop()
    t.join(30)
    assert not t.is_alive() and worker.acked == 0


def test_window_and_lease_bounds_are_refused_by_the_server(server):
    c = Client(server.url)
    for bad in (0, 1001, -1, 2**63):
        with pytest.raises(DelayqError) as caught:
            c.stream("q", max_in_flight=bad)
        assert "max_in_flight" in str(caught.value)
    with pytest.raises(ValueError):
        Worker(c, "q", lambda job: None, concurrency=1001)
    with pytest.raises(ValueError):
        Worker(c, "q", lambda job: None, prefetch=-1)


def test_a_queue_name_the_client_refuses_ends_run_with_its_error(server):
    worker = Worker(Client(server.url), "", lambda job: None)
    with pytest.raises(ValueError, match="queue"):
        worker.run()


class CuttingProxy:
    """A TCP proxy to the server that can cut its stream connections (a proxy's idle timeout, a
    network blip), leaving the others alone."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.streams = []
        self.sock, self.url = listen(self._connect)

    def _connect(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
        threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, request_side: bool) -> None:
        first = True
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if first and request_side and b"/stream " in data:
                self.streams.append((src, dst))
            first = False
            if not data:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            try:
                dst.sendall(data)
            except OSError:
                return

    def cut_streams(self) -> None:
        for pair in self.streams:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.streams.clear()


def wait_for(condition, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)  # polls a condition the server reports, with a deadline


def test_a_job_handed_out_again_while_its_handler_runs_is_not_run_twice(server):
    proxy = CuttingProxy(server.port)
    c = Client(proxy.url)
    c.enqueue("cut", "only")
    started = threading.Event()
    release = threading.Event()
    runs = []

    def handle(job):
        runs.append(job.attempt)
        started.set()
        assert release.wait(30)

    worker = Worker(c, "cut", handle, concurrency=1)
    t = threading.Thread(target=worker.run)
    t.start()
    assert started.wait(30)
    proxy.cut_streams()  # the server gives the running job back and the new stream brings it again
    direct = Client(server.url)
    wait_for(lambda: worker.redelivered == 1, "the job to be delivered again")
    release.set()
    wait_for(lambda: direct.stats("cut")["counters"]["acked"] == 1, "the ack")
    worker.stop()
    t.join(30)
    assert runs == [1], "the job ran once"
    s = direct.stats("cut")
    assert s["ready"] == 0 and s["reserved"] == 0


def test_prefetched_jobs_are_given_back_after_the_server_restarts(server):
    c = Client(server.url)
    c.set_config("restart", max_attempts=1, lease_ms=6000)
    c.enqueue_batch("restart", [{"payload": n} for n in range(6)])
    first_two = threading.Barrier(3)
    restarted = threading.Event()
    seen = []
    lock = threading.Lock()
    worker = None

    def handle(job):
        with lock:
            seen.append(job.payload)
            n = len(seen)
        if n <= 2:
            first_two.wait(30)
            assert restarted.wait(30)
        if n == 6:
            worker.stop()

    worker = Worker(c, "restart", handle, concurrency=2)  # a window of 4: 2 running, 2 prefetched
    t = threading.Thread(target=worker.run)
    t.start()
    first_two.wait(30)
    server.stop()  # SIGTERM: the stream ends, its deliveries stay leased
    server.start()
    restarted.set()
    t.join(60)
    assert not t.is_alive()
    assert sorted(seen) == list(range(6))
    s = c.stats("restart")
    assert s["dead"] == 0 and s["counters"]["acked"] == 6


@pytest.mark.parametrize("stream", [True, False])
def test_a_wrong_token_stops_the_worker_with_its_error(token_server, stream):
    worker = Worker(Client(token_server.url, token="wrong"), "q", lambda job: None, stream=stream)
    with pytest.raises(Unauthorized):
        worker.run()


def test_a_prefetched_job_whose_lease_ran_out_while_it_waited_runs_once(server):
    c = Client(server.url)
    c.enqueue_batch("slow", [{"payload": "a"}, {"payload": "b"}])
    runs = []
    worker = None

    def handle(job):
        runs.append(job.payload)
        if job.payload == "a":
            time.sleep(2.5)  # the work: longer than b's lease while b waits prefetched
        else:
            worker.stop()

    worker = Worker(c, "slow", handle, concurrency=1, prefetch=1, lease="1s")
    worker.run()
    assert runs == ["a", "b"], "b ran once, with its newest delivery"
    s = c.stats("slow")
    assert s["counters"]["acked"] == 2 and s["ready"] == 0 and s["reserved"] == 0


def test_an_on_error_that_raises_stops_the_worker_with_its_error(server):
    c = Client(server.url)
    c.enqueue("e", "x")

    def on_error(job, error):
        raise KeyError("a bug in the callback")

    def handle(job):
        raise RuntimeError("the job failed")

    with pytest.raises(KeyError, match="a bug in the callback"):
        Worker(c, "e", handle, on_error=on_error).run()
