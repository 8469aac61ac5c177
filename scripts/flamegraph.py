#!/usr/bin/env python3
"""Folds `perf script` output into stacks and draws a flame graph as SVG.

    perf script -i perf.data | scripts/flamegraph.py --title "enqueue" > out.svg
    perf script -i perf.data | scripts/flamegraph.py --folded > out.folded
    scripts/flamegraph.py --share handlers::Enqueue,rocksdb::DBImpl::Write < out.folded
    perf script -i redis.data | scripts/flamegraph.py --range "[Lua VM]=redis-check-rdb:0x14c000-0x170000" > redis.svg

An unnamed frame (a stripped binary's unexported function) is dropped, unless it is in a --range's
file (by base name) at an address in that range: then it takes the range's name (Debian's
redis-server, a link to redis-check-rdb, exports Redis's functions but not those of the Lua
library linked into it, which sit in one address range).

Why this is written here: Brendan Gregg's FlameGraph scripts (stackcollapse-perf.pl,
flamegraph.pl) are not packaged in Debian 12, and no registry but npm is reachable. This does
the two steps they do, for perf's default `perf script` format only, and also shortens C++ names
(template arguments and parameter lists are dropped: Beast's frames are kilobytes long).
"""
import argparse
import html
import re
import sys
from collections import defaultdict


def simplify(name: str) -> str:
    """Drops template arguments, parameter lists and ABI tags from a C++ symbol."""
    name = re.sub(r"\[abi:[^\]]*\]", "", name)
    out, depth_angle, depth_paren = [], 0, 0
    i = 0
    while i < len(name):
        c = name[i]
        if name.startswith("operator()", i) and depth_angle == 0 and depth_paren == 0:
            out.append("operator()")
            i += len("operator()")
            continue
        if name.startswith("(anonymous namespace)", i):
            if depth_angle == 0 and depth_paren == 0:
                out.append("(anon)")
            i += len("(anonymous namespace)")
            continue
        if c == "<":
            depth_angle += 1
        elif c == ">" and depth_angle > 0:
            depth_angle -= 1
        elif c == "(" and depth_angle == 0:
            depth_paren += 1
        elif c == ")" and depth_angle == 0 and depth_paren > 0:
            depth_paren -= 1
        elif depth_angle == 0 and depth_paren == 0:
            out.append(c)
        i += 1
    s = "".join(out).strip()
    s = re.sub(r"\s+const$", "", s)
    return s or name[:80]


def range_name(ranges, address, path):
    """The name of the --range an unnamed frame at `address` (hex) of `path` lies in, or None."""
    if not ranges or not re.fullmatch(r"[0-9a-fA-F]+", address):
        return None
    at, base = int(address, 16), path.rsplit("/", 1)[-1]
    return next((name for name, file, low, high in ranges if file == base and low <= at <= high), None)


def fold(lines, ranges=()):
    """perf script's default output → {"comm;frame;frame…": samples}, root first. `ranges`:
    (name, file base name, low, high) for unnamed frames of that file at an address in [low, high]."""
    stacks = defaultdict(int)
    comm, frames = None, []

    def flush():
        if comm is not None:
            stacks[";".join([comm] + [simplify(f) for f in reversed(frames)])] += 1

    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if not line.startswith((" ", "\t")):
            flush()
            comm, frames = line.split()[0], []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        where = re.search(r"\(([^()]*)\)$", parts[1])  # the "(/usr/lib/…so)" suffix
        sym = re.sub(r"\s+\([^()]*\)$", "", parts[1])
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        if sym == "[unknown]":
            sym = range_name(ranges, parts[0], where.group(1) if where else "")
            if sym is None:
                continue
        frames.append(sym)
    flush()
    return stacks


def read_folded(lines):
    stacks = defaultdict(int)
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack:
            stacks[stack] += int(count)
    return stacks


def color(name: str) -> str:
    h = sum(ord(c) * (i + 1) for i, c in enumerate(name)) % 1000 / 1000.0
    if name.startswith("[k]") or "entry_SYSCALL" in name or name.startswith("__x64") or name.startswith("do_"):
        return f"rgb({200 + int(55 * h)},{120 + int(60 * h)},60)"
    if name.startswith("delayq::"):
        return f"rgb(230,{90 + int(100 * h)},{40 + int(40 * h)})"
    if name.startswith("rocksdb::"):
        return f"rgb({80 + int(60 * h)},{150 + int(60 * h)},220)"
    return f"rgb({210 + int(45 * h)},{150 + int(80 * h)},{50 + int(50 * h)})"


def svg(stacks, title: str, width: int = 1400, row: int = 16) -> str:
    root = {"n": 0, "c": {}}
    for stack, count in stacks.items():
        node = root
        node["n"] += count
        for frame in stack.split(";"):
            node = node["c"].setdefault(frame, {"n": 0, "c": {}})
            node["n"] += count
    total = max(root["n"], 1)
    depth = [0]
    rects = []

    def walk(node, name, x, level):
        w = node["n"] / total * (width - 20)
        if w < 0.3:
            return
        depth[0] = max(depth[0], level)
        rects.append((name, x, level, w, node["n"]))
        cx = x
        for child, sub in sorted(node["c"].items()):
            walk(sub, child, cx, level + 1)
            cx += sub["n"] / total * (width - 20)

    walk(root, "all", 10, 0)
    height = (depth[0] + 1) * row + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="11">',
        f'<rect width="100%" height="100%" fill="#fdfdf6"/>',
        f'<text x="10" y="20" font-size="15">{html.escape(title)} — {total} samples</text>',
    ]
    for name, x, level, w, n in rects:
        y = height - 20 - (level + 1) * row
        label = html.escape(name)
        tip = f"{label} ({n} samples, {100.0 * n / total:.2f}%)"
        out.append(
            f'<g><title>{tip}</title><rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" '
            f'fill="{color(name)}" rx="2"/>'
        )
        chars = int(w / 7)
        if chars >= 3:
            text = name if len(name) <= chars else name[: chars - 2] + ".."
            out.append(f'<text x="{x + 3:.1f}" y="{y + row - 4}">{html.escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def share(stacks, names):
    """The share of samples whose stack holds each name (inclusive), one per line."""
    total = sum(stacks.values()) or 1
    lines = []
    for want in names:
        n = sum(c for s, c in stacks.items() if any(want in f for f in s.split(";")))
        lines.append(f"{100.0 * n / total:6.2f}%  {want}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--title", default="delayq")
    ap.add_argument("--folded", action="store_true", help="print folded stacks instead of an SVG")
    ap.add_argument("--share", help="comma-separated frame names: print each one's inclusive share")
    ap.add_argument("--range", action="append", default=[], metavar="NAME=FILE:LOW-HIGH",
                    help="name the unnamed frames of FILE (base name) at an address in LOW-HIGH (hex); repeatable")
    args = ap.parse_args()
    ranges = []
    for spec in args.range:
        match = re.fullmatch(r"(.+)=([^:=/]+):(0x[0-9a-fA-F]+)-(0x[0-9a-fA-F]+)", spec)
        if not match:
            ap.error(f"--range {spec!r}: expected NAME=FILE:LOW-HIGH with hex addresses, "
                     "e.g. \"[Lua VM]=redis-check-rdb:0x14c000-0x170000\"")
        ranges.append((match.group(1), match.group(2), int(match.group(3), 16), int(match.group(4), 16)))
    lines = sys.stdin.readlines()
    # Folded stacks: every line "stack count", none indented (perf script indents its frames; a
    # folded stack of the command alone has no ';', so that is no test).
    head = [line for line in lines[:50] if line.strip()]
    is_folded = bool(head) and all(not line.startswith((" ", "\t")) and re.search(r" \d+$", line.rstrip())
                                   for line in head)
    stacks = read_folded(lines) if is_folded else fold(lines, ranges)
    if args.share:
        print(share(stacks, args.share.split(",")))
    elif args.folded:
        for stack, count in sorted(stacks.items()):
            print(f"{stack} {count}")
    else:
        sys.stdout.write(svg(stacks, args.title))


if __name__ == "__main__":
    main()
