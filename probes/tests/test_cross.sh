#!/bin/sh
# The static cross builds of rtprobe and taskmem (make cross): each is statically linked for the right
# machine, and runs: natively for x86_64, under qemu-user (Debian's qemu-user) for aarch64 and armhf.
# Each writes sample files that the reference reader accepts: rtprobe exec, interleave and timer, taskmem switch.
# usage: test_cross.sh PROBES_CROSS_DIR [PYTHON]   (taskmem from ../cbtask/build/cross beside probes/)
set -u
CROSS=${1:?usage: test_cross.sh probes/build/cross [PYTHON]}
PYTHON=${2:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
TASKMEM_CROSS="$HERE/../../cbtask/build/cross"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rtprobe-cross-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$HERE/lib.sh"

for arch in x86_64 aarch64 armhf; do
    case $arch in
        x86_64)  machine="x86-64";       run="" ;;
        aarch64) machine="ARM aarch64";  run="qemu-aarch64" ;;
        armhf)   machine="ARM, EABI5";   run="qemu-arm" ;;
    esac
    if [ -n "$run" ] && ! command -v "$run" >/dev/null 2>&1; then
        fail "$arch: $run is not installed (apt-get install -y qemu-user)"; continue
    fi
    for bin in "$CROSS/$arch/rtprobe" "$TASKMEM_CROSS/$arch/taskmem"; do
        file "$bin" >"$TMP/file" 2>&1
        grep_in "$TMP/file" "statically linked" "$arch $(basename "$bin") is static"
        grep_in "$TMP/file" "$machine" "$arch $(basename "$bin") machine"
    done
    P="$CROSS/$arch/rtprobe"
    expect 0 "$arch rtprobe --version" -- $run "$P" --version
    grep_in "$TMP/out" "rtprobe " "$arch version text"
    expect 0 "$arch exec sum" -- $run "$P" exec sum --iterations 50 --pause-ms 0 --output "$TMP/$arch-sum.rts"
    pycheck "$TMP/$arch-sum.rts" "h['workload'] == 'exec' and len(r) == 50" "$arch exec samples"
    expect 0 "$arch timer" -- $run "$P" timer --interval-us 1000 --loops 100 --output "$TMP/$arch-timer.rts"
    pycheck "$TMP/$arch-timer.rts" "h['workload'] == 'timer' and len(r) == 100" "$arch timer samples"
    expect 0 "$arch interleave" -- $run "$P" interleave --block 5 --order 1,0,0,1 \
        --arm exec sum --iterations 10 --pause-ms 0 --output "$TMP/$arch-arm0.rts" \
        --arm exec fib --n 10 --iterations 10 --pause-ms 0 --output "$TMP/$arch-arm1.rts"
    pycheck "$TMP/$arch-arm1.rts" "h['variant'] == 'fib' and h['pairing']['blocks'] == [0, 3] and len(r) == 10" \
        "$arch interleave arm samples"
    T="$TASKMEM_CROSS/$arch/taskmem"
    # switch, not memory: memory re-executes itself per count, which under qemu-user needs binfmt_misc.
    expect 0 "$arch taskmem switch" -- $run "$T" switch --model cbtask --iterations 20 --batch 10 --warmup 1 \
        --output "$TMP/$arch-tasks.rts"
    pycheck "$TMP/$arch-tasks.rts" "h['workload'] == 'tasks' and len(r) == 20" "$arch taskmem samples"
done

echo "cross: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
