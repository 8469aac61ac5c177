#!/usr/bin/env python3
"""What the Redis store's Lua costs, one operation at a time (issue 30).

Each snippet below runs N times inside one EVALSHA, after the whole prelude
(src/store/redis/lua/prelude.lua, its placeholders filled from the C++ constants as scripts.cc
does), on a sample format 4 value of a 100-byte job. The time per iteration is Redis's own
(`INFO commandstats`, usec of evalsha over ROUNDS calls, minus nothing: the loop's own cost is
the `empty` row). Run it against an idle Redis; it writes only the key `dq:lua-costs:v`.

    scripts/redis-lua-costs.py [--port 6379] [--n 2000] [--rounds 20] [--repeat 5]

Prints the median over `repeat` rounds per snippet, in ns per iteration. No Python package is
needed: it speaks RESP over a socket (python3-redis is not a dependency of delayq).
"""
import argparse
import pathlib
import re
import socket
import statistics

ROOT = pathlib.Path(__file__).resolve().parent.parent

# What a job's life does in the scripts, and what a binary meta would do instead.
SNIPPETS = {
    "empty loop": "x = it",
    "redis.call EXISTS": "x = redis.call('EXISTS', 'dq:lua-costs:v')",
    "now_us() (TIME)": "x = now_us()",
    "tonumber of a due time": "x = tonumber('1796617365619')",
    "fmt(n)": "x = fmt(it)",
    "string.sub of the record": "x = string.sub(v, 36)",
    "meta_parse (format 4)": "x = meta_parse(v)",
    "meta_parse + meta_str": "local m = meta_parse(v); m.state = 'r'; x = meta_str(m)",
    # The same meta packed binary (BIN below): what a `struct` format would cost. The parse makes
    # the same table meta_parse does; the write packs the fields and joins the record.
    "binary parse, same table": "local _, st, due, base, att, mx, dl, sid, key, at = struct.unpack(BIN, bin); "
                                "x = { state = st, due = due, base = base, attempt = att, max = mx, delivery = dl, "
                                "sid = sid, ki = '0', key = key, prio = 0, grp = '', v = bin, body_at = at }",
    "binary write, with the record": "x = struct.pack(BIN, 2, 'r', 1796617365619, 0, 1, 5, 1, '0', 1, '-', 0, '') .. "
                                     "string.sub(bin, bin_record_at)",
}


class Resp:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.sock.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        return self.read()

    def read(self):
        line = self.file.readline()[:-2]
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        n = int(rest)
        return None if n < 0 else [self.read() for _ in range(n)]


def constant(path, pattern):
    match = re.search(pattern, (ROOT / path).read_text(), re.S)
    if not match:
        raise SystemExit(f"{path}: no match for {pattern}; the constant moved, update this script")
    return match.group(1)


def prelude():
    """The prelude as scripts.cc's WholePrelude() fills it."""
    edges = constant("include/delayq/job.h", r"kLatenessBucketsMs\[\]\s*=\s*\{([^}]*)\}")
    text = (ROOT / "src/store/redis/lua/prelude.lua").read_text()
    text = text.replace("@META_FORMAT@", constant("src/store/redis/redis_meta.h", r"kMetaFormat = (\d+);"))
    text = text.replace("@RECORD_IN_META_MAX@",
                        constant("src/store/redis/redis_meta.h", r"kRecordInMetaMaxBytes = (\d+);"))
    text = text.replace("@LATENESS_EDGES@", " ".join(edges.split()))
    left = re.search(r"@[A-Z_]+@", text)
    if left:  # a placeholder WholePrelude() fills that this script does not know yet
        raise SystemExit(f"prelude.lua has {left.group(0)}, which this script does not fill; see scripts.cc's WholePrelude()")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--n", type=int, default=2000, help="iterations per EVALSHA")
    ap.add_argument("--rounds", type=int, default=20, help="EVALSHA calls per measure")
    ap.add_argument("--repeat", type=int, default=5, help="measures per snippet (interleaved); the median is printed")
    args = ap.parse_args()
    redis = Resp(args.port)
    # A format 4 value: "4|30|", a format 2 meta of 30 bytes, then a 119-byte record (100-byte
    # payload) from byte 36.
    record = bytes(range(1, 20)) + b"d" + b"x" * 99
    meta = b"2|s|1796617365619|0|0|5|0|-|0|"
    redis.call("SET", "dq:lua-costs:v", b"4|%d|" % len(meta) + meta + record)
    keys = [f"dq:lua-costs:k{i}" for i in range(22)]  # KEYS[1..22], as every script gets them
    # BIN: version, state, due, base, attempt, max, then delivery, sid and key, each after its length.
    head = prelude() + "\nlocal v = redis.call('GET', 'dq:lua-costs:v')\nlocal x\n" \
        "local BIN = '>Bc1i8HHHBc0Bc0Bc0'\n" \
        "local bin = struct.pack(BIN, 2, 's', 1796617365619, 0, 0, 5, 1, '0', 1, '-', 0, '') .. string.sub(v, 36)\n" \
        "local bin_record_at = select(10, struct.unpack(BIN, bin))\n"
    shas = {name: redis.call("SCRIPT", "LOAD", head + f"for it = 1, {args.n} do {body} end\nreturn 1\n").decode()
            for name, body in SNIPPETS.items()}
    times = {name: [] for name in SNIPPETS}
    for _ in range(args.repeat):
        for name, sha in shas.items():
            redis.call("CONFIG", "RESETSTAT")
            for _ in range(args.rounds):
                redis.call("EVALSHA", sha, len(keys), *keys)
            stats = redis.call("INFO", "commandstats").decode()
            usec = int(re.search(r"cmdstat_evalsha:calls=\d+,usec=(\d+)", stats).group(1))
            times[name].append(usec * 1000 / (args.n * args.rounds))
    redis.call("DEL", "dq:lua-costs:v")
    print(f"{'snippet':32s} {'ns per iteration (median of ' + str(args.repeat) + ')':>34s}")
    for name, values in times.items():
        print(f"{name:32s} {statistics.median(values):12.0f}   (range {min(values):.0f}-{max(values):.0f})")


if __name__ == "__main__":
    main()
