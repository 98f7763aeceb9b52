"""The exceedance plot of the tail analysis in headless Chromium (issue 33, item 2; docs/tail.md): the report's
plot, drawn by plotly, has a log y axis per configuration, the threshold and the bound at p = 1e-9, the fit
reaching below the data's end, and the refusal's reason on the refused panel and in the caption; serve's
experiment and run pages draw it, and the API's tail endpoints answer exactly what `rtscope tail --json`
prints. The plot's figures without a browser: tests/test_exceedance.py."""

from __future__ import annotations

import pytest

from served import Served, open_page, report_page
from test_exceedance import N, tail_json, tails  # noqa: F401  (tails: the store, a fixture)

pytestmark = pytest.mark.real


# --- in Chromium: the report and serve --------------------------------------------------------------------

DRAWN_PLOT = """(() => {
  const d = [...document.querySelectorAll('div.plot')].find(d => d.layout.title.text.endsWith(': exceedance'));
  const L = d._fullLayout;
  return {types: Object.keys(L).filter(k => /^yaxis\\d*$/.test(k)).map(k => L[k].type),
          notes: [...d.querySelectorAll('.annotation-text')].map(e => e.textContent),
          names: d._fullData.map(t => t.name), points: d.querySelectorAll('.scatterlayer .point').length,
          caption: d.closest('figure').querySelector('figcaption').textContent, x: L.xaxis.range};
})()"""


def check_drawn(page, panels: int, claimed: bool, refused: bool) -> dict:
    p = page.evaluate(DRAWN_PLOT)
    assert p["types"] == ["log"] * panels, p["types"]
    assert p["points"] > 100                                  # the samples' markers are drawn
    assert ("threshold" in p["names"] and any(n.startswith("bound at p = 1e-09") for n in p["names"])) == claimed
    assert any(n.startswith("threshold ") for n in p["notes"]) == claimed
    assert any(n.startswith("p = 1e-09: ") for n in p["notes"]) == claimed
    assert any(n.startswith("no bound claimed: the independence check failed") for n in p["notes"]) == refused
    assert ("no bound claimed: independence: exceedances" in p["caption"]) == refused
    return p


def test_report_and_serve_in_chromium(cli, tails, browser, tmp_path):
    page = report_page(cli, tails["db"], tmp_path / "r.html", browser)
    p = check_drawn(page, 2, True, True)
    assert p["x"][1] >= tails["max_us"]
    assert page.problems == [], page.problems

    s = Served(tails["db"], log=tails["tmp"] / "serve.log")
    try:
        for path, panels, claimed, refused in ((f"/experiments/{tails['exp']}", 2, True, True),
                                               (f"/runs/{tails['ids']['bursty'][0]}", 1, False, True)):
            counters = open_page(page, s.url + path)
            assert counters["errors"] == 0 and counters["drawn"] == counters["plots"], (path, counters)
            check_drawn(page, panels, claimed, refused)
            links = page.evaluate("[...document.querySelectorAll('#tail-links a')].map(a => a.getAttribute('href'))")
            assert links, path
            for link in links:                                  # each link answers a tail document
                doc = s.json(link)
                assert doc["n"] >= 2 * N or "run" in doc, (link, doc)
        assert page.problems == [], page.problems

        # the API: exactly what `rtscope tail --json` prints
        run = tails["ids"]["none"][0]
        assert s.json(f"/api/runs/{run}/tail") == tail_json(cli, run, "--db", tails["db"])
        assert s.json(f"/api/experiments/{tails['exp']}/tail?where=load=bursty") == \
            tail_json(cli, "--experiment", tails["exp"], "--where", "load=bursty", "--db", tails["db"])
        ids = "&".join(f"run={i}" for i in tails["ids"]["none"])
        doc = s.json(f"/api/experiments/{tails['exp']}/tail?{ids}")
        assert doc["claimed"] and doc["levels"] and set(doc) >= {"configuration", "n", "checks", "claimed",
                                                                 "refused_because", "model", "levels"}
        status, body, _ = s.get(f"/api/experiments/{tails['exp']}/tail")
        assert status == 422 and "2 configurations" in body and "load=bursty" in body and "--where" in body
        status, body, _ = s.get("/api/experiments/999/tail")
        assert status == 404 and "no experiment 999" in body
        status, body, _ = s.get(f"/api/experiments/{tails['exp']}/tail?run=x")
        assert status == 422 and "parameter run='x'" in body and "valid: a run id" in body
        status, body, _ = s.get("/api/runs/999/tail")
        assert status == 404 and "no run 999" in body
    finally:
        s.stop()
