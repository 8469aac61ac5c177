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
