"""delayq.postgres: enqueue and cancel in the application's own psycopg transaction, against a
real PostgreSQL 15 (started here, as the postgres user when the tests run as root) and a delayq
server on it."""
from __future__ import annotations

import os
import pathlib
import shutil
import sys
import subprocess
import tempfile
import time
from typing import Iterator, List

import psycopg
import pytest

from conftest import BIN, Server
from delayq import Client, NotFound
from delayq.postgres import cancel_in, enqueue_in, reschedule_in

PG_BIN = pathlib.Path("/usr/lib/postgresql/15/bin")


def _as_server_user(args: List[str]) -> List[str]:
    if os.geteuid() != 0:
        return args
    import pwd
    pw = pwd.getpwnam("postgres")
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--", *args]


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    root = pathlib.Path(tempfile.mkdtemp(prefix="delayq-pg-"))
    if os.geteuid() == 0:
        import pwd
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
    data = root / "data"
    subprocess.run(_as_server_user([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                                    "--no-sync"]), check=True, capture_output=True)
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(_as_server_user([str(PG_BIN / "postgres"), "-D", str(data), "-p", str(port), "-k",
                                             str(root), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"postgres://postgres@127.0.0.1:{port}/postgres"
    for _ in range(500):  # asks the server, not a clock
        if subprocess.run([str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.02)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE DATABASE app")
    yield f"postgres://postgres@127.0.0.1:{port}/app"
    proc.terminate()
    proc.wait()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def server(pg_url: str, tmp_path: pathlib.Path) -> Iterator[Server]:
    s = Server(tmp_path / "data", ["--store", pg_url])
    yield s
    s.stop()


def test_the_order_and_its_timeout_commit_together(pg_url: str, server: Server) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, state text)")
        conn.commit()
        with conn.transaction():
            conn.execute("INSERT INTO orders VALUES (1, 'unpaid')")
            first = enqueue_in(conn, "timeouts", {"orderId": 1}, key="order-1")
        assert len(first.id) == 26 and not first.duplicate
        try:
            with conn.transaction():
                conn.execute("INSERT INTO orders VALUES (2, 'unpaid')")
                lost = enqueue_in(conn, "timeouts", {"orderId": 2}, key="order-2")
                raise RuntimeError("the application fails before commit")
        except RuntimeError:
            pass
    c = Client(server.url)
    jobs = c.reserve("timeouts", max=10, wait="2s")
    assert [j.payload for j in jobs] == [{"orderId": 1}]
    with pytest.raises(NotFound):
        c.get("timeouts", lost.id)
    for j in jobs:
        c.ack("timeouts", j.receipt)


def test_paying_cancels_the_timeout_in_the_same_transaction(pg_url: str, server: Server) -> None:
    with psycopg.connect(pg_url) as conn:
        with conn.transaction():
            enqueue_in(conn, "timeouts", {"orderId": 3}, delay="1h", key="order-3")
        with conn.transaction():
            assert reschedule_in(conn, "timeouts", "order-3", delay="2h") > 0
            assert cancel_in(conn, "timeouts", "order-3") is True
        with conn.transaction():
            assert cancel_in(conn, "timeouts", "order-3") is False


def test_a_bad_field_is_named_with_sqlstate_22023(pg_url: str, server: Server) -> None:
    with psycopg.connect(pg_url) as conn:
        with pytest.raises(psycopg.Error) as e:
            enqueue_in(conn, "timeouts", {"x": 1}, priority=12)
        assert e.value.sqlstate == "22023"
        assert str(e.value).startswith("priority is 12")


def test_the_trace_context_goes_with_the_job_and_a_bad_one_is_refused(pg_url: str, server: Server) -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with psycopg.connect(pg_url) as conn:
        with conn.transaction():
            made = enqueue_in(conn, "traced", {"orderId": 5}, traceparent=parent, tracestate="rojo=1")
        with pytest.raises(psycopg.Error) as e:
            enqueue_in(conn, "traced", {"orderId": 6}, traceparent="00-nope-01")
        assert e.value.sqlstate == "22023"
        assert str(e.value).startswith("traceparent is")
    job = Client(server.url).get("traced", made.id)
    assert (job.traceparent, job.tracestate) == (parent, "rojo=1")


def test_the_example_runs_as_written(pg_url: str, server: Server) -> None:
    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "order_timeout_postgres.py"
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[1] / "src"))
    out = subprocess.run([sys.executable, str(example), pg_url, server.url], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "timed out: order 2" in out.stdout
    assert "orders: [(1, 'paid'), (2, 'cancelled')]" in out.stdout, out.stdout


def test_the_sql_example_runs_as_written(pg_url: str, server: Server) -> None:
    example = pathlib.Path(__file__).resolve().parents[3] / "examples" / "postgres" / "order_timeout.sql"
    out = subprocess.run(["psql", "-v", "ON_ERROR_STOP=1", "-q", pg_url, "-f", str(example)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    c = Client(server.url)
    jobs = c.reserve("order-timeouts", max=10, wait="10s")
    assert [j.payload for j in jobs] == [{"orderId": 2}], "order 1 was paid, order 3 rolled back"
    c.ack("order-timeouts", jobs[0].receipt)


def test_dict_rows_naive_times_and_a_missing_key(pg_url: str, server: Server) -> None:
    import datetime
    from psycopg.rows import dict_row
    with psycopg.connect(pg_url, row_factory=dict_row) as conn:
        with conn.transaction():
            made = enqueue_in(conn, "timeouts", {"orderId": 9}, delay="1h", key="order-9")
        assert len(made.id) == 26
        with pytest.raises(ValueError, match="no time zone"):
            enqueue_in(conn, "timeouts", {}, deliver_at=datetime.datetime.now())
        assert reschedule_in(conn, "timeouts", "nobody", delay="1m") is None
        assert cancel_in(conn, "timeouts", "order-9") is True
