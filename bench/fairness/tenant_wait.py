#!/usr/bin/env python3
"""Issue 17's fairness figure: how long a tenant with 10 ready jobs waits while another tenant has
100 000 ready, against a running `delayq serve` (either store).

  python3 bench/fairness/tenant_wait.py --url http://127.0.0.1:7070 [--big 100000] [--runs 5] [--plain]

Per run: a fresh queue gets `--big` ready jobs of group "big" (batches of 1000); one consumer
then reserves 100 at a time and acks each batch; once it is busy, 10 jobs of group "small" are
handed in, and the run reports the time from that enqueue's answer to the delivery of the last
"small" job. --plain sends the same jobs without groups (the FIFO a queue without fairness gives,
for comparison). Prints one JSON line per run, then the median. Uses only the standard library."""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse


def job(payload, group, plain):
    return {"payload": payload} if plain else {"payload": payload, "group": group}


class Http:
    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body)
        headers = {} if body is None else {"content-type": "application/json"}
        self.conn.request(method, path, body=data, headers=headers)
        r = self.conn.getresponse()
        text = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {text[:200]!r}")
        return json.loads(text) if text else {}


def run(url, big, n, plain):
    queue = f"fair-{int(time.time() * 1000)}-{n}"
    base = f"/v1/queues/{queue}"
    producer = Http(url)
    for i in range(0, big, 1000):
        producer.call("POST", base + "/jobs", {"jobs": [job({"i": i + k}, "big", plain) for k in range(1000)]})
    small_done = threading.Event()
    started = threading.Event()
    last_small = [0.0]
    counts = {"big": 0, "small": 0}

    def consume():
        c = Http(url)
        while not small_done.is_set():
            got = c.call("POST", base + "/reserve", {"max": 100, "wait_ms": 1000})["jobs"]
            started.set()
            now = time.monotonic()
            for j in got:
                tenant = "small" if "small" in j["payload"] else "big"
                counts[tenant] += 1
            if counts["small"] >= 10 and not small_done.is_set():
                last_small[0] = now
                small_done.set()
            if got:
                c.call("POST", base + "/ack", {"receipts": [j["receipt"] for j in got]})

    t = threading.Thread(target=consume)
    t.start()
    started.wait()
    producer.call("POST", base + "/jobs", {"jobs": [job({"small": k}, "small", plain) for k in range(10)]})
    handed_in = time.monotonic()
    small_done.wait(600)
    t.join()
    wait_ms = (last_small[0] - handed_in) * 1000
    stats = producer.call("GET", base)
    producer.call("DELETE", base + "?force=true")
    return {"run": n, "big_ready": big, "small_served_ms": round(wait_ms, 2), "big_delivered_before": counts["big"],
            "ready_left": stats["ready"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="http://127.0.0.1:7070")
    p.add_argument("--big", type=int, default=100000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--plain", action="store_true")
    a = p.parse_args()
    results = [run(a.url, a.big, n, a.plain) for n in range(a.runs)]
    for r in results:
        print(json.dumps(r))
    print(json.dumps({"median_small_served_ms": statistics.median(r["small_served_ms"] for r in results)}))


if __name__ == "__main__":
    main()
