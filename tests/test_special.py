"""analysis.special against scipy.special (scipy stays a dependency; only the tests import it here), and the
compare and report commands without any scipy import."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.special as sc

from rtscope.analysis import special

pytestmark = pytest.mark.fast

RTOL = 1e-10
DFS = [1, 1.5, 2, 2.5, 3, 4.7, 7, 10, 17.3, 30, 99.9, 300, 1000, 5432.1, 1e4, 1e5, 1e6]
TS = [0, 1e-3, 0.1, 0.5, 1, 1.96, 2.5, 3, 5, 8, 10, 20, 50, 100, 300, 1e3]
PS = [1e-300, 1e-200, 1e-100, 1e-50, 1e-20, 1e-10, 1e-5, 1e-3, 0.01, 0.025, 0.1, 0.2, 0.25, 0.3, 0.4, 0.45, 0.49,
      0.4999, 0.5, 0.5001, 0.6, 0.75, 0.9, 0.975, 0.99, 0.999, 1 - 1e-8, 1 - 1e-12, 1 - 1e-16]


def close(ours: float, theirs: float, rtol: float = RTOL) -> bool:
    return ours == theirs or abs(ours - theirs) <= rtol * abs(theirs)


def tail_close(ours: float, theirs: float) -> bool:
    """close, or a subnormal value where scipy flushes it to 0 (pdtrc(50, 1e-5) = 6e-322)."""
    return close(ours, theirs) or (theirs == 0.0 and 0.0 <= ours < sys.float_info.min)


def test_stdtr_is_scipys_over_df_and_both_tails():
    bad = [(df, s * t, special.stdtr(df, s * t), float(sc.stdtr(df, s * t)))
           for df in DFS for t in TS for s in (-1, 1)
           if not close(special.stdtr(df, s * t), float(sc.stdtr(df, s * t)))]
    assert not bad
    assert special.stdtr(5, -math.inf) == 0.0 and special.stdtr(5, math.inf) == 1.0
    assert math.isnan(special.stdtr(0, 1.0)) and math.isnan(special.stdtr(3, math.nan))


def test_stdtr_closed_forms_near_zero_and_far_out():
    """df 1 (Cauchy) and 2 have closed forms; near t = 0 scipy's df = 1 is off by 1e-9 (not checked there)."""
    for t in (-1e-8, -1e-3, -0.7, -30.0, -1e5, -1e200, 1e-8, 2.0, 1e6):
        cauchy = 0.5 + math.atan(t) / math.pi if t > -1 else math.atan(-1 / t) / math.pi
        assert close(special.stdtr(1, t), cauchy, 1e-13), t
        root = abs(t) * math.sqrt(1 + 2 / t / t)              # √(2 + t²) without overflow
        two = 0.5 + t / (2 * root) if t > 0 else 1 / ((root - t) * root)
        assert close(special.stdtr(2, t), two, 1e-12), t


def test_stdtrit_is_scipys_where_scipy_inverts_its_own_stdtr():
    """Where scipy's own stdtrit does not return to p through its stdtr (df 1.5-3 at p ≤ 1e-200: scipy's value
    is off by a factor up to 1e46), ours is checked by its round trip instead."""
    checked = 0
    for df in DFS:
        for p in PS:
            ours, theirs = special.stdtrit(df, p), float(sc.stdtrit(df, p))
            if close(float(sc.stdtr(df, theirs)), p, 1e-12):
                assert close(ours, theirs), (df, p, ours, theirs)
                checked += 1
            else:
                assert close(special.stdtr(df, ours), p, 1e-12), (df, p, ours)
    assert checked >= 0.95 * len(DFS) * len(PS)
    for p in (1e-300, 1e-20, 0.3, 0.5 + 1e-12, 0.9, 1 - 1e-16):       # the Cauchy quantile tan(π(p − ½))
        cauchy = (-1 / math.tan(math.pi * p) if p < 0.25 else 1 / math.tan(math.pi * (1 - p)) if p > 0.75
                  else math.tan(math.pi * (p - 0.5)))
        assert close(special.stdtrit(1, p), cauchy, 1e-12), p
    assert special.stdtrit(7, 0.5) == 0.0 and special.stdtrit(7, 0.0) == -math.inf
    assert special.stdtrit(7, 1.0) == math.inf and math.isnan(special.stdtrit(7, 1.5))


def test_stdtr_and_stdtrit_round_trip_with_welch_df():
    rng = np.random.default_rng(3)
    for df, t in zip(rng.uniform(1, 200, 200), -np.abs(rng.standard_t(4, 200)) * 3):
        p = special.stdtr(df, t)                      # the lower tail: p has t's relative precision
        assert close(p, float(sc.stdtr(df, t)))
        assert close(special.stdtrit(df, p), t, 1e-12)
        assert close(special.stdtrit(df, 1 - p), float(sc.stdtrit(df, 1 - p)))


def test_poisson_and_chi2_tails_are_scipys():
    for k in (0, 1, 2, 5, 10, 50, 100, 1000, 10_000):
        for m in (0, 1e-5, 0.1, 1, 3, 10, 50, 100, 500, 1000, 2000, 1e4, 1.2e4):
            assert tail_close(special.pdtrc(k, m), float(sc.pdtrc(k, m))), (k, m)
    assert special.pdtrc(-1, 3.0) == 1.0
    for df in (1, 2, 3, 4, 5, 7, 10, 20, 50, 100, 1000):
        for x in (0, 1e-6, 0.1, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 1500):
            assert tail_close(special.chdtrc(df, x), float(sc.chdtrc(df, x))), (df, x)


def test_kv_is_scipys():
    z = np.geomspace(1e-8, 600, 300)
    for nu in (0.25, 0.75, 1.25):
        np.testing.assert_allclose(special.kv(nu, z), sc.kv(nu, z), rtol=RTOL, atol=0)
        # scipy gives 0 from about z = 700 on, where K_ν is still 1e-306: the asymptotic series there
        mu = 4 * nu * nu
        series = 1 + (mu - 1) / 5600 + (mu - 1) * (mu - 9) / 2 / 5600 ** 2 + (mu - 1) * (mu - 9) * (mu - 25) / 6 / 5600 ** 3
        asym = math.sqrt(math.pi / 1400) * math.exp(-700) * series
        assert close(special.kv(nu, 700.0), asym, 1e-10)
    assert special.kv(0.25, 800.0) == 0.0 == float(sc.kv(0.25, 800.0))
    assert special.kv(0.25, 0.0) == math.inf


def test_box_cox_and_xlog1py_are_scipys_to_an_ulp_or_two():
    """Bit for bit they are not: numpy's log, exp, log1p and expm1 (vectorised) differ from the C library's,
    which scipy's ufuncs call, in the last bit of 0.2-10 % of their values; inv_boxcox's exp turns the last bit
    of an exponent near 4.5 into 4 ulps of its value."""
    rng = np.random.default_rng(0)
    x, lam = rng.uniform(1e-6, 5, 2000), rng.uniform(-2, 2, 2000)
    lam[:10], lam[10:20] = 0.0, 1e-20
    for name, arg in (("boxcox", x), ("inv_boxcox", x), ("inv_boxcox1p", -x), ("xlog1py", x)):
        np.testing.assert_allclose(getattr(special, name)(arg, lam), getattr(sc, name)(arg, lam), rtol=2e-15,
                                   atol=0, equal_nan=True, err_msg=name)
    assert special.xlog1py(0.0, -1.0) == 0.0 and math.isnan(special.xlog1py(0.0, math.nan))
    assert special.inv_boxcox1p(1e-160, 0.5) == 1e-160


def _store(tmp_path):
    from rtscope import samplefile
    from rtscope.samplefile import Column
    from rtscope.store import Store
    db = str(tmp_path / "s.db")
    store = Store(db)
    rng = np.random.default_rng(1)
    for i in range(6):
        governor = ("conservative", "performance")[i % 2]
        header = samplefile.make_header("exec", "sum", "beam", "t", "0", "2026-01-01T00:00:00Z",
                                        [Column("duration", "ns", "i64")], {"governor": governor}, {"n": 10})
        values = (1_000_000 * (1 + i % 2) + rng.gamma(3, 30_000, 2000)).astype(np.int64)
        path = tmp_path / f"run{i}.rts"
        samplefile.write(path, header, {"duration": values})
        store.add_run(samplefile.read(path), {"hostname": "t", "cpu_count": 2}, tags=[])
    return db


def test_compare_and_report_import_no_scipy(tmp_path):
    """`compare` and `report` (the HTML) run without importing any scipy module."""
    db = _store(tmp_path)
    code = ("import sys, runpy; sys.argv = ['rtscope'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('rtscope', run_name='__main__')\n"
            "except SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
            "print('SCIPY', sorted(m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')))\n"
            "sys.exit(code)")
    for args in (["compare", "--db", db, "--baseline", "governor=conservative", "--json"],
                 ["report", "--db", db, "--baseline", "governor=conservative", "-o", str(tmp_path / "r.html")]):
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.rstrip().splitlines()[-1] == "SCIPY []", (args[0], out.stdout[-500:])
        if args[0] == "compare":
            result = json.loads(out.stdout[:out.stdout.rindex("SCIPY")])
            assert result["comparisons"]


def test_report_template_cache(tmp_path, monkeypatch):
    """The compiled templates are kept in $RTSCOPE_CACHE/jinja2 and give the same page; an unwritable cache
    directory only costs the compilation."""
    from rtscope.report import html
    monkeypatch.setenv("RTSCOPE_CACHE", str(tmp_path / "cache"))
    cache = html._bytecode_cache()
    assert cache is not None and html.template_cache_dir() == tmp_path / "cache" / "jinja2"
    import jinja2
    from rtscope.report.template import TABLES, TEMPLATE

    directory = tmp_path / "cache" / "jinja2"

    def compile_once(bytecode_cache=None):
        env = jinja2.Environment(loader=jinja2.DictLoader({"tables.html": TABLES, "report.html": TEMPLATE}),
                                 autoescape=True, bytecode_cache=bytecode_cache or html._bytecode_cache())
        return env.get_template("report.html")

    compile_once()
    [written] = directory.iterdir()
    inode = written.stat().st_ino
    compile_once()                                   # loaded, not written again (jinja2 writes a new file)
    assert [f.stat().st_ino for f in directory.iterdir()] == [inode]
    for source in ("a{{ x }}", "b{{ x }}"):          # the same name, an edited source: the new template
        env = jinja2.Environment(loader=jinja2.DictLoader({"report.html": source}), bytecode_cache=cache)
        assert env.get_template("report.html").render(x=1) == source[0] + "1"
    compile_once()
    written.write_bytes(written.read_bytes()[:40])   # truncated: compiled afresh and written again, no error
    compile_once()
    assert written.stat().st_size > 1000
    shutil.rmtree(directory)                         # the directory gone under the cache: nothing written, no error
    compile_once(cache)
    assert not directory.exists()
    monkeypatch.setenv("RTSCOPE_CACHE", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")               # the cache's parent is a file: no cache
    assert html._bytecode_cache() is None
