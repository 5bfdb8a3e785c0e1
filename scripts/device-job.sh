#!/usr/bin/env bash
# device-job.sh — run long work on the lent GPU machine in the background, so that it goes on
# between calls (device README: a process that starts a new session with setsid runs until the
# machine goes back) and several calls' worth of work needs no thinking time between them.
#
#   scripts/device-job.sh start NAME CMD [ARGS...]
#       starts CMD in its own session (setsid), in this tree, stdout and stderr to
#       /tmp/res/NAME.log; /tmp/res/NAME.done holds its exit status when it ends. Returns at once.
#   scripts/device-job.sh wait NAME
#       blocks until /tmp/res/NAME.done exists (for a job that must follow another: put
#       `scripts/device-job.sh wait build &&` in front of its command).
#   scripts/device-job.sh collect SECONDS [NAME]
#       waits up to SECONDS for NAME (default: every started job) to end, prints each log's
#       tail and packs /tmp/res into $OUT/res.tgz (the device returns a few files per call).
#
# The machine goes back after 30 s without a call, and that kills the jobs. So follow `start`
# with `collect` calls back to back (each at most the per-call limit), and give the machine back
# after the last one. Held time counts whether or not a call is running.
# Do not build in the background while later calls copy the tree again: a build that ran
# across 20 model-piece calls lost source files to the copies (bench/NOTES.md 42). Build in the
# foreground of the first call (about 40 s on 16 cores).
set -uo pipefail
cd "$(dirname "$0")/.."
R=${DEVICE_JOB_DIR:-/tmp/res} # (the tests point it elsewhere)
mkdir -p "$R"
case "${1:-}" in
start)
    [ $# -ge 3 ] || { sed -n 2,22p "$0" >&2; exit 2; }
    name=$2
    shift 2
    case "$name" in '' | *[!A-Za-z0-9_.-]*) echo "device-job: bad name '$name'" >&2; exit 2 ;; esac
    rm -f "$R/$name.done"
    echo "$name" >>"$R/.jobs"
    setsid bash -c '"$@" >"$0.log" 2>&1; echo $? >"$0.done"' "$R/$name" "$@" </dev/null \
        >/dev/null 2>&1 &
    echo "device-job: started $name (log $R/$name.log)"
    ;;
wait)
    [ $# -eq 2 ] || { sed -n 2,22p "$0" >&2; exit 2; }
    until [ -e "$R/$2.done" ]; do sleep 2; done
    ;;
collect)
    secs=${2:-0}
    names=${3:-$(sort -u "$R/.jobs" 2>/dev/null)}
    for ((t = 0; t < secs; t += 5)); do
        left=0
        for n in $names; do [ -e "$R/$n.done" ] || left=1; done
        [ "$left" = 0 ] && break
        sleep 5
    done
    for n in $names; do
        st=running
        [ -e "$R/$n.done" ] && st="exit $(cat "$R/$n.done")"
        echo "== $n: $st"
        tr '\r' '\n' <"$R/$n.log" 2>/dev/null | grep -v '^$' | tail -n 8 | cut -c1-300
    done
    [ -n "${OUT:-}" ] && tar -czf "$OUT/res.tgz" -C "$(dirname "$R")" "$(basename "$R")" && ls -l "$OUT/res.tgz"
    ;;
*)
    sed -n 2,22p "$0" >&2
    exit 2
    ;;
esac
