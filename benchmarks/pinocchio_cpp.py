"""Pinocchio's C++ algorithms timed on our states, in the same run as ours.

    python -m geppetto.benchmarks.pinocchio_cpp [--robots ur5 panda ...] [--repeats 15]

The benchmarks compare geppetto's kernels with Pinocchio's C++, not only with
its Python bindings (which add 0.1-1 us of argument conversion per call).
``cpp/pinocchio_timing.cpp`` is compiled against the ``pin`` wheel's own
headers and libraries (its cmeel prefix: Pinocchio's headers, Boost's headers
and ``libboost_serialization``) and Debian's Eigen headers
(``apt-get install libeigen3-dev``)::

    g++ -std=c++17 -O3 -DNDEBUG  (Pinocchio's release flags; no -march=native)

The algorithms' templates are compiled in the harness from the headers (no
``PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION``): what a C++ user of Pinocchio
gets.  The binary goes to ``~/.cache/geppetto/cpp`` (``$GEPPETTO_CPP_CACHE``),
named by a hash of the source's text, the compiler command (without the
source's path: every checkout shares it) and Pinocchio's version; the first
build takes minutes of one core, later runs reuse it.

The model is the one Pinocchio's Python built (``pin.Model.saveToBinary``: the
wheel lacks urdfdom's headers, so the harness cannot parse the URDF itself);
the states are written to a file and every state is timed one call at a time,
K calls per repeat, the functions interleaved within each repeat, on the
thread's CPU clock (or the wall clock).  A checksum of the outputs (sum of
absolute values; the upper triangle of M and M^-1) is compared with
Pinocchio's Python bindings on the same states, so that a table never quotes a
C++ time of a computation that differs from the one it is compared with.

:func:`unavailable` says why the harness cannot run here (no compiler, no
Pinocchio, no Eigen headers); the benchmarks then leave the C++ columns empty.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import numpy as np

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpp", "pinocchio_timing.cpp")
FLAGS = ("-std=c++17", "-O3", "-DNDEBUG")
# Pinocchio's exported compile definitions (its CMake targets' INTERFACE_COMPILE_DEFINITIONS)
DEFINITIONS = ("-DBOOST_MPL_LIMIT_LIST_SIZE=30", "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30",
               "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_FUSION_INVOKE_MAX_ARITY=12")
EIGEN_INCLUDES = ("/usr/include/eigen3", "/usr/local/include/eigen3")
CACHE = os.environ.get("GEPPETTO_CPP_CACHE",
                       os.path.join(os.path.expanduser("~"), ".cache", "geppetto", "cpp"))
FUNCTIONS = ("rnea", "aba", "crba", "computeMinverse", "computeRNEADerivatives",
             "computeABADerivatives")
# Timed only with contacts (time_cpp's ``contacts``): constraintDynamics, and
# constraintDynamics followed by computeConstraintDynamicsDerivatives.
CONSTRAINED_FUNCTIONS = ("constraintDynamics", "computeConstraintDynamicsDerivatives")


class Unavailable(RuntimeError):
    """The harness cannot be built or run here; the message says why."""


def _prefix():
    """The cmeel prefix of the ``pin`` wheel (include/ and lib/)."""
    try:
        import pinocchio
    except ImportError:
        raise Unavailable("Pinocchio is not installed (pip install pin)") from None
    prefix = os.path.join(sysconfig.get_paths()["purelib"], "cmeel.prefix")
    path = os.path.abspath(pinocchio.__file__)
    if "cmeel.prefix" in path:
        prefix = path[:path.index("cmeel.prefix") + len("cmeel.prefix")]
    if not os.path.isfile(os.path.join(prefix, "include", "pinocchio", "algorithm", "aba.hpp")):
        raise Unavailable(f"Pinocchio's C++ headers are not under {prefix}/include "
                          "(the pin wheel ships them in its cmeel prefix)")
    return prefix, pinocchio.__version__


def _compiler():
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise Unavailable("no C++ compiler (g++ or $CXX) on the PATH")
    return compiler


def _eigen():
    for include in EIGEN_INCLUDES:
        if os.path.isfile(os.path.join(include, "Eigen", "Core")):
            return include
    raise Unavailable("Eigen's headers are missing (apt-get install libeigen3-dev)")


def build_command(output):
    """The compiler's argument list that builds the harness into ``output``."""
    prefix, _ = _prefix()
    return [_compiler(), *FLAGS, *DEFINITIONS, "-I", os.path.join(prefix, "include"),
            "-I", _eigen(), SOURCE, "-o", output, "-L", os.path.join(prefix, "lib"),
            f"-Wl,-rpath,{os.path.join(prefix, 'lib')}", "-lboost_serialization"]


def build(verbose=True):
    """Path of the compiled harness, built on first use (minutes); :class:`Unavailable`
    when it cannot be built here."""
    _, version = _prefix()
    with open(SOURCE, "rb") as file:
        source = file.read()
    probe = [argument for argument in build_command("OUT") if argument != SOURCE]
    key = hashlib.sha256(source + " ".join(probe).encode() + version.encode()).hexdigest()[:16]
    binary = os.path.join(CACHE, f"pinocchio_timing-{key}")
    if os.path.isfile(binary):
        return binary
    os.makedirs(CACHE, exist_ok=True)
    partial = f"{binary}.{os.getpid()}.partial"
    if verbose:
        print(f"compiling the Pinocchio C++ harness ({' '.join(FLAGS)}; minutes, once) ...",
              file=sys.stderr, flush=True)
    done = subprocess.run(build_command(partial), capture_output=True, text=True)
    if done.returncode != 0:
        raise Unavailable("the C++ harness did not compile:\n" + done.stderr[-2000:])
    os.replace(partial, binary)
    return binary


def unavailable():
    """None when the harness can be built here, else the reason it cannot."""
    try:
        _prefix(), _compiler(), _eigen()
    except Unavailable as reason:
        return str(reason)
    return None


def write_states(path, Q, V, A, TAU):
    """The states file the harness reads: int64 K, nq, nv, then float64 Q, V, A, TAU."""
    K, nq = Q.shape
    nv = V.shape[1]
    with open(path, "wb") as file:
        np.array([K, nq, nv], dtype=np.int64).tofile(file)
        for stack in (Q, V, A, TAU):
            np.ascontiguousarray(stack, dtype=np.float64).tofile(file)


def write_contacts(path, contacts):
    """The contacts file the harness reads: int64 n, then per contact int64 size (3 or
    6), int64 joint, float64 R (3 x 3, row-major), p (3): joint1's placement of a
    RigidConstraintModel to the universe, LOCAL.  ``contacts``: (size, joint, R, p)."""
    with open(path, "wb") as file:
        np.array([len(contacts)], dtype=np.int64).tofile(file)
        for size, joint, R, p in contacts:
            np.array([size, joint], dtype=np.int64).tofile(file)
            np.concatenate([np.asarray(R, dtype=np.float64).reshape(9),
                            np.asarray(p, dtype=np.float64).reshape(3)]).tofile(file)


def time_cpp(pin_model, Q, V, A, TAU, functions=FUNCTIONS, repeats=15, clock="cpu",
             contacts=None):
    """{function: dict(best=, median=, checksum=, us=[...])}: Pinocchio's C++ time per
    state (microseconds) over the stack, the repeats of all functions interleaved.

    ``A`` is the acceleration for rnea and its derivatives, ``TAU`` the torque for aba,
    its derivatives and the constrained functions, which need ``contacts``: a list of
    (size 3 or 6, joint, R, p), see :func:`write_contacts`."""
    binary = build()
    with tempfile.TemporaryDirectory(prefix="geppetto-cpp-") as folder:
        model_path = os.path.join(folder, "model.bin")
        states_path = os.path.join(folder, "states.bin")
        pin_model.saveToBinary(model_path)
        write_states(states_path, Q, V, A, TAU)
        extra = []
        if contacts is not None:
            contacts_path = os.path.join(folder, "contacts.bin")
            write_contacts(contacts_path, contacts)
            extra = [f"contacts={contacts_path}"]
        done = subprocess.run([binary, model_path, states_path, str(repeats), clock, *extra,
                               *functions], capture_output=True, text=True)
    if done.returncode != 0:
        raise Unavailable(f"the C++ harness failed: {done.stderr.strip()}")
    results = json.loads(done.stdout)
    for result in results.values():
        result["best"] = float(np.min(result["us"]))
        result["median"] = float(np.median(result["us"]))
    return results


def pinocchio_checksums(pin, pin_model, Q, V, A, TAU, functions=FUNCTIONS, contacts=None):
    """The checksums of :func:`time_cpp` from Pinocchio's Python bindings."""
    data = pin_model.createData()
    sums = dict.fromkeys(functions, 0.0)
    if contacts is not None:
        models = [pin.RigidConstraintModel(
            pin.ContactType.CONTACT_3D if size == 3 else pin.ContactType.CONTACT_6D, pin_model,
            joint, pin.SE3(np.asarray(R), np.asarray(p)), 0, pin.SE3.Identity(),
            pin.ReferenceFrame.LOCAL) for size, joint, R, p in contacts]
        datas = [model.createData() for model in models]
        pin.initConstraintDynamics(pin_model, data, models, datas)
        settings = pin.ProximalSettings(1e-12, 1e-12, 0.0, 1)
    for q, v, a, tau in zip(Q, V, A, TAU):
        for function in functions:
            if function == "rnea":
                sums[function] += np.abs(pin.rnea(pin_model, data, q, v, a)).sum()
            elif function == "aba":
                sums[function] += np.abs(pin.aba(pin_model, data, q, v, tau)).sum()
            elif function == "crba":
                sums[function] += np.abs(np.triu(pin.crba(pin_model, data, q))).sum()
            elif function == "computeMinverse":
                sums[function] += np.abs(np.triu(pin.computeMinverse(pin_model, data, q))).sum()
            elif function in CONSTRAINED_FUNCTIONS:
                ddq = pin.constraintDynamics(pin_model, data, q, v, tau, models, datas, settings)
                if function == "constraintDynamics":
                    sums[function] += np.abs(ddq).sum() + np.abs(data.lambda_c).sum()
                    continue
                pin.computeConstraintDynamicsDerivatives(pin_model, data, models, datas, settings)
                sums[function] += sum(np.abs(x).sum() for x in (
                    data.ddq_dq, data.ddq_dv, data.ddq_dtau, data.dlambda_dq, data.dlambda_dv,
                    data.dlambda_dtau))
            elif function == "computeRNEADerivatives":
                pin.computeRNEADerivatives(pin_model, data, q, v, a)
                sums[function] += np.abs(data.dtau_dq).sum() + np.abs(data.dtau_dv).sum()
            else:
                pin.computeABADerivatives(pin_model, data, q, v, tau)
                sums[function] += np.abs(data.ddq_dq).sum() + np.abs(data.ddq_dv).sum()
    return sums


def check(pin, pin_model, Q, V, A, TAU, results, rtol=1e-9, contacts=None):
    """The largest relative difference between the C++ checksums and Pinocchio's Python
    ones on the same states; raises when it exceeds ``rtol``."""
    theirs = pinocchio_checksums(pin, pin_model, Q, V, A, TAU, tuple(results), contacts)
    worst = 0.0
    for function, result in results.items():
        difference = abs(result["checksum"] - theirs[function]) / max(1.0, abs(theirs[function]))
        if difference > rtol:
            raise AssertionError(f"the C++ harness computed another {function}: checksum "
                                 f"{result['checksum']!r}, Pinocchio's Python {theirs[function]!r}")
        worst = max(worst, difference)
    return worst


def main(argv=None):
    from geppetto.benchmarks import _common
    from geppetto.benchmarks.dynamics import ROBOTS, K, random_states, pinocchio_model
    import geppetto as gp
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS), choices=ROBOTS)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--clock", choices=sorted(_common.CLOCKS), default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)
    reason = unavailable()
    if reason:
        print(f"skipped: {reason}")
        return
    import pinocchio as pin
    rng = np.random.default_rng(options.seed)
    print(f"Pinocchio {pin.__version__} C++ ({' '.join(FLAGS)}), microseconds per state, "
          f"K = {K}, best / median of {options.repeats} repeats ({options.clock} time)")
    for name in options.robots:
        robot = gp.robots.load(name)
        Q, V, A = random_states(robot.model, rng)
        TAU = rng.standard_normal(V.shape)
        pin_model = pinocchio_model(pin, robot)
        results = time_cpp(pin_model, Q, V, A, TAU, repeats=options.repeats, clock=options.clock)
        worst = check(pin, pin_model, Q, V, A, TAU, results)
        print(f"{name:7s} " + "  ".join(f"{f} {r['best']:.2f}/{r['median']:.2f}"
                                         for f, r in results.items())
              + f"  (checksums within {worst:.0e} of Python's)")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
