#!/usr/bin/env python3
"""Fails when a comment or document cites a path of this repository that does not exist.

Reads the sources (src/, include/, tests/, bench/, clients/, examples/, scripts/, cmake/), the
docs/ and the READMEs, and takes every word that starts with one of the repository's top-level
folders (src/, docs/, tests/, ...) as a path. Patterns (<name>, *, {a,b}, ...) and generated
files (bench/results/, what benchmarks write) are not paths. A path is looked up from the
repository's root, then from the citing file's folder and each folder above it (a client's
README cites its own src/). Run by `make test` (ctest: CitedPathsExist).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("src", "docs", "tests", "include", "scripts", "bench", "clients", "examples", "cmake", "packaging")
SCANNED = ("src", "include", "tests", "bench", "clients", "examples", "scripts", "cmake", "docs")
EXTENSIONS = (".cc", ".h", ".md", ".py", ".js", ".mjs", ".ts", ".sh", ".cmake", ".txt", ".lua", ".yaml", ".toml", ".go", ".java")
OUTPUTS = ("bench/results/",)
SKIP_DIRS = {"node_modules", "__pycache__", ".pytest_cache", "build", "dist", ".venv"}
CITE = re.compile(r"(?<![\w./$-])((?:%s)/[\w./+-]*[\w/+-])" % "|".join(FOLDERS))


def files():
    for top in SCANNED:
        for dirpath, dirnames, names in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            for n in names:
                if n.endswith(EXTENSIONS) or n == "Makefile":
                    yield os.path.join(dirpath, n)
    for n in os.listdir(ROOT):
        if n.endswith(".md") or n in ("Makefile", "CMakeLists.txt"):
            yield os.path.join(ROOT, n)


def exists(cited, folder):
    while True:
        if os.path.exists(os.path.join(folder, cited)):
            return True
        if os.path.samefile(folder, ROOT):
            return os.path.exists(os.path.join(ROOT, cited))
        folder = os.path.dirname(folder)


def missing():
    for path in files():
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                for m in CITE.finditer(line):
                    cited = m.group(1).rstrip(".")
                    after = line[m.end():m.end() + 1]
                    if after in "<*{$" and after != "" or "..." in cited:
                        continue  # a pattern, not a path
                    if cited.startswith(OUTPUTS) or any(part.isupper() for part in cited.split("/")):
                        continue  # written by a run, or a placeholder (src/FOLDER)
                    if not exists(cited, os.path.dirname(path)):
                        yield f"{os.path.relpath(path, ROOT)}:{number}: cites {cited}, which does not exist"


def main():
    problems = list(missing())
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} cited paths do not exist: correct the citation or the path", file=sys.stderr)
        return 1
    print("every cited path exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
