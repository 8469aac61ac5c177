"""The client over HTTPS: a CA file, a client certificate for a server that asks for one
(`serve --tls-client-ca`), a server name other than the URL's host, big answers, and options
that cannot work refused before anything is sent."""
from __future__ import annotations

import subprocess

import pytest

from conftest import Server
from delayq import Client, Unavailable, Worker


def https(server: Server) -> str:
    return f"https://127.0.0.1:{server.port}"


def test_mutual_tls_lets_in_only_a_client_with_a_certificate_the_ca_signed(tmp_path, certs):
    s = Server(tmp_path / "data", ["--tls-cert", certs.cert("server"), "--tls-key", certs.key("server"),
                                   "--tls-client-ca", certs.cert("ca")])
    try:
        c = Client(https(s), ca_file=certs.cert("ca"), cert_file=certs.cert("client"), key_file=certs.key("client"))
        job = c.enqueue("mtls", {"n": 1})
        # Answers of every size arrive whole over TLS (a reserve of 8 x 50 KB).
        big = "x" * 50_000
        c.enqueue_batch("mtls", [{"payload": big} for _ in range(8)])
        got = c.reserve("mtls", max=9)
        assert [len(j.payload) if isinstance(j.payload, str) else 0 for j in got[1:]] == [50_000] * 8
        assert got[0].id == job.id
        without = Client(https(s), ca_file=certs.cert("ca"))
        # The refusal's alert says so; on a loaded machine the close may come first (EOF).
        with pytest.raises(Unavailable, match="refused this client's certificate|EOF occurred|reset by peer"):
            without.enqueue("mtls", {"n": 2})
        assert c.stats("mtls")["reserved"] == 9
    finally:
        s.stop()


def test_a_server_name_other_than_the_host_is_checked(tmp_path, certs):
    s = Server(tmp_path / "data", ["--tls-cert", certs.cert("named"), "--tls-key", certs.key("named")])
    try:
        with pytest.raises(Unavailable):
            Client(https(s), ca_file=certs.cert("ca")).version()
        Client(https(s), ca_file=certs.cert("ca"), server_name="delayq.test").version()
        with pytest.raises(Unavailable):
            Client(https(s), ca_file=certs.cert("ca"), server_name="other.test").version()
    finally:
        s.stop()


def test_tls_options_that_cannot_work_are_refused_at_once(tmp_path, certs):
    with pytest.raises(ValueError, match="https:// only"):
        Client("http://127.0.0.1:1", ca_file=certs.cert("ca"))
    with pytest.raises(ValueError, match="without cert_file"):
        Client("https://127.0.0.1:1", key_file=certs.key("client"))
    with pytest.raises(ValueError, match="ca_file"):
        Client("https://127.0.0.1:1", ca_file=str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="cert_file"):
        Client("https://127.0.0.1:1", cert_file=certs.cert("client"), key_file=certs.key("server"))
    with pytest.raises(ValueError, match="ca_file is empty"):
        Client("https://127.0.0.1:1", ca_file="")
    encrypted = tmp_path / "encrypted.key"
    subprocess.run(["openssl", "pkey", "-in", certs.key("client"), "-aes256", "-passout", "pass:pw", "-out",
                    str(encrypted)], check=True, capture_output=True)
    with pytest.raises(ValueError, match="cert_file"):
        Client("https://127.0.0.1:1", cert_file=certs.cert("client"), key_file=str(encrypted))


def test_a_worker_streams_over_mutual_tls_with_big_jobs_and_stops(tmp_path, certs):
    s = Server(tmp_path / "data", ["--tls-cert", certs.cert("server"), "--tls-key", certs.key("server"),
                                   "--tls-client-ca", certs.cert("ca")])
    try:
        c = Client(https(s), ca_file=certs.cert("ca"), cert_file=certs.cert("client"), key_file=certs.key("client"))
        big = "y" * 200_000  # a stream line of many TLS records
        c.enqueue_batch("tls-stream", [{"payload": {"n": n, "big": big}} for n in range(20)])
        seen = []
        worker = None

        def handle(job):
            assert job.payload["big"] == big
            seen.append(job.payload["n"])
            if len(seen) == 20:
                worker.stop()

        worker = Worker(c, "tls-stream", handle, concurrency=2)
        worker.run()  # returns: closing the TLS stream wakes its reader
        assert worker.delivery == "stream" and sorted(seen) == list(range(20))
        st = c.stats("tls-stream")
        assert st["counters"]["acked"] == 20 and st["reserved"] == 0
    finally:
        s.stop()
