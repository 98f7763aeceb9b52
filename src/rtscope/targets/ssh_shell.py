"""The POSIX sh that rtscope runs on an SSH target, and the parsing of what it prints.

Both ways of reaching the target use these: a command on its own SSH channel (ssh.py's fallback) and the
session agent that keeps one channel for a whole experiment (ssh_session.py). They are plain POSIX sh (dash,
busybox ash, bash as sh), with only setsid, cat, mkdir, rm, mkfifo (the agent's background jobs) and grep
(optional) besides the shell's builtins.
"""

from __future__ import annotations

# members SID: the live (non-zombie) processes of session SID, from /proc. Zombies wait for their reaper
# and cannot run; `kill -0` would count them. One grep reads every stat file (the fields after the last ')':
# state, ppid, pgrp, session); the loop of shell builtins is for a target without grep (10-30 ms).
MEMBERS_FUNCTION = r'''
members() {
  if command -v grep >/dev/null 2>&1; then
    set -- $(grep -lE "\) [^Z] [0-9]+ [0-9]+ $1 [^)]*\$" /proc/[0-9]*/stat 2>/dev/null)
    echo $#
    return
  fi
  sid=$1; n=0
  for s in /proc/[0-9]*/stat; do
    read -r l 2>/dev/null <"$s" || continue
    l=${l##*) }
    set -- $l
    [ "$4" = "$sid" ] && [ "$1" != Z ] && n=$((n+1))
  done
  echo $n
}
# alive SID: whether session SID has a live process. Its process group (SID too: setsid made it) is asked first
# with the builtin kill, so that the common case, the group gone, starts no process; only a group that still
# has a process (maybe a zombie) is counted by members. A process that left the group for another one of the
# session (setpgid) is not seen: the stops kill the group, which does not reach it either.
alive() { kill -0 -$1 2>/dev/null && [ "$(members $1)" != 0 ]; }
'''

# supervise DIR STDIN LOG COMMAND...: LOG "-" is the channel. In spawn mode (LOG given) the first line of stdout
# is "rtscope-pid PID". Returns the command's exit status. The command's whole session is killed when the
# supervisor's standard input ends (the channel closed: a stop, a dropped connection) or brings a line "stop"
# (the session agent's stop, which keeps the channel).
SUPERVISE_FUNCTION = MEMBERS_FUNCTION + r'''
supervise() {
  cd "$1" 2>/dev/null || { echo "rtscope: cannot enter directory $1 on the target" >&2; return 125; }
  in=$2; log=$3; shift 3
  exec 3<&0
  if [ "$log" = - ]; then setsid "$@" <"$in" 3<&- & else setsid "$@" <"$in" >"$log" 2>&1 3<&- & fi
  pid=$!
  [ "$log" = - ] || echo "rtscope-pid $pid"
  (
    while IFS= read -r l <&3; do [ "$l" = stop ] && break; done
    kill -TERM -$pid 2>/dev/null; n=0
    while alive $pid && [ $n -lt 20 ]; do sleep 0.1; n=$((n+1)); done
    kill -KILL -$pid 2>/dev/null
  ) 3<&3 &
  watcher=$!
  exec 3<&-
  wait $pid; rc=$?
  kill $watcher 2>/dev/null; wait $watcher 2>/dev/null  # gone before anything reads stdin again
  if alive $pid; then
    kill -TERM -$pid 2>/dev/null; sleep 1; kill -KILL -$pid 2>/dev/null; sleep 0.2
    alive $pid && echo "rtscope: processes of session $pid survived SIGKILL" >&2
  fi
  return $rc
}
'''
# $1 working directory, $2 stdin file, $3 log file ("-": the channel), then the command.
SUPERVISOR = SUPERVISE_FUNCTION + 'supervise "$@"; exit $?\n'

# The session agent's background jobs (spawn: load generators, PM QoS holders), in the agent's own shell so that
# it can wait for them. Each job has a watcher that reads a FIFO whose only writer is the agent's fd FD (4..9):
# when the agent closes FD (a stop) or ends however it ends (its channel closed, the connection lost, killed),
# the watcher reads end of file and kills the job's session. `jobfds` lists those fds; every other process the
# agent starts closes them first (closejobs), so that only the agent holds a job's FIFO open.
# jobstart FD DIR LOG COMMAND...: prints "rtscope-pid PID WATCHER FIFO".
# jobstate PID: "-" while the job runs, else its exit status.  jobstop FD PID WATCHER: the stop, then its state
# (status 1 when processes of its session survived SIGKILL).
JOBS_FUNCTION = r'''
jobfds=
closejobs() { for f in $jobfds; do eval "exec $f>&-"; done; }
jobstart() {
  fd=$1; dir=$2; log=$3; shift 3
  [ -d "$dir" ] || mkdir -p -- "$dir" 2>/dev/null || { echo "rtscope: cannot create directory $dir on the target" >&2; return 125; }
  ( closejobs; cd "$dir" || exit 125; exec setsid "$@" ) </dev/null >"$log" 2>&1 &
  pid=$!; fifo=$dir/.rtscope-job-$pid
  mkfifo -m 600 "$fifo" || { kill -KILL -$pid 2>/dev/null; kill -KILL $pid 2>/dev/null; return 125; }
  ( closejobs
    while IFS= read -r l; do [ "$l" = stop ] && break; done
    kill -TERM -$pid 2>/dev/null; n=0
    while alive $pid && [ $n -lt 20 ]; do sleep 0.1; n=$((n+1)); done
    kill -KILL -$pid 2>/dev/null; n=0
    while alive $pid && [ $n -lt 5 ]; do sleep 0.1; n=$((n+1)); done
    ! alive $pid ) <"$fifo" >/dev/null 2>&1 &
  watcher=$!
  eval "exec $fd>\"\$fifo\""
  jobfds="$jobfds $fd"
  echo "rtscope-pid $pid $watcher $fifo"
}
jobstate() {
  eval "rc=\${jobrc_$1-}"
  if [ -z "$rc" ]; then
    l=; { read -r l </proc/$1/stat; } 2>/dev/null
    case ${l##*) } in ""|Z*) wait $1; rc=$?; eval "jobrc_$1=$rc" ;; *) echo -; return 0 ;; esac
  fi
  echo "$rc"
}
jobstop() {
  eval "exec $1>&-"
  l=; for f in $jobfds; do [ "$f" = "$1" ] || l="$l $f"; done; jobfds=$l
  wait $3; w=$?
  jobstate $2
  [ $w = 0 ] || { echo "rtscope: processes of session $2 survived SIGKILL" >&2; return 1; }
}
'''

# readfile TOKEN FILE: "\n@@TOKEN FILE\n" and its text, or "\n@@TOKEN!" after it when it cannot be read.
READ_FUNCTION = r'''
readfile() { printf "\n@@%s %s\n" "$1" "$2"; cat -- "$2" 2>/dev/null || printf "\n@@%s!" "$1"; }
'''

# batch TOKEN FIRST BACK DIR STDIN LOG COMMAND...: a run with as few processes as it can (each costs a fork on
# the target): FIRST the files to read first and BACK the files to send back (newline-separated), then supervise's
# arguments. It writes each file read first as readfile does (a line read by the shell), "\n@@TOKEN>", the
# command's stdout, "@@TOKEN<", then each file to send back as "@@TOKEN PATH\n" and its bytes ("@@TOKEN! PATH\n"
# when absent), and returns the command's status.
BATCH_FUNCTION = r'''
batch() {
  tok=$1; first=$2; back=$3; shift 3
  IFS='
'; set -f
  for f in $first; do
    printf "\n@@%s %s\n" "$tok" "$f"
    l=; if { IFS= read -r l <"$f" || [ -n "$l" ]; } 2>/dev/null; then printf "%s\n" "$l"; else printf "\n@@%s!" "$tok"; fi
  done
  unset IFS; set +f
  printf "\n@@%s>" "$tok"
  supervise "$@"; rc=$?
  printf "@@%s<" "$tok"
  IFS='
'; set -f
  for f in $back; do
    if [ -f "$f" ]; then printf "@@%s %s\n" "$tok" "$f"; cat -- "$f"; else printf "@@%s! %s\n" "$tok" "$f"; fi
  done
  unset IFS; set +f
  return $rc
}
'''
BATCH = SUPERVISE_FUNCTION + BATCH_FUNCTION + 'batch "$@"; exit $?\n'


def printf_format(data: bytes) -> str:
    """`data` as a printf format in single quotes, on one line: printf writes exactly these bytes (NUL too).
    The session agent writes a command's standard input so, in the command's own request."""
    out = []
    for b in data:
        c = chr(b)
        if c == "%":
            out.append("%%")
        elif 32 <= b < 127 and c not in "\\'":
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return "'" + "".join(out) + "'"


def parse_read(text: str, token: str, paths: list[str] | None = None) -> dict[str, str | None]:
    """readfile's output: each path's text (of `paths`, else of every file in it), None when unreadable."""
    out: dict[str, str | None] = {}
    for part in text.split(f"\n@@{token} ")[1:]:
        name, _, body = part.partition("\n")
        out[name] = None if body.endswith(f"\n@@{token}!") or body == f"\n@@{token}!"[1:] else body
    return out if paths is None else {p: out.get(p) for p in paths}


def unbatch(token: str, out: bytes) -> tuple[dict[str, str | None], bytes, dict[str, bytes | None]]:
    """batch's output -> (files read first, the command's stdout, files brought back). A script stopped before
    the command (its directory could not be made) gives its output as the command's."""
    mark = b"@@" + token.encode()
    begin = out.find(b"\n" + mark + b">")
    if begin < 0:
        return {}, out, {}
    read = parse_read(out[:begin].decode(errors="replace"), token)
    start = begin + len(mark) + 2
    end = out.find(mark + b"<", start)
    if end < 0:
        return read, out[start:], {}
    brought: dict[str, bytes | None] = {}
    # Each file runs to the next mark: a random token that its bytes do not hold.
    for part in out[end + len(mark) + 1:].split(mark)[1:]:
        head, _, data = part.partition(b"\n")
        absent = head.startswith(b"!")
        brought[head[2 if absent else 1:].decode(errors="replace")] = None if absent else data
    return read, out[start:end], brought
