"""Numba's on-disk cache never runs stale code (:mod:`geppetto.dynamics.config`).

Numba keys a cached function on its own file's stamp only: a kernel calling a kernel of
another file kept the callee's old machine code after an edit of that file alone.  The
package's kernels are stamped with a hash of all its sources; a user residual's knot loop
(:func:`geppetto.ocp.fused.knot_loop`) with the files of the kernel and its helpers.
Each test runs fresh processes on a temporary cache folder (and, for the package, a
temporary copy of it), so that what a new process loads from the cache is observed.
"""
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numba
import pytest
from numba.core.caching import FunctionCache

from geppetto.dynamics import config

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CALLER = """
from geppetto.dynamics.config import kernel
from geppetto.dynamics._probe_callee import probe_callee


@kernel
def probe_caller(x):
    return probe_callee(x) + 1.0
"""

CALLEE = """
from geppetto.dynamics.config import kernel


@kernel
def probe_callee(x):
    return {factor} * x
"""

RUN_CALLER = ("from geppetto.dynamics._probe_caller import probe_caller; "
              "print(probe_caller(1.0), sum(probe_caller.stats.cache_hits.values()))")


def _run(code, pythonpath, **env):
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    environment.update(PYTHONPATH=pythonpath, **env)
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def _write(path, text):
    with open(path, "w") as handle:
        handle.write(textwrap.dedent(text))


@pytest.mark.parametrize("cache_dir", [True, False], ids=["NUMBA_CACHE_DIR", "in_tree"])
def test_an_edited_callee_file_recompiles_its_callers(tmp_path, cache_dir):
    """A copy of the package with two probe kernels in two files; editing the callee's
    file alone changes the caller's result in the next process (it kept 2.0 on the old
    code); an unchanged package, or an edit of a module the probes do not import, loads
    the caller from the cache."""
    copy = tmp_path / "geppetto"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns(
        "__pycache__", ".git", "tests", "benchmarks", "examples", "*.md"))
    _write(copy / "dynamics" / "_probe_caller.py", CALLER)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")} if cache_dir else {}
    results = []
    for factor in ("1.0", "1.0", "3.0"):
        _write(copy / "dynamics" / "_probe_callee.py", CALLEE.format(factor=factor))
        results.append(_run(RUN_CALLER, str(tmp_path), **env))
    with open(copy / "ocp" / "residuals.py", "a") as handle:  # not imported by the probes
        handle.write("\n# edited\n")
    results.append(_run(RUN_CALLER, str(tmp_path), **env))
    assert [float(value) for value, _ in results] == [2.0, 2.0, 4.0, 4.0]
    assert [int(hits) for _, hits in results] == [0, 1, 0, 1]


USER_MODULE = """
import numba

GAIN = {gain}


@numba.njit(cache=True)
def scaled(v):
    return GAIN * v


@numba.njit(cache=True)
def probe_residual(x, u, oR, op, J, reference, parameters, r, Rx, Ru, with_jacobian):
    r[0] = scaled(x[0])
"""

RUN_USER = """
import numpy as np
import probe_user
from geppetto.ocp.fused import knot_loop
K = 2
a = (np.zeros((K, 1, 3, 3)), np.zeros((K, 1, 3)), np.zeros((K, 6, 0)), np.zeros((K, 1)),
     np.zeros(1), np.zeros((K, 1)), np.zeros((K, 1, 2)), np.zeros((K, 1, 0)))
knot_loop(probe_user.probe_residual)(np.full((K, 2), 1.5), np.zeros((K, 0)), a, np.int64(0))
print(a[5][1, 0])
"""


def test_an_edited_user_helper_reaches_the_knot_loop(tmp_path):
    """A user residual kernel whose code is unchanged but whose helper's constant is
    edited: the knot loop calling it (a generated module, cached) runs the new value (the
    old code kept 1.5, the first process's)."""
    user = tmp_path / "user"
    user.mkdir()
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "GEPPETTO_CACHE_DIR": str(tmp_path / "geppetto")}
    pythonpath = os.pathsep.join([os.path.dirname(PACKAGE), str(user)])
    results = []
    for gain in ("1.0", "2.0"):
        _write(user / "probe_user.py", USER_MODULE.format(gain=gain))
        results.append(float(_run(RUN_USER, pythonpath, **env)[0]))
    assert results == [1.5, 3.0]


def test_source_fingerprint_follows_the_imported_sources_only(tmp_path):
    """A module's fingerprint changes with the modules it imports (relative, absolute,
    transitively, a submodule imported from its package), not with the others nor with
    tests/ or folders that are not packages; an outside module's follows all."""
    root = tmp_path / "pkg"
    for folder in ("", "sub", "tests", "data"):
        (root / folder).mkdir(exist_ok=True)
    files = {"__init__.py": "from . import sub\n",
             "a.py": "from .sub.b import f\n",
             "sub/__init__.py": "from .d import g\n",
             "sub/b.py": "from pkg.c import (h,\n   k as m)\nfrom . import e\n",
             "c.py": "import pkg.f as f\nh = k = 1\n", "f.py": "", "sub/d.py": "g = 1\n",
             "sub/e.py": "e = 1\n",
             "tests/t.py": "from ..a import f\n", "data/x.py": "x = 1\n"}
    for path, text in files.items():
        (root / path).write_text(text)

    config.declare_imports("generated_probe", ["pkg.sub.b"])  # a generated phase module

    def fingerprints():
        sources = config.package_sources(str(root), "pkg")
        return {m: config.source_fingerprint(m, sources)
                for m in ("pkg.a", "pkg.sub.d", "pkg.c", "outside", "generated_probe")}

    first = fingerprints()
    assert set(config.package_sources(str(root), "pkg")["pkg.sub.b"][1]) == {"pkg.c", "pkg.sub.e"}
    for outside in ("tests/t.py", "data/x.py"):  # not the package's
        (root / outside).write_text("x = 2\n")
    assert fingerprints() == first
    (root / "sub/d.py").write_text("g = 2\n")  # imported by no one but sub/__init__
    changed = fingerprints()
    assert [changed[m] == first[m] for m in first] == [True, False, True, False, True]
    (root / "sub/d.py").write_text("g = 1\n")  # same contents again: same fingerprints
    assert fingerprints() == first
    for path in ("c.py", "sub/e.py", "f.py"):
        (root / path).write_text(files[path] + "# edited\n")
        changed = fingerprints()
        assert changed["pkg.a"] != first["pkg.a"] and changed["outside"] != first["outside"]
        assert changed["generated_probe"] != first["generated_probe"]
        (root / path).write_text(files[path])
    assert config.source_fingerprint() == config.source_fingerprint(__name__)
    generated = "from geppetto.ocp.residuals import x\nfrom geppetto.dynamics import spatial\n"
    assert config.imported_modules(generated) == {"geppetto.ocp.residuals",
                                                  "geppetto.dynamics.spatial"}


def test_the_package_cache_stamp_holds_the_fingerprint():
    stamp = config.kernel(lambda x: x)._cache._cache_file._source_stamp
    assert stamp[1] == config.source_fingerprint(__name__) == config.source_fingerprint()
    rnea = sys.modules["geppetto.dynamics.rnea"]
    stamp = rnea._joint_motions._cache._cache_file._source_stamp
    assert stamp[1] == config.source_fingerprint("geppetto.dynamics.rnea")
    assert stamp[1] != config.source_fingerprint()


def test_without_numba_internals_numba_default_cache_and_a_warning(monkeypatch):
    def unavailable(py_func):
        raise AttributeError("no index stamp")
    monkeypatch.setattr(config, "PackageFunctionCache", unavailable)
    monkeypatch.setattr(config, "_WARNED", [])
    with pytest.warns(RuntimeWarning, match="cannot be keyed"):
        first = config.kernel(lambda x: x + 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        second = config.kernel(lambda x: x + 2.0)
    for dispatcher in (first, second):
        assert type(dispatcher._cache) is FunctionCache
        assert isinstance(dispatcher, numba.core.registry.CPUDispatcher)
    assert first(1.0) == 2.0
