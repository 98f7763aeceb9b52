"""What the routes share, and how a route gets it.

One `Server` per application, on `app.state.server`: the store, its change watch, the caches, the templates and
the token. A route names it as a parameter of type `Shared` (a FastAPI dependency); the middleware and the
exception handlers are handed it, or read it from the application.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Annotated

import jinja2
from fastapi import Depends, Request
from fastapi.responses import HTMLResponse

from ..analysis.documents import show_document
from ..report.html import PLOTLY_BUNDLE
from ..report.model import machine_rows
from ..report.template import TABLES
from ..store import Store, to_jsonable
from ..version import __version__
from . import boards, metrics, views
from .access import Access
from .live import Bounded, Refreshed, Watch

HERE = Path(__file__).parent


def document_text(obj) -> str:
    """A document as the CLI's --json prints it (the same text, without the final newline)."""
    return json.dumps(to_jsonable(obj), indent=2, sort_keys=False)


class Server:
    """The store and what the routes share: the change watch, the caches, the templates and the token check."""

    def __init__(self, store: Store, access: Access):
        self.store, self.access = store, access
        self.watch = Watch(store)
        self.lab = boards.Lab(store)       # the boards of /metrics, each interval's figures computed once
        self.run_docs = Bounded(256)       # run id -> (show document, its text)
        self.run_stats = Bounded(256)      # run id -> its show document without the worst case (no tail fit)
        self.run_pages = Bounded(16)       # run id -> page (a stored run never changes)
        self.run_machines = Bounded(1024)  # run id -> its machine record (each target's newest run's)
        self.exposition = metrics.Exposition()   # /metrics' text, each board's lines made once per its state
        self.by_state = Bounded(32)        # (what, args..., fingerprint) -> page or document (pages < ~1 MB)
        making = threading.Lock()          # the lab page, and the boards as /metrics reads them: made again off
        self.lab_page = Refreshed(making)  # the request when the store changes, one at a time
        self.boards_read = Refreshed(making)
        self.templates = jinja2.Environment(loader=jinja2.ChoiceLoader([
            jinja2.FileSystemLoader(HERE / "templates"), jinja2.DictLoader({"tables.html": TABLES})]), autoescape=True,
                                            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.templates.globals["machine_rows"] = machine_rows
        self.plotly_gz = PLOTLY_BUNDLE.read_bytes()

    def page(self, name: str, status: int = 200, **context) -> HTMLResponse:
        html = self.templates.get_template(name).render(version=__version__, store=self.store.shown_url,
                                                        token=self.access.required, **context)
        return HTMLResponse(html, status_code=status)

    def run_doc(self, run_id: int) -> tuple[dict, str]:
        def make():
            doc = to_jsonable(show_document(self.store, views.get_run(self.store, run_id)))
            return doc, document_text(doc)
        return self.run_docs.get(run_id, make)

    def stats_doc(self, run) -> dict:
        """A run's show document for a page of many runs: without the worst case, whose tail fit would cost
        each run up to seconds (the run's own page and the API have it)."""
        return self.run_stats.get(run.id, lambda: to_jsonable(show_document(self.store, run, worst_case=False)))

    def targets(self) -> list[views.TargetRow]:
        """Every target that has runs, with its newest run's machine record (read once per run)."""
        newest = self.lab.origins.read().targets
        return views.targets(newest, self.run_machines.get_many([t.run_id for t in newest.values()],
                                                                self.store.machines))

    def latest_runs(self) -> list:
        """The newest stored runs, newest first (each read once: a stored run never changes)."""
        ids = self.store.latest_run_ids(views.LATEST_RESULTS)
        found = self.lab.runs(ids)
        return [found[i] for i in ids if i in found]

    def current(self, key: tuple, make):
        """A value computed from the store as it is now, cached until the store changes."""
        return self.by_state.get((*key, self.watch.fingerprint()), make)


async def server(request: Request) -> Server:
    """The application's Server. A coroutine, so FastAPI resolves it on the event loop: /metrics' fast path
    stays there (a plain function would be run in the thread pool)."""
    return request.app.state.server


Shared = Annotated[Server, Depends(server)]
