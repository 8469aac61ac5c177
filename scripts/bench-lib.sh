# shellcheck shell=bash
# Shared by the bench-*.sh scripts: each run appends one JSON line to $work/NAME; these print
# the median of a field over the runs, with every run's value.
field() { sed -n "s/.*\"$1\":\([-0-9.e]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
report() {  # report TITLE NAME FIELD: prints the median and every run's value; sets M
  local values
  values=$(field "$3" <"$work/$2" | tr '\n' ' ')
  M=$(echo "$values" | tr ' ' '\n' | grep . | median)
  printf '%-46s %-20s %12s   (runs: %s)\n' "$1" "$3" "$M" "$values"
}

# scratch NAME: a scratch directory $work (/tmp/NAME.XXXX), a list pids of the processes a run
# starts and a list stops of commands that stop what a pid cannot (a server started under another
# user); all run, then the directory goes, when the script exits.
scratch() {
  work=$(mktemp -d "/tmp/$1.XXXX")
  pids=()
  stops=()
  # shellcheck disable=SC2154  # s and p are the trap's own loop variables
  trap 'for s in "${stops[@]}"; do eval "$s" || true; done
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
        wait 2>/dev/null || true
        rm -rf "$work"' EXIT
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# plain_redis PORT [extra args]: a redis-server without persistence in $work/redis-PORT, up when
# this returns, stopped with the scratch directory.
plain_redis() {
  local port=$1
  shift
  mkdir -p "$work/redis-$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/redis-$port" "$@" \
    >"$work/redis-$port/redis.log" 2>&1 &
  pids+=($!)
  wait_redis "$port"
}
wait_redis() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.1; done; echo "redis on $1 did not start" >&2; exit 1; }
# cluster_ports N: sets nodes to N free ports whose cluster bus ports (p + 10000) are free too.
cluster_ports() {
  nodes=()
  while [ ${#nodes[@]} -lt "$1" ]; do
    local p
    p=$(free_port)
    [ "$p" -lt 55000 ] && ! (exec 3<>/dev/tcp/127.0.0.1/$((p + 10000))) 2>/dev/null && nodes+=("$p")
  done
}
# form_cluster [SPLIT]: one Redis Cluster (no replicas) of the servers on $nodes, started with
# --cluster-enabled yes; returns when it answers cluster_state:ok. redis-cli makes clusters of 3
# masters or more; 2 get the slots by hand, the first below SPLIT (default 8192), the second the
# rest.
form_cluster() {
  local n=${#nodes[@]} split=${1:-8192}
  if [ "$n" -ge 3 ]; then
    # shellcheck disable=SC2046  # one argument per node
    redis-cli --cluster create $(printf '127.0.0.1:%s ' "${nodes[@]}") --cluster-replicas 0 --cluster-yes \
      >"$work/cluster.log" 2>&1
  else
    [ "$n" -eq 2 ] || { echo "form_cluster: 2 nodes or 3 and more, not $n" >&2; exit 1; }
    {
      redis-cli -p "${nodes[0]}" cluster addslotsrange 0 $((split - 1))
      redis-cli -p "${nodes[1]}" cluster addslotsrange "$split" 16383
      redis-cli -p "${nodes[0]}" cluster meet 127.0.0.1 "${nodes[1]}"
    } >>"$work/cluster.log"
  fi
  for _ in $(seq 100); do
    redis-cli -p "${nodes[0]}" cluster info | grep -q cluster_state:ok && return
    sleep 0.1
  done
  echo "the Redis Cluster did not form: $(tail -3 "$work/cluster.log")" >&2
  exit 1
}
