"""The package's own PEP 517 build backend: a pure-Python wheel, an editable wheel and an sdist.

Why not setuptools: pip builds a package in an isolated environment and fetches the backend named
in pyproject.toml from a package index first. Offline (a build host, an air-gapped server) that
fails, though this package is the standard library only. A backend kept in the tree needs nothing
fetched, so `pip install ./clients/python` works in a fresh virtual environment with no network.
The package is a handful of .py files, so a wheel is a zip of them with three metadata files
(https://packaging.python.org/en/latest/specifications/binary-distribution-format/).
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import pathlib
import re
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "delayq"


def _project() -> dict:
    """The [project] table of pyproject.toml: tomllib where there is one (3.11+), else the few
    flat keys this file uses, read line by line."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # type: ignore[import-not-found]

        return tomllib.loads(text)["project"]
    except ImportError:
        pass
    project: dict = {}
    section = None
    array = None  # the key of an array that runs over several lines
    for line in text.splitlines():
        line = line.split(" #")[0].strip()
        if array is not None:
            project[array] += re.findall(r'"([^"]*)"', line)
            array = None if line.endswith("]") else array
        elif line.startswith("["):
            section = line
        elif section == "[project]" and "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            if value.startswith('"'):
                project[key] = value.strip('"')
            elif value.startswith("["):
                project[key] = re.findall(r'"([^"]*)"', value)
                array = None if value.endswith("]") else key
    return project


def _metadata() -> str:
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p['description']}",
        f"Requires-Python: {p['requires-python']}",
        "License: Apache-2.0",
    ]
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + (ROOT / "README.md").read_text(encoding="utf-8")


def _names() -> tuple[str, str]:
    p = _project()
    return p["name"], p["version"]


def _dist_info() -> str:
    name, version = _names()
    return f"{name}-{version}.dist-info"


def _wheel_file() -> str:
    return "Wheel-Version: 1.0\nGenerator: delayq_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _sources() -> list[pathlib.Path]:
    src = ROOT / "src" / PACKAGE
    return sorted(f for f in src.rglob("*") if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc")


class _Wheel:
    """A wheel being written: each file goes in with its line in RECORD."""

    def __init__(self, path: pathlib.Path):
        self._zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self._record: list[str] = []

    def add(self, arcname: str, data: bytes) -> None:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self._record.append(f"{arcname},sha256={digest},{len(data)}")
        info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self._zip.writestr(info, data)

    def close(self) -> None:
        dist_info = _dist_info()
        self.add(f"{dist_info}/METADATA", _metadata().encode())
        self.add(f"{dist_info}/WHEEL", _wheel_file().encode())
        record = f"{dist_info}/RECORD"
        self._record.append(f"{record},,")
        info = zipfile.ZipInfo(record, date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        self._zip.writestr(info, "\n".join(self._record) + "\n")
        self._zip.close()


def _wheel_name() -> str:
    name, version = _names()
    return f"{name}-{version}-py3-none-any.whl"


# PEP 517 / PEP 660 hooks.

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    target = pathlib.Path(metadata_directory) / _dist_info()
    target.mkdir(parents=True, exist_ok=True)
    (target / "METADATA").write_text(_metadata(), encoding="utf-8")
    (target / "WHEEL").write_text(_wheel_file(), encoding="utf-8")
    return target.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel = _Wheel(pathlib.Path(wheel_directory) / _wheel_name())
    src = ROOT / "src"
    for f in _sources():
        wheel.add(f.relative_to(src).as_posix(), f.read_bytes())
    wheel.close()
    return _wheel_name()


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """The sources stay where they are: a .pth file puts src/ on the path."""
    wheel = _Wheel(pathlib.Path(wheel_directory) / _wheel_name())
    wheel.add(f"__editable__.{PACKAGE}.pth", (str(ROOT / "src") + "\n").encode())
    wheel.close()
    return _wheel_name()


def build_sdist(sdist_directory, config_settings=None):
    name, version = _names()
    base = f"{name}-{version}"
    path = pathlib.Path(sdist_directory) / f"{base}.tar.gz"
    files = [ROOT / "pyproject.toml", ROOT / "README.md", pathlib.Path(__file__)]
    files += _sources()
    files += sorted((ROOT / "examples").glob("*.py"))
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            info = tar.gettarinfo(str(f), arcname=f"{base}/{f.relative_to(ROOT).as_posix()}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(f, "rb") as data:
                tar.addfile(info, data)
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return path.name


if __name__ == "__main__":  # python3 _build/delayq_build.py DIR: a wheel, without pip
    import sys

    out = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    print(build_wheel(out))
