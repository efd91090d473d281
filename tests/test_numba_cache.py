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
    code), and an unchanged package loads the caller from the cache."""
    copy = tmp_path / "geppetto"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns(
        "__pycache__", ".git", "tests", "benchmarks", "examples", "*.md"))
    _write(copy / "dynamics" / "_probe_caller.py", CALLER)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")} if cache_dir else {}
    results = []
    for factor in ("1.0", "1.0", "3.0"):
        _write(copy / "dynamics" / "_probe_callee.py", CALLEE.format(factor=factor))
        results.append(_run(RUN_CALLER, str(tmp_path), **env))
    assert [float(value) for value, _ in results] == [2.0, 2.0, 4.0]
    assert [int(hits) for _, hits in results] == [0, 1, 0]


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


def test_source_fingerprint_follows_the_package_sources_only(tmp_path):
    root = tmp_path / "package"
    for folder in ("", "sub", "tests", "__pycache__", "data"):
        (root / folder).mkdir(exist_ok=True)
    for path in ("__init__.py", "a.py", "sub/__init__.py", "sub/b.py", "tests/t.py",
                 "__pycache__/c.py", "data/d.py"):
        (root / path).write_text("x = 1\n")
    first = config.source_fingerprint(str(root))
    for outside in ("tests/t.py", "__pycache__/c.py", "data/d.py"):  # not the package's
        (root / outside).write_text("x = 2\n")
    assert config.source_fingerprint(str(root)) == first
    (root / "sub/b.py").write_text("x = 2\n")
    assert config.source_fingerprint(str(root)) != first
    (root / "sub/b.py").write_text("x = 1\n")  # same contents again: same fingerprint
    assert config.source_fingerprint(str(root)) == first
    assert config.source_fingerprint() == config.source_fingerprint()


def test_the_package_cache_stamp_holds_the_fingerprint():
    stamp = config.kernel(lambda x: x)._cache._cache_file._source_stamp
    assert stamp[1] == config.source_fingerprint()


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
