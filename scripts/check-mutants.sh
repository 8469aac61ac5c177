#!/usr/bin/env bash
# `make check-mutants`: a history checker that cannot fail proves nothing. Builds delayq with the
# seeded defects of src/core/mutant.h (build-mutants/, -DDELAYQ_MUTANTS=ON: delayq, delayq-check
# and delayq-fuse only, about 5 minutes on 2 cores the first time), then runs delayq-check once per mutant, at
# its default length, with the fault that exposes it, and fails unless every mutant gets a FAIL
# verdict. Prints a table of each mutant's verdict and the anomalies it showed.
# Needs root (FUSE, for the power cut).
set -uo pipefail
build=${1:-build-mutants}
out=$build/check-mutants.txt
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYQ_WERROR=ON -DDELAYQ_MUTANTS=ON \
  -DDELAYQ_BUILD_BENCH=OFF >/dev/null || exit 1
cmake --build "$build" -j "$(nproc)" --target delayq_cli delayq_check delayq_fuse || exit 1
: >"$out"
caught=0
total=0
# mutant  fault that exposes it
while read -r mutant fault; do
  total=$((total + 1))
  log=$build/mutant-$mutant.log
  echo "== DELAYQ_MUTANT=$mutant delayq-check --fault $fault"
  DELAYQ_MUTANT=$mutant "$build/delayq-check" --store embedded --durability sync --fault "$fault" \
    --keep "$build/mutant-$mutant" >"$log" 2>&1
  verdict=$(grep -E "^delayq-check (PASS|FAIL)" "$log" | tail -1)
  # The defect was on in the server (not a build or name that left it out).
  if ! grep -qs "MUTANT $mutant is on" "$build/mutant-$mutant"/server*.log; then
    verdict="delayq-check did not run it: no server said MUTANT $mutant is on"
  fi
  # The kinds of the anomalies it shows (at most 10 are printed), and how many there were in all.
  kinds=$(grep -oE "^anomaly \[[a-z_]+\]" "$log" | sort | uniq -c | awk '{printf "%s, ", $3}' | sed 's/, $//')
  count=$(echo "$verdict" | grep -oE "[0-9]+ anomalies" | cut -d' ' -f1)
  [ -n "$kinds" ] && kinds="${count:-?} anomalies: $kinds"
  if [[ $verdict == "delayq-check FAIL"* ]]; then
    caught=$((caught + 1))
    result=FAIL
  else
    result="${verdict:-no verdict}"
    [[ $result == "delayq-check PASS"* ]] && result=PASS
  fi
  printf '| %s | %s | %s | %s |\n' "$mutant" "$fault" "$result" "${kinds:-none}" >>"$out"
  echo "$verdict" | cut -c1-300
done <<'MUTANTS'
answer-before-fsync power-cut
drop-waiter-answer none
deliver-early none
ack-keeps-job none
lease-twice none
result-of-another none
outcome-early none
payload-of-another none
ignore-pause none
MUTANTS
echo
echo "| mutant | fault | verdict | anomalies |"
echo "|---|---|---|---|"
cat "$out"
echo "check-mutants: $caught of $total mutants caught"
[ "$caught" -eq "$total" ]
