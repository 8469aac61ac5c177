#!/usr/bin/env python3
"""Samples processes' CPU time for scripts/bench-capacity.sh.

Usage: cpu_sampler.py OUT NAME=PID [NAME=PID ...]

Every 20 ms, appends one JSON line to OUT: {"t": monotonic seconds, NAME: CPU seconds (user +
system, /proc/PID/stat) ...}, until killed. A process that has gone keeps its last value.
"""
import json
import os
import signal
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def main():
    out = sys.argv[1]
    procs = dict(arg.split("=", 1) for arg in sys.argv[2:])
    last = {name: 0.0 for name in procs}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(out, "w") as f:
        while True:
            line = {"t": time.monotonic()}
            for name, pid in procs.items():
                try:
                    last[name] = cpu_seconds(pid)
                except OSError:
                    pass
                line[name] = last[name]
            f.write(json.dumps(line) + "\n")
            f.flush()
            time.sleep(0.02)


if __name__ == "__main__":
    main()
