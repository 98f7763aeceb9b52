"""The HTML report in a real browser: headless Chromium opens it from file://, offline.

Passes only if the page logs nothing to the console (no script error, no
plotly warning), every plot div holds a rendered plotly SVG, the page's own
error collector saw nothing, the screenshot is not blank, and a label carrying
<script> shows as text. Skips, saying why, when Chromium is not installed
(Debian package `chromium`).
"""

import re
import shutil
import subprocess

import numpy as np
import pytest

from report_fixtures import mixed_store

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = [pytest.mark.real,
              pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed: apt-get install -y "
                                                          "chromium (the browser test of the HTML report needs it)")]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000"]


def chromium(tmp_path, url: str, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, url], capture_output=True,
                          text=True, timeout=180)


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_console_errors_are_detected(tmp_path):
    """The harness itself: a page with a script error must be caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    proc = chromium(tmp_path, bad.as_uri(), "--dump-dom")
    assert any("Uncaught ReferenceError" in m for m in console_messages(proc.stderr)), proc.stderr[-2000:]


def test_report_renders_in_chromium(cli, tmp_path):
    db = mixed_store(tmp_path)
    report = tmp_path / "report.html"
    r = cli("report", "--db", db, "-o", report, "--baseline", "priority=normal", "--baseline", "kernel=normal")
    assert r.code == 0, r.err

    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, report.as_uri(), "--dump-dom", "--window-size=1280,4000", f"--screenshot={shot}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_messages(proc.stderr) == []
    dom = proc.stdout
    body = re.search(r"<body([^>]*)>", dom).group(1)
    plots = int(re.search(r'data-plots="(\d+)"', body).group(1))
    assert plots == 12          # the timer group's exceedance plot included (test_report.py says why)
    assert re.search(r'data-plots-drawn="(\d+)"', body).group(1) == str(plots)
    assert 'data-js-errors="0"' in body
    # every plot div holds a rendered plotly figure
    divs = re.split(r'<div class="plot[^"]*" id="plot-\d+"', dom)[1:]
    assert len(divs) == plots
    for d in divs:
        block = d.split("</figure>")[0]
        assert 'class="main-svg"' in block and ('class="trace' in block or 'class="boxlayer' in block)
    # the label with markup is text, both in the tables and in plotly's legends
    assert "window.rtsInjected" in dom and "<img src=" not in dom
    assert "priority=&lt;script&gt;window.rtsInjected=1&lt;/script&gt;" in dom
    assert re.search(r'class="legendtext"[^>]*>(<tspan[^>]*>)?[^<]*priority=&lt;script&gt;', dom)   # wrapped: tspans

    assert shot.exists(), proc.stderr[-2000:]
    import matplotlib.image as mpimg
    img = mpimg.imread(shot)
    rgb = (img[..., :3] * 255).astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])
    assert len(colours) > 50          # a blank or single-colour page has one or two
    # plotly's blue and red traces are drawn somewhere on the page
    assert (np.abs(img[..., :3] - np.array([0x1f, 0x77, 0xb4]) / 255).sum(axis=-1) < 0.05).sum() > 500
