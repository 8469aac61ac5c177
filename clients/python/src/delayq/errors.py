"""The errors a delayq server answers, one exception class per error code.

Every error the server sends is ``{"error": {"code": "...", "message": "..."}}``; the client
raises the class of that code, carrying the message (which names what was wrong and what would
be right) and the HTTP status.
"""
from __future__ import annotations

from typing import Dict, Optional, Type


class DelayqError(Exception):
    """Any error from delayq. ``code`` is the server's code ("not_found", ...)."""

    def __init__(self, message: str, code: str = "internal", status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidArgument(DelayqError):
    """400: a malformed request, a bad field (the message names it), an unknown field."""


class TooLarge(InvalidArgument):
    """413: a payload over the queue's max_payload, a body or batch over the server's limit."""


class Unauthorized(DelayqError):
    """401: the server wants a (different) bearer token."""


class Forbidden(DelayqError):
    """403: a foreign Origin or an unexpected Host."""


class NotFound(DelayqError):
    """404: no such job, key, queue or route."""


class Conflict(DelayqError):
    """409: the job's state forbids it (cancel a reserved job, reschedule a dead one)."""


class LeaseExpired(Conflict):
    """409 lease_expired: the receipt names a delivery that is over (the job was delivered
    again, or went dead). The job is someone else's now: do not retry the ack."""


class Overloaded(DelayqError):
    """429 (or 507): the server refused for load or a limit (waiting reserves, queues, memory)."""


class Unavailable(DelayqError):
    """503 (a proxy's 502, 504), or no answer at all: the server is down, starting, shutting down, or its store
    cannot serve now. Retry later (with a key, an enqueue is safe to retry)."""


_BY_CODE: Dict[str, Type[DelayqError]] = {
    "invalid_argument": InvalidArgument,
    "unsupported_media_type": InvalidArgument,
    "method_not_allowed": InvalidArgument,
    "too_large": TooLarge,
    "unauthenticated": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "lease_expired": LeaseExpired,
    "resource_exhausted": Overloaded,
    "unavailable": Unavailable,
    "io_error": Unavailable,
}

_BY_STATUS: Dict[int, Type[DelayqError]] = {
    400: InvalidArgument,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    429: Overloaded,
    502: Unavailable,  # a proxy's 502 and 504: delayq is down or restarting behind it
    503: Unavailable,
    504: Unavailable,
    507: Overloaded,
}


def error_for(status: int, code: Optional[str], message: str) -> DelayqError:
    """The exception for an answer: by its code, else by its HTTP status."""
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or DelayqError
    return cls(message, code or f"http_{status}", status)
