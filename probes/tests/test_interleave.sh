#!/bin/sh
# Command-line tests of rtprobe interleave: usage errors and their messages
# (nothing written), real runs of several exec arms (each file validated by
# read_samplefile.py, its pairing header and records checked), each arm's CPU
# and priority applied in its own blocks, no file left after a failure or a
# SIGTERM.
# usage: test_interleave.sh PATH/TO/rtprobe
set -u
PROBE=${1:?usage: test_interleave.sh PATH/TO/rtprobe}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
READER="$HERE/read_samplefile.py"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rtprobe-interleave-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
chmod 0777 "$TMP"
. "$HERE/lib.sh"

nothing_left() { # DESCRIPTION: no sample file and no partial file in $TMP
    if ls "$TMP" | grep -q '\.rts'; then fail "$1 left $(ls "$TMP" | grep '\.rts' | tr '\n' ' ')"; else ok; fi
}

expect 0 "interleave --help" -- "$PROBE" interleave --help
grep_in "$TMP/out" "--order LIST" "interleave --help lists options"
grep_in "$TMP/out" "workload (sum, fib, sleep, nothing)" "interleave --help names the arms' workloads"
"$PROBE" --help | grep -q "interleave" && ok || fail "rtprobe --help lists interleave"

A0="--arm exec sum --iterations 4 --pause-ms 0 --output $TMP/a0.rts"
A1="--arm exec sum --n 8000 --iterations 4 --pause-ms 0 --output $TMP/a1.rts"
# shellcheck disable=SC2086 # the arms are word lists
{
expect 2 "order not balanced" -- "$PROBE" interleave --block 2 --order 0,0,0,1 $A0 $A1
grep_in "$TMP/err" "arm 0 (exec sum) appears 3 times in --order, it must appear iterations 4 / block 2 = 2 times" "unbalanced order message"
expect 2 "order with a bad index" -- "$PROBE" interleave --block 2 --order 0,1,2,1 $A0 $A1
grep_in "$TMP/err" "--order entry '2' at position 2 is not an arm index: valid are 0..1" "bad index message"
expect 2 "iterations not a multiple of the block" -- "$PROBE" interleave --block 3 --order 0,1 $A0 $A1
grep_in "$TMP/err" "iterations 4 is not a multiple of the block size 3" "block message"
expect 2 "arms differ in --pause-ms" -- "$PROBE" interleave --block 2 --order 0,1,1,0 $A0 $A1 --pause-ms 1
grep_in "$TMP/err" "arm 0 and arm 1 differ in --pause-ms: arms may differ only in the workload, --n/--ms, --priority and --cpu" "differing options message"
expect 2 "same output" -- "$PROBE" interleave --block 2 --order 0,1,1,0 $A0 $A0
grep_in "$TMP/err" "arm 0 and arm 1 would write the same file" "same output message"
expect 2 "exec touch as an arm" -- "$PROBE" interleave --block 2 --order 0,1,1,0 $A0 --arm exec touch --iterations 4 --pause-ms 0 --output "$TMP/t.rts"
grep_in "$TMP/err" "arm 1 is exec touch: interleave takes exec sum, fib, sleep, nothing" "touch message"
expect 2 "timer as an arm" -- "$PROBE" interleave --block 2 --order 0,1,1,0 $A0 --arm timer --output "$TMP/t.rts"
grep_in "$TMP/err" "interleave measures exec arms" "timer message"
expect 2 "one arm" -- "$PROBE" interleave --block 2 --order 0,0 $A0
grep_in "$TMP/err" "needs at least 2 arms" "one arm message"
expect 2 "bad arm option" -- "$PROBE" interleave --block 2 --order 0,1,1,0 $A0 $A1 --iterations x
grep_in "$TMP/err" "arm 1 is not a valid exec run" "bad arm message"
expect 2 "unavailable CPU in an arm" -- "$PROBE" interleave --block 2 --order 0,1,1,0 $A0 $A1 --cpu 1023
grep_in "$TMP/err" "allowed CPUs: " "unavailable CPU message"
nothing_left "a refused command line"
expect 1 "an arm's output in a missing directory" -- "$PROBE" interleave --block 2 --order 0,1,1,0 $A0 --arm exec sum --iterations 4 --pause-ms 0 --output "$TMP/no/such/a1.rts"
grep_in "$TMP/err" "No such file or directory" "missing directory message"
nothing_left "a run whose arm 1 cannot be written"

# --write: each arm's files written before its blocks that follow another arm's; every arm writes each file once.
printf 'x' > "$TMP/switched"
expect 0 "files switched with the arms" -- "$PROBE" interleave --block 2 --order 0,1,1,0 \
    --write "0:$TMP/switched=zero" --write "1:$TMP/switched=one" $A0 $A1
[ "$(cat "$TMP/switched")" = zero ] && ok || fail "the last block's arm's text is in the file"
pycheck "$TMP/a0.rts" "t['blocks_switched_to'] == 2" "arm 0 switched to twice (blocks 0 and 3)"
pycheck "$TMP/a1.rts" "t['blocks_switched_to'] == 1" "arm 1 switched to once (blocks 1-2)"
rm -f "$TMP/a0.rts" "$TMP/a1.rts"
expect 2 "a file only one arm writes" -- "$PROBE" interleave --block 2 --order 0,1,1,0 \
    --write "0:$TMP/switched=zero" $A0 $A1
grep_in "$TMP/err" "arm 1 writes $TMP/switched 0 times" "a file only one arm writes: message"
expect 2 "a --write without ARM:" -- "$PROBE" interleave --block 2 --order 0,1,1,0 --write "$TMP/switched" $A0 $A1
grep_in "$TMP/err" "is not ARM:PATH=VALUE" "a --write without ARM: message"
expect 1 "a file that cannot be written" -- "$PROBE" interleave --block 2 --order 0,1,1,0 \
    --write "0:$TMP/no/such=zero" --write "1:$TMP/no/such=one" $A0 $A1
grep_in "$TMP/err" "arm 0 cannot write zero into $TMP/no/such" "a file that cannot be written: message"
nothing_left "a file that cannot be written"

# Three arms, five blocks of 4 each, in a given order: each arm its own file, as exec writes it, plus pairing.
CPU=$("$PYTHON" -c "import os; print(max(os.sched_getaffinity(0)))")
expect 0 "three arms" -- "$PROBE" interleave --block 4 --order 2,0,1,1,2,0,0,1,2,1,0,2,2,1,0 \
    --arm exec sum --iterations 20 --pause-ms 0 --cpu 0 --output "$TMP/sum.rts" \
    --arm exec sum --n 40000 --iterations 20 --pause-ms 0 --cpu "$CPU" --output "$TMP/sum40k.rts" \
    --arm exec --workload fib --n 10 --iterations 20 --pause-ms 0 --output "$TMP/fib.rts"
}
for f in sum sum40k fib; do
    expect 0 "validate $f" -- "$PYTHON" "$READER" "$TMP/$f.rts"
    grep_in "$TMP/out" "^n: 20$" "$f record count"
done
pycheck "$TMP/sum.rts" "h['variant'] == 'sum' and h['runtime'] == 'native' and h['params'] == {'n': 4000, 'iterations': 20, 'pause_ms': 0} and h['settings'] == {'cpu': 0, 'mlock': False} and h['pairing'] == {'arm': 0, 'arms': 3, 'block_samples': 4, 'blocks': [1, 5, 6, 10, 14]} and 'finished_at' in t and all(c == 0 for d, c in r)" "arm 0: header, pairing, pinned to CPU 0"
pycheck "$TMP/sum40k.rts" "h['params']['n'] == 40000 and h['settings'] == {'cpu': $CPU, 'mlock': False} and h['pairing'] == {'arm': 1, 'arms': 3, 'block_samples': 4, 'blocks': [2, 3, 7, 9, 13]} and all(c == $CPU for d, c in r)" "arm 1: header, pairing, pinned to CPU $CPU"
pycheck "$TMP/fib.rts" "h['variant'] == 'fib' and h['params']['n'] == 10 and h['settings'] == {'mlock': False} and h['pairing']['blocks'] == [0, 4, 8, 11, 12]" "arm 2: header and pairing"
# Each arm measures its own n: ten times the sum is several times slower (medians of 20 calls).
if "$PYTHON" -c "
import sys; sys.path.insert(0, '$HERE')
import read_samplefile as rs
med = lambda p: sorted(d for d, c in rs.read(open(p, 'rb').read())[2])[10]
sys.exit(0 if med('$TMP/sum40k.rts') > 3 * med('$TMP/sum.rts') else 1)
"; then ok; else fail "arm n=40000 not slower than arm n=4000"; fi
rm -f "$TMP/sum.rts" "$TMP/sum40k.rts" "$TMP/fib.rts"

# A failure after the measuring: arm 1's directory is gone when the files are written, so arm 0's
# file, written already, is removed too.
mkdir "$TMP/gone"
"$PROBE" interleave --block 1 --order 0,1,1,0 \
    --arm exec sleep --ms 300 --iterations 2 --pause-ms 0 --output "$TMP/first.rts" \
    --arm exec sleep --ms 300 --iterations 2 --pause-ms 0 --output "$TMP/gone/second.rts" 2>"$TMP/err" &
pid=$!
sleep 0.5
rm -rf "$TMP/gone"
wait "$pid"
rc=$?
[ "$rc" -eq 1 ] && ok || fail "a failed write: exit $rc, expected 1"
grep_in "$TMP/err" "arm 1's file could not be written; no file left" "failed write message"
nothing_left "a failed write"

# SIGTERM mid-run: exit 128+15, no arm's file, no partial file.
expect_stopped 0.5 "no sample file written" "$TMP/k0.rts" -- "$PROBE" interleave --block 10 --order 0,1,0,1 \
    --arm exec sleep --ms 20 --iterations 20 --pause-ms 0 --output "$TMP/k0.rts" \
    --arm exec sleep --ms 20 --iterations 20 --pause-ms 0 --output "$TMP/k1.rts"
nothing_left "SIGTERM"

# Priorities per arm (root only: SCHED_FIFO): the measuring thread runs each arm's blocks under the arm's
# policy, seen from outside while it runs; as nobody the priority is refused before anything is measured.
if [ "$(id -u)" -eq 0 ] && command -v chrt >/dev/null && command -v setpriv >/dev/null; then
    "$PROBE" interleave --block 1 --order 0,1,1,0,0,1 \
        --arm exec sleep --ms 150 --iterations 3 --pause-ms 0 --priority 7 --output "$TMP/p0.rts" \
        --arm exec sleep --ms 150 --iterations 3 --pause-ms 0 --output "$TMP/p1.rts" 2>"$TMP/err" &
    pid=$!
    : >"$TMP/policies"
    while kill -0 "$pid" 2>/dev/null; do
        chrt -p "$pid" 2>/dev/null | tr '\n' ' ' >>"$TMP/policies"
        echo >>"$TMP/policies"
        sleep 0.03
    done
    wait "$pid" && ok || fail "priority arms: exit $?"
    grep_in "$TMP/policies" "SCHED_FIFO.*priority: 7" "arm 0's blocks under SCHED_FIFO 7"
    grep_in "$TMP/policies" "SCHED_OTHER.*priority: 0" "arm 1's blocks under SCHED_OTHER"
    pycheck "$TMP/p0.rts" "h['settings'] == {'rt_priority': 7, 'mlock': False}" "arm 0's priority recorded"
    pycheck "$TMP/p1.rts" "h['settings'] == {'mlock': False}" "arm 1 without a priority"
    rm -f "$TMP/p0.rts" "$TMP/p1.rts"
    expect 1 "a priority refused to nobody" -- setpriv --reuid=nobody --regid=nogroup --clear-groups \
        "$PROBE" interleave --block 1 --order 0,1 \
        --arm exec sum --iterations 1 --pause-ms 0 --output "$TMP/p0.rts" \
        --arm exec sum --iterations 1 --pause-ms 0 --priority 7 --output "$TMP/p1.rts"
    grep_in "$TMP/err" "SCHED_FIFO priority 7 refused by the kernel" "refused priority message"
    grep_in "$TMP/err" "(arm 1)" "refused priority names the arm"
    nothing_left "a refused priority"
else
    echo "test_interleave.sh: priority checks skipped (need root, chrt and setpriv)"
fi

echo "test_interleave.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
