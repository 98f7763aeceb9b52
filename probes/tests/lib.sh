# Shared by rtprobe's shell tests (sourced): counters and assertions.
# The sourcing script sets TMP (a scratch directory), HERE (this folder) and PYTHON,
# and may set PYCHECK_PRELUDE (Python run before each pycheck expression).
passed=0
failed=0

ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# expect CODE DESCRIPTION -- COMMAND...: run, compare the exit code; stdout
# and stderr are kept in $TMP/out and $TMP/err for further checks.
expect() {
    code=$1; what=$2; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -eq "$code" ]; then ok; else fail "$what: exit $rc, expected $code"; cat "$TMP/err" >&2; fi
}

# expect_stopped SECONDS MESSAGE OUTPUT -- COMMAND...: start COMMAND in the
# background, SIGTERM it after SECONDS; it must exit 143, say MESSAGE on
# stderr ($TMP/err) and leave nothing at OUTPUT.
expect_stopped() {
    delay=$1; message=$2; output=$3; shift 4
    "$@" 2>"$TMP/err" &
    pid=$!
    sleep "$delay"
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    [ "$rc" -eq 143 ] && ok || fail "SIGTERM: exit $rc, expected 143"
    grep_in "$TMP/err" "$message" "SIGTERM message"
    [ ! -e "$output" ] && ok || fail "SIGTERM left $(basename "$output")"
}

# grep_in FILE PATTERN DESCRIPTION
grep_in() {
    if grep -q -- "$2" "$1"; then ok; else fail "$3: '$2' not in $(basename "$1")"; cat "$1" >&2; fi
}

# pycheck FILE EXPRESSION DESCRIPTION: EXPRESSION over header h, trailer t, rows r
pycheck() {
    if "$PYTHON" -c "
import sys; sys.path.insert(0, '$HERE')
import read_samplefile as rs
h, t, r = rs.read(open('$1', 'rb').read())
${PYCHECK_PRELUDE:-}
sys.exit(0 if ($2) else 1)
"; then ok; else fail "$3: ($2) is false for $1"; fi
}
