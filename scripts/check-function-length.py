#!/usr/bin/env python3
"""Fails when a function in src/ is longer than the architecture allows (docs/architecture.md).

No function in src/ is over 100 lines, and none on the hot paths (reserve, enqueue, the
schedulers: HOT below) over 60. The functions that were longer when the rule came are listed in
DEBT with their length then: each may shrink, none may grow, and a function leaves the list by
getting under the limit. Run by `make test` (ctest: FunctionLengths).

A function is a definition at namespace or class level (indented 0 or 2 spaces) whose body's braces
are counted outside strings, characters and comments; its length runs from the line its name is on
to its closing brace.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT, HOT_LIMIT = 100, 60
HOT = (
    "src/store/embedded/engine_delivery.cc",
    "src/store/embedded/engine_jobs.cc",
    "src/store/embedded/engine_scheduler.cc",
    "src/store/redis/redis_delivery.cc",
    "src/store/redis/redis_jobs.cc",
    "src/store/redis/redis_scheduler.cc",
    "src/schedule/runner.cc",
)
# file:function -> its length when the rule came (issue 28). Shrink these; never add one.
DEBT = {}  # every function is within its limit; a longer one listed here may only shrink
START = re.compile(r"^( {0,2})(?!(?:if|for|while|switch|return|case|else|do|namespace|struct|class|enum|union|using|template)\b)"
                   r"[A-Za-z_~][\w:<>,*&~ ]*?\b((?:[A-Za-z_]\w*::)*~?[A-Za-z_]\w*)\s*\(")


def strip(text):
    """The text with strings, characters and comments blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and 0 < i < n - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            out.append(c)  # a digit separator (30'000)
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    lines = strip(open(path, encoding="utf-8").read()).split("\n")
    i = 0
    while i < len(lines):
        m = START.match(lines[i])
        if not m:
            i += 1
            continue
        # The signature runs until '{' (a body) or ';' (a declaration) at depth 0 of parentheses.
        depth, j, body = 0, i, None
        while j < len(lines) and body is None:
            for k, ch in enumerate(lines[j]):
                if ch == "(":
                    depth += 1
                elif ch == ")":
                    depth -= 1
                elif depth == 0 and ch == ";":
                    body = False
                    break
                elif depth == 0 and ch == "{":
                    body = (j, k)
                    break
            j += 1 if body is None else 0
            if j - i > 8:
                break
        if not body:
            i += 1
            continue
        bj, bk = body
        level, end = 0, None
        for r in range(bj, len(lines)):
            for ch in lines[r][bk if r == bj else 0:]:
                if ch == "{":
                    level += 1
                elif ch == "}":
                    level -= 1
                    if level == 0:
                        end = r
                        break
            if end is not None:
                break
        if end is None:
            return
        yield m.group(2), i + 1, end - i + 1
        i = end + 1


def main():
    problems = []
    seen = set()
    for path in sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.cc"), recursive=True) +
                       glob.glob(os.path.join(ROOT, "src", "**", "*.h"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        limit = HOT_LIMIT if rel in HOT else LIMIT
        for name, line, length in functions(path):
            key = f"{rel}:{name}"
            allowed = max(limit, DEBT.get(key, 0))
            if key in DEBT:
                seen.add(key)
                if length <= limit:
                    problems.append(f"{rel}:{line}: {name} has {length} lines, within the limit now: take it out of "
                                    "DEBT in scripts/check-function-length.py")
            if length > allowed:
                what = f"it was {DEBT[key]} lines when the rule came; it may only shrink" if key in DEBT else (
                    f"the most a function {'on a hot path ' if limit == HOT_LIMIT else ''}may have is {limit}")
                problems.append(f"{rel}:{line}: {name} has {length} lines; {what}: split it")
    for key in sorted(set(DEBT) - seen):
        problems.append(f"{key} is in DEBT but was not found: remove it from scripts/check-function-length.py")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"every function in src/ is within {LIMIT} lines ({HOT_LIMIT} on the hot paths), {len(DEBT)} known longer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
