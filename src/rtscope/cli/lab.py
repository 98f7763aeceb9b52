"""rtscope lab: the lab's boards, who watches each and their last interval (docs/lab.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import DbOption, Table, app, console, escape, open_store, print_json


@app.command()
def lab(json_out: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout, nothing "
                                                "else.")] = False,
        db: DbOption = None) -> None:
    """The lab's boards: which controller watches each (`rtscope monitor --target FLEET`), its state, its
    monitoring's intervals and its last interval."""
    from ..experiment import fleet
    status = fleet.lab_status(open_store(db))
    if json_out:
        print_json(status)
        return
    t = Table(box=None, pad_edge=False)
    for name in ("board", "state", "controller", "monitoring", "intervals", "last interval", "max µs",
                 "p99.99 µs", "bound µs", "note"):
        t.add_column(name)
    for b in status["boards"]:
        last = b["last_interval"] or {}
        t.add_row(escape(b["board"]), b["state"], escape(b["controller"] or "–"),
                  str(b["experiment"] or "–"), f"{b['intervals']}/{b['planned'] or '?'}",
                  escape(last.get("finished_at") or "–"),
                  f"{last['max_us']:.1f}" if last.get("max_us") is not None else "–",
                  f"{last['p9999_us']:.1f}" if last.get("p9999_us") is not None else "–",
                  f"{last['bound_us']:.1f}" if last.get("bound_us") is not None else "–", escape(b["reason"] or ""))
    if not status["boards"]:
        console.print("no board in the lab's lease table yet: `rtscope monitor --target FLEET` fills it")
        return
    console.print(t)
    console.print(f"controllers alive: {', '.join(status['controllers']) or 'none'}", highlight=False)
