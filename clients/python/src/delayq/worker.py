"""Worker: runs a handler for each job of a queue, ``concurrency`` at a time.

The handler runs on one of the worker's threads (one per concurrency slot), with the Job. When
it returns, the job is acked; when it raises, the job is nacked with the exception's text as its
last_error, and the queue's back-off decides when it comes back (or it goes dead). While it runs,
the lease is touched every third of its length, so a handler may take longer than the lease.
``run()`` blocks until ``stop()``, or SIGTERM/SIGINT when called on the main thread: then no
new job is taken, the running handlers finish and are settled, and ``run()`` returns.
"""
from __future__ import annotations

import signal
import threading
import time
from typing import Any, Callable, Dict, Optional

from .client import Client, Job
from .durations import Duration, to_ms
from .errors import DelayqError, LeaseExpired, NotFound

Handler = Callable[[Job], Any]

# A reserve waits at most this long at a time, so that a stop is seen within it.
_POLL_MS = 5_000


class Worker:
    def __init__(self, client: Client, queue: str, handler: Handler, *, concurrency: int = 1,
                 lease: Optional[Duration] = None, wait: Duration = "20s",
                 on_error: Optional[Callable[[Job, BaseException], None]] = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.lease_ms = to_ms(lease, "lease") if lease is not None else None
        self.wait_ms = max(1, min(to_ms(wait, "wait"), _POLL_MS))
        self.on_error = on_error
        self.acked = 0
        self.nacked = 0
        self.errors = 0  # calls to the server that failed (retried after a pause)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._running: Dict[str, Dict[str, Any]] = {}  # receipt -> lease bookkeeping

    def stop(self) -> None:
        """Takes no new job; run() returns once the running handlers are done. Any thread."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        try:
            threads = [threading.Thread(target=self._loop, name=f"delayq-worker-{i}", daemon=True)
                       for i in range(self.concurrency)]
            keeper = threading.Thread(target=self._keep_leases, name="delayq-keepalive", daemon=True)
            for t in threads:
                t.start()
            keeper.start()
            # Joined with a timeout so that the main thread still sees signals.
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
            keeper.join()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                jobs = self.client.reserve(self.queue, max=1, wait=self.wait_ms, lease=self.lease_ms)
            except DelayqError:
                self.errors += 1
                self._stop.wait(1.0)  # the server is down or refusing: try again shortly
                continue
            for job in jobs:
                self._handle(job)

    def _handle(self, job: Job) -> None:
        now = time.time() * 1000
        lease = max(1000, job.lease_deadline - now) if job.lease_deadline else 30_000
        with self._lock:
            self._running[job.receipt] = {"lease": lease, "next": now + lease / 3}
        try:
            self.handler(job)
            error: Optional[BaseException] = None
        except Exception as e:  # the handler's failure is the job's, not the worker's
            error = e
        finally:
            with self._lock:
                self._running.pop(job.receipt, None)
        try:
            if error is None:
                self.client.ack(self.queue, job.receipt)
                self.acked += 1
            else:
                text = f"{type(error).__name__}: {error}"[:4000]
                self.client.nack(self.queue, job.receipt, error=text)
                self.nacked += 1
                if self.on_error:
                    self.on_error(job, error)
        except (LeaseExpired, NotFound):
            pass  # the job was delivered again meanwhile, or deleted: it is not ours to settle
        except DelayqError:
            self.errors += 1  # unsettled: the lease runs out and the job is delivered again

    def _keep_leases(self) -> None:
        while True:
            with self._lock:
                due = [(r, b) for r, b in self._running.items() if b["next"] <= time.time() * 1000]
                idle = not self._running
            if idle and self._stop.is_set():
                return
            for receipt, book in due:
                try:
                    self.client.touch(self.queue, receipt, lease=int(book["lease"]))
                except (LeaseExpired, NotFound):
                    pass  # settled meanwhile (or delivered again): nothing to keep alive
                except DelayqError:
                    self.errors += 1
                book["next"] = time.time() * 1000 + book["lease"] / 3
            time.sleep(0.05)  # the keep-alive's tick (a timer, not a synchronisation)
