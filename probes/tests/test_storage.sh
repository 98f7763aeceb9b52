#!/bin/sh
# Command-line tests of `rtprobe storage`: usage errors, bad directories, not
# enough free space (a real 1 MiB tmpfs, as root), every mode end to end with
# the records and the block histogram checked against each other, O_DIRECT,
# fdatasync, cold reads (root) and their refusal (nobody), clean stop on
# SIGTERM, and after every run: no test file left in the target directory.
# usage: test_storage.sh PATH/TO/rtprobe
set -u
PROBE=${1:?usage: test_storage.sh PATH/TO/rtprobe}
PROBE=$(cd "$(dirname "$PROBE")" && pwd)/$(basename "$PROBE") # the tests change directory
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
READER="$HERE/read_samplefile.py"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rtprobe-storage-test-XXXXXX")
MNT="$TMP/mnt"
cleanup() {
    if [ "$(id -u)" -eq 0 ] && mountpoint -q "$MNT" 2>/dev/null; then umount "$MNT"; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
DIR="$TMP/target"
mkdir "$DIR"
. "$HERE/lib.sh"
PYCHECK_PRELUDE="b = t['histograms']['block']"
# nothing_left DIR WHAT: the probe left no test file behind.
nothing_left() {
    if ls -A "$1" | grep -q rtprobe-storage; then fail "$2 left a test file: $(ls -A "$1")"; else ok; fi
}
OUT="$TMP/run.rts"

# Help and usage errors (exit 2, nothing written).
expect 0 "--help" -- "$PROBE" --help
grep_in "$TMP/out" "storage" "--help lists storage"
expect 0 "storage --help" -- "$PROBE" storage --help
grep_in "$TMP/out" "--drop-caches" "storage --help lists options"
expect 2 "no mode" -- "$PROBE" storage --output "$OUT"
grep_in "$TMP/err" "valid modes: write_sync, write, read" "no mode message"
expect 2 "unknown mode" -- "$PROBE" storage writesync --output "$OUT"
grep_in "$TMP/err" "unknown mode 'writesync'; valid modes: write_sync, write, read" "unknown mode message"
expect 2 "missing --output" -- "$PROBE" storage write --dir "$DIR"
grep_in "$TMP/err" "output" "missing --output message"
expect 2 "size not a multiple of the block size" -- "$PROBE" storage write --size 5000 --dir "$DIR" --output "$OUT"
grep_in "$TMP/err" "not a multiple of --block-size 4096 (nearest multiples: 4096, 8192)" "size multiple message"
expect 2 "size below the block size" -- "$PROBE" storage write --size 1K --block-size 4K --dir "$DIR" --output "$OUT"
grep_in "$TMP/err" "smallest valid size is 4096" "small size message"
expect 2 "bad size" -- "$PROBE" storage write --size 4MB --dir "$DIR" --output "$OUT"
grep_in "$TMP/err" "expected a byte count such as 4096, 4K, 1M or 1G, got '4MB'" "bad size message"
expect 2 "size 0" -- "$PROBE" storage write --size 0 --dir "$DIR" --output "$OUT"
expect 2 "repetitions 0" -- "$PROBE" storage write --repetitions 0 --dir "$DIR" --output "$OUT"
expect 2 "--direct with an odd block size" -- "$PROBE" storage read --direct --size 1000 --block-size 1000 --dir "$DIR" --output "$OUT"
grep_in "$TMP/err" "multiple of 512" "--direct block size message"
expect 2 "--fdatasync with write" -- "$PROBE" storage write --fdatasync --dir "$DIR" --output "$OUT"
grep_in "$TMP/err" "write_sync only" "--fdatasync message"
expect 2 "--drop-caches with write" -- "$PROBE" storage write --drop-caches --dir "$DIR" --output "$OUT"
grep_in "$TMP/err" "read only" "--drop-caches message"
expect 2 "--read-back with write" -- "$PROBE" storage write --read-back --dir "$DIR" --output "$OUT"
grep_in "$TMP/err" "--read-back applies to mode read" "--read-back message"
expect 2 "--read-back with --drop-caches" -- "$PROBE" storage read --read-back --drop-caches --dir "$DIR" --output "$OUT"
expect 2 "--read-back with --direct" -- "$PROBE" storage read --read-back --direct --dir "$DIR" --output "$OUT"
expect 2 "--direct=maybe" -- "$PROBE" storage write --direct=maybe --dir "$DIR" --output "$OUT"
[ ! -e "$OUT" ] && ok || fail "a usage error left $OUT"

# Bad directories: exit 1, a clear message, nothing written.
expect 1 "missing directory" -- "$PROBE" storage write --repetitions 2 --dir "$TMP/no/such" --output "$OUT"
grep_in "$TMP/err" "cannot use directory '$TMP/no/such': No such file or directory" "missing directory message"
touch "$TMP/plain"
expect 1 "not a directory" -- "$PROBE" storage write --repetitions 2 --dir "$TMP/plain" --output "$OUT"
grep_in "$TMP/err" "is not a directory" "not a directory message"
expect 1 "too big for the disk" -- "$PROBE" storage write --size 1T --repetitions 1 --dir "$DIR" --output "$OUT"
grep_in "$TMP/err" "not enough free space in '$DIR': the test file needs 1.0 TiB" "free space message"
[ ! -e "$OUT" ] && ok || fail "a refused run left $OUT"
nothing_left "$DIR" "refused runs"

# Every mode end to end: records, histogram and counters agree.
for mode in write_sync write read; do
    expect 0 "storage $mode" -- "$PROBE" storage "$mode" --size 64K --block-size 4K --repetitions 5 --dir "$DIR" --output "$TMP/$mode.rts"
    expect 0 "validate $mode" -- "$PYTHON" "$READER" "$TMP/$mode.rts"
    grep_in "$TMP/out" "^columns: duration, sync, block_max$" "$mode columns"
    grep_in "$TMP/out" "^n: 5$" "$mode record count"
    pycheck "$TMP/$mode.rts" "h['workload'] == 'storage' and h['variant'] == '$mode' and h['params'] == {'size': 65536, 'repetitions': 5, 'block_size': 4096, 'dir': '$DIR', 'direct': False, 'fdatasync': False, 'drop_caches': False} and b['n'] == 80 and t['counters']['blocks_per_pass'] == 16 and t['counters']['bytes'] == 5 * 65536 and all(d > 0 and bm > 0 and bm <= d and s <= d for d, s, bm in r) and b['sum'] <= sum(d for d, s, bm in r) and b['max'] == max(bm for d, s, bm in r) and sum(b['counts']) + b['overflow'] == 80" "$mode records and histogram"
    nothing_left "$DIR" "storage $mode"
done
pycheck "$TMP/write_sync.rts" "all(s > 0 for d, s, bm in r)" "write_sync records its fsync"
pycheck "$TMP/write.rts" "all(s == 0 for d, s, bm in r)" "write has no sync"
pycheck "$TMP/read.rts" "any('page cache' in n for n in t['notes'])" "warm read note"
# The study's defaults: 4 KiB in one 4 KiB block (fewer passes here).
expect 0 "default size and block" -- "$PROBE" storage read --repetitions 50 --dir "$DIR" --output "$TMP/small.rts"
pycheck "$TMP/small.rts" "h['params']['size'] == 4096 and h['params']['block_size'] == 4096 and len(r) == 50 and b['n'] == 50" "defaults"
# The relative default directory is the working directory.
(cd "$DIR" && "$PROBE" storage write --repetitions 3 --output "$TMP/cwd.rts") 2>"$TMP/err" && ok || fail "--dir default ."
pycheck "$TMP/cwd.rts" "h['params']['dir'] == '.'" "default dir recorded"
nothing_left "$DIR" "default dir run"
# A tiny histogram: the slow blocks go to overflow, never lost.
expect 0 "histogram overflow" -- "$PROBE" storage write --size 32K --repetitions 4 --hist-bucket-ns 1 --hist-buckets 2 --dir "$DIR" --output "$TMP/ovf.rts"
pycheck "$TMP/ovf.rts" "b['overflow'] == 32 and b['n'] == 32 and b['overflow_cycles'] == list(range(32)) and t['counters']['block_overflows'] == 32 and any('overflow' in n for n in t['notes'])" "histogram overflow counted"
# --read-back: the file is dropped from the cache and read back once before the timed passes
# (16 blocks: 16 untimed reads + 3 x 16 timed ones, one fadvise), recorded in the parameters.
expect 0 "read --read-back" -- "$PROBE" storage read --read-back --size 64K --repetitions 3 --dir "$DIR" --output "$TMP/rb.rts"
pycheck "$TMP/rb.rts" "h['params']['read_back'] is True and b['n'] == 48 and len(r) == 3" "--read-back recorded"
pycheck "$TMP/read.rts" "'read_back' not in h['params']" "no read_back parameter without --read-back"
nothing_left "$DIR" "--read-back"
if command -v strace >/dev/null 2>&1; then
    # LeakSanitizer cannot run under ptrace; the dynamic loader's own preads are not 4 KiB.
    ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=pread64,fadvise64 -o "$TMP/rb.trace" "$PROBE" storage read --read-back --size 64K --repetitions 3 --dir "$DIR" --output "$TMP/rb2.rts" 2>"$TMP/err" || fail "--read-back under strace"
    [ "$(grep -c 'pread64(.*, 4096, ' "$TMP/rb.trace")" -eq 64 ] && grep -q 'POSIX_FADV_DONTNEED' "$TMP/rb.trace" && ok || fail "--read-back: expected 64 preads and one POSIX_FADV_DONTNEED: $(grep -c 'pread64(.*, 4096, ' "$TMP/rb.trace") preads"
fi
# fdatasync and O_DIRECT (on this directory's filesystem, when it supports it).
expect 0 "write_sync --fdatasync" -- "$PROBE" storage write_sync --fdatasync --repetitions 3 --dir "$DIR" --output "$TMP/fds.rts"
pycheck "$TMP/fds.rts" "h['params']['fdatasync'] is True and all(s > 0 for d, s, bm in r)" "fdatasync recorded"
"$PROBE" storage read --direct --size 16K --repetitions 3 --dir "$DIR" --output "$TMP/direct.rts" 2>"$TMP/err"
rc=$?
if [ "$rc" -eq 0 ]; then
    pycheck "$TMP/direct.rts" "h['params']['direct'] is True and b['n'] == 12 and not any('page cache' in n for n in t['notes'])" "O_DIRECT read"
elif grep -q "does not support O_DIRECT" "$TMP/err"; then
    ok
else
    fail "--direct: exit $rc"; cat "$TMP/err" >&2
fi
nothing_left "$DIR" "--direct"

# SIGTERM mid-run: exit 128+15, the test file removed, no sample file.
expect_stopped 0.5 "test file removed, no sample file written" "$TMP/killed.rts" -- \
    "$PROBE" storage write_sync --size 64K --repetitions 10000000 --dir "$DIR" --output "$TMP/killed.rts"
nothing_left "$DIR" "SIGTERM"
ls "$TMP" | grep -q '^\.killed' && fail "SIGTERM left a partial sample file" || ok

if [ "$(id -u)" -ne 0 ]; then
    chmod 0555 "$DIR"
    expect 1 "unwritable directory" -- "$PROBE" storage write --repetitions 2 --dir "$DIR" --output "$OUT"
    grep_in "$TMP/err" "is not writable: Permission denied" "unwritable directory message"
    chmod 0755 "$DIR"
    expect 1 "--drop-caches as non-root" -- "$PROBE" storage read --drop-caches --repetitions 2 --dir "$DIR" --output "$OUT"
    grep_in "$TMP/err" "needs root (this process is not root)" "--drop-caches refusal"
    echo "test_storage.sh: root-only checks skipped (small tmpfs for free space, read-only mount, cold reads)"
else
    mkdir "$MNT"
    # Not enough free space: a real 1 MiB tmpfs.
    if mount -t tmpfs -o size=1m rtprobe-test "$MNT" 2>"$TMP/err"; then
        expect 1 "file larger than the free space" -- "$PROBE" storage write --size 2M --repetitions 1 --dir "$MNT" --output "$OUT"
        grep_in "$TMP/err" "not enough free space in '$MNT': the test file needs 2.0 MiB" "tmpfs free space message"
        [ -z "$(ls -A "$MNT")" ] && ok || fail "refused run left files on the tmpfs: $(ls -A "$MNT")"
        expect 0 "a file that fits" -- "$PROBE" storage write_sync --size 256K --repetitions 3 --dir "$MNT" --output "$OUT"
        pycheck "$OUT" "any('tmpfs' in n for n in t['notes'])" "tmpfs note"
        [ -z "$(ls -A "$MNT")" ] && ok || fail "run left files on the tmpfs: $(ls -A "$MNT")"
        umount "$MNT"
        # Unwritable: a read-only mount (root may write anywhere else).
        mount -t tmpfs -o size=1m,ro rtprobe-test "$MNT"
        expect 1 "read-only directory" -- "$PROBE" storage write --repetitions 2 --dir "$MNT" --output "$OUT"
        grep_in "$TMP/err" "directory '$MNT' is not writable: Read-only file system" "read-only message"
        umount "$MNT"
    else
        echo "test_storage.sh: cannot mount a tmpfs here ($(cat "$TMP/err")); free-space checks skipped"
    fi
    # Cold reads as root; as nobody they are refused.
    expect 0 "read --drop-caches as root" -- "$PROBE" storage read --drop-caches --size 16K --repetitions 2 --dir "$DIR" --output "$TMP/cold.rts"
    pycheck "$TMP/cold.rts" "h['params']['drop_caches'] is True and len(r) == 2" "cold read recorded"
    nothing_left "$DIR" "--drop-caches"
    if command -v setpriv >/dev/null; then
        cp "$PROBE" "$TMP/rtprobe"
        chmod 0755 "$TMP" "$TMP/rtprobe"
        chmod 0777 "$DIR"
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$TMP/rtprobe" storage read --drop-caches \
            --repetitions 2 --dir "$DIR" --output "$DIR/nobody.rts" 2>"$TMP/err"
        rc=$?
        [ "$rc" -eq 1 ] && ok || fail "--drop-caches as nobody: exit $rc, expected 1"
        grep_in "$TMP/err" "--drop-caches needs root (this process is not root): cannot open /proc/sys/vm/drop_caches for writing: Permission denied" "--drop-caches refusal"
        chmod 0555 "$DIR"
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$TMP/rtprobe" storage write \
            --repetitions 2 --dir "$DIR" --output "$TMP/nobody.rts" 2>"$TMP/err"
        rc=$?
        [ "$rc" -eq 1 ] && ok || fail "unwritable directory as nobody: exit $rc, expected 1"
        grep_in "$TMP/err" "is not writable: Permission denied" "unwritable directory message"
        chmod 0755 "$DIR"
        nothing_left "$DIR" "runs as nobody"
    fi
fi

echo "test_storage.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
