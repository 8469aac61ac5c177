#!/usr/bin/env python3
"""Turns scripts/bench-growth.sh's runs into bench/results/growth.{md,json} and plot data.

    growth_report.py RUNS.jsonl RESULTS_DIR DATA_DIR DATE MACHINE LOAD_BEFORE LOAD_AFTER VERSIONS SECONDS
"""
import json
import os
import sys

runs_path, results, data, date, machine, load_before, load_after, versions, seconds = sys.argv[1:10]
runs = [json.loads(line) for line in open(runs_path) if line.strip()]


def fmt_int(x):
    return f"{round(x):,}".replace(",", " ")


def fmt_level(n):
    return "0" if n == 0 else (f"{n // 1_000_000} M" if n % 1_000_000 == 0 else fmt_int(n))


def fmt_ms(x):
    return f"{x:.2f} ms" if x < 10 else (f"{x:.1f} ms" if x < 100 else f"{x:.0f} ms")


def held_mib(r):  # what the store holds: the process's RSS, plus Redis's used memory
    return r["rss_mib"] + r["redis_used_mib"]


lines = []
w = lines.append
w("# How delayq's cost grows with what is already scheduled")
w("")
w(f"Measured by `make bench-growth` (scripts/bench-growth.sh; `delayq-engine-bench growth`, in-process) on {date}: "
  f"{machine}. One run each; the whole run took {seconds} s. Load average before: {load_before}; after: {load_after}. "
  f"Versions: {versions}.")
w("")
w("At each level the store first holds that many jobs due 1–8 days ahead; then 200 000 more are enqueued "
  "(batches of 100, one thread, also due days ahead: they join the backlog), and jobs due over 5 s are delivered "
  "to 4 consumers (reserve 100, ack in batches): 20 000 due/s on the embedded store, 10 000 due/s on Redis (about "
  "what one Redis core carries end to end). Memory is this process's RSS (block cache, memtables, window; the "
  "same in `delayq serve`), plus Redis's `used_memory` on Redis.")
w("")
w("## Embedded store and one Redis")
w("")
w("| store | scheduled before | enqueue jobs/s | due/s | lateness p50 · p99 · max | early | memory held | per million scheduled |")
w("|---|--:|--:|--:|--:|--:|--:|--:|")
for label, title in (("embedded", "embedded (RocksDB)"), ("redis", "Redis (one redis-server)")):
    rs = [r for r in runs if r["run"] == label]
    if not rs:
        continue
    base = rs[0]
    for r in rs:
        per_m = "–"
        if r is not base and r["scheduled"] > base["scheduled"]:
            per_m = f"{(held_mib(r) - held_mib(base)) / ((r['scheduled'] - base['scheduled']) / 1e6):.1f} MiB"
        w(f"| {title} | {fmt_level(r['level'])} | {fmt_int(r['enqueue_jobs_per_s'])} | {fmt_int(r['rate'])} | "
          f"{fmt_ms(r['p50_ms'])} · {fmt_ms(r['p99_ms'])} · {fmt_ms(r['max_ms'])} | {r['early']} | "
          f"{held_mib(r):.0f} MiB | {per_m} |")
w("")
cluster = [r for r in runs if r["run"].startswith("cluster-shards-")]
if cluster:
    w("## Redis Cluster (4 masters on this machine): `--redis-shards`")
    w("")
    w("A queue's shards are spread over the cluster's slots, so more shards spread one queue over more nodes.")
    w("")
    w("| shards | scheduled before | enqueue jobs/s | lateness p50 · p99 · max | early | Redis used memory |")
    w("|--:|--:|--:|--:|--:|--:|")
    for r in cluster:
        w(f"| {r['shards']} | {fmt_level(r['level'])} | {fmt_int(r['enqueue_jobs_per_s'])} | "
          f"{fmt_ms(r['p50_ms'])} · {fmt_ms(r['p99_ms'])} · {fmt_ms(r['max_ms'])} | {r['early']} | "
          f"{r['redis_used_mib']:.0f} MiB |")
    w("")
w("Plot: [growth.png](growth.png)")
os.makedirs(results, exist_ok=True)
with open(os.path.join(results, "growth.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
with open(os.path.join(results, "growth.json"), "w") as f:
    json.dump({"meta": {"date": date, "machine": machine, "load_before": load_before, "load_after": load_after,
                        "versions": versions, "seconds": int(seconds)}, "runs": runs}, f, indent=1)
    f.write("\n")

os.makedirs(data, exist_ok=True)
by = {label: {r["level"]: r for r in runs if r["run"] == label} for label in ("embedded", "redis")}
with open(os.path.join(data, "levels.dat"), "w") as f:
    f.write("# level embedded_enqueue redis_enqueue embedded_p99 redis_p99 embedded_mib redis_mib\n")
    for level in sorted(set(by["embedded"]) | set(by["redis"])):
        e, r = by["embedded"].get(level), by["redis"].get(level)
        cell = lambda x, k: (str(x[k]) if k != "held" else f"{held_mib(x):.1f}") if x else "?"
        f.write(f"\"{fmt_level(level)}\" {cell(e, 'enqueue_jobs_per_s')} {cell(r, 'enqueue_jobs_per_s')} "
                f"{cell(e, 'p99_ms')} {cell(r, 'p99_ms')} {cell(e, 'held')} {cell(r, 'held')}\n")
print("\n".join(lines))
