"""The order-timeout story with the order and its timeout in one PostgreSQL transaction
(docs/postgres.md): order 1 is paid in time (its timeout is cancelled in the payment's
transaction), order 2 is not (its timeout cancels it), order 3's transaction fails (neither the
order nor its timeout exists).

    delayq serve --store postgres://USER@HOST/DB &
    python3 order_timeout_postgres.py postgres://USER@HOST/DB [http://127.0.0.1:7070]
"""
import sys
import threading

import psycopg

from delayq import Client, Worker
from delayq.postgres import cancel_in, enqueue_in

database, server = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:7070")

with psycopg.connect(database) as conn:
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY, state text NOT NULL)")
    conn.commit()
    for order in (1, 2):
        with conn.transaction():  # the order and its timeout: both or neither
            conn.execute("INSERT INTO orders VALUES (%s, 'unpaid') ON CONFLICT (id) DO UPDATE SET state = 'unpaid'",
                         (order,))
            enqueue_in(conn, "order-timeouts", {"orderId": order}, delay="1s", key=f"order-{order}")
    try:
        with conn.transaction():
            conn.execute("INSERT INTO orders VALUES (3, 'unpaid') ON CONFLICT (id) DO UPDATE SET state = 'unpaid'")
            enqueue_in(conn, "order-timeouts", {"orderId": 3}, delay="1s", key="order-3")
            raise RuntimeError("the card service is down")  # the transaction rolls back: no order 3, no timeout
    except RuntimeError as e:
        print("order 3 failed:", e)
    with conn.transaction():  # payment: the order is paid and its timeout cancelled, together
        conn.execute("UPDATE orders SET state = 'paid' WHERE id = 1")
        print("order 1 paid; timeout cancelled:", cancel_in(conn, "order-timeouts", "order-1"))

done = threading.Event()


def time_out(job):
    with psycopg.connect(database) as conn:
        conn.execute("UPDATE orders SET state = 'cancelled' WHERE id = %s AND state = 'unpaid'",
                     (job.payload["orderId"],))
    print("timed out: order", job.payload["orderId"], flush=True)
    done.set()


worker = Worker(Client(server), "order-timeouts", time_out)
runner = threading.Thread(target=worker.run)
runner.start()
done.wait(30)
worker.stop()
runner.join()
with psycopg.connect(database) as conn:
    print("orders:", conn.execute("SELECT id, state FROM orders ORDER BY id").fetchall())
