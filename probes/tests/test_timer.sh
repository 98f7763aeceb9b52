#!/bin/sh
# Command-line tests of rtprobe timer: usage errors and their messages, short
# real runs in every mode (files validated by read_samplefile.py), clean stop
# on SIGTERM, and (as root) a SCHED_FIFO priority the kernel refuses.
# usage: test_timer.sh PATH/TO/rtprobe [PATH/TO/optimised/rtprobe]
set -u
PROBE=${1:?usage: test_timer.sh PATH/TO/rtprobe [PATH/TO/optimised/rtprobe]}
FAST=${2:-$PROBE}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
READER="$HERE/read_samplefile.py"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rtprobe-timer-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$HERE/lib.sh"

OUT="$TMP/t.rts"
expect 0 "timer --help" -- "$PROBE" timer --help
grep_in "$TMP/out" "--histogram-us" "timer --help lists options"
"$PROBE" --help | grep -q "timer" && ok || fail "rtprobe --help lists timer"

# Bad input: each a usage error (exit 2) with a message naming the problem.
expect 2 "interval 0" -- "$PROBE" timer --interval-us 0 --output "$OUT"
grep_in "$TMP/err" "interval must be greater than 0" "interval 0 message"
expect 2 "interval below the clock resolution" -- "$PROBE" timer --interval-us 0.0004 --output "$OUT"
grep_in "$TMP/err" "below the resolution of CLOCK_MONOTONIC" "resolution message"
expect 2 "negative interval" -- "$PROBE" timer --interval-us -5 --output "$OUT"
expect 2 "unknown CPU in --threads" -- "$PROBE" timer --threads 0,1023 --loops 10 --output "$OUT"
grep_in "$TMP/err" "CPU 1023 does not exist, is offline or is not allowed for this process; allowed CPUs: " "--threads CPU message"
expect 2 "unknown CPU in --cpu" -- "$PROBE" timer --cpu 1023 --loops 10 --output "$OUT"
grep_in "$TMP/err" "allowed CPUs: " "--cpu message"
expect 2 "bad CPU list" -- "$PROBE" timer --threads 1-0 --output "$OUT"
expect 2 "unknown variant" -- "$PROBE" timer posix --output "$OUT"
grep_in "$TMP/err" "valid variants: absolute, relative" "variant message"
expect 2 "variant twice" -- "$PROBE" timer relative --variant absolute --output "$OUT"
grep_in "$TMP/err" "timer: variant given twice ('relative' and 'absolute')" "variant twice message"
expect 2 "missing --output" -- "$PROBE" timer --loops 10
[ ! -e "$OUT" ] && ok || fail "a refused run left $OUT"

# Every sample kept: one record per loop, latencies >= 0, cycles increasing.
expect 0 "timer 300 loops" -- "$PROBE" timer --interval-us 100 --loops 300 --output "$TMP/abs.rts"
expect 0 "validate" -- "$PYTHON" "$READER" "$TMP/abs.rts"
grep_in "$TMP/out" "^columns: latency, cycle, thread, cpu$" "timer columns"
grep_in "$TMP/out" "^n: 300$" "timer record count"
pycheck "$TMP/abs.rts" "h['workload'] == 'timer' and h['variant'] == 'absolute' and h['params'] == {'interval_us': 100, 'loops': 300} and all(lat >= 0 and th == 0 for lat, c, th, cpu in r) and [c for _, c, _, _ in r] == sorted(set(c for _, c, _, _ in r)) and r[-1][1] == 299 + t['counters']['missed_periods'] and t['threads'][0]['samples'] == 300" "timer records"

# One pinned thread per CPU; the CPU column says where each sample was taken.
NCPU=$("$PYTHON" -c "import os; print(len(os.sched_getaffinity(0)))")
expect 0 "timer --threads all" -- "$FAST" timer --interval-us 200 --loops 200 --threads all --output "$TMP/all.rts"
pycheck "$TMP/all.rts" "len(r) == 200 * $NCPU and all(cpu == t['threads'][th]['cpu'] for _, _, th, cpu in r) and h['params']['threads'] == 'all'" "one pinned thread per CPU"

# Histogram mode: no records, one histogram per thread, counts + overflow = n.
expect 0 "timer --histogram-us" -- "$FAST" timer --interval-us 100 --loops 500 --threads all --histogram-us 2 --output "$TMP/hist.rts"
expect 0 "validate histogram file" -- "$PYTHON" "$READER" "$TMP/hist.rts"
grep_in "$TMP/out" "^n: 0$" "histogram mode keeps no records"
pycheck "$TMP/hist.rts" "sorted(t['histograms']) == ['thread%d' % k for k in range($NCPU)] and all(x['n'] == 500 and len(x['counts']) == 2 and x['bucket_width'] == 1000 and sum(x['counts']) + x['overflow'] == 500 and x['min'] <= x['max'] for x in t['histograms'].values()) and t['counters']['overflows'] == sum(x['overflow'] for x in t['histograms'].values())" "histograms"
# A 2 us range overflows often on any machine: overflows are counted and their cycles kept.
pycheck "$TMP/hist.rts" "all(len(x['overflow_cycles']) + x['overflow_cycles_dropped'] == x['overflow'] for x in t['histograms'].values())" "overflow cycles"

# Duration: every deadline within it is either a sample or a missed period.
expect 0 "timer --duration-s" -- "$FAST" timer --interval-us 1000 --duration-s 0.2 --output "$TMP/dur.rts"
pycheck "$TMP/dur.rts" "len(r) + t['counters']['missed_periods'] == 200 and 'loops' not in h['params'] and h['params']['duration_s'] == 0.2" "duration"

# Relative variant (cyclictest -r).
expect 0 "timer relative" -- "$PROBE" timer relative --interval-us 100 --loops 100 --output "$TMP/rel.rts"
pycheck "$TMP/rel.rts" "h['variant'] == 'relative' and len(r) == 100 and all(lat >= 0 for lat, *_ in r)" "relative"

# SIGTERM mid-run: exit 128+15, no file.
expect_stopped 0.3 "no sample file written" "$TMP/killed.rts" -- \
    "$FAST" timer --interval-us 1000 --loops 100000 --output "$TMP/killed.rts"

# A priority the kernel refuses (an unprivileged user without RLIMIT_RTPRIO).
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && command -v prlimit >/dev/null; then
    chmod 0777 "$TMP"
    cp "$FAST" "$TMP/rtprobe" && chmod 0755 "$TMP/rtprobe"
    prlimit --rtprio=0:0 setpriv --reuid=nobody --regid=nogroup --clear-groups \
        "$TMP/rtprobe" timer --priority 90 --loops 10 --output "$TMP/nobody.rts" 2>"$TMP/err"
    rc=$?
    [ "$rc" -eq 1 ] && ok || fail "refused priority: exit $rc, expected 1"
    grep_in "$TMP/err" "SCHED_FIFO priority 90 refused by the kernel" "refused priority message"
    [ ! -e "$TMP/nobody.rts" ] && ok || fail "refused run left a file"
else
    echo "test_timer.sh: refused-priority test skipped (needs root, setpriv and prlimit)"
fi

echo "test_timer.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
