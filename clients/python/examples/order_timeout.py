"""The order-timeout story: cancel an unpaid order 30 minutes after it was placed (here: 1 s).

    python3 order_timeout.py [http://127.0.0.1:7070]

A key makes placing the same order twice harmless; a worker acks what it handles; a poison job
fails every attempt, goes dead, and is replayed once it is fixed.
"""
import sys
import threading
import time

from delayq import Client, Worker

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:7070"
c = Client(url)
c.set_config("orders", max_attempts=2, backoff={"base_ms": 100, "jitter": 0})

first = c.enqueue("orders", {"orderId": 42}, delay="1s", key="order-42")
again = c.enqueue("orders", {"orderId": 42}, delay="1s", key="order-42")
print("enqueued", first.id, "duplicate:", again.duplicate)
c.enqueue("orders", {"orderId": "not-a-number"}, key="order-bad")

fixed = threading.Event()


def cancel_unpaid(job):
    order = job.payload["orderId"]
    if not isinstance(order, int) and not fixed.is_set():
        raise ValueError(f"order id {order!r} is not a number")
    print("cancelled unpaid order", order, "on attempt", job.attempt, flush=True)


worker = Worker(c, "orders", cancel_unpaid, concurrency=4)
runner = threading.Thread(target=worker.run)
runner.start()
while not (c.stats("orders")["counters"]["acked"] >= 1 and c.stats("orders")["dead"] == 1):
    time.sleep(0.1)
dead = c.dead("orders")
print("dead:", [(j.key, j.last_error) for j in dead])

fixed.set()  # the handler is fixed: replay the dead job
replayed = c.replay("orders")
while c.stats("orders")["counters"]["acked"] < 2:
    time.sleep(0.1)
worker.stop()
runner.join()
print("replayed", replayed)
print("done: acked", worker.acked, "nacked", worker.nacked)
