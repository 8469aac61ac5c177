"""delayq: the Python client and worker for the delayq delay queue.

    from delayq import Client, Worker
    c = Client("http://127.0.0.1:7070")
    c.enqueue("orders", {"orderId": 42}, delay="30m", key="order-42")
    Worker(c, "orders", handle, concurrency=8).run()
"""
from .client import BatchResult, Client, EnqueueResult, Job, JobInfo, JobPage, NackResult, job_body
from .durations import to_ms
from .stream import JobStream
from .errors import (Conflict, DelayqError, Forbidden, InvalidArgument, LeaseExpired, NotFound, Overloaded,
                     TooLarge, Unauthorized, Unavailable)
from .worker import Worker

__version__ = "0.2.0"

__all__ = [
    "Client", "Worker", "JobStream", "Job", "JobInfo", "JobPage", "EnqueueResult", "NackResult", "BatchResult", "job_body", "to_ms",
    "DelayqError", "InvalidArgument", "TooLarge", "Unauthorized", "Forbidden", "NotFound", "Conflict",
    "LeaseExpired", "Overloaded", "Unavailable",
]
