"""`pip install ./clients/python` into a fresh virtual environment, then the README's story
(examples/order_timeout.py) run by that environment's Python against a real server."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

HERE = pathlib.Path(__file__).resolve().parents[1]


def test_pip_install_and_the_order_timeout_story(server, tmp_path):
    venv = tmp_path / "venv"
    package = tmp_path / "package"  # a copy without the tests
    shutil.copytree(HERE, package, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    # A plain venv and pip's own build isolation, with no package index: the package builds
    # itself (_build/delayq_build.py), so nothing has to be fetched.
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", str(package)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    show = subprocess.run([str(venv / "bin" / "pip"), "show", "delayq"], capture_output=True, text=True)
    assert "Version: 0.2.0" in show.stdout and "Requires: \n" in show.stdout, show.stdout
    run = subprocess.run([str(venv / "bin" / "python"), str(HERE / "examples" / "order_timeout.py"), server.url],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout.splitlines()
    assert out[0].endswith("duplicate: True")
    assert "cancelled unpaid order 42 on attempt 1" in out
    assert "dead: [('order-bad', \"ValueError: order id 'not-a-number' is not a number\")]" in out
    assert "replayed 1" in out
    assert "cancelled unpaid order not-a-number on attempt 1" in out
    assert out[-1] == "done: acked 2 nacked 2"
