-- The order-timeout story done right, in SQL alone (docs/postgres.md): the order and its timeout
-- are written in one transaction, the payment and the timeout's cancel in another. Either both
-- happen or neither: no order without its timeout, no timeout for an order that never existed.
--
--   delayq serve --store postgres://app@localhost/shop &      (or: delayq migrate postgres://...)
--   psql postgres://app@localhost/shop -f examples/postgres/order_timeout.sql
--   delayq reserve order-timeouts --wait 5s                    (order 2's timeout, 2 s later)
CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY, state text NOT NULL);

-- Placing two orders: each with its timeout, in the order's own transaction.
BEGIN;
INSERT INTO orders VALUES (1, 'unpaid') ON CONFLICT (id) DO UPDATE SET state = 'unpaid';
SELECT id, due_at_ms FROM delayq.enqueue('order-timeouts', '{"orderId": 1}', delay_ms => 2000, key => 'order-1');
COMMIT;
BEGIN;
INSERT INTO orders VALUES (2, 'unpaid') ON CONFLICT (id) DO UPDATE SET state = 'unpaid';
SELECT id, due_at_ms FROM delayq.enqueue('order-timeouts', '{"orderId": 2}', delay_ms => 2000, key => 'order-2');
COMMIT;

-- A third order whose transaction fails: neither the order nor its timeout exists afterwards.
BEGIN;
INSERT INTO orders VALUES (3, 'unpaid') ON CONFLICT (id) DO UPDATE SET state = 'unpaid';
SELECT id FROM delayq.enqueue('order-timeouts', '{"orderId": 3}', delay_ms => 2000, key => 'order-3');
ROLLBACK;

-- Order 1 is paid: its timeout is cancelled in the payment's transaction.
BEGIN;
UPDATE orders SET state = 'paid' WHERE id = 1;
SELECT delayq.cancel('order-timeouts', 'order-1') AS timeout_cancelled;
COMMIT;
