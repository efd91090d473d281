"""Crocoddyl in its own virtual environment, for the benchmarks and the test tier
(``tests/test_crocoddyl_parity.py``) that compare with it.

Crocoddyl 3.2 needs Pinocchio 3.9, and the test environment has Pinocchio
4.1, so (DESIGN.md, "Comparison environments") Crocoddyl lives in a
separate virtual environment with exactly the pinned packages of
:data:`PACKAGES`, and a benchmark runs its Crocoddyl half there, in a
subprocess:

    result, reason = crocoddyl_env.run(SCRIPT, payload)
    if result is None:
        print(crocoddyl_env.skipped(reason))      # "Crocoddyl: skipped (...)"

The environment is made once (``python -m venv`` + ``pip install``) in
``$GEPPETTO_CROCODDYL_VENV``, by default ``~/.cache/geppetto/crocoddyl-venv``
(``$XDG_CACHE_HOME`` is honoured), outside the repository.  A stamp file
written after ``import crocoddyl`` succeeded there marks it as ready; later
calls only read the stamp, and a lock file keeps two benchmarks started
together from building it twice.  When it cannot be made (no network, a
pip error) nothing raises: :func:`ensure` and :func:`run` return None and the
reason, and the failed attempt is remembered for this interpreter only, so a
later run tries again.

    python -m geppetto.benchmarks.crocoddyl_env      # make it and print the versions
    python benchmarks/crocoddyl_env.py               # the same, before geppetto is installed

:data:`ENVIRONMENTS` names the environments made this way: ``"crocoddyl"`` (the
default, :data:`PACKAGES`) and ``"mim_solvers"`` (:data:`MIM_PACKAGES`:
mim_solvers 0.3.0 with Crocoddyl 3.2.1 and Pinocchio 4.0, in
``$GEPPETTO_MIM_SOLVERS_VENV``, by default ``~/.cache/geppetto/mim-solvers-venv``;
a script there imports crocoddyl before mim_solvers, or mim_solvers' boost
libraries are not found; its Crocoddyl is built with OpenMP and a
ShootingProblem there defaults to one thread per core: set ``problem.nthreads
= 1`` for one-thread timings, or its threads' spin-waits count in the CPU
time).  Every function takes ``environment=``:

    result, reason = crocoddyl_env.run(SCRIPT, payload, environment="mim_solvers")
    python -m geppetto.benchmarks.crocoddyl_env mim_solvers     # make that one

This module uses only Python's standard library, so that ``.ci/run`` can make
the environment (and fail, printing pip's reason, when it cannot) before it
installs geppetto; it then sets ``GEPPETTO_REQUIRE_CROCODDYL=1``, which turns the
test tier's skip ("environment missing") into a failure.
"""
import fcntl
import json
import os
import subprocess
import sys

PACKAGES = ("pin==3.9.0", "libpinocchio==3.9.0", "crocoddyl==3.2.0", "libcrocoddyl==3.2.0",
            "cmeel-urdfdom==4.0.1", "cmeel-tinyxml2==10.0.0")
ENVIRONMENT_VARIABLE = "GEPPETTO_CROCODDYL_VENV"
STAMP = "geppetto-crocoddyl-stamp.json"
INSTALL_TIMEOUT_S = 1800

_CHECK_SCRIPT = """
import json, numpy, pinocchio, crocoddyl
print(json.dumps({"crocoddyl": crocoddyl.__version__, "pinocchio": pinocchio.__version__,
                  "numpy": numpy.__version__}))
"""

# mim_solvers (SolverCSQP) with its own pins; crocoddyl is imported first, or
# mim_solvers' boost libraries are not found.
MIM_PACKAGES = ("pin==4.0.0", "libpinocchio==4.0.0", "crocoddyl==3.2.1", "libcrocoddyl==3.2.1",
                "mim-solvers==0.3.0", "libmim-solvers==0.3.0")
_MIM_CHECK_SCRIPT = """
import json, numpy, pinocchio, crocoddyl, mim_solvers
print(json.dumps({"crocoddyl": crocoddyl.__version__, "pinocchio": pinocchio.__version__,
                  "mim_solvers": getattr(mim_solvers, "__version__", "0.3.0"),
                  "numpy": numpy.__version__}))
"""

# name -> (packages, environment variable, folder under ~/.cache/geppetto, check script)
ENVIRONMENTS = {
    "crocoddyl": (PACKAGES, ENVIRONMENT_VARIABLE, "crocoddyl-venv", _CHECK_SCRIPT),
    "mim_solvers": (MIM_PACKAGES, "GEPPETTO_MIM_SOLVERS_VENV", "mim-solvers-venv",
                    _MIM_CHECK_SCRIPT),
}

_failures = {}  # venv folder -> reason, for this interpreter


def venv_dir(environment="crocoddyl"):
    """The folder of the environment (not created)."""
    _, variable, name, _ = ENVIRONMENTS[environment]
    if os.environ.get(variable):
        return os.path.abspath(os.path.expanduser(os.environ[variable]))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "geppetto", name)


def _python(folder):
    return os.path.join(folder, "bin", "python")


def _read_stamp(folder, packages=PACKAGES):
    try:
        with open(os.path.join(folder, STAMP)) as stamp:
            content = json.load(stamp)
    except (OSError, ValueError):
        return None
    if content.get("packages") != list(packages) or not os.path.exists(_python(folder)):
        return None
    return content


def ready(environment="crocoddyl"):
    """``(info, None)`` when the environment is made (its stamp is read, nothing
    is built), else ``(None, reason)``."""
    folder = venv_dir(environment)
    stamp = _read_stamp(folder, ENVIRONMENTS[environment][0])
    if stamp is not None:
        return stamp, None
    return None, (f"the {environment} environment {folder} is not made (make it with "
                  f"`python -m geppetto.benchmarks.crocoddyl_env {environment}`, about a "
                  f"minute with network access)")


def ensure(verbose=True, environment="crocoddyl"):
    """Make the environment unless it is ready.

    Returns ``(info, None)`` with ``info = {"python": path, "crocoddyl": version,
    "pinocchio": version, "numpy": version, "venv": folder}``, or ``(None,
    reason)`` when it could not be made.  Progress goes to stderr when
    ``verbose``.  ``environment``: a key of :data:`ENVIRONMENTS`.
    """
    folder = venv_dir(environment)
    packages = ENVIRONMENTS[environment][0]
    stamp = _read_stamp(folder, packages)
    if stamp is not None:
        return stamp, None
    if folder in _failures:
        return None, _failures[folder]
    try:
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        with open(folder + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it
            stamp = _read_stamp(folder, packages)
            if stamp is None:
                stamp = _create(folder, verbose, environment)
    except (OSError, subprocess.SubprocessError, RuntimeError, ValueError) as error:
        reason = str(error).strip() or type(error).__name__
        _failures[folder] = reason
        return None, reason
    return stamp, None


def _create(folder, verbose, environment="crocoddyl"):
    """python -m venv --clear, pip install the packages, import check, stamp."""
    packages, _, _, check_script = ENVIRONMENTS[environment]
    def step(what, command, timeout, note=""):
        if verbose:
            print(f"crocoddyl_env: {what}{note}", file=sys.stderr, flush=True)
        finished = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env=_clean_environment(), check=False)
        if finished.returncode != 0:
            tail = (finished.stderr or finished.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"{what} failed: " + " | ".join(tail))
        return finished.stdout

    step(f"creating the virtual environment {folder}",
         [sys.executable, "-m", "venv", "--clear", folder], 300)
    step("pip install " + " ".join(packages),
         [_python(folder), "-m", "pip", "install", "--no-input", *packages],
         INSTALL_TIMEOUT_S, " (about a minute)")
    versions = json.loads(step(f"checking import {environment}",
                               [_python(folder), "-I", "-c", check_script],
                               300).strip().splitlines()[-1])
    stamp = dict(packages=list(packages), python=_python(folder), venv=folder, **versions)
    with open(os.path.join(folder, STAMP), "w") as out:
        json.dump(stamp, out, indent=2)
    if verbose:
        print(f"crocoddyl_env: ready, Crocoddyl {versions['crocoddyl']}, Pinocchio "
              f"{versions['pinocchio']}", file=sys.stderr, flush=True)
    return stamp


def _clean_environment(threads=None):
    """os.environ without what would leak this interpreter's packages into the venv."""
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
                                   "PYTHONSTARTUP")}
    if threads is not None:
        environment["OMP_NUM_THREADS"] = str(threads)
    return environment


def run(script, payload=None, timeout=1800, threads=1, environment="crocoddyl"):
    """Run ``script`` (Python source) with the environment's interpreter.

    ``payload`` is sent as JSON on stdin (read it with ``json.load(sys.stdin)``);
    the script prints one JSON object on its last line of stdout, which is
    returned.  Isolated mode (``-I``): nothing of this interpreter's
    ``sys.path`` is visible there.  ``OMP_NUM_THREADS`` is set to ``threads``.

    Returns ``(result, None)``, or ``(None, reason)`` when the environment
    could not be made or the script failed.  ``environment``: a key of
    :data:`ENVIRONMENTS` (``"mim_solvers"`` for mim_solvers' pins).
    """
    info, reason = ensure(environment=environment)
    if info is None:
        return None, reason
    try:
        finished = subprocess.run([info["python"], "-I", "-c", script],
                                  input=json.dumps(payload), capture_output=True, text=True,
                                  timeout=timeout, env=_clean_environment(threads),
                                  check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"the Crocoddyl subprocess failed: {error}"
    if finished.returncode != 0:
        tail = " | ".join(finished.stderr.strip().splitlines()[-5:])
        return None, f"the Crocoddyl script failed (exit {finished.returncode}): {tail}"
    try:
        return json.loads(finished.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "the Crocoddyl script printed no JSON on its last line"


def skipped(reason):
    """The line a benchmark prints when Crocoddyl is not available."""
    return f"Crocoddyl: skipped ({reason})"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    environment = argv[0] if argv else "crocoddyl"
    if environment not in ENVIRONMENTS:
        print(f"unknown environment {environment!r}: one of {', '.join(ENVIRONMENTS)}")
        return 2
    info, reason = ensure(environment=environment)
    if info is None:
        print(skipped(reason))
        return 1
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
