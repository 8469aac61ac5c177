"""A real `delayq serve` per test, on a free loopback port, in a temporary data directory.

The binary is $DELAYQ_BIN, or build/delayq of this repository.
"""
from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
from typing import Iterator, List, Optional

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))  # the package, uninstalled

REPO = pathlib.Path(__file__).resolve().parents[3]
BIN = os.environ.get("DELAYQ_BIN", str(REPO / "build" / "delayq"))


class Server:
    """`delayq serve`; url once it serves. kill() is kill -9, restart() comes back on the same
    port and data."""

    def __init__(self, data: pathlib.Path, extra: Optional[List[str]] = None) -> None:
        self.data = data
        self.extra = extra or []
        self.port = 0
        self.log: List[str] = []
        self.proc: Optional[subprocess.Popen] = None
        self.start()

    def start(self) -> None:
        args = [BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--data", str(self.data), *self.extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # blocks on the server's own output, not on a guess
            self.log.append(line)
            m = re.search(r"delayq serving https?://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        else:
            raise RuntimeError("delayq serve did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            self.log.append(line)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[Server]:
    s = Server(tmp_path / "data", ["--durability", "interval"])
    yield s
    s.stop()


@pytest.fixture
def token_server(tmp_path: pathlib.Path) -> Iterator[Server]:
    s = Server(tmp_path / "token-data", ["--auth-token", "s3cret-token-for-tests"])
    yield s
    s.stop()


class Certs:
    """A CA (openssl) and what it signed: "server" for 127.0.0.1, "named" for the DNS name
    delayq.test only, "client" for a client."""

    def __init__(self, where: pathlib.Path) -> None:
        self.dir = where
        where.mkdir(parents=True, exist_ok=True)
        self._run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=delayq-test-ca",
                  "-keyout", self.key("ca"), "-out", self.cert("ca"))
        self._sign("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1")
        self._sign("named", "/CN=delayq.test", "subjectAltName=DNS:delayq.test")
        self._sign("client", "/CN=delayq-client", None)

    def cert(self, who: str) -> str:
        return str(self.dir / f"{who}.pem")

    def key(self, who: str) -> str:
        return str(self.dir / f"{who}.key")

    def _run(self, *args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    def _sign(self, who: str, subject: str, san: Optional[str]) -> None:
        csr = str(self.dir / f"{who}.csr")
        self._run("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", self.key(who), "-out", csr)
        args = ["x509", "-req", "-in", csr, "-CA", self.cert("ca"), "-CAkey", self.key("ca"), "-CAcreateserial",
                "-days", "2", "-out", self.cert(who)]
        if san:
            ext = self.dir / f"{who}.ext"
            ext.write_text(san + "\n")
            args += ["-extfile", str(ext)]
        self._run(*args)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))
