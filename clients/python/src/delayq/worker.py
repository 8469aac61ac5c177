"""Worker: runs a handler for each job of a queue, ``concurrency`` at a time.

The handler runs on one of the worker's threads (one per concurrency slot), with the Job. When
it returns, the job is acked, and what it returned (not None) becomes the job's result, kept with
it while the queue keeps completed jobs (``keep_completed_ms``); when it raises, the job is nacked with the exception's text as its
last_error, and the queue's back-off decides when it comes back (or it goes dead). While it runs,
the lease is touched every third of its length, so a handler may take longer than the lease.
``run()`` blocks until ``stop()``, or SIGTERM/SIGINT when called on the main thread: then no
new job is taken, the running handlers finish and are settled, and ``run()`` returns.

Jobs come by a push stream (``Client.stream``) unless ``stream=False``: one connection on which
the server sends each job as it comes due, at most ``concurrency + prefetch`` unacknowledged at
a time, and acks go back in batches (one request per ``ack_delay`` at most). A server without
streams (404) gets long-polled reserves instead, as does ``stream=False``. When the stream
breaks, its store cannot serve or its server stops, the worker opens it again after a pause and
gives back the jobs it had prefetched and not started (``release``: no attempt used). A job the
server hands out again while its handler still runs here (the stream broke: the server took back
its deliveries) is not run twice: the running handler's outcome settles the new delivery.

A refusal no retry can mend (401, 403, 400: a wrong token, a bad option or queue name) stops the
worker, and ``run()`` raises it.
"""
from __future__ import annotations

import queue as queues
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .client import BatchResult, Client, Job, _json_body
from .durations import Duration, to_ms
from .errors import DelayqError, Forbidden, InvalidArgument, LeaseExpired, NotFound, Unauthorized
from .stream import JobStream

Handler = Callable[[Job], Any]

# A reserve waits at most this long at a time, so that a stop is seen within it.
_POLL_MS = 5_000
# A result is at most this many bytes of JSON (the server's limit); acks carry at most about
# _MAX_ACK_BYTES of results per request (its body limit is 16 MiB).
_MAX_RESULT = 65536
_MAX_ACK_BYTES = 8 << 20
# How often an idle handler thread looks at the stop flag.
_IDLE_S = 0.2
# Longest window a stream may ask for (the server's limit).
_MAX_IN_FLIGHT = 1000
# Refusals no retry mends: the worker stops and run() raises them.
_FATAL = (Unauthorized, Forbidden, InvalidArgument)


class Worker:
    def __init__(self, client: Client, queue: str, handler: Handler, *, concurrency: int = 1,
                 lease: Optional[Duration] = None, wait: Duration = "20s",
                 on_error: Optional[Callable[[Job, BaseException], None]] = None, stream: bool = True,
                 prefetch: Optional[int] = None, ack_delay: Duration = "2ms") -> None:
        if concurrency < 1 or concurrency > _MAX_IN_FLIGHT:
            raise ValueError(f"concurrency must be 1..{_MAX_IN_FLIGHT}, not {concurrency}")
        prefetch = concurrency if prefetch is None else prefetch
        if prefetch < 0:
            raise ValueError(f"prefetch must be 0 or more, not {prefetch}")
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.max_in_flight = min(_MAX_IN_FLIGHT, concurrency + prefetch)
        self.lease_ms = to_ms(lease, "lease") if lease is not None else None
        self._queue_lease: Tuple[Optional[int], float] = (None, 0.0)  # the queue's lease_ms as last read, and when
        self.wait_ms = max(1, min(to_ms(wait, "wait"), _POLL_MS))
        self.ack_delay_s = to_ms(ack_delay, "ack_delay") / 1000
        self.on_error = on_error
        # "stream" or "reserve": how jobs come now ("reserve" after a server without streams).
        self.delivery = "stream" if stream else "reserve"
        self.acked = 0
        self.nacked = 0
        self.errors = 0  # calls to the server that failed (retried after a pause)
        # Deliveries of a job whose handler was running here, settled by that handler (not run again).
        self.redelivered = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        # Job id -> its running handler's bookkeeping: the receipt to settle with (the newest
        # delivery of the job), the lease, when to touch it next.
        self._running: Dict[str, Dict[str, Any]] = {}
        # Stream deliveries read but not started: (stream generation, job, ms it was read at).
        self._inbox: "queues.Queue[List[Any]]" = queues.Queue()
        # Job id -> its entry in the inbox: a newer delivery of a queued job (its lease ran out
        # while it waited) replaces the older in place, so that the job runs once.
        self._queued: Dict[str, List[Any]] = {}
        self._stream: Optional[JobStream] = None
        self._generation = 0  # of the stream open now; older deliveries were given back
        self._acks: List[Tuple[str, Any, int, Job]] = []  # (receipt, result, its bytes, job) for the next batch
        self._acks_ready = threading.Condition(self._lock)
        self._handlers_done = False
        self._unstarted: List[Tuple[str, float]] = []  # (receipt, lease deadline) to give back
        self._failed: Optional[BaseException] = None  # what ended the stream's reader, for run() to raise

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
            self._run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _run(self) -> None:
        streaming = self.delivery == "stream"
        threads = [threading.Thread(target=self._loop, name=f"delayq-worker-{i}", daemon=True)
                   for i in range(self.concurrency)]
        keeper = threading.Thread(target=self._keep_leases, name="delayq-keepalive", daemon=True)
        reader = threading.Thread(target=self._read_or_stop, name="delayq-stream", daemon=True)
        acker = threading.Thread(target=self._send_acks, name="delayq-acks", daemon=True)
        helpers = [keeper, reader, acker] if streaming else [keeper]
        for t in threads + helpers:
            t.start()
        # Joined with a timeout so that the main thread still sees signals.
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(_IDLE_S)
        self.stop()  # (they end only when stopping, or after a failure that stopped the worker)
        # Every handler is settled; the acks go out before the stream ends, since ending it gives
        # back each delivery not yet acked.
        with self._lock:
            self._handlers_done = True
            self._acks_ready.notify_all()
        if streaming:
            acker.join()
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
        for t in helpers:
            t.join()
        if self._failed is not None:
            raise self._failed

    # --- taking jobs ---

    def _loop(self) -> None:
        try:
            self._take_jobs()
        except BaseException as e:  # a bug, or a handler's BaseException: stop, and run() raises it
            self._fail(e)

    def _take_jobs(self) -> None:
        while not self._stop.is_set():
            if self.delivery == "stream":
                self._take_streamed()
                continue
            try:
                jobs = self.client.reserve(self.queue, max=1, wait=self.wait_ms, lease=self.lease_ms)
            except _FATAL as e:
                self._fail(e)
                return
            except DelayqError:
                self.errors += 1
                self._stop.wait(1.0)  # the server is down or refusing: try again shortly
                continue
            for job in jobs:
                lease = self._lease(self._queue_lease_ms(), job, time.time() * 1000)
                with self._lock:
                    running = self._running.get(job.id)
                    if running is not None:  # delivered again while its handler runs here: not run twice
                        running["receipt"] = job.receipt
                        self.redelivered += 1
                        continue
                    book = self._start(job, lease)
                self._handle(job, book, batched=False)

    def _take_streamed(self) -> None:
        try:
            entry = self._inbox.get(timeout=_IDLE_S)
        except queues.Empty:
            return
        known = self._queue_lease_ms()  # a request, maybe: not under the lock
        with self._lock:
            generation, job, read_at = entry  # under the lock: _read replaces a queued delivery in place
            if self._queued.get(job.id) is entry:
                del self._queued[job.id]
            if generation != self._generation or self._stop.is_set():
                # Its stream ended, or the worker stops: given back unused.
                self._unstarted.append((job.receipt, job.lease_deadline))
                return
            running = self._running.get(job.id)
            if running is not None:  # delivered again while queued here (see _read)
                running["receipt"] = job.receipt
                self.redelivered += 1
                return
            book = self._start(job, self._lease(known, job, read_at))  # in the same hold as the check
        self._handle(job, book, batched=True)

    def _fail(self, error: BaseException) -> None:
        if self._failed is None:
            self._failed = error
        self.stop()

    def _read_or_stop(self) -> None:
        try:
            self._read()
        except BaseException as e:  # a bug, or a queue name the client refuses: stop, and run() raises it
            self._fail(e)
        finally:
            self._give_back(final=True)

    def _give_back(self, final: bool = False) -> None:
        """Releases the stream deliveries no handler started: the server may still hold them
        leased (it does after it stopped or restarted). While it cannot be reached they are kept
        for the next try, as long as their leases hold."""
        while True:  # what an ended stream queued and no handler took
            try:
                entry = self._inbox.get_nowait()
            except queues.Empty:
                break
            with self._lock:
                job = entry[1]
                if self._queued.get(job.id) is entry:
                    del self._queued[job.id]
                self._unstarted.append((job.receipt, job.lease_deadline))
        with self._lock:
            now = time.time() * 1000
            held = [(r, d) for r, d in self._unstarted if not d or d > now]  # a lease over: nothing to give
            batch, self._unstarted = held[:1000], held[1000:]
        if not batch:
            return
        try:
            self.client.release(self.queue, [r for r, _ in batch])
        except DelayqError:
            self.errors += 1
            if not final:
                with self._lock:
                    self._unstarted.extend(batch)

    def _read(self) -> None:
        """The stream's reader: opens it, queues what comes, opens it again when it breaks."""
        while not self._stop.is_set():
            self._give_back()
            try:
                stream = self.client.stream(self.queue, max_in_flight=self.max_in_flight, lease=self.lease_ms)
            except NotFound:
                self.delivery = "reserve"  # a server without streams: the handler threads reserve
                return
            except _FATAL as e:
                self._fail(e)
                return
            except DelayqError:
                self.errors += 1
                self._stop.wait(1.0)
                continue
            with self._lock:
                if self._stop.is_set():
                    stream.close()
                    return
                self._stream = stream
                self._generation += 1
                generation = self._generation
            try:
                for job in stream:
                    with self._lock:
                        running = self._running.get(job.id)
                        if running is not None:
                            # Delivered again while its handler runs here (the last stream broke and
                            # the server took the delivery back): that handler's outcome settles
                            # this delivery, the newest.
                            running["receipt"] = job.receipt
                            self.redelivered += 1
                            continue
                        queued = self._queued.get(job.id)
                        if queued is not None and queued[0] == generation:
                            queued[1:] = [job, time.time() * 1000]  # a newer delivery of a queued job
                            continue
                        entry = [generation, job, time.time() * 1000]
                        self._queued[job.id] = entry
                    self._inbox.put(entry)
            except DelayqError:
                self.errors += 1
                self._stop.wait(1.0)
            finally:
                with self._lock:
                    if self._stream is stream:
                        self._stream = None
                    self._generation += 1  # what it queued and nobody started is given back
                stream.close()

    # --- settling ---

    def _queue_lease_ms(self) -> Optional[float]:
        """The lease a delivery gets: ``lease``, or the queue's lease_ms, read from its config at
        most every 10 s (as the C++ worker does); None while the config cannot be read. Not the
        delivery's lease_deadline less this clock: that is the server's clock, and with this one
        20 s behind, a touch came after the lease had run out (a hostile try of the Java worker saw
        the job run by another consumer meanwhile)."""
        if self.lease_ms is not None:
            return self.lease_ms
        known, read_at = self._queue_lease
        if known is None or time.monotonic() - read_at > 10:
            try:
                ms = self.client.config(self.queue).get("lease_ms")
                if isinstance(ms, int) and ms > 0:
                    known = ms
                    self._queue_lease = (known, time.monotonic())
            except DelayqError:
                self.errors += 1
        return known

    @staticmethod
    def _lease(known: Optional[float], job: Job, received_ms: float) -> float:
        """``known`` (_queue_lease_ms), or while the config cannot be read the delivery's deadline
        less this clock; at least a second."""
        if known is None:
            known = job.lease_deadline - received_ms if job.lease_deadline else 30_000
        return max(1000, known)

    def _start(self, job: Job, lease: float) -> Dict[str, Any]:
        """Under the lock: the job's handler runs from now on (the keep-alive touches its lease)."""
        book = {"receipt": job.receipt, "lease": lease, "next": time.time() * 1000 + lease / 3}
        self._running[job.id] = book
        return book

    def _result_of(self, job: Job, value: Any) -> Tuple[Any, int]:
        """A handler's return value as the job's result and its size: None when it has none, or
        one the server would refuse (not JSON, over 64 KiB), which is counted in ``errors`` and
        given to ``on_error``; the job is acked without it (its work is done: a refused ack would
        only run it again)."""
        if value is None:
            return None, 0
        try:
            size = len(_json_body(value))
            if size > _MAX_RESULT:
                raise ValueError(f"the result of job {job.id} is {size} bytes of JSON; at most {_MAX_RESULT} are kept")
            return value, size
        except (TypeError, ValueError) as e:
            self._result_refused(job, e)
            return None, 0

    def _result_refused(self, job: Job, error: BaseException) -> None:
        """A result that cannot be kept (here, or refused by the server): counted and reported;
        the job is acked without it."""
        self.errors += 1
        if self.on_error:
            try:
                self.on_error(job, error)
            except BaseException as raised:  # an on_error that raised: the worker stops, run() raises it
                self._fail(raised)

    def _handle(self, job: Job, book: Dict[str, Any], batched: bool) -> None:
        returned: Any = None
        try:
            returned = self.handler(job)
            error: Optional[BaseException] = None
        except Exception as e:  # the handler's failure is the job's, not the worker's
            error = e
        finally:
            with self._lock:
                if self._running.get(job.id) is book:
                    del self._running[job.id]
                receipt = book["receipt"]  # the newest delivery of the job
        result, size = self._result_of(job, returned) if error is None else (None, 0)
        if error is None and batched:
            with self._lock:
                self._acks.append((receipt, result, size, job))
                self._acks_ready.notify()
            return
        try:
            if error is None:
                self._ack_batch([(receipt, result, size, job)])
            else:
                text = f"{type(error).__name__}: {error}"[:4000]
                self.client.nack(self.queue, receipt, error=text)
                self.nacked += 1
                if self.on_error:
                    self.on_error(job, error)
        except (LeaseExpired, NotFound):
            pass  # the job was delivered again meanwhile, or deleted: it is not ours to settle
        except DelayqError:
            self.errors += 1  # unsettled: the lease runs out and the job is delivered again
        except BaseException as e:  # an on_error that raised: the worker stops, run() raises it
            self._fail(e)

    def _send_acks(self) -> None:
        """Acks what the handlers finished, a batch per ``ack_delay`` at most; returns once the
        handlers are done and every ack went out."""
        while True:
            with self._lock:
                while not self._acks and not self._handlers_done:
                    self._acks_ready.wait()
                if not self._acks and self._handlers_done:
                    return
            time.sleep(self.ack_delay_s)  # the batching timer: more acks join meanwhile
            with self._lock:
                n, size = 0, 0  # at most 1000 acks and _MAX_ACK_BYTES of results (the first always)
                while n < min(1000, len(self._acks)):
                    size += self._acks[n][2]
                    if n > 0 and size > _MAX_ACK_BYTES:
                        break
                    n += 1
                batch, self._acks = self._acks[:n], self._acks[n:]
            try:
                self._ack_batch(batch)
            except Exception as e:  # a bug: the worker stops, run() raises it (the acks go on)
                self._fail(e)

    def _ack_batch(self, batch: List[Tuple[str, Any, int, Job]]) -> None:
        """Acks (receipt, result, its size, job) entries in one request. A request the server
        refuses for its results (400: one it cannot keep, such as one nested too deep; 413: a body
        over its --max-body) is split in halves, down to the ack whose result it refuses, which is
        reported and acked without it: one job's result never costs the others their acks."""
        try:
            result = self.client.ack(self.queue, [(receipt, res) for receipt, res, _, _ in batch])
        except InvalidArgument as e:
            if all(res is None for _, res, _, _ in batch):
                self.errors += 1  # unsettled: the leases run out and the jobs are delivered again
            elif len(batch) > 1:
                self._ack_batch(batch[:len(batch) // 2])
                self._ack_batch(batch[len(batch) // 2:])
            else:
                receipt, _, _, job = batch[0]
                self._result_refused(job, e)
                self._ack_batch([(receipt, None, 0, job)])
            return
        except DelayqError:
            self.errors += 1  # unsettled: the leases run out and the jobs are delivered again
            return
        assert isinstance(result, BatchResult)
        self.acked += result.done
        self.errors += sum(1 for e in result.failed if not isinstance(e, (LeaseExpired, NotFound)))

    def progress(self, job: Job, value: Any) -> None:
        """From a handler: reports how far it has got with ``job`` (any JSON value up to 4 KiB),
        shown on the job while it runs; it touches the lease too. Raises LeaseExpired or NotFound
        when the job is no longer this handler's."""
        with self._lock:
            book = self._running.get(job.id)
        if book is None:
            raise ValueError(f"job {job.id} is not running in this worker")
        self.client.touch(self.queue, book["receipt"], lease=int(book["lease"]), progress=value)
        book["next"] = time.time() * 1000 + book["lease"] / 3

    def _keep_leases(self) -> None:
        while True:
            with self._lock:
                due = [(r, b) for r, b in self._running.items() if b["next"] <= time.time() * 1000]
                idle = not self._running
            if idle and self._stop.is_set():
                return
            for _, book in due:
                try:
                    self.client.touch(self.queue, book["receipt"], lease=int(book["lease"]))
                except (LeaseExpired, NotFound):
                    pass  # settled meanwhile (or delivered again): nothing to keep alive
                except DelayqError:
                    self.errors += 1
                book["next"] = time.time() * 1000 + book["lease"] / 3
            time.sleep(0.05)  # the keep-alive's tick (a timer, not a synchronisation)
