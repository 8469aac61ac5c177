"""The delayq HTTP client: every operation of the API, as methods.

A Client is safe to share between threads: each thread keeps its own keep-alive connection.
Errors are raised as the exceptions of ``delayq.errors`` (``NotFound``, ``LeaseExpired``, ...).
"""
from __future__ import annotations

import base64
import datetime
import http.client
import json
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .durations import Duration, to_ms
from .errors import DelayqError, Overloaded, Unavailable, error_for
from .stream import QUIET_S, JobStream

Timestamp = Union[int, str, datetime.datetime]


# The states a wait for an outcome ends on (Client.wait), and the longest wait one request holds.
FINAL_STATES = ("completed", "dead", "cancelled")
WAIT_MAX_MS = 60_000


@dataclass
class EnqueueResult:
    id: str
    due_at: int  # epoch milliseconds
    duplicate: bool  # the key already named a live job: this is that job
    replaced: bool = False


@dataclass
class Job:
    """A delivery, as reserve hands it out. Settle it with ack, nack or touch and its receipt."""

    id: str
    receipt: str
    payload: Any  # the JSON value enqueued; bytes for a binary payload
    attempt: int
    due_at: int
    key: Optional[str] = None
    headers: Dict[str, str] = field(default_factory=dict)
    max_attempts: int = 0
    lease_deadline: int = 0  # epoch ms; touch before it
    priority: int = 0
    group: Optional[str] = None
    # W3C Trace Context of the producer (docs/http-api.md, "Trace context"): start the handler's
    # span with a link to it. Also in headers, under the same names.
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None


@dataclass
class JobInfo:
    """A job as get and the dead list show it."""

    id: str
    queue: str
    state: str  # scheduled | ready | reserved | dead | completed | cancelled (only a wait answers it)
    due_at: int
    attempt: int
    max_attempts: int
    payload: Any
    key: Optional[str] = None
    headers: Dict[str, str] = field(default_factory=dict)
    created_at: int = 0
    last_error: Optional[str] = None
    lease_deadline: Optional[int] = None
    dead_at: Optional[int] = None
    priority: int = 0
    group: Optional[str] = None
    traceparent: Optional[str] = None  # W3C Trace Context, as on Job
    tracestate: Optional[str] = None
    progress: Any = None  # while reserved: its delivery's last progress (Client.touch); else None
    completed_at: Optional[int] = None  # when completed: when it was acked
    result: Any = None  # when completed: the result its ack carried (Client.ack); else None


@dataclass
class JobPage:
    """One page of a listing (Client.jobs): ``next_cursor`` is None on the last page."""

    jobs: List[JobInfo]
    next_cursor: Optional[str]


@dataclass
class NackResult:
    state: str  # "scheduled" (retried at due_at) or "dead"
    due_at: int


@dataclass
class BatchResult:
    """A batch ack/nack/touch: not all-or-nothing. ``failed`` lists each receipt that failed,
    with its error."""

    done: int
    failed: List[DelayqError] = field(default_factory=list)
    failed_receipts: List[str] = field(default_factory=list)


def _json_body(body: Any) -> bytes:
    """A request body as the server reads it: UTF-8 as written (not \\u escapes, which made a
    progress of 2 047 "é" count 12 284 bytes against its 4 096), compact, and no NaN or Infinity,
    which JSON has not (a ValueError here rather than the server's "not valid JSON")."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _payload_of(obj: Mapping[str, Any]) -> Any:
    if "payload_base64" in obj:
        return base64.b64decode(obj["payload_base64"])
    return obj.get("payload")


def _job(obj: Mapping[str, Any]) -> Job:
    return Job(id=obj["id"], receipt=obj["receipt"], payload=_payload_of(obj), attempt=obj.get("attempt", 0),
               due_at=obj.get("due_at", 0), key=obj.get("key"), headers=dict(obj.get("headers") or {}),
               max_attempts=obj.get("max_attempts", 0), lease_deadline=obj.get("lease_deadline", 0),
               priority=obj.get("priority", 0), group=obj.get("group"), traceparent=obj.get("traceparent"),
               tracestate=obj.get("tracestate"))


def _job_info(obj: Mapping[str, Any]) -> JobInfo:
    return JobInfo(id=obj["id"], queue=obj.get("queue", ""), state=obj.get("state", ""), due_at=obj.get("due_at", 0),
                   attempt=obj.get("attempt", 0), max_attempts=obj.get("max_attempts", 0), payload=_payload_of(obj),
                   key=obj.get("key"), headers=dict(obj.get("headers") or {}), created_at=obj.get("created_at", 0),
                   last_error=obj.get("last_error"), lease_deadline=obj.get("lease_deadline"),
                   dead_at=obj.get("dead_at"), priority=obj.get("priority", 0), group=obj.get("group"),
                   traceparent=obj.get("traceparent"), tracestate=obj.get("tracestate"),
                   progress=obj.get("progress"), completed_at=obj.get("completed_at"), result=obj.get("result"))


def _when(body: Dict[str, Any], delay: Optional[Duration], delay_ms: Optional[int],
          deliver_at: Optional[Timestamp]) -> None:
    given = [n for n, v in (("delay", delay), ("delay_ms", delay_ms), ("deliver_at", deliver_at)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"give one of delay, delay_ms and deliver_at, not {' and '.join(given)}")
    if delay is not None:
        if isinstance(delay, str):
            body["delay"] = delay  # the server parses it, with the same grammar
        else:
            body["delay_ms"] = to_ms(delay, "delay")
    elif delay_ms is not None:
        body["delay_ms"] = to_ms(delay_ms, "delay_ms")
    elif deliver_at is not None:
        if isinstance(deliver_at, datetime.datetime):
            if deliver_at.tzinfo is None:
                raise ValueError("deliver_at is a naive datetime; give it a timezone (datetime.timezone.utc)")
            body["deliver_at"] = int(deliver_at.timestamp() * 1000)
        else:
            body["deliver_at"] = deliver_at


def job_body(payload: Any, *, delay: Optional[Duration] = None, delay_ms: Optional[int] = None,
             deliver_at: Optional[Timestamp] = None, key: Optional[str] = None,
             headers: Optional[Mapping[str, str]] = None, max_attempts: Optional[int] = None,
             replace: bool = False, key_ttl: Optional[Duration] = None,
             debounce: bool = False, priority: Optional[int] = None,
             group: Optional[str] = None, traceparent: Optional[str] = None,
             tracestate: Optional[str] = None) -> Dict[str, Any]:
    """The JSON object of one job, as enqueue and enqueue_batch send it. ``bytes`` payloads go
    as base64; anything else as its JSON value. ``traceparent`` and ``tracestate`` are the
    producer's W3C Trace Context (the server checks them)."""
    body: Dict[str, Any] = {}
    if isinstance(payload, (bytes, bytearray, memoryview)):
        body["payload_base64"] = base64.b64encode(bytes(payload)).decode("ascii")
    else:
        body["payload"] = payload
    _when(body, delay, delay_ms, deliver_at)
    if key is not None:
        body["key"] = key
    if headers:
        body["headers"] = dict(headers)
    if max_attempts is not None:
        body["max_attempts"] = max_attempts
    if replace:
        body["replace"] = True
    if debounce:
        body["debounce"] = True
    if key_ttl is not None:
        body["key_ttl_ms"] = to_ms(key_ttl, "key_ttl")
    if priority is not None:
        body["priority"] = priority
    if group is not None:
        body["group"] = group
    if traceparent is not None:
        body["traceparent"] = traceparent
    if tracestate is not None:
        body["tracestate"] = tracestate
    return body


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS that sends and checks ``server_name`` instead of the host it connects to."""

    def __init__(self, host: str, port: int, *, server_name: str, **kwargs) -> None:
        super().__init__(host, port, **kwargs)
        self._server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_name)


def _certificate_hint(error: BaseException) -> str:
    """What to do when the server refused this client's certificate (TLS 1.3 says so at the first
    read): else it reads like a network failure."""
    text = str(error).upper()
    if any(a in text for a in ("CERTIFICATE_REQUIRED", "UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_EXPIRED",
                               "CERTIFICATE_UNKNOWN")):
        return (" (the server refused this client's certificate, or wants one: give cert_file/key_file signed by a"
                " CA its --tls-client-ca names, valid now)")
    return ""


def _tls_context(ca_file: Optional[str], cert_file: Optional[str], key_file: Optional[str]) -> ssl.SSLContext:
    for name, value in (("ca_file", ca_file), ("cert_file", cert_file), ("key_file", key_file)):
        if value == "":
            raise ValueError(f"{name} is empty: give a PEM file, or leave it out (None)")
    if key_file and not cert_file:
        raise ValueError("key_file was given without cert_file: give the client certificate too, or neither")
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"cannot use ca_file {ca_file!r}: {e} (a PEM file of CAs is needed)") from e
    if cert_file:
        try:
            # password="" : an encrypted key is an error here, not a pass phrase prompt on the terminal.
            context.load_cert_chain(cert_file, key_file, password="")
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"cannot use cert_file {cert_file!r} / key_file {key_file!r}: {e} "
                             "(a PEM client certificate and its private key are needed)") from e
    return context


class Client:
    """A connection to a delayq server.

    ``url``: "http://127.0.0.1:7070" (or https://). ``token``: the server's bearer token, if it
    has one. ``timeout``: seconds for connecting and for each answer (a waiting reserve gets its
    wait on top). With https only: ``ca_file`` trusts the CAs in this PEM file instead of the
    system's; ``cert_file`` (and ``key_file``, if the key is not in it) is the client certificate
    for a server started with ``--tls-client-ca``; ``server_name`` is the name the server's
    certificate must carry when it is not the URL's host. TLS options with http:// are a
    ValueError, as is a file that cannot be used.
    """

    def __init__(self, url: str = "http://127.0.0.1:7070", token: Optional[str] = None, *,
                 timeout: float = 30.0, ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                 key_file: Optional[str] = None, server_name: Optional[str] = None) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"url {url!r} is not http://HOST:PORT or https://HOST:PORT")
        self.url = url.rstrip("/")
        self._https = parsed.scheme == "https"
        if not self._https and (ca_file or cert_file or key_file or server_name):
            raise ValueError(f"ca_file, cert_file, key_file and server_name are for https:// only, not {url!r}")
        self._host = parsed.hostname
        self._port = parsed.port or (443 if self._https else 80)
        self._token = token
        self._timeout = timeout
        self._ssl = _tls_context(ca_file, cert_file, key_file) if self._https else None
        self._server_name = server_name or self._host
        self._local = threading.local()

    # --- transport ---

    def _connection(self, fresh: bool) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and not fresh:
            return conn
        if conn is not None:
            conn.close()
        conn = self._new_connection(self._timeout)
        self._local.conn = conn
        self._local.used = False
        return conn

    def _new_connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return _HTTPSConnection(self._host, self._port, server_name=self._server_name, timeout=timeout,
                                    context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, method: str) -> Dict[str, str]:
        headers = {"Accept": "application/json"}
        if method in ("POST", "PUT", "PATCH"):
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    def close(self) -> None:
        """Closes this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, path: str, body: Optional[Any] = None, *, wait_s: float = 0,
              query: Optional[Mapping[str, Any]] = None) -> Any:
        if query:
            path += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else _json_body(body)
        headers = self._headers(method)
        for attempt in (0, 1):
            conn = self._connection(fresh=False)
            reused = getattr(self._local, "used", False)
            try:
                conn.timeout = self._timeout + wait_s
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                text = response.read()
                self._local.used = True
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self._connection(fresh=True)
                # A kept-alive connection the server closed while idle fails before any answer:
                # sent again once on a new connection. A new connection failing is an answer.
                if reused and attempt == 0:
                    continue
                raise Unavailable(f"{self.url} closed the connection: {e}{_certificate_hint(e)}", "unavailable") from e
            except (OSError, http.client.HTTPException) as e:
                self._connection(fresh=True)
                raise Unavailable(f"cannot reach {self.url}: {e}{_certificate_hint(e)}", "unavailable") from e
            if response.getheader("Connection", "").lower() == "close":
                self._connection(fresh=True)
            return self._answer(response.status, text)
        raise AssertionError("unreachable")

    @staticmethod
    def _answer(status: int, text: bytes) -> Any:
        try:
            value = json.loads(text) if text else None
        except ValueError:
            value = None
        if 200 <= status < 300:
            return value
        err = value.get("error") if isinstance(value, dict) else None
        if isinstance(err, dict):
            raise error_for(status, err.get("code"), err.get("message", ""))
        raise error_for(status, None, f"HTTP {status}: {text[:200].decode('utf-8', 'replace')}")

    @staticmethod
    def _q(queue: str) -> str:
        if not isinstance(queue, str) or not queue:
            raise ValueError("queue must be a non-empty string")
        return "/v1/queues/" + urllib.parse.quote(queue, safe="")

    def _job_path(self, queue: str, id: Optional[str], key: Optional[str]) -> tuple:
        if (id is None) == (key is None):
            raise ValueError("give the job's id or its key (one of them)")
        if id is not None:
            return self._q(queue) + "/jobs/" + urllib.parse.quote(id, safe=""), None
        return self._q(queue) + "/jobs", {"key": key}

    # --- jobs ---

    def enqueue(self, queue: str, payload: Any, *, delay: Optional[Duration] = None, delay_ms: Optional[int] = None,
                deliver_at: Optional[Timestamp] = None, key: Optional[str] = None,
                headers: Optional[Mapping[str, str]] = None, max_attempts: Optional[int] = None,
                replace: bool = False, key_ttl: Optional[Duration] = None,
                debounce: bool = False, priority: Optional[int] = None,
                group: Optional[str] = None, traceparent: Optional[str] = None,
                tracestate: Optional[str] = None) -> EnqueueResult:
        """Hands in one job, due after ``delay`` ("30m", ms, timedelta) or at ``deliver_at``
        (epoch ms, RFC 3339, aware datetime); due now without either. With a ``key`` naming a
        live job, nothing is added and ``duplicate`` is true (``replace=True`` rewrites it;
        ``debounce=True`` rewrites it and pushes it back, never earlier). ``key_ttl`` keeps the
        key taken that long after the job is acked or cancelled. ``priority`` (0-9) and ``group``
        (a tenant, say) order the ready jobs: groups take turns, higher priority first within one.
        ``traceparent``/``tracestate``: the producer's W3C Trace Context, handed to the consumer."""
        body = job_body(payload, delay=delay, delay_ms=delay_ms, deliver_at=deliver_at, key=key, headers=headers,
                        max_attempts=max_attempts, replace=replace, key_ttl=key_ttl, debounce=debounce,
                        priority=priority, group=group, traceparent=traceparent, tracestate=tracestate)
        r = self._call("POST", self._q(queue) + "/jobs", body)
        return EnqueueResult(r["id"], r["due_at"], r.get("duplicate", False), r.get("replaced", False))

    def enqueue_batch(self, queue: str, jobs: Sequence[Mapping[str, Any]]) -> List[EnqueueResult]:
        """Hands in up to 1000 jobs at once, all or none. Each is a dict of the wire fields
        ({"payload": ..., "delay_ms": ..., "key": ...}); ``job_body()`` builds one."""
        r = self._call("POST", self._q(queue) + "/jobs", {"jobs": [dict(j) for j in jobs]})
        return [EnqueueResult(j["id"], j["due_at"], j.get("duplicate", False), j.get("replaced", False))
                for j in r["jobs"]]

    def get(self, queue: str, id: Optional[str] = None, *, key: Optional[str] = None) -> JobInfo:
        path, query = self._job_path(queue, id, key)
        return _job_info(self._call("GET", path, query=query))

    def wait(self, queue: str, job: Union[str, EnqueueResult, "Job", JobInfo, None] = None, timeout: Duration = 60_000,
             *, key: Optional[str] = None) -> JobInfo:
        """Waits for the job's outcome: answers it once it is ``completed`` (its ``result`` is the
        one its ack carried, kept for this wait even with keep_completed_ms 0), ``dead`` or
        ``cancelled``, or as it then is when ``timeout`` ("5m", ms, timedelta; default 60 s) ends:
        look at ``state``. ``job`` is the id, or what enqueue, reserve or get answered; or give
        ``key``. The server is woken by the job's end, never polls; a wait longer than 60 s is made
        of waits of 60 s. A server that restarts (503, a proxy's 502 or 504, or no answer) or is full (429) meanwhile is
        asked again until the timeout; NotFound when there is no such job (or it ended, not kept,
        before the wait began)."""
        job_id = job if isinstance(job, str) or job is None else job.id
        path, query = self._job_path(queue, job_id, key)
        deadline = time.monotonic() + to_ms(timeout, "timeout") / 1000
        pause = 0.1
        while True:
            left_ms = max(0, int((deadline - time.monotonic()) * 1000))
            wait_ms = min(left_ms, WAIT_MAX_MS)
            try:
                info = _job_info(self._call("GET", path, query={**(query or {}), "wait_ms": wait_ms},
                                            wait_s=wait_ms / 1000))
            except (Unavailable, Overloaded):
                # A server starting again, or one at --max-waiting: asked again until the timeout,
                # the last time without waiting (wait_ms 0 is a plain read, never a 429); that last
                # one's failure is the answer.
                if wait_ms == 0:
                    raise
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, 2.0)
                continue
            if info.state in FINAL_STATES or time.monotonic() >= deadline:
                return info
            path, query = self._job_path(queue, info.id, None)  # by key: the job the key named at first

    def cancel(self, queue: str, id: Optional[str] = None, *, key: Optional[str] = None) -> bool:
        """Deletes a scheduled, ready or dead job. NotFound when there is none; Conflict while
        it is reserved."""
        path, query = self._job_path(queue, id, key)
        return bool(self._call("DELETE", path, query=query).get("cancelled"))

    def reschedule(self, queue: str, id: Optional[str] = None, *, key: Optional[str] = None,
                   delay: Optional[Duration] = None, delay_ms: Optional[int] = None,
                   deliver_at: Optional[Timestamp] = None) -> JobInfo:
        """Moves a scheduled or ready job's due time; answers the job as it is now."""
        path, query = self._job_path(queue, id, key)
        body: Dict[str, Any] = {}
        _when(body, delay, delay_ms, deliver_at)
        if not body:
            raise ValueError("give the new due time: delay, delay_ms or deliver_at")
        return _job_info(self._call("PATCH", path, body, query=query))

    # --- consuming ---

    def reserve(self, queue: str, max: int = 1, wait: Optional[Duration] = None,
                lease: Optional[Duration] = None) -> List[Job]:
        """Takes up to ``max`` ready jobs for ``lease`` (default: the queue's), waiting up to
        ``wait`` (at most 60 s) for the first. An empty list when none came."""
        body: Dict[str, Any] = {"max": max}
        wait_ms = to_ms(wait, "wait") if wait is not None else 0
        if wait_ms:
            body["wait_ms"] = wait_ms
        if lease is not None:
            body["lease_ms"] = to_ms(lease, "lease")
        r = self._call("POST", self._q(queue) + "/reserve", body, wait_s=wait_ms / 1000)
        return [_job(j) for j in r["jobs"]]

    def stream(self, queue: str, *, max_in_flight: int = 100, lease: Optional[Duration] = None,
               max_bytes: Optional[int] = None) -> JobStream:
        """Opens a push stream on a connection of its own: iterating it yields each job as it comes
        due, with at most ``max_in_flight`` (1..1000) unacknowledged at a time; settle them with
        ack, nack, touch or release as reserved jobs. Close it (or use ``with``) to end it: its
        unacknowledged deliveries are then ready again, no attempt used. A server without streams
        answers NotFound here (use reserve)."""
        body: Dict[str, Any] = {"max_in_flight": max_in_flight}
        if lease is not None:
            body["lease_ms"] = to_ms(lease, "lease")
        if max_bytes is not None:
            body["max_bytes"] = max_bytes
        path = self._q(queue) + "/stream"
        conn = self._new_connection(self._timeout + QUIET_S)
        try:
            conn.request("POST", path, body=_json_body(body), headers=self._headers("POST"))
            sock = conn.sock
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise Unavailable(f"cannot reach {self.url}: {e}{_certificate_hint(e)}", "unavailable") from e
        if response.status != 200:
            try:
                text = response.read(1 << 20)
            except (OSError, http.client.HTTPException):
                text = b""
            conn.close()
            self._answer(response.status, text)  # raises its error
            raise Unavailable(f"{self.url}: the stream was answered {response.status}", "unavailable")
        return JobStream(conn, sock, response, _job, f"{self.url}{path}")

    def release(self, queue: str, receipt: Union[str, Sequence[str]]) -> Union[int, BatchResult]:
        """Gives back deliveries that never reached a handler: ready again at once, no attempt
        used. A list of receipts is a batch (a BatchResult)."""
        r = self._settle(queue, "release", receipt, {}, "released")
        return r.get("released", 0) if isinstance(r, dict) else r

    def _settle(self, queue: str, verb: str, receipt: Union[str, Sequence[Any]], extra: Dict[str, Any],
                count_field: str) -> Any:
        if isinstance(receipt, str):
            return self._call("POST", self._q(queue) + "/" + verb, {"receipt": receipt, **extra})
        receipts = list(receipt)
        r = self._call("POST", self._q(queue) + "/" + verb, {"receipts": receipts, **extra})
        failed = r.get("failed") or []
        return BatchResult(r.get(count_field, 0),
                           [error_for(409 if f.get("code") == "lease_expired" else 400, f.get("code"),
                                      f.get("message", f.get("code", ""))) for f in failed],
                           [f.get("receipt", "") for f in failed])

    def ack(self, queue: str, receipt: Union[str, Sequence[Union[str, Tuple[str, Any]]]], *,
            result: Any = None) -> Union[int, BatchResult]:
        """Acknowledges a delivery: the job is done, and deleted, or kept as ``completed`` with
        ``result`` (any JSON value up to 64 KiB; None: none) while the queue keeps completed jobs
        (config ``keep_completed_ms``). A list of receipts is a batch (answered with a BatchResult,
        never raising for one receipt); its items may be ``(receipt, result)`` pairs, each with its
        own result."""
        if isinstance(receipt, str):
            extra = {"result": result} if result is not None else {}
            r = self._settle(queue, "ack", receipt, extra, "acked")
            return r.get("acked", 0)
        entries: List[Any] = []
        for item in receipt:
            one, its = (item, result) if isinstance(item, str) else (item[0], item[1])
            entries.append(one if its is None else {"receipt": one, "result": its})
        return self._settle(queue, "ack", entries, {}, "acked")

    def nack(self, queue: str, receipt: Union[str, Sequence[str]], *, retry_in: Optional[Duration] = None,
             error: Optional[str] = None, dead: bool = False) -> Union[NackResult, BatchResult]:
        """Ends a delivery without success: retried after ``retry_in`` (default: the queue's
        back-off), or dead when out of attempts or ``dead=True``. ``error`` becomes last_error."""
        extra: Dict[str, Any] = {}
        if retry_in is not None:
            extra["retry_in_ms"] = to_ms(retry_in, "retry_in")
        if error is not None:
            extra["error"] = error
        if dead:
            extra["dead"] = True
        r = self._settle(queue, "nack", receipt, extra, "nacked")
        return NackResult(r["state"], r["due_at"]) if isinstance(r, dict) else r

    def touch(self, queue: str, receipt: Union[str, Sequence[str]], lease: Optional[Duration] = None, *,
              progress: Any = None) -> Union[int, BatchResult]:
        """Extends a delivery's lease (by ``lease``, default the queue's); answers the new
        lease deadline (epoch ms). ``progress``, any JSON value up to 4 KiB (0.5, {"rows": 120}),
        is shown on the job while this delivery holds it (JobInfo.progress); None keeps the last."""
        extra: Dict[str, Any] = {"lease_ms": to_ms(lease, "lease")} if lease is not None else {}
        if progress is not None:
            extra["progress"] = progress
        r = self._settle(queue, "touch", receipt, extra, "touched")
        return r["lease_deadline"] if isinstance(r, dict) else r

    # --- queues ---

    def stats(self, queue: str) -> Dict[str, Any]:
        """The queue's counts, counters and lateness (the JSON of GET /v1/queues/{q})."""
        return self._call("GET", self._q(queue))

    def queues(self) -> List[Dict[str, Any]]:
        r = self._call("GET", "/v1/queues")
        return r["queues"] if isinstance(r, dict) else r

    def config(self, queue: str) -> Dict[str, Any]:
        return self._call("GET", self._q(queue) + "/config")

    def set_config(self, queue: str, **fields: Any) -> Dict[str, Any]:
        """Changes the fields given (max_attempts, lease_ms, backoff={...}, ...); the others keep theirs."""
        return self._call("PUT", self._q(queue) + "/config", fields)

    def pause(self, queue: str) -> None:
        self._call("POST", self._q(queue) + "/pause")

    def resume(self, queue: str) -> None:
        self._call("POST", self._q(queue) + "/resume")

    def delete_queue(self, queue: str, force: bool = False) -> None:
        self._call("DELETE", self._q(queue), query={"force": "true"} if force else None)

    # --- recurring schedules (the JSON of docs/http-api.md, "Recurring schedules") ---

    def put_schedule(self, queue: str, name: str, *, cron: Optional[str] = None, every: Optional[Duration] = None,
                     timezone: Optional[str] = None, payload: Any = None, **fields: Any) -> Dict[str, Any]:
        """Creates or replaces a schedule: ``cron="0 9 * * MON-FRI", timezone="Europe/Berlin"`` or
        ``every="90s"``; each run becomes a job with ``payload``. Other fields (headers,
        max_attempts, priority, group, misfire, start_at, end_at) as the wire has them. Returns it
        with its next runs."""
        body: Dict[str, Any] = dict(fields)
        if cron is not None:
            body["cron"] = cron
        if every is not None:
            body["every"] = to_ms(every, "every")
        if timezone is not None:
            body["timezone"] = timezone
        if payload is not None:
            body["payload"] = payload
        return self._call("PUT", self._schedule(queue, name), body)

    def schedule(self, queue: str, name: str) -> Dict[str, Any]:
        return self._call("GET", self._schedule(queue, name))

    def schedules(self, queue: str) -> List[Dict[str, Any]]:
        return self._call("GET", self._q(queue) + "/schedules")["schedules"]

    def delete_schedule(self, queue: str, name: str) -> None:
        """Deletes it; its jobs not yet due are cancelled."""
        self._call("DELETE", self._schedule(queue, name))

    def pause_schedule(self, queue: str, name: str) -> Dict[str, Any]:
        return self._call("POST", self._schedule(queue, name) + "/pause")

    def resume_schedule(self, queue: str, name: str) -> Dict[str, Any]:
        return self._call("POST", self._schedule(queue, name) + "/resume")

    def _schedule(self, queue: str, name: str) -> str:
        return self._q(queue) + "/schedules/" + urllib.parse.quote(name, safe="")

    def dead(self, queue: str, limit: int = 100) -> List[JobInfo]:
        """The first ``limit`` dead jobs, oldest death first (``jobs(queue, "dead")`` pages on)."""
        r = self._call("GET", self._q(queue) + "/dead", query={"limit": limit})
        return [_job_info(j) for j in r["jobs"]]

    def jobs(self, queue: str, state: str, *, limit: int = 100, cursor: Optional[str] = None) -> JobPage:
        """One page of the queue's jobs in ``state`` ("scheduled", "ready", "reserved", "dead"):
        pass ``page.next_cursor`` back as ``cursor`` until it is None."""
        query: Dict[str, Any] = {"state": state, "limit": limit}
        if cursor:
            query["cursor"] = cursor
        r = self._call("GET", self._q(queue) + "/jobs", query=query)
        return JobPage([_job_info(j) for j in r["jobs"]], r.get("next_cursor"))

    def iter_jobs(self, queue: str, state: str, *, page_size: int = 100) -> Iterator[JobInfo]:
        """Every job of the queue in ``state``, a page at a time (see ``jobs``)."""
        cursor: Optional[str] = None
        while True:
            page = self.jobs(queue, state, limit=page_size, cursor=cursor)
            yield from page.jobs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def replay(self, queue: str, ids: Optional[Sequence[str]] = None) -> int:
        """Makes dead jobs ready again (all of them without ``ids``), attempts reset to 0."""
        body = {"ids": list(ids)} if ids is not None else {}
        return self._call("POST", self._q(queue) + "/dead/replay", body).get("replayed", 0)

    def purge(self, queue: str) -> int:
        """Deletes every dead job of the queue."""
        return self._call("DELETE", self._q(queue) + "/dead").get("purged", 0)

    # --- the service ---

    def version(self) -> Dict[str, str]:
        return self._call("GET", "/v1/version")

    def ready(self) -> bool:
        try:
            self._call("GET", "/readyz")
            return True
        except DelayqError:
            return False


__all__ = ["Client", "Job", "JobInfo", "EnqueueResult", "NackResult", "BatchResult", "job_body"]
