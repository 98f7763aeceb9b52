#!/bin/sh
# Overhead of rtprobe's measurement loop: per-call time of the empty workload
# `nothing` (clock_gettime pair + an indirect call + storing the record) and,
# for scale, of `sum` (n = 4000), 200,000 calls each, no pause, pinned to one
# CPU. As root, under SCHED_FIFO 90 with mlockall when the kernel allows it.
# Prints n, median and p99 (nearest rank) in ns.
#
# usage: bench/probe_overhead.sh [--check]
#   --check   exit 1 if the median of `nothing` is above 100 ns (the target)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
PROBE="$ROOT/probes/build/rtprobe"
READER="$ROOT/probes/tests/read_samplefile.py"
ITERATIONS=200000
TARGET_NS=100
CHECK=0
case "${1:-}" in
--check) CHECK=1 ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

make -s -C "$ROOT/probes" >/dev/null
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rtprobe-bench-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# The highest CPU this process may use (CPU 0 tends to take more interrupts).
CPU=$("$PYTHON" -c "import os; print(max(os.sched_getaffinity(0)))")
OPTS="--cpu $CPU"
MODE="plain scheduling (not root)"
if [ "$(id -u)" -eq 0 ]; then
    if "$PROBE" exec nothing --iterations 1 --pause-ms 0 --priority 90 --mlock --cpu "$CPU" \
        --output "$TMP/probe.rts" 2>"$TMP/err"; then
        OPTS="--cpu $CPU --priority 90 --mlock"
        MODE="SCHED_FIFO 90 + mlockall"
    else
        MODE="plain scheduling (root, but refused: $(cat "$TMP/err"))"
    fi
fi
echo "rtprobe $("$PROBE" --version | cut -d' ' -f2), $ITERATIONS calls per workload, pause 0, CPU $CPU, $MODE"
echo "kernel $(uname -r), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //')"

median_nothing=
for w in nothing sum; do
    # shellcheck disable=SC2086 # OPTS is a list of options
    "$PROBE" exec "$w" --iterations "$ITERATIONS" --pause-ms 0 $OPTS --output "$TMP/$w.rts"
    stats=$("$PYTHON" "$READER" --stats "$TMP/$w.rts")
    n=$(echo "$stats" | sed -n 's/^n: //p')
    median=$(echo "$stats" | sed -n 's/^median: \([0-9]*\).*/\1/p')
    p99=$(echo "$stats" | sed -n 's/^p99: \([0-9]*\).*/\1/p')
    printf '%-8s n=%-7s median=%6s ns  p99=%6s ns\n' "$w" "$n" "$median" "$p99"
    [ "$w" = nothing ] && median_nothing=$median
done

if [ "$median_nothing" -le "$TARGET_NS" ]; then
    echo "target median(nothing) <= $TARGET_NS ns: met"
else
    echo "target median(nothing) <= $TARGET_NS ns: MISSED"
    [ "$CHECK" -eq 1 ] && exit 1
fi
exit 0
