"""The spool: what a command measured while its store was unreachable, kept on this machine until the store
answers again, then written to it exactly once (docs/store.md, "When the store goes away").

One directory per store, in rtscope's state directory ($RTSCOPE_STATE_DIR, else $XDG_STATE_HOME/rtscope, else
~/.local/state/rtscope): spool/<a hash of the store's URL>/, with a file `store` naming the store. Each entry
is one file, written through a temporary file, fsynced and renamed (a crash leaves the whole entry or none):

    rtscope-spool 1\\n
    {"kind": ..., "size": N, "sha256": ..., ...}\\n        what to write, as JSON on one line
    N bytes                                              the runs' sample files, one after the other

Kinds: `runs` (one or more runs stored in one transaction, with what `add_run` takes; a fleet's interval also
names the board and controller whose lease row it updates) and `status` (an experiment's status, and a fleet
board given back). Entries are written to the store in the order they were made (their names sort so), under
an flock of the directory, so that two rtscope processes never write one twice; an entry is deleted once its
transaction committed. A replay is idempotent: a run of an experiment is refused by the store's unique
(experiment, plan index), so a run already there (stored by an earlier flush killed before it deleted its
entry) is skipped; a run of no experiment (an import) is matched by its recorded identity (started and stored
at, source, what it measured). A file that cannot be read as an entry is renamed to *.corrupt, named in the
report, and never written.

The store layer's own: no console, no SQL here beyond what SqlStore and the lease tables offer.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import RtscopeError

if TYPE_CHECKING:
    from ..samplefile import SampleFile
    from .sql import SqlStore

MAGIC = b"rtscope-spool 1\n"
SUFFIX = ".spool"
CORRUPT = ".corrupt"
RUNS, STATUS = "runs", "status"


class CorruptEntry(RtscopeError):
    """A spool file that is not a whole entry (truncated, altered, not rtscope's)."""


def state_dir() -> Path:
    """Where rtscope keeps its state on this machine: $RTSCOPE_STATE_DIR, else $XDG_STATE_HOME/rtscope, else
    ~/.local/state/rtscope."""
    if os.environ.get("RTSCOPE_STATE_DIR"):
        return Path(os.environ["RTSCOPE_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "rtscope"


def store_key(url: str) -> str:
    """The name of a store's spool directory: a hash of its URL (a SQLite file's absolute path), so that one
    store has one spool whatever directory a command runs in."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        path = url.removeprefix("sqlite:///")
        if path and path != ":memory:" and "?" not in path:
            url = "sqlite:///" + os.path.abspath(path)
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Entry:
    path: Path
    meta: dict[str, Any]
    payload: bytes

    @property
    def runs(self) -> int:
        return len(self.meta.get("runs") or [])


def encode(meta: dict[str, Any], payload: bytes = b"") -> bytes:
    meta = {**meta, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    return MAGIC + json.dumps(meta, separators=(",", ":"), default=str).encode() + b"\n" + payload


def decode(path: Path, blob: bytes) -> Entry:
    """An entry's file, checked whole (its magic, its JSON line, its payload's length and hash)."""
    if not blob.startswith(MAGIC):
        raise CorruptEntry(f"spool file {path} is not an rtscope spool entry (no '{MAGIC.decode().strip()}' line)")
    end = blob.find(b"\n", len(MAGIC))
    if end < 0:
        raise CorruptEntry(f"spool file {path} is truncated (its description line is cut)")
    try:
        meta = json.loads(blob[len(MAGIC):end])
        size, digest = int(meta["size"]), str(meta["sha256"])
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptEntry(f"spool file {path}: its description is not valid ({e})") from None
    payload = blob[end + 1:]
    if len(payload) != size:
        raise CorruptEntry(f"spool file {path} is truncated: {len(payload)} of {size} bytes of samples")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise CorruptEntry(f"spool file {path} is corrupt: its samples do not match their checksum")
    if meta.get("kind") not in (RUNS, STATUS):
        raise CorruptEntry(f"spool file {path}: unknown kind {meta.get('kind')!r} (valid: {RUNS}, {STATUS})")
    return Entry(path, meta, payload)


def write_durably(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all, and on disk before this returns: a temporary file, fsync, rename,
    fsync of the directory."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Flushed:
    """What one flush wrote: runs stored (their ids), runs already there (skipped), statuses set, and the
    corrupt files set aside."""

    stored: list[int] = field(default_factory=list)
    already: int = 0
    statuses: int = 0
    corrupt: list[str] = field(default_factory=list)
    entries: int = 0

    def text(self) -> str:
        parts = [f"{len(self.stored)} spooled run{'s' if len(self.stored) != 1 else ''} written"
                 + (f" (run{'s' if len(self.stored) > 1 else ''} {_ids(self.stored)})" if self.stored else "")]
        if self.already:
            parts.append(f"{self.already} stored already (skipped)")
        if self.statuses:
            parts.append(f"{self.statuses} status change{'s' if self.statuses > 1 else ''} written")
        return ", ".join(parts)


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids)) if len(ids) <= 6 else f"{ids[0]}..{ids[-1]}"


class Spool:
    """The spool directory of one store."""

    def __init__(self, url: str, shown_url: str, root: Path | None = None):
        self.url, self.shown_url = url, shown_url
        self.dir = (root or state_dir()) / "spool" / store_key(url)
        self._lock = threading.Lock()   # one flush at a time in this process (the flock is per open file)

    # --- what is there ------------------------------------------------------------------------------------
    def files(self) -> list[Path]:
        """The entries waiting, oldest first (none when the directory does not exist, or is another user's:
        a spool this user cannot read is not its own to write)."""
        try:
            names = os.listdir(self.dir)
        except (FileNotFoundError, PermissionError):
            return []
        return [self.dir / n for n in sorted(names) if n.endswith(SUFFIX) and not n.startswith(".")]

    def corrupt_files(self) -> list[Path]:
        try:
            return [self.dir / n for n in sorted(os.listdir(self.dir)) if n.endswith(CORRUPT)]
        except (FileNotFoundError, PermissionError):
            return []

    def pending_runs(self) -> int:
        """Runs waiting (read from the entries' names: no file is opened)."""
        total = 0
        for p in self.files():
            try:
                total += int(p.name.rsplit(".", 2)[-2].removeprefix("r"))
            except ValueError:
                total += 1
        return total

    # --- writing an entry ---------------------------------------------------------------------------------
    def _add(self, meta: dict[str, Any], payload: bytes, runs: int) -> Path:
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            named = self.dir / "store"
            if not named.exists():
                write_durably(named, (self.shown_url + "\n").encode())
            path = self.dir / f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(3)}.r{runs}{SUFFIX}"
            write_durably(path, encode({**meta, "store": self.shown_url, "spooled_at": _now_iso(),
                                        "pid": os.getpid()}, payload))
        except OSError as e:
            raise RtscopeError(f"store {self.shown_url} is unreachable and its spool {self.dir} cannot be "
                               f"written ({e.strerror or e}): what was measured is lost") from None
        return path

    def add_runs(self, runs: list[tuple[SampleFile, dict, dict]], lease: dict | None = None) -> Path:
        """Keep runs (each: its sample file, machine record, and add_run's other arguments) to be stored in
        one transaction; `lease`: the fleet board's row to update as the interval's own transaction would."""
        from .. import samplefile
        blobs, described = [], []
        for sf, environment, kw in runs:
            kw = dict(kw)
            blob = samplefile.serialize(sf.header, sf.data, sf.trailer)
            blobs.append(blob)
            described.append({"environment": environment, "size": len(blob),
                              "stored_at": kw.pop("stored_at", None) or _now_iso(), **kw})
        return self._add({"kind": RUNS, "runs": described, "lease": lease}, b"".join(blobs), len(runs))

    def add_status(self, experiment_id: int, status: str, finished_at: str | None,
                   board: dict | None = None) -> Path:
        """Keep an experiment's status change (and a fleet board's release: target, controller, state, reason)."""
        return self._add({"kind": STATUS, "experiment_id": experiment_id, "status": status,
                          "finished_at": finished_at, "board": board}, b"", 0)

    # --- writing the spool to the store --------------------------------------------------------------------
    @contextmanager
    def _flushing(self) -> Iterator[None]:
        with self._lock:
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def flush(self, sql: SqlStore) -> Flushed:
        """Write every entry to the store, oldest first, each in one transaction, and delete it once
        committed. An error of the store (unreachable again) propagates, the entries not yet written kept."""
        out = Flushed()
        if not self.files():
            return out
        with self._flushing():
            for path in self.files():   # again, under the lock: another process may have written some
                try:
                    entry = decode(path, path.read_bytes())
                except FileNotFoundError:
                    continue
                except CorruptEntry as e:
                    os.replace(path, path.with_name(path.name + CORRUPT))
                    out.corrupt.append(f"{e}; set aside as {path.name + CORRUPT}, not written")
                    continue
                apply(entry, sql, out)
                path.unlink()
                out.entries += 1
            _fsync_dir(self.dir)
        return out


def apply(entry: Entry, sql: SqlStore, out: Flushed) -> None:
    """One entry written to the store in one transaction (idempotent: see the module's docstring)."""
    if entry.meta["kind"] == STATUS:
        _apply_status(entry.meta, sql)
        out.statuses += 1
        return
    from .. import samplefile
    from .records import DuplicateRun
    lease = entry.meta.get("lease")
    offset = 0
    with sql.transaction() as c:
        for r in entry.meta["runs"]:
            blob = entry.payload[offset:offset + r["size"]]
            offset += r["size"]
            sf = samplefile.parse(blob, str(entry.path))
            kw = {k: v for k, v in r.items() if k not in ("environment", "size")}
            if kw.get("experiment_id") is None and sql.has_run_like(c, sf, kw["stored_at"], kw.get("source")):
                out.already += 1
                continue
            try:
                with c.begin_nested():
                    run_id = sql.add_run(sf, r["environment"], conn=c, **kw)
            except DuplicateRun:
                out.already += 1
                continue
            out.stored.append(run_id)
            if lease:
                sql.leases.record(c, lease["target"], lease["controller"], last_run_id=run_id,
                                  intervals=lease["intervals"], last_interval_at=sf.trailer.get("finished_at"))


def _apply_status(meta: dict, sql: SqlStore) -> None:
    from .tables import experiments
    with sql.transaction() as c:
        # never over a finished experiment (another process may have resumed and finished it meanwhile)
        c.execute(experiments.update().where(experiments.c.id == meta["experiment_id"],
                                             experiments.c.status != "finished")
                  .values(status=meta["status"], finished_at=meta["finished_at"]))
        board = meta.get("board")
        if board:
            sql.leases.give_back(c, board["target"], board["controller"], board["state"], board.get("reason"))


# --- a store's writes that outlive the store going away -------------------------------------------------------

@dataclass(frozen=True)
class Spooled:
    """A write kept in the spool (the store unreachable): since when, how many runs wait, where, and why."""

    since: float
    pending: int
    dir: Path
    error: str

    def text(self, shown_url: str) -> str:
        since = datetime.fromtimestamp(self.since).strftime("%H:%M:%S")
        return (f"store {shown_url} unreachable since {since}, {self.pending} run{'s' if self.pending != 1 else ''} "
                f"spooled in {self.dir}, retrying ({self.error})")


def hide_password(url: str) -> str:
    import re
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def one_line(e: BaseException) -> str:
    """A store error on one line, without SQLAlchemy's background link."""
    text = str(getattr(e, "orig", None) or e).strip().splitlines()
    return text[0] if text else type(e).__name__


SUMMARY_S = 30.0   # while runs go to the spool, a line saying so at most this often


class Keeper:
    """The writes of a command that measures (runs, a monitoring's intervals, an experiment's status): to the
    store, or to its spool while the store is unreachable, the spool written first whenever the store answers
    again (so runs reach the store in the order they were made). `say` gets a line for each change (the first
    run spooled, with since when; the spool written when the store answers again) and, while runs keep going to
    the spool, one line every SUMMARY_S with how many wait: a fleet of 100 boards says 2 lines a minute, not one
    per interval per board."""

    def __init__(self, sql_of: Callable[[], SqlStore], spool: Spool):
        self._sql_of, self.spool = sql_of, spool
        self.since: float | None = None           # unreachable since (None: it answered last time)
        self.say: Callable[[str], None] | None = None
        self.last: Flushed | None = None          # the last flush that wrote something
        self.error = ""                           # the store's last error, on one line
        self.clock: Callable[[], float] = time.monotonic
        self._next_line: float | None = None      # clock: the next "still unreachable" line (None: none said yet)
        self._state = threading.Lock()

    @property
    def shown_url(self) -> str:
        return self.spool.shown_url

    def _said(self, text: str) -> None:
        if self.say is not None:
            self.say(text)

    def flush(self) -> Flushed | None:
        """Write the spool to the store; what was written (None: the store is still unreachable)."""
        from .sql import unreachable
        try:
            done = self.spool.flush(self._sql_of())
        except Exception as e:  # noqa: BLE001  (unreachable: kept; anything else is a real error)
            if not unreachable(e):
                raise
            self.down(e)
            return None
        with self._state:
            was_down, self.since, self._next_line = self.since is not None, None, None
        for line in done.corrupt:
            self._said(f"spool of store {self.shown_url}: {line}")
        if done.entries or done.corrupt:
            self.last = done
        if done.entries:
            self._said(f"store {self.shown_url} answers{' again' if was_down else ''}: {done.text()}")
        return done

    def down(self, e: BaseException | None) -> float:
        """Note the store unreachable (since now, unless it was already); since when."""
        with self._state:
            if self.since is None:
                self.since = time.time()
            if e is not None:
                self.error = one_line(e)
            return self.since

    def spooled(self, e: BaseException | None) -> Spooled:
        """A write went to the spool (e: the store's error; None: the one seen last): said for the first since
        the store went away, then at most once every SUMMARY_S."""
        since = self.down(e)
        out = Spooled(since, self.spool.pending_runs(), self.spool.dir, self.error)
        with self._state:
            now = self.clock()
            due = self._next_line is None or now >= self._next_line
            if due:
                self._next_line = now + SUMMARY_S
        if due:
            self._said(out.text(self.shown_url))
        return out

    def guarded(self, write: Callable[[], Any], spool: Callable[[], Any], say: bool = True) -> Any:
        """write() to the store after the spool; when the store is unreachable, spool() and a Spooled (said,
        unless `say` is False)."""
        from .sql import unreachable
        error: BaseException | None = None
        if self.spool.files() and self.flush() is None:
            pass
        else:
            try:
                return write()
            except Exception as e:  # noqa: BLE001
                if not unreachable(e):
                    raise
                error = e
        spool()
        if not say:
            self.down(error)
            return Spooled(self.since or time.time(), self.spool.pending_runs(), self.spool.dir, self.error)
        return self.spooled(error)

    def add_run(self, sf: SampleFile, environment: dict, **kw: Any) -> int | Spooled:
        """A run to the store (one transaction), or to the spool."""
        return self.guarded(lambda: self._sql_of().add_run(sf, environment, **kw),
                            lambda: self.spool.add_runs([(sf, environment, kw)]))

    def add_runs(self, runs: list[tuple[SampleFile, dict, dict]]) -> list[int] | Spooled:
        """Runs to the store in one transaction (all or none), or to the spool together."""
        def write() -> list[int]:
            sql = self._sql_of()
            with sql.transaction() as c:
                return [sql.add_run(sf, env, conn=c, **kw) for sf, env, kw in runs]
        return self.guarded(write, lambda: self.spool.add_runs(runs))

    def set_status(self, experiment_id: int, status: str, finished_at: str | None,
                   board: dict | None = None) -> bool:
        """An experiment's status (and a fleet board given back) to the store: True, or spooled: False."""
        meta = {"experiment_id": experiment_id, "status": status, "finished_at": finished_at, "board": board}
        done = self.guarded(lambda: _apply_status(meta, self._sql_of()),
                            lambda: self.spool.add_status(experiment_id, status, finished_at, board), say=False)
        return not isinstance(done, Spooled)

    def wait(self, seconds: float, every: float = 2.0) -> bool:
        """Try to write the spool for up to `seconds`: True once it is empty."""
        deadline = time.monotonic() + seconds
        while True:
            if not self.spool.files() or (self.flush() is not None and not self.spool.files()):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(every, max(0.0, deadline - time.monotonic())))

