"""Table I of Carpentier & Mansard (RSS 2018): analytical against finite-difference
derivatives of inverse (ID = RNEA) and forward (FD = ABA) dynamics, and M^-1.

    python -m geppetto.benchmarks.derivatives [--robots ur5 panda ...] [--states 1000]
        [--repeats 9] [--fd-repeats 3] [--no-scaling] [--out DIR]

One thread (the script restarts itself with NUMBA_NUM_THREADS=1).  Per robot,
K = 1000 random states are drawn once (seeded); each function is called once
on them to compile (that first call's time, less the timed cost, is reported
as compile time, with Numba's cache hit or miss), then timed as ONE call of
the kernel that the public function calls, on the whole stack, divided by K:
microseconds per state from compiled code, no Python border per state.  The
repeats of all contenders of a robot are interleaved, and each is timed by the
CPU time of the thread (``time.thread_time_ns``: with one thread, the work
done, whatever other processes hold the cores of a shared machine) and by the
wall clock; the tables and charts show the best CPU time of the repeats, the
JSON keeps the medians and the wall-clock times too.  Nothing is allocated per
timed call on either side but the kernels' own small scratch: each kernel runs
on the arrays the captured public call passed (the Data's stacks, and the arrays
that rnea_derivatives and aba_derivatives return, made once by that call), and
ID, dID and dFD follow one policy: a stack writes its results and oMi per
state and keeps the other intermediates in a one-state scratch
(``rnea.stack_scratch``); FD (``aba``) still writes all of its Data's fields
per state; Pinocchio's C++ writes one Data that stays in cache.

    ID        rnea                     dID       rnea_derivatives
    FD        aba                      dFD       aba_derivatives
    dID fd    rnea_derivatives_fd, forward differences on the manifold: 3 nv + 1
              RNEA calls per state (the paper's finite differences; central
              differences make 6 nv calls, twice the cost)
    dFD fd    aba_derivatives_fd, the same with ABA
    M^-1      compute_minverse, the dedicated ABA-like algorithm (never forms M)
    M^-1 chol crba, then a dense Cholesky M = L L^T, L^-1 and M^-1 = L^-T L^-1,
              jitted here (n^3 flops, no use of the tree's sparsity)

Beside them, Pinocchio's Python calls, one state per call from a Python loop
over the same states (``pin.rnea``, ``pin.computeRNEADerivatives``,
``pin.aba``, ``pin.computeABADerivatives``, ``pin.computeMinverse``, and
``pin.crba`` + ``pin.cholesky.decompose`` + ``pin.cholesky.computeMinv``, its
sparse Cholesky), and Pinocchio's C++ on the same states in the same run
(``pinocchio_cpp.py``: g++ -O3 -DNDEBUG against the pin wheel's headers, one
state per call, timed right after ours on the thread's CPU clock, its
checksums checked against Pinocchio's Python; left empty, with the reason
printed, where no compiler or headers are there).  The largest
difference from Pinocchio over 20 states, relative to max(1, |pin|), is shown
as a check that both computed the same thing.

Targets (issues 3 and 15): dID <= 3.5 x ID and dFD <= 4 x FD (the paper's ratios);
our per-state dID and dFD <= Pinocchio's Python call and <= its C++ (same states,
same run).

Scaling study: geppetto.robots.chain, 2 to 200 dof, serial (branching 1) and
binary tree (branching 2): analytical dID against forward-difference dID per
state, against nv.  The analytical cost grows as nv x depth, the
finite differences as (3 nv + 1) x one RNEA.

Writes ``derivatives.json``, ``derivatives.md``, ``derivatives_table1.png``
(the paper's Fig. 2), ``derivatives_minverse.png`` and
``derivatives_scaling.png`` into ``results/`` beside this file.
"""
import argparse
import os
import sys
import time

import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common, pinocchio_cpp
from geppetto.dynamics import finite_differences
from geppetto.dynamics.config import kernel
from geppetto.dynamics.linalg import cholesky_factor, lower_inverse

ROBOTS = ("ur5", "panda", "solo12", "hyq", "talos")
MORE_ROBOTS = ("bolt", "anymal", "go1")  # floating-base robots not tuned on, on request
STATISTIC = "best"
TARGET_DID_OVER_ID = 3.5
TARGET_DFD_OVER_FD = 4.0

# Pinocchio's C++ function timed by pinocchio_cpp for each label
CPP_FUNCTIONS = {"ID": "rnea", "dID": "computeRNEADerivatives", "FD": "aba",
                 "dFD": "computeABADerivatives", "Minv": "computeMinverse", "CRBA": "crba"}
# The paper's Table I (C++, one core), microseconds, for reference.
PAPER_TABLE_I = {"KUKA (7 dof)": dict(dID=3.34, dFD=5.78),
                 "HyQ (18 dof)": dict(dID=7.01, dFD=14.24),
                 "Atlas (36 dof)": dict(dID=16.72, dFD=45.20)}

# label: (public function, its kernel, the stack it takes, keyword arguments)
OURS = {
    "ID": (gp.dynamics.rnea, "_rnea", "qva", {}),
    "dID": (gp.dynamics.rnea_derivatives, "_rnea_derivatives", "qva", {}),
    "FD": (gp.dynamics.aba, "_aba", "qvt", {}),
    "dFD": (gp.dynamics.aba_derivatives, "_aba_derivatives", "qvt", {}),
    "Minv": (gp.dynamics.compute_minverse, "_compute_minverse", "q", {}),
    "CRBA": (gp.dynamics.crba, "_crba", "q", {}),
}
FINITE_DIFFERENCES = {
    "dID_fd": (finite_differences.rnea_derivatives_fd, "_dynamics_fd", "qva",
               {"method": "forward"}),
    "dFD_fd": (finite_differences.aba_derivatives_fd, "_dynamics_fd", "qvt",
               {"method": "forward"}),
}
SCALING_SIZES = (2, 5, 10, 20, 50, 100, 200)


# --- Timing --------------------------------------------------------------------------

def time_side_by_side(runs, calls, repeats):
    """:func:`._common.time_runs` in microseconds per call: ``best`` and ``median``
    of the CPU times of the thread (the statistic shown), ``wall_best`` and
    ``wall_median`` of the wall clock; the repeats of all runs interleaved."""
    return {label: dict(best=t["cpu_best"] * 1e6, median=t["cpu_median"] * 1e6,
                        wall_best=t["best"] * 1e6, wall_median=t["median"] * 1e6)
            for label, t in _common.time_runs(runs, calls, repeats).items()}


# --- M^-1 by Cholesky of CRBA (dense, jitted) ----------------------------------

@kernel
def _invert_lower(L):
    """L^-1 in place (lower triangle)."""
    lower_inverse(L, L.shape[0], L)


@kernel
def _lower_gram(X, out):
    """out = X^T X for a lower-triangular X (n, n)."""
    n = X.shape[0]
    for a in range(n):
        for b in range(a + 1):
            s = 0.0
            for p in range(a, n):
                s += X[p, a] * X[p, b]
            out[a, b] = s
            out[b, a] = s


@kernel
def _cholesky_minverse(M, Minv, L):
    """Minv[k] = M[k]^-1 for a stack M (K, n, n) through M = L L^T (L (n, n) scratch)."""
    for k in range(M.shape[0]):
        cholesky_factor(M[k], M.shape[1], L, 0.0)
        _invert_lower(L)
        _lower_gram(L, Minv[k])


# --- Our kernels on a stack -------------------------------------------------------

def random_states(model, rng, K):
    """q, v, a, tau stacks (K, nq) and (K, nv); a free flyer's translation in [-1, 1]."""
    Q = gp.dynamics.random_configuration(model, rng, size=K)
    V, A, T = (rng.standard_normal((K, model.nv)) for _ in range(3))
    return dict(q=Q, v=V, a=A, t=T)


def stack_kernel(model, entry, stack):
    """(run, first_call_s, kernel): ``run()`` calls the kernel behind the public
    function once on the whole stack; first_call_s is the public call that
    captured it (validation + compile or cache load + one run)."""
    public, kernel_name, layout, keywords = entry
    arguments = [stack[key] for key in layout]
    data = model.create_data()
    start = time.perf_counter()
    captured, kernel_args = _common.capture_kernel_call(public, kernel_name, model, data,
                                                        *arguments, **keywords)
    first_call_s = time.perf_counter() - start
    return (lambda: captured(*kernel_args)), first_call_s, captured, kernel_args


def cholesky_run(model, crba_args, crba_kernel):
    """CRBA on the stack, then the dense Cholesky inverse of every M (the kernel's (K, nv,
    nv) output: found by shape, since the kernel's arguments end in its table of passes)."""
    nv = model.nv
    M = [a for a in crba_args if isinstance(a, np.ndarray) and a.ndim == 3
         and a.shape[1:] == (nv, nv) and a.dtype == np.float64][-1]
    Minv = np.empty_like(M)
    L = np.zeros((model.nv, model.nv))

    def run():
        crba_kernel(*crba_args)
        _cholesky_minverse(M, Minv, L)
    return run, Minv


def cache_state(captured):
    stats = captured.stats
    if sum(stats.cache_hits.values()):
        return "cache hit"
    return "compiled" if sum(stats.cache_misses.values()) else "in memory"


# --- Pinocchio --------------------------------------------------------------------

def pinocchio_model(pin, robot):
    if robot.model.joint_types[1] == gp.dynamics.FREE_FLYER:
        return pin.buildModelFromUrdf(robot.urdf_path, pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(robot.urdf_path)


def pinocchio_calls(pin, pm, pd):
    """label -> f(q, v, u) with u the acceleration (ID) or the torque (FD)."""
    def cholesky(q, v, u):
        pin.crba(pm, pd, q)
        pin.cholesky.decompose(pm, pd)
        return pin.cholesky.computeMinv(pm, pd)

    return {"ID": lambda q, v, u: pin.rnea(pm, pd, q, v, u),
            "dID": lambda q, v, u: pin.computeRNEADerivatives(pm, pd, q, v, u),
            "FD": lambda q, v, u: pin.aba(pm, pd, q, v, u),
            "dFD": lambda q, v, u: pin.computeABADerivatives(pm, pd, q, v, u),
            "Minv": lambda q, v, u: pin.computeMinverse(pm, pd, q),
            "Minv_chol": cholesky,
            "CRBA": lambda q, v, u: pin.crba(pm, pd, q)}


def python_loop(call, states):
    def run():
        for q, v, u in states:
            call(q, v, u)
    return run


def largest_differences(model, stack, pin_call, count=20):
    """max over ``count`` states of max|ours - pin| / max(1, max|pin|) for dID, dFD and
    M^-1 (Pinocchio's M and M^-1 symmetrized from their upper triangle)."""
    data = model.create_data()
    ours = {"dID": lambda q, v, a, t: gp.dynamics.rnea_derivatives(model, data, q, v, a),
            "dFD": lambda q, v, a, t: gp.dynamics.aba_derivatives(model, data, q, v, t),
            "Minv": lambda q, v, a, t: (gp.dynamics.compute_minverse(model, data, q),)}
    worst = dict.fromkeys(ours, 0.0)
    for k in range(count):
        q, v, a, t = (stack[key][k] for key in "qvat")
        for label, mine in ours.items():
            u = a if label == "dID" else t
            theirs = pin_call[label](q, v, u)
            if not isinstance(theirs, tuple):
                theirs = (theirs,)
            theirs = [np.array(y) for y in theirs]
            for index, (x, y) in enumerate(zip(mine(q, v, a, t), theirs)):
                if index == 2 or label == "Minv":
                    y = np.triu(y) + np.triu(y, 1).T
                scale = max(1.0, float(np.max(np.abs(y))))
                worst[label] = max(worst[label], float(np.max(np.abs(x - y))) / scale)
    return worst


# --- One robot ----------------------------------------------------------------------

def benchmark_robot(name, K, repeats, fd_repeats, pin, rng, cpp=False):
    robot = gp.robots.load(name)
    model = robot.model
    stack = random_states(model, rng, K)
    runs, first_calls, cache = {}, {}, {}
    kernels = {}
    for label, entry in {**OURS, **FINITE_DIFFERENCES}.items():
        runs[label], first_calls[label], captured, args = stack_kernel(model, entry, stack)
        kernels[label] = (captured, args)
        cache[label] = cache_state(captured)
    start = time.perf_counter()
    runs["Minv_chol"], Minv_chol = cholesky_run(model, kernels["CRBA"][1], kernels["CRBA"][0])
    runs["Minv_chol"]()
    first_calls["Minv_chol"] = time.perf_counter() - start
    cache["Minv_chol"] = cache_state(_cholesky_minverse)
    Minv = kernels["Minv"][1][-1]
    chol_error = float(np.max(np.abs(Minv_chol - Minv[:K])) / max(1.0, np.max(np.abs(Minv))))

    quick = {f"ours {label}": runs[label] for label in (*OURS, "Minv_chol")}
    differences = None
    if pin is not None:
        pm = pinocchio_model(pin, robot)
        assert (pm.nq, pm.nv) == (model.nq, model.nv), name
        pin_call = pinocchio_calls(pin, pm, pm.createData())
        differences = largest_differences(model, stack, pin_call)
        for label, call in pin_call.items():
            layout = "a" if label in ("ID", "dID") else "t"
            states = list(zip(stack["q"], stack["v"], stack[layout]))
            quick[f"pin {label}"] = python_loop(call, states)
            quick[f"pin {label}"]()
    for run in quick.values():
        run()
    timings = time_side_by_side(quick, K, repeats)
    timings.update(time_side_by_side(
        {f"ours {label}": runs[label] for label in FINITE_DIFFERENCES}, K, fd_repeats))
    cpp_us = cpp_checksum = None
    if cpp:  # right after ours: the same states, the thread's CPU clock
        measured = pinocchio_cpp.time_cpp(pm, stack["q"], stack["v"], stack["a"], stack["t"],
                                          tuple(CPP_FUNCTIONS.values()), repeats, "cpu")
        cpp_checksum = pinocchio_cpp.check(pin, pm, stack["q"], stack["v"], stack["a"],
                                           stack["t"], measured)
        cpp_us = {label: dict(best=measured[function]["best"],
                              median=measured[function]["median"])
                  for label, function in CPP_FUNCTIONS.items()}
    ours = {label: timings[f"ours {label}"]
            for label in (*OURS, "Minv_chol", *FINITE_DIFFERENCES)}
    pin_python = ({label: timings[f"pin {label}"] for label in pin_call}
                  if pin is not None else None)
    compile_s = {label: max(0.0, first_calls[label] - K * 1e-6 * ours[label]["wall_best"])
                 for label in first_calls}
    print(f"  {name:7s} done", file=sys.stderr, flush=True)
    return dict(robot=name, nq=model.nq, nv=model.nv, states=K, ours_in_jit_us=ours,
                pin_python_us=pin_python, cpp_us=cpp_us, cpp_checksum_rel_diff=cpp_checksum,
                max_rel_diff_vs_pin=differences, cholesky_vs_minverse_rel_diff=chol_error,
                first_call_s=first_calls, compile_s=compile_s, cache=cache)


# --- Scaling on the n-link chain ------------------------------------------------------

def tree_depth(model):
    depth = np.zeros(model.njoints, dtype=int)
    for i in range(1, model.njoints):
        depth[i] = depth[model.parents[i]] + 1
    return int(depth.max())


def scaling_study(repeats, rng):
    """Per-state ID, analytical dID and forward-difference dID on chains."""
    points = []
    for branching in (1, 2):
        for n in SCALING_SIZES:
            model = gp.robots.chain(n, branching=branching)
            nv = model.nv
            analytical_stack = random_states(model, rng, 200)
            fd_states = max(4, min(200, 4000 // nv))
            fd_stack = {key: value[:fd_states] for key, value in analytical_stack.items()}
            id_run = stack_kernel(model, OURS["ID"], analytical_stack)[0]
            did_run = stack_kernel(model, OURS["dID"], analytical_stack)[0]
            fd_run = stack_kernel(model, FINITE_DIFFERENCES["dID_fd"], fd_stack)[0]
            fast = time_side_by_side({"ID": id_run, "dID": did_run}, 200, repeats)
            slow = time_side_by_side({"fd": fd_run}, fd_states, max(2, repeats // 3))["fd"]
            points.append(dict(branching=branching, n=n, nv=nv, depth=tree_depth(model),
                               ID_us=fast["ID"][STATISTIC], dID_us=fast["dID"][STATISTIC],
                               dID_fd_us=slow[STATISTIC], fd_states=fd_states))
        print(f"  chains with branching {branching} done", file=sys.stderr, flush=True)
    return points


def scaling_chart(path, points, machine_line):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (times, ratios) = plt.subplots(1, 2, figsize=(12.4, 4.6))
    styles = {1: ("serial chain", "-"), 2: ("binary tree", "--")}
    for branching, (name, line) in styles.items():
        rows = [p for p in points if p["branching"] == branching]
        nv = np.array([p["nv"] for p in rows])
        analytical = np.array([p["dID_us"] for p in rows])
        fd = np.array([p["dID_fd_us"] for p in rows])
        one_call = np.array([p["ID_us"] for p in rows])
        times.plot(nv, analytical, "o" + line, color="tab:blue",
                   label=f"analytical dID, {name}")
        times.plot(nv, fd, "s" + line, color="tab:red", label=f"finite-difference dID, {name}")
        times.plot(nv, (3 * nv + 1) * one_call, ":", color="tab:red", alpha=0.5,
                   label=f"(3 nv + 1) x ID, {name}")
        ratios.plot(nv, fd / analytical, "o" + line, color="tab:purple",
                    label=f"finite differences / analytical, {name}")
        ratios.plot(nv, analytical / one_call, "s" + line, color="tab:green",
                    label=f"analytical dID / ID, {name}")
    times.set(xscale="log", yscale="log", xlabel="nv (dof)",
              ylabel="microseconds per state (log)",
              title="Cost of the derivatives of RNEA on geppetto.robots.chain")
    ratios.set(xscale="log", yscale="log", xlabel="nv (dof)", ylabel="ratio (log)",
               title="Ratios")
    for axis in (times, ratios):
        axis.grid(which="both", alpha=0.3)
        axis.legend(fontsize=7)
    figure.suptitle(f"One thread, in-jit, CPU time per state\n{machine_line}", fontsize=9)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


# --- Tables and charts -------------------------------------------------------------------

def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(numerator, denominator):
    return None if numerator is None or denominator is None else numerator / denominator


def _best(row, label, side="ours_in_jit_us"):
    values = row[side]
    return None if values is None or label not in values else values[label][STATISTIC]


def table_one(rows):
    headers = ["robot", "nv", "ID", "dID", "dID fd", "FD", "dFD", "dFD fd", "M^-1",
               "M^-1 chol", "dID/ID", "dFD/FD", "fd/dID", "fd/dFD"]
    lines = []
    for row in rows:
        b = {label: _best(row, label) for label in
             ("ID", "dID", "dID_fd", "FD", "dFD", "dFD_fd", "Minv", "Minv_chol")}
        lines.append([row["robot"], row["nv"], *(_fmt(b[k]) for k in b),
                      _fmt(_ratio(b["dID"], b["ID"])), _fmt(_ratio(b["dFD"], b["FD"])),
                      _fmt(_ratio(b["dID_fd"], b["dID"]), 1),
                      _fmt(_ratio(b["dFD_fd"], b["dFD"]), 1)])
    return headers, lines


def pinocchio_table(rows):
    headers = ["robot", "function", "ours in-jit", "pin Python", "ours/pin", "C++",
               "ours/C++", "max rel diff"]
    lines = []
    for row in rows:
        for label in ("ID", "dID", "FD", "dFD", "Minv", "Minv_chol"):
            ours, theirs = _best(row, label), _best(row, label, "pin_python_us")
            cpp = _best(row, label, "cpp_us")
            diff = (row["max_rel_diff_vs_pin"] or {}).get(label)
            lines.append([row["robot"], label, _fmt(ours), _fmt(theirs),
                          _fmt(_ratio(ours, theirs)), _fmt(cpp), _fmt(_ratio(ours, cpp)),
                          "-" if diff is None else f"{diff:.0e}"])
    return headers, lines


def targets(rows):
    """One line per robot and target: (robot, target, value, limit, met)."""
    checks = []
    for row in rows:
        for label, base, limit in (("dID", "ID", TARGET_DID_OVER_ID),
                                   ("dFD", "FD", TARGET_DFD_OVER_FD)):
            value = _ratio(_best(row, label), _best(row, base))
            checks.append((row["robot"], f"{label}/{base} <= {limit}", value, limit,
                           value <= limit))
        for label in ("dID", "dFD"):
            for side, anchor in (("pin_python_us", "Pinocchio Python call"),
                                 ("cpp_us", "Pinocchio C++")):
                theirs = _best(row, label, side)
                if theirs is not None:
                    value = _ratio(_best(row, label), theirs)
                    checks.append((row["robot"], f"{label} <= {anchor}", value, 1.0,
                                   value <= 1.0))
    return checks


def markdown(headers, lines):
    out = ["| " + " | ".join(str(h) for h in headers) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out)


def table_chart(path, rows, machine_line):
    robots = [row["robot"] for row in rows]

    def values(*labels, side="ours_in_jit_us"):
        out = np.full((2, len(rows)), np.nan)
        for g, row in enumerate(rows):
            for p, label in enumerate(labels):
                value = _best(row, label, side)
                out[p, g] = np.nan if value is None else value
        return out

    series = {
        "geppetto ID / FD": values("ID", "FD"),
        "geppetto analytical derivatives": values("dID", "dFD"),
        "geppetto finite differences (forward)": values("dID_fd", "dFD_fd"),
        "Pinocchio Python call, analytical": values("dID", "dFD", side="pin_python_us"),
        "Pinocchio C++ (same run), analytical": values("dID", "dFD", side="cpp_us"),
    }
    _common.grouped_bar_chart(
        path, ["derivatives of inverse dynamics (RNEA)",
               "derivatives of forward dynamics (ABA)"], robots, series,
        f"Carpentier & Mansard 2018, Table I / Fig. 2: microseconds per state, CPU time "
        f"of one thread (lower is better)\n{machine_line}", "microseconds (log)")


def minverse_chart(path, rows, machine_line):
    """M^-1 per robot: the dedicated algorithm against Cholesky of CRBA (log bars)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {"geppetto compute_minverse": ("ours_in_jit_us", "Minv"),
              "geppetto crba + dense Cholesky": ("ours_in_jit_us", "Minv_chol"),
              "Pinocchio Python computeMinverse": ("pin_python_us", "Minv"),
              "Pinocchio Python crba + sparse Cholesky": ("pin_python_us", "Minv_chol"),
              "Pinocchio C++ (same run), computeMinverse": ("cpp_us", "Minv")}
    figure, axis = plt.subplots(figsize=(11.5, 4.4))
    x = np.arange(len(rows))
    width = 0.8 / len(series)
    for s, (label, (side, key)) in enumerate(series.items()):
        heights = [_best(row, key, side) for row in rows]
        axis.bar(x - 0.4 + (s + 0.5) * width,
                 [np.nan if h is None else h for h in heights], width, label=label)
    axis.set_xticks(x, [f"{row['robot']} ({row['nv']})" for row in rows])
    axis.set_yscale("log")
    axis.set_ylabel("microseconds (log)")
    axis.grid(axis="y", which="both", alpha=0.3)
    axis.legend(fontsize=8, loc="upper left")
    axis.set_title(f"M^-1: dedicated algorithm against Cholesky of CRBA, CPU time of one "
                   f"thread\n"
                   f"{machine_line}", fontsize=9)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


# --- Main ------------------------------------------------------------------------------------

def report(rows, scaling, options):
    headers, lines = table_one(rows)
    print(f"\nMicroseconds per state (CPU time of the thread), in-jit, one batched kernel "
          f"call on {options.states} states, best of {options.repeats} "
          f"({options.fd_repeats} for fd)")
    print(_common.format_table(headers, lines))
    pin_headers, pin_lines = pinocchio_table(rows)
    print("\nBeside Pinocchio (Python call per state; C++ per state, same states, same run)")
    print(_common.format_table(pin_headers, pin_lines))
    checks = targets(rows)
    print("\nTargets")
    for robot, what, value, limit, met in checks:
        print(f"  {robot:7s} {what:34s} {value:6.2f}  {'met' if met else 'NOT met'}")
    compile_s = rows[0]["compile_s"]
    print(f"\nFirst call on {rows[0]['robot']} (compile or cache load), seconds: "
          + ", ".join(f"{label} {seconds:.1f} ({rows[0]['cache'][label]})"
                      for label, seconds in compile_s.items()))
    if scaling:
        print("\nScaling on geppetto.robots.chain (microseconds per state)")
        print(_common.format_table(
            ["branching", "nv", "depth", "ID", "dID", "dID fd", "fd/dID", "dID/ID"],
            [[p["branching"], p["nv"], p["depth"], _fmt(p["ID_us"]), _fmt(p["dID_us"]),
              _fmt(p["dID_fd_us"]), _fmt(p["dID_fd_us"] / p["dID_us"], 1),
              _fmt(p["dID_us"] / p["ID_us"])] for p in scaling]))
    md = "\n\n".join([markdown(headers, lines), markdown(pin_headers, pin_lines),
                      markdown(["robot", "target", "value", "met"],
                               [[r, w, f"{v:.2f}", "yes" if m else "no"]
                                for r, w, v, _, m in checks])])
    return md, checks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS), choices=ROBOTS + MORE_ROBOTS)
    parser.add_argument("--states", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--fd-repeats", type=int, default=3)
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    options = parser.parse_args(argv)
    _common.run_single_threaded("geppetto.benchmarks.derivatives")
    started = time.perf_counter()
    load = os.getloadavg()
    pin, info, cpp_skipped = _common.beside_pinocchio()
    machine_line = _common.describe_machine(info)
    rng = np.random.default_rng(options.seed)
    rows = [benchmark_robot(name, options.states, options.repeats, options.fd_repeats, pin,
                            rng, cpp=cpp_skipped is None) for name in options.robots]
    scaling = None if options.no_scaling else scaling_study(options.repeats, rng)
    md, checks = report(rows, scaling, options)
    out = options.out
    paths = [os.path.join(out, f"derivatives{suffix}") for suffix in
             (".json", ".md", "_table1.png", "_minverse.png", "_scaling.png")]
    _common.write_json(paths[0], dict(
        machine=info, states_per_robot=options.states, repeats=options.repeats,
        fd_repeats=options.fd_repeats, seed=options.seed, unit="microseconds per state",
        cholesky="crba kernel + dense jitted Cholesky, L^-1, L^-T L^-1",
        paper_table_i_us=PAPER_TABLE_I, rows=rows, scaling=scaling,
        cpp_flags=" ".join(pinocchio_cpp.FLAGS), cpp_skipped=cpp_skipped,
        targets=[dict(robot=r, target=w, value=v, limit=lim, met=bool(m))
                 for r, w, v, lim, m in checks],
        load_average_start=load, load_average_end=os.getloadavg(),
        total_s=time.perf_counter() - started))
    with open(paths[1], "w") as handle:
        handle.write(f"Machine: {machine_line}\n\n{md}\n")
    table_chart(paths[2], rows, machine_line)
    minverse_chart(paths[3], rows, machine_line)
    if scaling:
        scaling_chart(paths[4], scaling, machine_line)
    print(f"\nwrote {', '.join(paths if scaling else paths[:4])}")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
