"""scripts/flamegraph.py: folding perf script output, reading folded stacks back, naming the
unnamed frames of an address range."""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "flamegraph.py"

# perf script's default output: a header line per sample, its frames indented, leaf first.
PERF_SCRIPT = """\
redis-server  101 [000] 10.000001:    1000 cpu-clock:
\t          155000 [unknown] (/usr/bin/redis-server)
\t          155100 [unknown] (/usr/lib/x86_64-linux-gnu/libjemalloc.so.2)
\t          1e0000 lua_pcall+0x10 (/usr/bin/redis-server)
\t          100000 main+0x5 (/usr/bin/redis-server)

redis-server  101 [000] 10.000002:    1000 cpu-clock:
\t          200000 [unknown] (/usr/bin/redis-server)
\t          100000 main+0x5 (/usr/bin/redis-server)

redis-server  101 [000] 10.000003:    1000 cpu-clock:

"""


def run(args, stdin):
    return subprocess.run([sys.executable, "-B", str(SCRIPT), *args], input=stdin, capture_output=True,
                          text=True, check=False)


def test_unnamed_frames_in_a_range_of_its_file_take_its_name_and_the_others_are_dropped():
    # The jemalloc frame's address is in the range too, but in another file: dropped.
    out = run(["--folded", "--range", "[Lua VM]=redis-server:0x150000-0x160000"], PERF_SCRIPT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "redis-server 1",
        "redis-server;main 1",
        "redis-server;main;lua_pcall;[Lua VM] 1",
    ]


def test_folded_stacks_read_back_even_when_the_first_is_the_command_alone():
    folded = run(["--folded", "--range", "[Lua VM]=redis-server:0x150000-0x160000"], PERF_SCRIPT).stdout
    assert folded.startswith("redis-server 1\n")  # sorted first: no ';' in it
    out = run(["--share", "lua_pcall,[Lua VM],main"], folded)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["33.33%", "lua_pcall", "33.33%", "[Lua", "VM]", "66.67%", "main"]


def test_a_malformed_range_is_refused_with_the_form_it_takes():
    out = run(["--range", "Lua"], "")
    assert out.returncode == 2
    assert "NAME=FILE:LOW-HIGH" in out.stderr
