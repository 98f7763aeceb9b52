#!/bin/sh
# Command-line tests of rtprobe: help, version, usage errors and their exit
# codes, every exec workload end to end (files validated by
# read_samplefile.py), CPU pinning, and clean stop on SIGTERM.
# usage: test_cli.sh PATH/TO/rtprobe
set -u
PROBE=${1:?usage: test_cli.sh PATH/TO/rtprobe}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
READER="$HERE/read_samplefile.py"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rtprobe-cli-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$HERE/lib.sh"

expect 0 "--version" -- "$PROBE" --version
grep_in "$TMP/out" "^rtprobe 0.1.0$" "--version output"
expect 0 "--help" -- "$PROBE" --help
grep_in "$TMP/out" "exec" "--help lists exec"
expect 2 "no subcommand" -- "$PROBE"
grep_in "$TMP/err" "valid subcommands: exec" "no subcommand message"
expect 2 "unknown subcommand" -- "$PROBE" frobnicate
grep_in "$TMP/err" "unknown subcommand 'frobnicate'; valid subcommands: exec" "unknown subcommand message"
expect 0 "exec --help" -- "$PROBE" exec --help
grep_in "$TMP/out" "--pause-ms" "exec --help lists options"

OUT="$TMP/run.rts"
expect 2 "unknown workload" -- "$PROBE" exec fibonacci --output "$OUT"
grep_in "$TMP/err" "valid workloads: sum, fib, sleep, nothing, touch, lock" "unknown workload message"
expect 2 "missing --output" -- "$PROBE" exec sum
grep_in "$TMP/err" "output" "missing --output message"
expect 2 "--iterations 0" -- "$PROBE" exec sum --iterations 0 --output "$OUT"
grep_in "$TMP/err" "iterations" "--iterations message"
expect 2 "--pause-ms garbage" -- "$PROBE" exec sum --pause-ms 5ms --output "$OUT"
expect 2 "--priority out of range" -- "$PROBE" exec sum --priority 100 --output "$OUT"
grep_in "$TMP/err" "1..99" "--priority range message"
expect 2 "unavailable CPU" -- "$PROBE" exec sum --cpu 1023 --output "$OUT"
grep_in "$TMP/err" "allowed CPUs: " "unavailable CPU message"
expect 1 "output in a missing directory" -- "$PROBE" exec sum --iterations 3 --pause-ms 0 --output "$TMP/no/such/dir.rts"
grep_in "$TMP/err" "No such file or directory" "missing directory message"
[ ! -e "$OUT" ] && ok || fail "a failed run left $OUT"

# gpio: usage errors and the machine's answers that need no GPIO hardware (the virtual Raspberry Pi 3's
# PL061 runs it for real: tests/test_gpio.py).
expect 2 "gpio without a variant" -- "$PROBE" gpio --output "$OUT"
grep_in "$TMP/err" "no variant given; valid variants: write, read, blink, port" "gpio variant message"
expect 2 "gpio unknown variant" -- "$PROBE" gpio toggle --output "$OUT"
grep_in "$TMP/err" "unknown variant 'toggle'; valid variants: write, read, blink, port" "gpio unknown variant message"
expect 2 "gpio variant twice" -- "$PROBE" gpio write read --output "$OUT"
grep_in "$TMP/err" "gpio: variant given twice ('write' and 'read')" "gpio variant twice message"
expect 2 "exec workload twice" -- "$PROBE" exec sum --workload fib --output "$OUT"
grep_in "$TMP/err" "exec: workload given twice ('sum' and 'fib')" "exec workload twice message"
expect 2 "gpio without --output" -- "$PROBE" gpio write
grep_in "$TMP/err" "--output FILE is required" "gpio --output message"
expect 2 "gpio bad line" -- "$PROBE" gpio write --line -1 --output "$OUT"
expect 1 "gpio chip that does not exist" -- "$PROBE" gpio write --chip "$TMP/gpiochip9" --output "$OUT"
grep_in "$TMP/err" "no GPIO chip $TMP/gpiochip9; chips here: " "gpio missing chip message"
expect 1 "gpio chip that is not a chip" -- "$PROBE" gpio read --chip /dev/zero --output "$OUT"
grep_in "$TMP/err" "/dev/zero is not a GPIO chip" "gpio not a chip message"
[ ! -e "$OUT" ] && ok || fail "a failed gpio run left $OUT"
# gpio --start-times and --mark-worst (setting explain; the samples themselves: tests/test_gpio_explain.py).
expect 0 "gpio --help" -- "$PROBE" gpio --help
grep_in "$TMP/out" "--start-times" "gpio --help lists --start-times"
grep_in "$TMP/out" "--mark-worst K" "gpio --help lists --mark-worst"
expect 2 "gpio --mark-worst negative" -- "$PROBE" gpio blink --mark-worst -1 --output "$OUT"
grep_in "$TMP/err" "mark-worst" "gpio --mark-worst message"
expect 2 "gpio --mark-worst without a value" -- "$PROBE" gpio blink --output "$OUT" --mark-worst
expect 1 "gpio --start-times reaches the chip" -- "$PROBE" gpio write --start-times --mark-worst 3 --chip "$TMP/gpiochip9" --output "$OUT"
grep_in "$TMP/err" "no GPIO chip $TMP/gpiochip9" "gpio --start-times chip message"
expect 1 "gpio marks file that cannot be opened" -- env RTSCOPE_MARKS="$TMP/no/such/marks" "$PROBE" gpio read --mark-worst 3 --chip "$TMP/gpiochip9" --output "$OUT"
grep_in "$TMP/err" "cannot open RTSCOPE_MARKS=$TMP/no/such/marks" "gpio marks file message"
[ ! -e "$OUT" ] && ok || fail "a failed gpio --mark-worst run left $OUT"
expect 1 "gpio port, chip that does not exist" -- "$PROBE" gpio port --chip "$TMP/gpiochip9"
grep_in "$TMP/out" "Eno GPIO chip $TMP/gpiochip9" "gpio port error frame"

# Every workload, end to end.
for w in sum fib nothing touch lock; do
    expect 0 "exec $w" -- "$PROBE" exec "$w" --iterations 20 --pause-ms 0 --output "$TMP/$w.rts"
    expect 0 "validate $w" -- "$PYTHON" "$READER" "$TMP/$w.rts"
    grep_in "$TMP/out" "^columns: duration, cpu$" "$w columns"
    grep_in "$TMP/out" "^n: 20$" "$w record count"
    pycheck "$TMP/$w.rts" "h['variant'] == '$w' and h['workload'] == 'exec' and h['runtime'] == 'native' and h['params']['iterations'] == 20 and h['params']['pause_ms'] == 0 and h['settings'] == {'mlock': False} and 'finished_at' in t and all(d > 0 for d, c in r)" "$w header and records"
done
pycheck "$TMP/sum.rts" "h['params']['n'] == 4000" "sum default n"
pycheck "$TMP/fib.rts" "h['params']['n'] == 20" "fib default n"
pycheck "$TMP/touch.rts" "h['params']['n'] == 256" "touch default n"
expect 0 "exec touch --n 0 (no memory reserved)" -- "$PROBE" exec touch --n 0 --iterations 3 --pause-ms 0 --output "$TMP/touch0.rts"
expect 0 "exec touch --mlock (its reservation made resident)" -- "$PROBE" exec touch --n 64 --mlock --iterations 5 --pause-ms 0 --output "$TMP/touchm.rts"
expect 2 "exec touch --n beyond 65536" -- "$PROBE" exec touch --n 65537 --iterations 3 --output "$TMP/touchx.rts"
pycheck "$TMP/lock.rts" "h['params']['n'] == 10000" "lock default n"
expect 0 "exec lock --n 0 (no holder)" -- "$PROBE" exec lock --n 0 --iterations 3 --pause-ms 0 --output "$TMP/lock0.rts"
expect 2 "exec lock --n beyond 1000000" -- "$PROBE" exec lock --n 1000001 --iterations 3 --output "$TMP/lockx.rts"
# The holder holds 20 ms about every 400 ms: over a second of calls, one waits for most of a hold.
expect 0 "exec lock --n 20000" -- "$PROBE" exec lock --n 20000 --iterations 1000 --pause-ms 1 --output "$TMP/lockw.rts"
pycheck "$TMP/lockw.rts" "max(d for d, c in r) >= 10000000" "a lock call waited for the holder"
expect 0 "exec sleep --ms 2" -- "$PROBE" exec --workload sleep --ms 2 --iterations 3 --pause-ms 0.5 --output "$TMP/sleep.rts"
pycheck "$TMP/sleep.rts" "h['params'] == {'n': 2, 'iterations': 3, 'pause_ms': 0.5} and len(r) == 3 and all(2000000 <= d < 1000000000 for d, c in r)" "sleep durations >= 2 ms"
# The conformance checker itself must reject damaged files.
"$PYTHON" - "$TMP/sum.rts" "$TMP" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
hlen = int.from_bytes(data[8:12], "little")
flip = bytearray(data); flip[12 + hlen] ^= 1                 # a record bit
open(sys.argv[2] + "/bad_crc.rts", "wb").write(flip)
open(sys.argv[2] + "/truncated.rts", "wb").write(data[:-1])
extra = data[:-24] + b"\0" * 16 + data[-24:]                 # sizes do not add up
open(sys.argv[2] + "/bad_size.rts", "wb").write(extra)
bad_magic = b"RTSCSF02" + data[8:]
open(sys.argv[2] + "/bad_magic.rts", "wb").write(bad_magic)
PY
for f in bad_crc truncated bad_size bad_magic; do
    expect 1 "reader rejects $f" -- "$PYTHON" "$READER" "$TMP/$f.rts"
done
expect 1 "reader rejects bad_crc (message)" -- "$PYTHON" "$READER" "$TMP/bad_crc.rts"
grep_in "$TMP/err" "CRC mismatch" "bad CRC message"
expect 1 "reader rejects bad_size (message)" -- "$PYTHON" "$READER" "$TMP/bad_size.rts"
grep_in "$TMP/err" "sizes do not add up" "bad size message"

# More work takes longer: fib(25) against fib(10) (about 200x the calls).
expect 0 "exec fib 10" -- "$PROBE" exec fib --n 10 --iterations 21 --pause-ms 0 --output "$TMP/fib10.rts"
expect 0 "exec fib 25" -- "$PROBE" exec fib --n 25 --iterations 21 --pause-ms 0 --output "$TMP/fib25.rts"
if "$PYTHON" -c "
import sys; sys.path.insert(0, '$HERE')
import read_samplefile as rs
med = lambda p: sorted(d for d, c in rs.read(open(p, 'rb').read())[2])[10]
sys.exit(0 if med('$TMP/fib25.rts') > 20 * med('$TMP/fib10.rts') else 1)
"; then ok; else fail "fib 25 not much slower than fib 10"; fi

# Pinning: every record on the chosen CPU, and the setting recorded.
CPU=$("$PYTHON" -c "import os; print(max(os.sched_getaffinity(0)))")
expect 0 "exec --cpu $CPU" -- "$PROBE" exec sum --cpu "$CPU" --iterations 30 --pause-ms 0.1 --output "$TMP/pin.rts"
pycheck "$TMP/pin.rts" "h['settings'] == {'cpu': $CPU, 'mlock': False} and all(c == $CPU for d, c in r)" "pinned records"

# SIGTERM mid-run: exit 128+15, no file at the output path, no partial file.
expect_stopped 0.5 "no sample file written" "$TMP/killed.rts" -- \
    "$PROBE" exec sleep --ms 20 --iterations 1000 --pause-ms 0 --output "$TMP/killed.rts"
ls "$TMP" | grep -q partial && fail "SIGTERM left a partial file" || ok

# An output path that is not a regular file (here a FIFO; as root /dev/null alike) is refused, not replaced.
mkfifo "$TMP/fifo"
expect 1 "output onto a FIFO refused" -- "$PROBE" exec nothing --iterations 1 --pause-ms 0 --output "$TMP/fifo"
grep_in "$TMP/err" "is not a regular file" "not-a-regular-file message"
[ -p "$TMP/fifo" ] && ok || fail "the FIFO was replaced"

echo "test_cli.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
