#!/bin/sh
# Smoke tests of the cbtask programs: the blink example (ASan build) and
# taskmem (every model, small sizes, files checked by the sample-file reader).
#   test_programs.sh BLINK TASKMEM READ_SAMPLEFILE_PY PYTHON
set -eu
blink=$1 taskmem=$2 reader=$3 python=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect STATUS CMD...: run CMD, check its exit status; output in $tmp/out, $tmp/err
expect() {
    want=$1; shift
    set +e
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    set -e
    if [ "$got" = "$want" ]; then ok; else bad "exit $got, wanted $want: $*"; cat "$tmp/err"; fi
}

# blink: fake clock, deterministic output
expect 0 "$blink" --fake-clock --seconds 1
lines=$(grep -c ' ms  LED' "$tmp/out")
# LED1 toggles every 250 ms, LED2 every 150 ms, in [0, 1000): the stop timer
# (its sleep began at 0 ms) wins the tie with LED1's toggle due at 1000 ms.
[ "$lines" = 11 ] && ok || bad "blink --seconds 1 printed $lines toggles, wanted 11"
grep -q '^11 toggles in 1000.000 ms (LED1 4, LED2 7)$' "$tmp/out" && ok || bad "blink summary: $(tail -1 "$tmp/out")"
expect 0 "$blink" --fake-clock --toggles 5
grep -q '^5 toggles' "$tmp/out" && ok || bad "blink --toggles 5: $(tail -1 "$tmp/out")"
grep -q 'late   0.000 ms' "$tmp/out" && ok || bad "blink on the fake clock should never be late"
expect 0 "$blink" --seconds 0.2  # real clock
expect 2 "$blink" --period1 1
grep -q -- '--period1 wants an integer >= 2' "$tmp/err" && ok || bad "blink --period1 1 error text"
expect 2 "$blink" --frobnicate

# taskmem memory: every model, checked with the reader
for model in cbtask cbtask_receive pthread std_thread; do
    expect 0 "$taskmem" memory --model "$model" --counts 1,50,200 --repeat 2 --output "$tmp/m-$model.rts"
    expect 0 "$python" "$reader" "$tmp/m-$model.rts"
    grep -q '^columns: rss_bytes, tasks, vsz_bytes, alloc_bytes$' "$tmp/out" && ok || bad "$model memory columns"
    grep -q '^n: 6$' "$tmp/out" && ok || bad "$model memory should have 6 samples"
done
# cbtask: 200 idle tasks hold at most 64 B each (the first 64 of the callback type: full slot + sleep-heap
# entry; then compact slot + entry, 40 B), within a page either way
"$python" - "$tmp/m-cbtask.rts" <<'PY' && ok || bad "cbtask memory figures"
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
hlen = struct.unpack_from("<I", blob, 8)[0]
header = json.loads(blob[12:12 + hlen])
assert header["workload"] == "tasks" and header["variant"] == "memory", header
assert header["settings"] == {"model": "cbtask"}, header["settings"]
n = struct.unpack_from("<Q", blob, len(blob) - 20)[0]
rows = [struct.unpack_from("<4q", blob, 12 + hlen + 32 * i) for i in range(n)]
for rss, tasks, vsz, alloc in rows:
    assert tasks in (1, 50, 200), rows
    assert 0 <= rss <= 64 * tasks + 3 * 4096, rows
    assert alloc >= 56 * tasks, rows
PY

# taskmem switch: every model
for model in cbtask pthread_pipe pthread_futex std_thread; do
    expect 0 "$taskmem" switch --model "$model" --iterations 20 --batch 50 --warmup 2 --output "$tmp/s-$model.rts"
    expect 0 "$python" "$reader" --stats "$tmp/s-$model.rts"
    grep -q '^n: 20$' "$tmp/out" && ok || bad "$model switch should have 20 samples"
done
expect 0 "$taskmem" switch --model pthread_futex --pin none --iterations 5 --batch 10 --output "$tmp/s-none.rts"

# usage errors: exit 2 and a message naming the valid choices
expect 2 "$taskmem"
expect 2 "$taskmem" memory --model fibers --output "$tmp/x.rts"
grep -q "valid: cbtask, cbtask_receive, pthread, std_thread" "$tmp/err" && ok || bad "memory model error text"
expect 2 "$taskmem" switch --model cbtask --pin sideways --output "$tmp/x.rts"
grep -q "valid: same, split, none" "$tmp/err" && ok || bad "pin error text"
expect 2 "$taskmem" memory --model cbtask --counts 1,,3 --output "$tmp/x.rts"
expect 2 "$taskmem" memory --model cbtask --counts 0 --output "$tmp/x.rts"
expect 2 "$taskmem" switch --model cbtask --iterations 10
grep -q -- "--output is required" "$tmp/err" && ok || bad "missing --output error text"
expect 2 "$taskmem" switch --model cbtask --batch 10 --batch 20 --output "$tmp/x.rts"
expect 1 "$taskmem" switch --model cbtask --iterations 2 --output "$tmp/no/such/dir/x.rts"
[ ! -e "$tmp/x.rts" ] && ok || bad "a failed run left $tmp/x.rts"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
