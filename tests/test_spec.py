"""Spec parsing: matrix expansion, excludes, repetitions, scales, line numbers of every problem."""

import re
from pathlib import Path

import pytest

from rtscope.experiment import spec as spec_mod
from rtscope.paths import repo_file
from rtscope.experiment.spec import Locator, SpecError, analyse, parse

pytestmark = pytest.mark.fast

EXEC = """
name = "t"
[[workload]]
name = "exec"
variants = ["sum", "fib"]
[workload.params]
iterations = 20
pause_ms = 0
"""


def keys(spec):
    return [c.key for c in spec.cells]


# --- positions -------------------------------------------------------------------------------------------

def test_locator_finds_keys_tables_and_array_elements():
    text = '''# a comment with [brackets] and = signs
name = "x # not a comment"   # comment
desc = """multi
[not.a.table]
line"""
[scale.quick]
repetitions = 1
[scale.quick.params]
"iterations" = 5

[[workload]]
name = "exec"
variants = [
  "sum",   # first
  'fib',
]
params = { n = [1, 2], pause_ms = 0 }
[workload.settings]
rt_priority = [50,
               90]
[[workload.exclude]]
variant = "fib"

[[workload]]
name = "timer"
a.b.c = 1
'''
    loc = Locator(text)
    assert loc.line(("name",)) == 2
    assert loc.line(("desc",)) == 3
    assert loc.line(("scale", "quick", "repetitions")) == 7
    assert loc.line(("scale", "quick", "params", "iterations")) == 9
    assert loc.line(("workload", 0)) == 11
    assert loc.line(("workload", 0, "variants", 0)) == 14
    assert loc.line(("workload", 0, "variants", 1)) == 15
    assert loc.line(("workload", 0, "params", "n", 1)) == 17
    assert loc.line(("workload", 0, "settings", "rt_priority", 1)) == 20
    assert loc.line(("workload", 0, "exclude", 0, "variant")) == 22
    assert loc.line(("workload", 1, "name")) == 25
    assert loc.line(("workload", 1, "a", "b", "c")) == 26
    # unknown paths fall back to their nearest ancestor
    assert loc.line(("workload", 1, "settings", "governor")) == 24
    assert loc.line(("nothing",)) is None


# --- expansion -------------------------------------------------------------------------------------------

def test_lists_expand_as_a_cartesian_product_with_excludes():
    s = parse(EXEC + """
[workload.settings]
rt_priority = [50, 90]
cpu = [0, 1]
[[workload.exclude]]
variant = "fib"
rt_priority = 90
[[workload.exclude]]
cpu = [1]
variant = ["sum"]
""")
    got = sorted((c.request.variant, c.request.settings["rt_priority"], c.request.settings["cpu"]) for c in s.cells)
    assert got == [("fib", 50, 0), ("fib", 50, 1), ("sum", 50, 0), ("sum", 90, 0)]
    assert all(c.repetitions == 1 for c in s.cells) and s.total_runs == 4


def test_params_may_be_matrix_axes_and_cells_name_the_configuration():
    s = parse(EXEC.replace("iterations = 20", "iterations = [20, 40]"))
    assert keys(s) == ["exec/sum/native iterations=20 pause_ms=0", "exec/sum/native iterations=40 pause_ms=0",
                       "exec/fib/native iterations=20 pause_ms=0", "exec/fib/native iterations=40 pause_ms=0"]
    assert [c.request.params["iterations"] for c in s.cells] == [20, 40, 20, 40]
    assert s.cells[0].request.params == {"n": 4000, "iterations": 20, "pause_ms": 0}


def test_repetitions_top_block_and_scale_precedence():
    text = """
repetitions = 3
[scale.quick]
repetitions = 2
[scale.quick.params]
iterations = 10
[scale.full]
[scale.full.params]
iterations = 1000
[[workload]]
name = "exec"
variants = "sum"
repetitions = 5
[workload.params]
iterations = 50
[[workload]]
name = "exec"
variants = "fib"
[workload.scale.full]
repetitions = 7
[workload.scale.full.params]
iterations = 2000
"""
    quick = parse(text)  # default scale: quick
    assert quick.scale == "quick" and quick.scales == ("quick", "full")
    assert [(c.request.variant, c.repetitions, c.request.params["iterations"]) for c in quick.cells] == \
        [("sum", 2, 10), ("fib", 2, 10)]
    full = parse(text, scale="full")
    assert [(c.request.variant, c.repetitions, c.request.params["iterations"]) for c in full.cells] == \
        [("sum", 5, 1000), ("fib", 7, 2000)]
    assert full.total_runs == 12
    with pytest.raises(SpecError, match="unknown scale 'huge'; valid scales: quick, full"):
        parse(text, scale="huge")
    with pytest.raises(SpecError, match="defines no"):
        parse(EXEC, scale="full")


def test_spec_wide_scale_parameter_reaches_only_blocks_whose_variants_take_it():
    # exec's n is a default of sum, fib and sleep, not of nothing: a spec-wide override skips a block with
    # nothing unless the block sets n itself; iterations (a default of every variant) reaches every block.
    text = """
[scale.quick.params]
n = 7
iterations = 30
[[workload]]
name = "exec"
variants = ["sum", "fib"]
[[workload]]
name = "exec"
variants = ["sleep", "nothing"]
"""
    s = parse(text)
    got = {c.request.variant: (c.request.params.get("n"), c.request.params["iterations"]) for c in s.cells}
    assert got == {"sum": (7, 30), "fib": (7, 30), "sleep": (5, 30), "nothing": (None, 30)}
    only_nothing = analyse('[scale.quick.params]\nn = 7\n[[workload]]\nname = "exec"\nvariants = "nothing"\n')
    assert not only_nothing.problems
    assert [(w.line, "applies to no block" in w.message) for w in only_nothing.warnings] == [(2, True)]


def test_tags_order_seed_and_defaults():
    s = parse('tags = ["a"]\nseed = 42\norder = "shuffle"\non_unavailable = "skip"\n' + EXEC.replace(
        'variants = ["sum", "fib"]', 'variants = ["sum", "fib"]\ntags = "b"\ntimeout_s = 30'), "dir/my-spec.toml")
    assert s.seed == 42 and s.order == "shuffle" and s.name == "t"
    assert all(c.request.tags == ("a", "b") and c.timeout_s == 30 and c.on_unavailable == "skip" for c in s.cells)
    d = parse(EXEC.replace('name = "t"\n', ""), "dir/my-spec.toml")
    assert d.seed is None and d.order == "random" and d.cells[0].on_unavailable == "fail"
    assert d.cells[0].request.runtime == "native" and d.scale is None and d.name == "my-spec"


def test_a_list_valued_parameter_is_written_as_a_list_inside_the_list():
    s = parse("""
[[workload]]
name = "tasks"
variants = "memory"
[workload.params]
counts = [[1, 10, 100]]
[workload.settings]
model = "pthread"
""")
    assert len(s.cells) == 1 and s.cells[0].request.params["counts"] == "1,10,100"


def test_unused_exclude_rule_is_a_warning_and_all_excluded_is_an_error():
    s = analyse(EXEC + '[[workload.exclude]]\nvariant = "sleep"\n')
    assert not s.problems and len(s.cells) == 2
    assert [w.line for w in s.warnings] == [9] and "matches no combination" in s.warnings[0].message
    s = analyse(EXEC + '[[workload.exclude]]\nvariant = ["sum", "fib"]\n')
    assert [(p.line, "every combination is excluded" in p.message) for p in s.problems] == [(3, True)]


def test_duplicate_configuration_across_blocks():
    s = analyse(EXEC + EXEC.replace('name = "t"\n', ""))
    assert len(s.problems) == 2 and all("repeats configuration" in p.message for p in s.problems)
    assert {p.line for p in s.problems} == {10}


def test_runtime_that_cannot_run_a_variant_names_the_fix():
    s = analyse(EXEC.replace('variants = ["sum", "fib"]', 'variants = "memory"').replace('"exec"', '"tasks"')
                .replace("[workload.params]\niterations = 20\npause_ms = 0\n", '[workload.settings]\nmodel = "cbtask"\nfoo = 1\n'))
    assert s.problems and all(p.line for p in s.problems)


# --- bad specs: every problem, each with its line -----------------------------------------------------------

@pytest.mark.parametrize("text, line, message", [
    ('nam = "x"\n' + EXEC, 1, r"unknown key 'nam' in the spec \(top level\); valid keys: .*name"),
    (EXEC.replace("[workload.params]", "colour = 1\n[workload.params]"), 6,
     r"unknown key 'colour' in workload block 1; valid keys"),
    ("repetitions = \"two\"\n" + EXEC, 1, r"repetitions must be an integer, not a string"),
    (EXEC.replace("iterations = 20", "iterations = 2.5"), 7, r"invalid value 2.5 for iterations: not an integer"),
    (EXEC.replace('["sum", "fib"]', "[]"), 5, r"variants is an empty list"),
    (EXEC + "[workload.settings]\ncpu = []\n", 10, r"cpu is an empty list"),
    (EXEC.replace('"exec"', '"exce"'), 4, r"unknown workload 'exce'; valid workloads: .*exec"),
    (EXEC.replace('"fib"', '"fibb"'), 5, r"unknown exec variant 'fibb'; valid variants: sum, fib"),
    (EXEC + "[workload.settings]\ngovernor = \"fastest\"\n", 10, r"invalid value 'fastest' for governor.*performance"),
    (EXEC + "[workload.settings]\nrt_priority = [50, 100]\n", 10, r"rt_priority: must be <= 99"),
    (EXEC + "[workload.settings]\ngovernr = 1\n", 10, r"unknown setting 'governr'; valid settings .*governor"),
    (EXEC.replace("[workload.params]", "runtime = [\"native\", \"jvm\"]\n[workload.params]"), 6,
     r"unknown runtime 'jvm'; valid runtimes: .*native"),
    (EXEC + "[[workload.exclude]]\nspeed = 1\n", 10, r"exclude key 'speed' is not a matrix axis"),
    ("order = \"backwards\"\n" + EXEC, 1, r"unknown order 'backwards'; valid: random, shuffle, sequential"),
    ("[scale.quick]\niterations = 5\n" + EXEC, 2, r"unknown key 'iterations' in \[scale.quick\].*scale.quick.params"),
    ("[scale.quick.params]\niteratons = 5\n" + EXEC, 2, r"unknown parameter 'iteratons' in \[scale.quick.params\]"),
    ("name = [1]\n" + EXEC.replace('name = "t"\n', ""), 1, r"name must be a string, not a list"),
    ('x = [1,\n', 2, r"not valid TOML"),
    ('name = "a"\nname = "b"\n', 2, r"not valid TOML: Cannot overwrite a value"),
    ("name = \"t\"\n", None, r"no \[\[workload\]\] block"),
    (EXEC.replace('[workload.params]', '[workload.settings]\nrt_priority = [50, 50]\n[workload.params]'), 7,
     r"rt_priority value 50 is listed twice"),
])
def test_bad_spec_names_the_line(text, line, message):
    s = analyse(text, "bad.toml")
    assert s.problems, text
    found = [p for p in s.problems if re.search(message, p.message)]
    assert found, [p.message for p in s.problems]
    assert found[0].line == line
    with pytest.raises(SpecError) as e:
        parse(text, "bad.toml")
    assert (f"bad.toml:{line}: " if line else "bad.toml: ") in str(e.value)
    assert e.value.exit_code == 2


def test_every_problem_is_reported_at_once_in_line_order():
    text = """name = 5
colour = "red"
[[workload]]
name = "exec"
variants = ["sum", "summ"]
[workload.params]
iterations = 0
[workload.settings]
governor = "fast"
[[workload]]
name = "nope"
"""
    with pytest.raises(SpecError) as e:
        parse(text, "s.toml")
    lines = [p.line for p in e.value.problems]
    assert lines == [1, 2, 5, 7, 9, 11]
    assert str(e.value).startswith("6 problems in spec s.toml:")
    for ln in lines:
        assert f"s.toml:{ln}: " in str(e.value)


def test_cli_check_reports_problems_with_lines_and_runs_nothing(cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "b"\n[[workload]]\nname = "exec"\nvariants = ["sum", "x"]\n'
                   '[workload.settings]\nmlock = "maybe"\n')
    r = cli("check", bad)
    assert r.code == 2
    err = " ".join(r.err.split())
    assert f"{bad}:4: unknown exec variant 'x'" in err and f"{bad}:6: invalid value 'maybe' for mlock" in err
    db = tmp_path / "never.db"
    r = cli("run", bad, "--db", db)
    assert r.code == 2 and "2 problems" in r.err and not db.exists()


def test_cli_check_ok_prints_the_plan_for_every_scale(cli, tmp_path):
    good = tmp_path / "good.toml"
    good.write_text("repetitions = 3\n[scale.quick]\nrepetitions = 1\n[scale.full]\n" + EXEC.replace('name = "t"\n', ""))
    r = cli("check", good)
    assert r.code == 0, r.err
    out = " ".join(r.out.split())
    assert "scale quick: 2 cells, 2 runs" in out and "scale full: 2 cells, 6 runs" in out and out.endswith("OK")


def test_cli_check_unavailable_governor_skip_or_fail(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("RTSCOPE_SYSFS_ROOT", str(tmp_path / "empty-root"))  # no cpufreq there
    text = EXEC + '[workload.settings]\ngovernor = "performance"\n'
    p = tmp_path / "g.toml"
    p.write_text('on_unavailable = "skip"\n' + text)
    r = cli("check", p)
    assert r.code == 0 and "would skip 2 runs" in " ".join(r.out.split())
    assert "not available on this machine" in r.out
    p.write_text(text)
    r = cli("check", p)
    assert r.code == 1 and "cannot run here" in " ".join(r.out.split())


# --- the shipped specs -----------------------------------------------------------------------------------------

SHIPPED = sorted(Path(repo_file("specs")).glob("*.toml"))


def test_the_studies_are_shipped():
    names = {p.name for p in SHIPPED}
    assert {"demo.toml", "nerves-rt.toml", "kernel-latency.toml", "msgq.toml", "storage.toml",
            "tasks.toml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_spec_is_valid_at_every_scale(path):
    first = spec_mod.load(path)
    assert first.description
    for scale in first.scales or [None]:
        s = spec_mod.load(path, scale)
        assert s.cells and not s.warnings, [w.text(str(path)) for w in s.warnings]
    if first.scales:
        assert first.scale == "quick" and "full" in first.scales
