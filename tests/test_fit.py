"""Least squares (rtscope.analysis.fit) and `rtscope fit FILE`, checked against study 5's own tables."""

import json

import numpy as np
import pytest

from rtscope.errors import UsageError
from rtscope.analysis.fit import least_squares
from rtscope.paths import repo_file

pytestmark = pytest.mark.fast

FIXTURES = repo_file("tests", "fixtures", "tasks")


def test_exact_line():
    f = least_squares([1, 2, 3, 10], [25, 30, 35, 70])
    assert f.slope == pytest.approx(5) and f.intercept == pytest.approx(20)
    assert f.r == pytest.approx(1) and f.r2 == pytest.approx(1) and f.n == 4


def test_negative_slope_gives_negative_r_and_positive_r2():
    f = least_squares([0, 1, 2, 3], [10, 8.5, 6, 4.1])
    assert f.slope < 0 and f.r < -0.99 and f.r2 == pytest.approx(f.r ** 2)


def test_matches_numpy_on_noisy_data():
    rng = np.random.default_rng(7)
    x = rng.integers(1, 50_000, 200).astype(float)
    y = 2835 * x + 24_000 + rng.normal(0, 1e5, 200)
    f = least_squares(x, y)
    slope, intercept = np.polyfit(x, y, 1)
    assert f.slope == pytest.approx(slope) and f.intercept == pytest.approx(intercept)
    assert f.r == pytest.approx(np.corrcoef(x, y)[0, 1])


def test_constant_values_have_no_r():
    f = least_squares([1, 10, 100], [4096, 4096, 4096])
    assert f.slope == 0 and f.intercept == 4096 and f.r is None and f.r2 is None


@pytest.mark.parametrize("x, y, message", [
    ([5], [1], "at least 2 points"),
    ([], [], "at least 2 points"),
    ([3, 3, 3], [1, 2, 3], "same task count"),
    ([1, 2], [1, float("nan")], "finite"),
])
def test_undetermined_lines_are_refused(x, y, message):
    with pytest.raises(UsageError, match=message):
        least_squares(x, y)


# The study printed r² and called it the correlation coefficient; slopes are bytes per task.
@pytest.mark.parametrize("name, slope, r2, points", [
    ("zackernel.csv", 204.31, 0.8396, 9),
    ("study_std_thread.csv", 546_103, 0.99993, 5),
    ("study_callback_thread.csv", 1332, 0.99284, 5),
    ("study_erlang_process.csv", 2835, 0.99998, 5),
])
def test_cli_reproduces_the_study(cli, name, slope, r2, points):
    r = cli("fit", FIXTURES / name, "--json")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert {"slope", "intercept", "r", "r2"} <= set(got)
    digits = 2 if name == "zackernel.csv" else 0
    assert round(got["slope"], digits) == pytest.approx(slope)
    assert round(got["r2"], len(str(r2)) - 2) == pytest.approx(r2)
    assert got["r"] == pytest.approx(got["r2"] ** 0.5) and got["n"] == points


def test_cli_text_labels_r_and_r2(cli):
    r = cli("fit", FIXTURES / "zackernel.csv")
    assert r.code == 0, r.err
    assert "204.31" in r.out and "0.9163" in r.out and "0.8396" in r.out
    assert "Pearson correlation coefficient" in r.out and "coefficient of determination" in r.out


def test_cli_headerless_and_named_columns(cli, tmp_path):
    (tmp_path / "plain.csv").write_text("1,120\n2,220\n\n3,320\n")
    got = json.loads(cli("fit", tmp_path / "plain.csv", "--json").out)
    assert got["slope"] == pytest.approx(100) and got["intercept"] == pytest.approx(20)
    # rtscope export layout: other columns around, chosen by name.
    (tmp_path / "export.csv").write_text("index,rss_bytes,tasks,bytes\n0,9,10,1000\n1,9,20,2000\n2,9,40,4000\n")
    got = json.loads(cli("fit", tmp_path / "export.csv", "--json").out)
    assert got["slope"] == pytest.approx(100) and got["n"] == 3
    got = json.loads(cli("fit", tmp_path / "export.csv", "--y", "rss_bytes", "--json").out)
    assert got["slope"] == 0 and got["r"] is None


@pytest.mark.parametrize("text, message", [
    ("tasks,bytes\n1,100\n2,abc\n", ":3: 'abc' is not a number (column bytes)"),
    ("1,100\n2,200,5\n", ":2: expected 2 values"),
    ("tasks,size\n1,2\n", ":1: header has no column 'bytes'"),
    ("# only a comment\n\n", "no data"),
    ("1,100\n", "at least 2 points"),
    ("1,100\n1,200\n", "same task count"),
    ("1,100\ninf,5\n", ":2: 'inf' is not a finite number"),
])
def test_cli_bad_csv_exits_2_naming_the_line(cli, tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    r = cli("fit", path)
    assert r.code == 2
    assert message in r.err.replace("\n", "")


def test_cli_missing_file_exits_2(cli, tmp_path):
    r = cli("fit", tmp_path / "nope.csv")
    assert r.code == 2 and "cannot read" in r.err
