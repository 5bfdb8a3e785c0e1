#!/usr/bin/env bash
# cli_device_job.sh — scripts/device-job.sh, the background-job helper for the GPU machine, here
# on the CPU: a started job returns at once and runs on; `wait` orders a second job after the
# first; `collect` waits for both, reports each exit status and log, and packs the logs into
# $OUT/res.tgz; a bad name or a missing command is refused with exit 2.
# Usage: cli_device_job.sh PATH/TO/longctx (the binary is not used)
set -u
export LC_ALL=C
S=$(cd "$(dirname "$0")/.." && pwd)/scripts/device-job.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DEVICE_JOB_DIR=$TMP/res OUT=$TMP/out
mkdir -p "$OUT"
pass=0
fail=0
check() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: $3" >&2; fi; }

t0=$(date +%s)
bash "$S" start first bash -c 'echo one; sleep 6; echo two' >/dev/null
bash "$S" start second bash -c "bash '$S' wait first && echo after-first; exit 3" >/dev/null
check "start returns at once" $(($(date +%s) - t0 < 4 ? 0 : 1)) "took $(($(date +%s) - t0)) s"
[ ! -e "$TMP/res/first.done" ]
check "the first job still runs" $? "already done"
bash "$S" collect 30 >"$TMP/c.out" 2>&1
grep -q "== first: exit 0" "$TMP/c.out" && grep -q "== second: exit 3" "$TMP/c.out"
check "collect reports both exit statuses" $? "$(cat "$TMP/c.out")"
grep -q "^two$" "$TMP/c.out" && grep -q "^after-first$" "$TMP/c.out"
check "collect shows the logs' tails" $? "$(cat "$TMP/c.out")"
tar -tzf "$OUT/res.tgz" 2>/dev/null | grep -q "res/second.log"
check "the logs are packed into OUT/res.tgz" $? "$(tar -tzf "$OUT/res.tgz" 2>&1)"
bash "$S" start 'bad/name' true >/dev/null 2>&1
check "a bad name is refused" $(($? == 2 ? 0 : 1)) "exit $?"
bash "$S" start lonely >/dev/null 2>&1
check "a start without a command is refused" $(($? == 2 ? 0 : 1)) "exit $?"
echo "cli_device_job: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
