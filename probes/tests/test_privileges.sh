#!/bin/sh
# Real-time settings under real privileges: as root SCHED_FIFO and mlockall
# work (and the policy is really in force); as an unprivileged user they are
# refused with exit 1 and the exact message, and no file is written.
# Needs root (to switch to nobody); skips otherwise.
# usage: test_privileges.sh PATH/TO/rtprobe
set -u
PROBE=${1:?usage: test_privileges.sh PATH/TO/rtprobe}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ]; then
    echo "test_privileges.sh: skipped (needs root to test SCHED_FIFO and to switch to nobody)"
    exit 0
fi
for tool in setpriv prlimit chrt; do
    if ! command -v "$tool" >/dev/null; then
        echo "test_privileges.sh: skipped ($tool not found; it is in util-linux)"
        exit 0
    fi
done
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rtprobe-priv-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
chmod 0777 "$TMP"
cp "$PROBE" "$TMP/rtprobe" # somewhere nobody can surely execute it
chmod 0755 "$TMP/rtprobe"
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
AS_NOBODY="setpriv --reuid=nobody --regid=nogroup --clear-groups"

# Root: the run succeeds and records the settings.
if "$TMP/rtprobe" exec nothing --priority 90 --mlock --cpu 0 --iterations 100 --pause-ms 0 \
    --output "$TMP/root.rts" 2>"$TMP/err"; then ok; else fail "root run with --priority 90 --mlock"; cat "$TMP/err" >&2; fi
if "$PYTHON" -c "
import sys; sys.path.insert(0, '$HERE')
import read_samplefile as rs
h, t, r = rs.read(open('$TMP/root.rts', 'rb').read())
sys.exit(0 if h['settings'] == {'rt_priority': 90, 'cpu': 0, 'mlock': True} and len(r) == 100 else 1)
"; then ok; else fail "root run: settings not recorded"; fi

# Root: the policy is really in force while the probe runs.
"$TMP/rtprobe" exec sleep --ms 400 --iterations 1 --pause-ms 0 --priority 42 --output "$TMP/chrt.rts" &
pid=$!
sleep 0.2
policy=$(chrt -p "$pid" 2>&1)
wait "$pid"
case "$policy" in
*SCHED_FIFO*42*) ok ;;
*) fail "probe not under SCHED_FIFO 42 while running: $policy" ;;
esac

# nobody, no real-time budget: SCHED_FIFO refused, exit 1, exact message.
prlimit --rtprio=0:0 $AS_NOBODY "$TMP/rtprobe" exec nothing --priority 90 --iterations 10 \
    --pause-ms 0 --output "$TMP/nobody.rts" 2>"$TMP/err"
rc=$?
[ "$rc" -eq 1 ] && ok || fail "nobody --priority 90: exit $rc, expected 1"
if grep -qx "rtprobe: SCHED_FIFO priority 90 refused by the kernel: Operation not permitted" "$TMP/err"; then ok; else
    fail "nobody --priority 90 message"; cat "$TMP/err" >&2; fi
[ ! -e "$TMP/nobody.rts" ] && ok || fail "refused run left a file"

# nobody, no lockable memory: mlockall refused, exit 1.
prlimit --memlock=0:0 $AS_NOBODY "$TMP/rtprobe" exec nothing --mlock --iterations 10 \
    --pause-ms 0 --output "$TMP/nobody.rts" 2>"$TMP/err"
rc=$?
[ "$rc" -eq 1 ] && ok || fail "nobody --mlock: exit $rc, expected 1"
if grep -q "^rtprobe: mlockall refused by the kernel: " "$TMP/err"; then ok; else
    fail "nobody --mlock message"; cat "$TMP/err" >&2; fi
[ ! -e "$TMP/nobody.rts" ] && ok || fail "refused run left a file"

# nobody without real-time options: works, so the refusals above are about privileges.
if $AS_NOBODY "$TMP/rtprobe" exec nothing --iterations 10 --pause-ms 0 --output "$TMP/nobody.rts" 2>"$TMP/err" &&
    "$PYTHON" "$HERE/read_samplefile.py" "$TMP/nobody.rts" >/dev/null; then ok; else
    fail "plain run as nobody"; cat "$TMP/err" >&2; fi

echo "test_privileges.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
