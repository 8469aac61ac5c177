#!/usr/bin/env python3
"""The capacity model of scripts/bench-capacity.sh.

  capacity_model.py --run LAYOUT RUN LEAD SAMPLES BENCH_JSON
      One run: prints a JSON line with each process's CPU µs per job in the enqueue phase and in
      the delivery phase (SAMPLES: cpu_sampler.py's lines; BENCH_JSON: `delayq bench`'s).
  capacity_model.py RUNS OUT DATE MACHINE LOAD VERSIONS
      The report: OUT/capacity.md and OUT/capacity.json from the runs' lines.

The model: a job costs each process a fixed CPU time (µs per job, measured); a core saturates when
the costs of the processes pinned to it, times the rate, reach one second per second. So a layout's
rate is bounded by min over its cores of 1e6 / (sum of the µs per job of the processes on it), and
N cores of a kind give N times one core's rate, as long as the work spreads evenly over them (one
queue over N shards: jobs without a key pick a shard at random).
"""
import json
import statistics
import sys

PHASES = ("enqueue", "delivery")


def cpu_at(samples, t, name):
    value = samples[0][name]
    for s in samples:
        if s["t"] > t:
            break
        value = s[name]
    return value


def one_run(layout, run, lead, samples_path, bench_path):
    bench = json.loads(open(bench_path).read().splitlines()[-1])
    samples = [json.loads(line) for line in open(samples_path)]
    if not bench.get("enqueue_finished_before_window", False):
        sys.exit(f"{layout} run {run}: the enqueue ran into the window; raise LEAD")
    jobs = bench["jobs"]
    lead_s = float(lead.rstrip("s"))
    enqueue_s = jobs / bench["enqueue_jobs_per_s"]
    t0 = samples[0]["t"]
    boundary = t0 + (enqueue_s + lead_s) / 2  # in the idle gap between the phases
    names = [n for n in samples[0] if n != "t"]
    us = {}
    for n in names:
        first, middle, last = samples[0][n], cpu_at(samples, boundary, n), samples[-1][n]
        us[n] = {"enqueue": (middle - first) * 1e6 / jobs, "delivery": (last - middle) * 1e6 / jobs}
    redis = [n for n in names if n.startswith("redis")]
    if redis:
        us["redis"] = {p: sum(us[n][p] for n in redis) for p in PHASES}
        for n in redis:
            del us[n]
    lateness = bench["lateness_ms"]
    print(json.dumps({"layout": layout, "run": int(run), "jobs": jobs, "redis_masters": len(redis),
                      "enqueue_jobs_per_s": bench["enqueue_jobs_per_s"], "p50_ms": lateness["p50"],
                      "p99_ms": lateness["p99"], "delivered": bench["delivered"], "us_per_job": us}))


def med(values):
    return statistics.median(values) if values else None


def layout_medians(runs):
    procs = sorted({p for r in runs for p in r["us_per_job"]})
    out = {"runs": len(runs), "redis_masters": runs[0]["redis_masters"],
           "enqueue_jobs_per_s": med([r["enqueue_jobs_per_s"] for r in runs]),
           "enqueue_jobs_per_s_runs": [round(r["enqueue_jobs_per_s"]) for r in runs],
           "p50_ms": med([r["p50_ms"] for r in runs]), "p99_ms": med([r["p99_ms"] for r in runs]),
           "us_per_job": {}}
    for p in procs:
        out["us_per_job"][p] = {ph: med([r["us_per_job"][p][ph] for r in runs]) for ph in PHASES}
        out["us_per_job"][p]["total"] = sum(out["us_per_job"][p][ph] for ph in PHASES)
        out["us_per_job"][p]["total_runs"] = [round(sum(r["us_per_job"][p][ph] for ph in PHASES), 1)
                                              for r in runs]
    return out


def cost(m, proc, phase="total"):
    return m["us_per_job"].get(proc, {}).get(phase, 0.0)


def per_second(us):
    """Jobs/s one core gives at `us` µs per job (inf when too few ticks were counted)."""
    return 1e6 / us if us > 0 else float("inf")


def predicted_enqueue(costs):
    """Enqueue jobs/s on this machine's layout: delayq alone on core 0, Redis and the client on 1."""
    core0 = cost(costs, "delayq", "enqueue")
    core1 = cost(costs, "redis", "enqueue") + cost(costs, "client", "enqueue")
    return min(per_second(core0), per_second(core1)), ("delayq's core" if core0 >= core1 else "the Redis and client core")


def projection(single, sharded):
    rows = []
    for masters in (1, 4, 16):
        m = single if masters == 1 else sharded
        redis_total, dq = cost(m, "redis"), cost(m, "delayq")
        rate = masters * per_second(redis_total)
        enqueue_rate = masters * per_second(cost(m, "redis", "enqueue"))
        rows.append({"masters": masters, "shards": masters, "burst_jobs_per_s": rate,
                     "delayq_cores": rate * dq / 1e6, "enqueue_jobs_per_s": enqueue_rate,
                     "delayq_cores_enqueue": enqueue_rate * cost(m, "delayq", "enqueue") / 1e6})
    return rows


def fmt(x, digits=0):
    if x == float("inf"):
        return "∞"
    return f"{x:,.{digits}f}".replace(",", " ")


def report(runs_path, out, date, machine, load, versions):
    runs = [json.loads(line) for line in open(runs_path)]
    layouts = {}
    for r in runs:
        layouts.setdefault(r["layout"], []).append(r)
    m = {name: layout_medians(rs) for name, rs in layouts.items()}
    lines = [f"# Capacity model ({date})", "",
             f"`make bench-capacity` (scripts/bench-capacity.sh) on {machine}; {versions}; load before: {load}.",
             f"Each layout: {m['embedded']['runs']} runs of the burst ({runs[0]['jobs']:,} jobs of 100 bytes, "
             "4 producers with batches of 100, 4 consumers on push streams), every process pinned "
             "with taskset. Medians; the runs in brackets.", "",
             "## CPU µs per job", "",
             "| layout | delayq enqueue | delayq delivery | delayq total | Redis enqueue | Redis delivery | "
             "Redis total | enqueue jobs/s (one client) | lateness p50 / p99 ms |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for name, x in m.items():
        redis = "redis" in x["us_per_job"]
        lines.append(
            f"| {name} | {cost(x, 'delayq', 'enqueue'):.1f} | {cost(x, 'delayq', 'delivery'):.1f} | "
            f"**{cost(x, 'delayq'):.1f}** <sub>{x['us_per_job']['delayq']['total_runs']}</sub> | "
            + (f"{cost(x, 'redis', 'enqueue'):.1f} | {cost(x, 'redis', 'delivery'):.1f} | "
               f"**{cost(x, 'redis'):.1f}** <sub>{x['us_per_job']['redis']['total_runs']}</sub> | "
               if redis else "– | – | – | ")
            + f"{fmt(x['enqueue_jobs_per_s'])} <sub>{x['enqueue_jobs_per_s_runs']}</sub> | "
            f"{x['p50_ms']:.1f} / {x['p99_ms']:.1f} |")
    lines += ["", "## Jobs/s per core", "",
              "One core's worth of each process, from the costs above: the burst (each job enqueued "
              "once and delivered once) and enqueue alone.", "",
              "| layout | per delayq core, burst | per delayq core, enqueue | per Redis core, burst | "
              "per Redis core, enqueue |", "|---|--:|--:|--:|--:|"]
    for name, x in m.items():
        per = [per_second(cost(x, "delayq")), per_second(cost(x, "delayq", "enqueue"))]
        if "redis" in x["us_per_job"]:
            per += [per_second(cost(x, "redis")), per_second(cost(x, "redis", "enqueue"))]
        lines.append(f"| {name} | " + " | ".join(fmt(v) for v in per) + (" | – | – |" if len(per) == 2 else " |"))
    result = {"date": date, "machine": machine, "versions": versions, "load_before": load, "layouts": m}
    if "redis" in m and "cluster-2" in m:
        rows = projection(m["redis"], m["cluster-2"])
        result["projection"] = rows
        lines += ["", "## Projection: one queue over N Redis Cluster masters", "",
                  "Each master on a core of its own, one shard per master (`--redis-shards N`), and as "
                  "many delayq cores as it takes (several servers may share the cluster). The Redis "
                  "cost per job is the one measured with 1 master (N = 1) or with 2 shards (N > 1).", "",
                  "| masters | burst jobs/s (Redis-bound) | delayq cores to keep up | enqueue jobs/s | "
                  "delayq cores to keep up |", "|--:|--:|--:|--:|--:|"]
        for r in rows:
            lines.append(f"| {r['masters']} | {fmt(r['burst_jobs_per_s'])} | {r['delayq_cores']:.1f} | "
                         f"{fmt(r['enqueue_jobs_per_s'])} | {r['delayq_cores_enqueue']:.1f} |")
        predicted, bound = predicted_enqueue(m["redis"])
        measured = m["cluster-2"]["enqueue_jobs_per_s"]
        result["check"] = {"predicted_enqueue_jobs_per_s": predicted, "bound_by": bound,
                           "measured_enqueue_jobs_per_s": measured, "ratio": measured / predicted}
        lines += ["", "## The first step, checked here", "",
                  "This machine has 2 cores, so the issue's layout (each master on a core of its own, the "
                  "server on a third) cannot run here. What can: delayq on core 0, both masters and the "
                  "client on core 1. From the 1-master costs the model predicts the enqueue rate of "
                  f"that layout: {fmt(predicted)} jobs/s, bound by {bound}. Measured: "
                  f"**{fmt(measured)}** jobs/s ({measured / predicted:.2f}× the prediction). "
                  "Where it is below 1, the difference is what splitting a queue over shards costs "
                  "beyond one master, or the client not keeping the cores busy."]
    lines += ["", "What the model leaves out: the network between hosts (here all loopback), Redis "
              "replicas (each master's writes are sent again to its replicas), and how many cores one "
              "delayq server can use (2 here); the client's CPU is not part of any layout's cost."]
    with open(f"{out}/capacity.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(f"{out}/capacity.json", "w") as f:
        json.dump(result, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    if sys.argv[1] == "--run":
        one_run(*sys.argv[2:7])
    else:
        report(*sys.argv[1:7])
