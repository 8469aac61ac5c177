"""A push stream (POST /v1/queues/{q}/stream): jobs arrive as they come due, under a window.

    with client.stream("orders", max_in_flight=16) as jobs:
        for job in jobs:
            ...
            client.ack("orders", job.receipt)

The stream holds a connection of its own. Heartbeat lines are read and skipped; an error line
(the store cannot serve) raises its error, as does a stream that goes quiet for longer than the
server's longest heartbeat allows. Closing the stream (or leaving the ``with``) gives its
unacknowledged deliveries back to the queue at once, without using an attempt.
"""
from __future__ import annotations

import http.client
import json
import socket
from typing import Any, Callable, Dict, Iterator, Optional

from .errors import DelayqError, Unavailable, error_for

# The server sends a heartbeat after at most 15 s of silence (--stream-heartbeat-ms <= 15000):
# this much quiet on top means the stream is gone.
QUIET_S = 15.0
# A line is one delivery, bounded by the server's payload limit; this bounds a hostile server.
MAX_LINE = 64 << 20


class JobStream:
    """Iterates a stream's jobs. Made by ``Client.stream``; not shared between threads, except
    ``close()``, which any thread may call to end a blocked iteration."""

    def __init__(self, conn: http.client.HTTPConnection, sock: socket.socket, response: http.client.HTTPResponse,
                 make_job: Callable[[Dict[str, Any]], Any], where: str) -> None:
        self._conn = conn
        # The connection lets go of its socket when the answer says it closes (a stream's does):
        # the response reads it on, and close() needs it to wake a blocked read.
        self._sock = sock
        self._response = response
        self._make_job = make_job
        self._where = where
        self._closed = False
        self.heartbeats = 0

    def __iter__(self) -> Iterator[Any]:
        while True:
            line = self._readline()
            if line is None or self._closed:
                return
            if not line.strip():
                continue
            value = _parse(line, self._where)
            if "heartbeat" in value:
                self.heartbeats += 1
                continue
            if "error" in value:
                err = value["error"] if isinstance(value["error"], dict) else {}
                raise error_for(503, err.get("code", "unavailable"), err.get("message", "the stream ended"))
            try:
                job = self._make_job(value)
            except (KeyError, TypeError, ValueError) as e:
                raise DelayqError(f"{self._where}: a stream line is not a delivery ({e!r} missing or wrong): "
                                  f"{line[:200]!r}", "internal") from e
            yield job

    def _readline(self) -> Optional[bytes]:
        try:
            line = self._response.readline(MAX_LINE)
        except (OSError, http.client.HTTPException, ValueError) as e:
            if self._closed:
                return None
            if isinstance(e, socket.timeout):
                raise Unavailable(f"{self._where}: the stream sent nothing, not even a heartbeat, for "
                                  f"{QUIET_S:.0f} s past its heartbeat interval", "unavailable") from e
            raise Unavailable(f"{self._where}: the stream broke: {e}", "unavailable") from e
        if not line:
            if self._closed:
                return None
            raise Unavailable(f"{self._where}: the server ended the stream (it is stopping)", "unavailable")
        if len(line) >= MAX_LINE and not line.endswith(b"\n"):
            raise Unavailable(f"{self._where}: a stream line longer than {MAX_LINE} bytes", "unavailable")
        return line

    def close(self) -> None:
        """Ends the stream: its unacknowledged deliveries are ready again, no attempt used."""
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it
        except OSError:
            pass
        self._conn.close()

    def __enter__(self) -> "JobStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _parse(line: bytes, where: str) -> Dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError as e:
        raise DelayqError(f"{where}: a stream line is not JSON: {line[:200]!r}", "internal") from e
    if not isinstance(value, dict):
        raise DelayqError(f"{where}: a stream line is not a JSON object: {line[:200]!r}", "internal")
    return value
