"""Time of ShootingProblem.calc and calc_diff on the reaching task, beside Crocoddyl.

    python -m geppetto.benchmarks.ocp [--robots ur5 panda] [--threads 1 2] [--repeats 20]
                                      [--calls 10] [--rounds 3] [--profile] [--out DIR]

The reaching task of DESIGN.md, the same on both sides (:func:`reaching_task`):
a frame translation cost towards ``TARGET`` (ur5 "tool0", panda "panda_hand"),
state regularization towards x0 and control regularization towards zero,
each ``weight * 1/2 |r|^2`` (Crocoddyl's CostModelResidual with the default
ActivationModelQuad), running costs scaled by dt; semi-implicit Euler
(Crocoddyl's IntegratedActionModelEuler: v' = v + dt a, q' = q (+) dt v'),
dt = 10 ms, 100 knots; x0 = the robot's reference configuration at rest.
Crocoddyl builds its model with ``pinocchio.buildModelFromUrdf`` on the URDF
file our loader read, and runs in its own virtual environment (see
:mod:`.crocoddyl_env`; the benchmark makes it, or says why it skipped it).

Checks before timing: the total cost of both problems at the same (xs, us),
at the timing point and at a seeded random point, must agree to 1e-9
relative (they validate that the tasks are identical); the largest relative
difference of every calc_diff output (Fx, Fu, Lx, Lu, Lxx, Luu, Lxu) at the
random point and of the quasi-static controls is printed too.

Timing point: xs = x0 repeated, us = quasi-static (gravity compensation), as
FDDP's first iteration sees it.  Milliseconds per call, the best of
``rounds x repeats`` samples of ``calls`` calls each (the JSON keeps the
median too), as wall-clock time and as CPU time of the calling thread (see
:func:`.time_runs`; on a loaded machine the CPU time is the steadier figure
for one thread).  A round times Crocoddyl (one subprocess) and then ours with
1 and 2 Numba threads (``problem.nthreads``), so a busy spell of the machine
hits both sides.  Crocoddyl's pip wheel is built without multithreading: it
runs one thread.  Its calls get their (xs, us) already converted to
``StdVec_VectorXs``; ours take NumPy arrays and validate them (that cost is
in our figures).

One stage object per knot: the same task built as Crocoddyl's examples build
theirs, one StageModel (and new residual and cost objects) per knot
(:func:`reaching_problem_per_knot`); the problem groups the knots by structure
into one phase.  Its calc_diff outputs must equal the shared build's exactly;
then both are timed in ``--blocks`` interleaved blocks (one thread, CPU time),
and the median over the blocks of the per-block median ratio is reported
(``--per-knot-only``: only this, into ``results/ocp_per_knot.json``).

``--profile``: a cProfile of calc_diff (one thread, CPU time) where every
Numba kernel that Python calls shows as its own entry, in microseconds per
calc_diff and per knot, and what Python and NumPy around the kernels cost
(:func:`profile_calls`).

Writes ``results/ocp.json`` and ``results/ocp.png`` beside this file.
"""
import argparse
import cProfile
import gc
import inspect
import io
import os
import pstats
import statistics
import sys
import time

import numba
import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common, crocoddyl_env
from geppetto.examples import reaching

# -- the reaching task (benchmarks/solvers.py uses it too) ---------------------
FRAMES = {"ur5": "tool0", "panda": "panda_hand"}
TARGET = (0.4, 0.2, 0.4)
DT = 0.01
KNOTS = 100
INTEGRATOR = "euler"          # symplectic: Crocoddyl's IntegratedActionModelEuler
WEIGHTS = dict(reach=1.0, x_reg=1e-2, u_reg=1e-4, terminal_reach=1e3, terminal_x_reg=1e-2)
COST_TOLERANCE = 1e-9  # relative, ours vs Crocoddyl at the same (xs, us)


def reaching_task(name):
    """The task as plain data (JSON), from which both sides build their problem."""
    robot = gp.robots.load(name)
    return dict(robot=name, urdf=robot.urdf_path, frame=FRAMES[name],
                q0=[float(value) for value in robot.q0], target=list(TARGET), dt=DT,
                knots=KNOTS, weights=dict(WEIGHTS))


def reaching_problem(task):
    """Our ShootingProblem for ``task`` (:func:`geppetto.examples.reaching.reaching_problem`);
    returns (problem, x0)."""
    model = gp.robots.load(task["robot"]).model
    problem, _ = reaching.reaching_problem(model, task["frame"], task["target"], task["q0"],
                                           knots=task["knots"], dt=task["dt"],
                                           integrator=INTEGRATOR, weights=task["weights"])
    return problem, problem.x0


def reaching_problem_per_knot(task):
    """The same problem built as Crocoddyl's examples build theirs: one stage object per
    knot, each with its own residual and cost objects (equal references and weights).
    The problem groups the knots by structure into one phase."""
    model = gp.robots.load(task["robot"]).model
    weights = dict(reaching.WEIGHTS, **task["weights"])
    dynamics = gp.ocp.FreeDynamics(model)
    state = dynamics.state
    x0 = np.concatenate([task["q0"], np.zeros(model.nv)])

    def stage():
        return gp.ocp.StageModel(dynamics, [
            gp.ocp.Cost(gp.ocp.FrameTranslationResidual(model, task["frame"], task["target"]),
                        weight=weights["reach"]),
            gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=weights["x_reg"]),
            gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=weights["u_reg"])],
            dt=task["dt"], integrator=INTEGRATOR)

    reach = gp.ocp.FrameTranslationResidual(model, task["frame"], task["target"])
    terminal = gp.ocp.TerminalModel(state, [
        gp.ocp.Cost(reach, weight=weights["terminal_reach"]),
        gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=weights["terminal_x_reg"])])
    return gp.ocp.ShootingProblem(x0, [stage() for _ in range(task["knots"])], terminal)


TIMING_SOURCE = "\n\n" + inspect.getsource(_common.time_runs)

# The same problem in Crocoddyl: Python source run in its environment.
CROCODDYL_REACHING = '''
import json, sys
import numpy as np
import pinocchio
import crocoddyl


def reaching_terms(task):
    """(model, state, actuation, x0, reach residual, running costs, terminal costs) of
    the task dict of geppetto.benchmarks.ocp.reaching_task."""
    model = pinocchio.buildModelFromUrdf(task["urdf"])
    weights = task["weights"]
    state = crocoddyl.StateMultibody(model)
    actuation = crocoddyl.ActuationModelFull(state)
    nu = actuation.nu
    x0 = np.concatenate([task["q0"], np.zeros(model.nv)])
    reach_residual = crocoddyl.ResidualModelFrameTranslation(
        state, model.getFrameId(task["frame"]), np.array(task["target"]), nu)
    reach = crocoddyl.CostModelResidual(state, reach_residual)
    x_reg = crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelState(state, x0, nu))
    u_reg = crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, nu))
    running_costs = crocoddyl.CostModelSum(state, nu)
    running_costs.addCost("reach", reach, weights["reach"])
    running_costs.addCost("x_reg", x_reg, weights["x_reg"])
    running_costs.addCost("u_reg", u_reg, weights["u_reg"])
    terminal_costs = crocoddyl.CostModelSum(state, nu)
    terminal_costs.addCost("reach", reach, weights["terminal_reach"])
    terminal_costs.addCost("x_reg", x_reg, weights["terminal_x_reg"])
    return model, state, actuation, x0, reach_residual, running_costs, terminal_costs


def reaching_problem(task):
    """(problem, x0, model) for the task dict of geppetto.benchmarks.ocp.reaching_task."""
    model, state, actuation, x0, _, running_costs, terminal_costs = reaching_terms(task)
    running = crocoddyl.IntegratedActionModelEuler(
        crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, running_costs),
        task["dt"])
    terminal = crocoddyl.IntegratedActionModelEuler(
        crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, terminal_costs), 0.0)
    problem = crocoddyl.ShootingProblem(x0, [running] * task["knots"], terminal)
    return problem, x0, model


def stdvec(rows):
    out = crocoddyl.StdVec_VectorXs()
    out.extend([np.array(row, dtype=float) for row in rows])
    return out


def versions():
    return dict(crocoddyl=crocoddyl.__version__, pinocchio=pinocchio.__version__)
'''

CROCODDYL_OCP_SCRIPT = CROCODDYL_REACHING + TIMING_SOURCE + '''

def calls(function, xs, us, n):
    def run():
        for _ in range(n):
            function(xs, us)
    return run


def derivatives(problem):
    running = problem.runningDatas
    out = {name: [np.asarray(getattr(d, name)).tolist() for d in running]
           for name in ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu")}
    out["terminal_Lx"] = np.asarray(problem.terminalData.Lx).tolist()
    out["terminal_Lxx"] = np.asarray(problem.terminalData.Lxx).tolist()
    return out


payload = json.load(sys.stdin)
result = dict(versions=versions(), robots={})
for task in payload["tasks"]:
    problem, x0, model = reaching_problem(task)
    xs, us = stdvec(task["xs"]), stdvec(task["us"])
    check_xs, check_us = stdvec(task["check_xs"]), stdvec(task["check_us"])
    row = dict(nq=model.nq, nv=model.nv)
    row["cost"] = problem.calc(xs, us)
    row["check_cost"] = problem.calc(check_xs, check_us)
    problem.calcDiff(check_xs, check_us)
    row["check_derivatives"] = derivatives(problem)
    row["quasi_static"] = [np.asarray(u).tolist()
                           for u in problem.quasiStatic([x0] * task["knots"])]
    runs = {"calc": calls(problem.calc, xs, us, payload["calls"]),
            "calc_diff": calls(problem.calcDiff, xs, us, payload["calls"])}
    for run in runs.values():
        run()
    row["timings"] = time_runs(runs, payload["calls"], payload["repeats"])
    result["robots"][task["robot"]] = row
print(json.dumps(result))
'''


def check_point(x0, us, nq, seed):
    """A seeded random (xs, us) near (x0, us): positions +-0.3 rad, velocities
    and torque offsets standard normal, so that every cost term is non-zero."""
    rng = np.random.default_rng(seed)
    xs = np.repeat(x0[None], us.shape[0] + 1, axis=0)
    xs[:, :nq] += 0.3 * rng.standard_normal((xs.shape[0], nq))
    xs[:, nq:] += rng.standard_normal((xs.shape[0], xs.shape[1] - nq))
    return xs, us + rng.standard_normal(us.shape)


def relative_difference(ours, theirs):
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    return float(np.max(np.abs(ours - theirs)) / max(np.max(np.abs(theirs)), 1e-300))


def compare_derivatives(problem, crocoddyl_derivatives):
    """{name: largest |ours - Crocoddyl| / largest |Crocoddyl|} after calc_diff."""
    N = problem.N
    ours = dict(Fx=problem.Fx, Fu=problem.Fu, Lx=problem.Lx[:N], Lu=problem.Lu,
                Lxx=problem.Lxx[:N], Luu=problem.Luu, Lxu=problem.Lxu,
                terminal_Lx=problem.Lx[N], terminal_Lxx=problem.Lxx[N])
    return {name: relative_difference(value, crocoddyl_derivatives[name])
            for name, value in ours.items()}


class Setup:
    """One robot: the task, our problem, the timing and check points."""

    def __init__(self, name, seed):
        self.name = name
        self.task = reaching_task(name)
        started = time.perf_counter()
        self.problem, self.x0 = reaching_problem(self.task)
        nq = len(self.task["q0"])
        self.xs = np.repeat(self.x0[None], KNOTS + 1, axis=0)
        self.us = self.problem.quasi_static(self.xs)
        self.problem.calc(self.xs, self.us)
        calc_first = time.perf_counter() - started
        started = time.perf_counter()
        self.problem.calc_diff(self.xs, self.us)
        self.first_call_s = dict(build_and_calc=calc_first,
                                 calc_diff=time.perf_counter() - started)
        self.check_xs, self.check_us = check_point(self.x0, self.us, nq, seed)

    def payload(self):
        return dict(self.task, xs=self.xs.tolist(), us=self.us.tolist(),
                    check_xs=self.check_xs.tolist(), check_us=self.check_us.tolist())

    def agreement(self, crocoddyl_row):
        """Costs, derivatives and quasi-static controls against Crocoddyl's."""
        problem = self.problem
        if (crocoddyl_row["nq"], crocoddyl_row["nv"]) != (problem.state.nq, problem.state.nv):
            raise RuntimeError(f"{self.name}: Crocoddyl's model has nq, nv = "
                               f"{crocoddyl_row['nq']}, {crocoddyl_row['nv']}")
        cost = problem.calc(self.xs, self.us)
        check_cost = problem.calc_diff(self.check_xs, self.check_us)
        out = dict(cost=cost, crocoddyl_cost=crocoddyl_row["cost"],
                   cost_relative_difference=abs(cost - crocoddyl_row["cost"])
                   / abs(crocoddyl_row["cost"]),
                   check_cost=check_cost, crocoddyl_check_cost=crocoddyl_row["check_cost"],
                   check_cost_relative_difference=abs(check_cost - crocoddyl_row["check_cost"])
                   / abs(crocoddyl_row["check_cost"]),
                   derivatives_relative_difference=compare_derivatives(
                       problem, crocoddyl_row["check_derivatives"]),
                   quasi_static_relative_difference=relative_difference(
                       self.us, crocoddyl_row["quasi_static"]))
        out["identical_task"] = bool(
            max(out["cost_relative_difference"], out["check_cost_relative_difference"])
            <= COST_TOLERANCE)
        return out


def use_threads(problem, threads):
    """Run ``problem``'s kernels on ``threads`` Numba threads (its ``nthreads``,
    Crocoddyl's name, when it has one)."""
    numba.set_num_threads(threads)
    if hasattr(problem, "nthreads"):
        problem.nthreads = threads


def time_ours(setup, threads, calls, repeats):
    """{"calc": Timing, "calc_diff": Timing} with ``threads`` Numba threads."""
    use_threads(setup.problem, threads)
    problem, xs, us = setup.problem, setup.xs, setup.us

    def loop(function):
        def run():
            for _ in range(calls):
                function(xs, us)
        return run

    runs = {"calc": loop(problem.calc), "calc_diff": loop(problem.calc_diff)}
    for run in runs.values():
        run()
    return _common.time_runs(runs, calls, repeats)


def merge(rounds):
    """Rounds of :func:`._common.time_runs` entries -> one, in milliseconds: the best of
    the bests, the median of the medians."""
    return dict(best=min(r["best"] for r in rounds) * 1e3,
                median=statistics.median(r["median"] for r in rounds) * 1e3,
                cpu_best=min(r["cpu_best"] for r in rounds) * 1e3,
                cpu_median=statistics.median(r["cpu_median"] for r in rounds) * 1e3)


def run_crocoddyl(script, setups, extra):
    """Run ``script`` in Crocoddyl's environment on every setup's payload."""
    payload = dict(extra, tasks=[setup.payload() for setup in setups])
    return crocoddyl_env.run(script, payload)


# -- one stage object per knot -------------------------------------------------
def per_knot_comparison(setup, blocks, repeats, calls=5):
    """calc_diff of the per-knot build against the shared-object build of ``setup``'s
    task, one thread: both must give identical outputs; then ``blocks`` blocks of
    :func:`._common.time_runs` (``repeats`` interleaved samples of ``calls`` calls
    each).  Returns a dict: phases, the medians (ms, CPU time and wall clock) and
    ratio per block, and the median of the block ratios."""
    shared = setup.problem
    per_knot = reaching_problem_per_knot(setup.task)
    use_threads(shared, 1)
    use_threads(per_knot, 1)
    xs, us = setup.check_xs, setup.check_us
    shared.calc_diff(xs, us)
    per_knot.calc_diff(xs, us)
    for name in ("costs", "Lx", "Lu", "Lxx", "Luu", "Lxu", "Fx", "Fu", "xnext"):
        if not np.array_equal(getattr(shared, name), getattr(per_knot, name)):
            raise RuntimeError(f"{setup.name}: the per-knot build differs in {name}")
    xs, us = setup.xs, setup.us

    def loop(problem):
        def run():
            for _ in range(calls):
                problem.calc_diff(xs, us)
        return run

    runs = {"shared": loop(shared), "per_knot": loop(per_knot)}
    for run in runs.values():
        run()
    rows = []
    for _ in range(blocks):
        timing = _common.time_runs(runs, calls, repeats)
        rows.append(dict(shared_cpu_median=timing["shared"]["cpu_median"] * 1e3,
                         per_knot_cpu_median=timing["per_knot"]["cpu_median"] * 1e3,
                         shared_median=timing["shared"]["median"] * 1e3,
                         per_knot_median=timing["per_knot"]["median"] * 1e3))
        rows[-1]["cpu_ratio"] = rows[-1]["per_knot_cpu_median"] / rows[-1]["shared_cpu_median"]
        rows[-1]["wall_ratio"] = rows[-1]["per_knot_median"] / rows[-1]["shared_median"]
    return dict(phases_shared=len(shared.phases), phases_per_knot=len(per_knot.phases),
                identical_outputs=True, blocks=rows,
                cpu_ratio_median=statistics.median(r["cpu_ratio"] for r in rows),
                wall_ratio_median=statistics.median(r["wall_ratio"] for r in rows))


def per_knot_lines(name, comparison):
    rows = comparison["blocks"]
    return (f"  {name}: phases {comparison['phases_shared']} (shared) / "
            f"{comparison['phases_per_knot']} (one object per knot), identical calc_diff "
            f"outputs; calc_diff CPU ms, median per block: shared "
            + ", ".join(f"{r['shared_cpu_median']:.3f}" for r in rows) + "; per knot "
            + ", ".join(f"{r['per_knot_cpu_median']:.3f}" for r in rows)
            + f"; ratio per knot / shared, median of the blocks: CPU "
              f"{comparison['cpu_ratio_median']:.3f}, wall clock "
              f"{comparison['wall_ratio_median']:.3f}")


# -- profile -----------------------------------------------------------------
def _kernel_codes():
    """(file, first line, name) of every Numba kernel in geppetto's modules.

    Numba's dispatcher reports its calls to an active profiler under the code
    object of the Python function it compiled, so cProfile lists each kernel
    that Python calls as its own entry; this tells those entries apart."""
    from numba.core.dispatcher import Dispatcher

    from geppetto.dynamics.config import ThreadedKernel
    codes = set()
    for module_name, module in list(sys.modules.items()):
        if module is not None and module_name.startswith("geppetto."):
            for value in list(vars(module).values()):
                if isinstance(value, (Dispatcher, ThreadedKernel)):
                    code = value.py_func.__code__
                    codes.add((code.co_filename, code.co_firstlineno, code.co_name))
    return codes


def _where(filename):
    if filename.startswith(("/", ".")):
        return os.path.basename(os.path.dirname(filename)) + "/" + os.path.basename(filename)
    return filename


def profile_calls(run, calls, knots, samples=5, top=18):
    """cProfile of ``run()`` (``calls`` calls of what is studied) in CPU time of
    the calling thread (one Numba thread: the work runs there), ``samples``
    times; each entry keeps its smallest self time over the samples.  Numba
    kernels show as their own entries; the self time of a Python entry
    includes the NumPy array operations it makes.  Returns (text table, dict);
    microseconds per call and per knot."""
    run()
    kernels = _kernel_codes()
    best = {}
    for _ in range(samples):
        profiler = cProfile.Profile(time.thread_time_ns, 1e-9)
        gc.disable()
        profiler.enable()
        run()
        profiler.disable()
        gc.enable()
        for key, (_, ncalls, tottime, cumtime, _) in pstats.Stats(
                profiler, stream=io.StringIO()).stats.items():
            if key not in best or tottime < best[key][1]:
                best[key] = (ncalls, tottime, cumtime)
    rows = []
    for key, (ncalls, tottime, cumtime) in best.items():
        filename, line, function = key
        rows.append(dict(function=function, where=f"{_where(filename)}:{line}",
                         kind="kernel" if key in kernels else "python", calls=ncalls / calls,
                         self_us=tottime / calls * 1e6, cumulative_us=cumtime / calls * 1e6,
                         self_us_per_knot=tottime / calls / knots * 1e6))
    rows.sort(key=lambda row: -row["self_us"])
    per_call = sum(row["self_us"] for row in rows)
    in_kernels = sum(row["self_us"] for row in rows if row["kind"] == "kernel")
    headers = ["function (self time)", "where", "kind", "calls", "us", "us/knot", "share"]
    lines = [[row["function"][:34], row["where"][:34], row["kind"], f"{row['calls']:.0f}",
              f"{row['self_us']:.0f}", f"{row['self_us_per_knot']:.2f}",
              f"{100 * row['self_us'] / per_call:.0f}%"] for row in rows[:top]]
    text = (_common.format_table(headers, lines)
            + f"\nper call: {per_call:.0f} us CPU time with the profiler on (sum of the "
              f"entries, each the best of {samples}), of which Numba kernels "
              f"{in_kernels:.0f} us ({100 * in_kernels / per_call:.0f}%), Python and NumPy "
              f"around them {per_call - in_kernels:.0f} us")
    return text, dict(per_call_us=per_call, kernels_us=in_kernels, rows=rows[:40])


def profile_ocp(setup, calls=20):
    use_threads(setup.problem, 1)
    problem, xs, us = setup.problem, setup.xs, setup.us

    def run():
        for _ in range(calls):
            problem.calc_diff(xs, us)
    return profile_calls(run, calls, KNOTS)


# -- output ------------------------------------------------------------------
def _ratio(numerator, denominator):
    return None if numerator is None or denominator is None else numerator / denominator


def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def timing_table(rows, threads):
    headers = (["robot", "function"] + [f"ours {t} thr" for t in threads]
               + ["Crocoddyl"] + [f"{t} thr/Croc" for t in threads]
               + ["ours 1 thr CPU", "Croc CPU", "CPU ratio", "ours CPU us/knot",
                  "Croc CPU us/knot"])
    lines = []
    for row in rows:
        ours = [row["ours"][str(t)]["best"] for t in threads]
        croc = row["crocoddyl"]
        theirs = croc["best"] if croc else None
        cpu, croc_cpu = row["ours"]["1"]["cpu_best"], croc["cpu_best"] if croc else None
        lines.append([row["robot"], row["function"]] + [_fmt(v, 3) for v in ours]
                     + [_fmt(theirs, 3)] + [_fmt(_ratio(v, theirs)) for v in ours]
                     + [_fmt(cpu, 3), _fmt(croc_cpu, 3), _fmt(_ratio(cpu, croc_cpu)),
                        _fmt(cpu * 1e3 / KNOTS, 1),
                        _fmt(croc_cpu * 1e3 / KNOTS if croc else None, 1)])
    return _common.format_table(headers, lines)


def agreement_lines(name, agreement):
    d = agreement["derivatives_relative_difference"]
    worst = max(d, key=d.get)
    return (f"  {name}: cost at the timing point {agreement['cost']:.12e} (ours) vs "
            f"{agreement['crocoddyl_cost']:.12e} (Crocoddyl), relative difference "
            f"{agreement['cost_relative_difference']:.1e}\n"
            f"  {name}: cost at the random point  {agreement['check_cost']:.12e} (ours) vs "
            f"{agreement['crocoddyl_check_cost']:.12e} (Crocoddyl), relative difference "
            f"{agreement['check_cost_relative_difference']:.1e}\n"
            f"  {name}: calc_diff outputs at the random point, largest relative difference "
            f"{d[worst]:.1e} ({worst}); quasi-static controls "
            f"{agreement['quasi_static_relative_difference']:.1e} -> "
            + ("identical tasks" if agreement["identical_task"] else
               f"THE TASKS DIFFER (tolerance {COST_TOLERANCE:.0e})"))


def chart(path, rows, robots, threads, machine_line):
    functions = ["calc", "calc_diff"]

    def values(side, key):
        out = np.full((2, len(robots)), np.nan)
        for row in rows:
            timing = row["crocoddyl"] if side == "crocoddyl" else row["ours"].get(side)
            if timing:
                out[functions.index(row["function"]), robots.index(row["robot"])] = timing[key]
        return out

    series = {"geppetto, 1 thread, CPU time": values("1", "cpu_best"),
              "Crocoddyl 3.2 (C++, one thread), CPU time": values("crocoddyl", "cpu_best"),
              "geppetto, 1 thread, wall clock": values("1", "best"),
              "Crocoddyl 3.2, wall clock": values("crocoddyl", "best")}
    for t in threads[1:]:
        series[f"geppetto, {t} threads, wall clock"] = values(str(t), "best")
    _common.grouped_bar_chart(
        path, [f"problem.{f}, {KNOTS} knots" for f in functions], list(robots), series,
        f"Reaching task, best of the repeats (lower is better)\n{machine_line}",
        "milliseconds per call (log)", log=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=list(FRAMES), choices=list(FRAMES))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10, help="calls per timed sample")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true",
                        help="also profile calc_diff kernel by kernel (one thread)")
    parser.add_argument("--per-knot-only", action="store_true",
                        help="only time calc_diff of the per-knot build against the "
                             "shared-object build (writes ocp_per_knot.json)")
    parser.add_argument("--blocks", type=int, default=7,
                        help="interleaved blocks of the per-knot comparison")
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    options = parser.parse_args(argv)
    if options.per_knot_only:
        return main_per_knot(options)
    threads = sorted({1} | {t for t in options.threads
                            if t <= numba.config.NUMBA_NUM_THREADS})
    info = _common.machine()
    setups = [Setup(name, options.seed) for name in options.robots]
    crocoddyl_rounds, reason = [], None
    ours_rounds = {(s.name, t): [] for s in setups for t in threads}
    for round_index in range(options.rounds):
        if reason is None:
            result, reason = run_crocoddyl(CROCODDYL_OCP_SCRIPT, setups,
                                           dict(calls=options.calls, repeats=options.repeats))
            if result is not None:
                crocoddyl_rounds.append(result)
        for setup in setups:
            for t in threads:
                ours_rounds[setup.name, t].append(time_ours(setup, t, options.calls,
                                                            options.repeats))
        print(f"  round {round_index + 1}/{options.rounds} done", file=sys.stderr, flush=True)
    if crocoddyl_rounds:
        info.update(crocoddyl_rounds[0]["versions"])
    machine_line = _common.describe_machine(info)
    print(f"machine: {machine_line}")
    print("The machine may be loaded by other work: every figure is the best of "
          f"{options.rounds} rounds x {options.repeats} samples of {options.calls} calls; "
          "on a loaded machine trust the CPU-time columns and the ratios more than the "
          f"wall clock (load average {os.getloadavg()[0]:.1f} at the end, "
          f"{info['usable_cores']} usable cores).")
    rows, agreements = [], {}
    for setup in setups:
        if crocoddyl_rounds:
            agreements[setup.name] = setup.agreement(
                crocoddyl_rounds[0]["robots"][setup.name])
        for function in ("calc", "calc_diff"):
            ours = {str(t): merge([r[function] for r in ours_rounds[setup.name, t]])
                    for t in threads}
            theirs = (merge([r["robots"][setup.name]["timings"][function]
                             for r in crocoddyl_rounds]) if crocoddyl_rounds else None)
            rows.append(dict(robot=setup.name, function=function, ours=ours, crocoddyl=theirs,
                             first_call_s=setup.first_call_s))
    if crocoddyl_rounds:
        print("\nSame task on both sides (total cost at the same (xs, us)):")
        for name, agreement in agreements.items():
            print(agreement_lines(name, agreement))
    else:
        print("\n" + crocoddyl_env.skipped(reason))
    print(f"\nReaching task, {KNOTS} knots, dt = {DT} s, symplectic Euler: milliseconds "
          "per call, best of the samples, wall clock and (one thread) CPU time of the "
          "calling thread; ratios ours / Crocoddyl (< 1: we are faster)")
    print(timing_table(rows, threads))
    print("first calls (compile or load from Numba's cache), s: " + ", ".join(
        f"{s.name} build+calc {s.first_call_s['build_and_calc']:.1f}, calc_diff "
        f"{s.first_call_s['calc_diff']:.1f}" for s in setups))
    per_knot = {}
    print("\nOne stage object per knot (Crocoddyl's way of building) against one shared "
          "object, calc_diff, one thread:")
    for setup in setups:
        per_knot[setup.name] = per_knot_comparison(setup, options.blocks, options.repeats)
        print(per_knot_lines(setup.name, per_knot[setup.name]))
    profiles = {}
    if options.profile:
        for setup in setups:
            text, profiles[setup.name] = profile_ocp(setup)
            print(f"\nProfile of calc_diff, {setup.name}, one thread (self time per call):")
            print(text)
    info["load_average_1min_at_end"] = os.getloadavg()[0]
    json_path = os.path.join(options.out, "ocp.json")
    png_path = os.path.join(options.out, "ocp.png")
    _common.write_json(json_path, dict(
        machine=info, task={s.name: s.task for s in setups}, rounds=options.rounds,
        repeats=options.repeats, calls=options.calls, threads=threads, unit="ms per call",
        crocoddyl_skipped=None if crocoddyl_rounds else reason, agreement=agreements,
        timings=rows, per_knot=per_knot, profile=profiles))
    chart(png_path, rows, options.robots, threads, machine_line)
    print(f"\nwrote {json_path} and {png_path}")


def main_per_knot(options):
    """``--per-knot-only``: the per-knot comparison alone, into ocp_per_knot.json."""
    info = _common.machine()
    per_knot = {}
    for name in options.robots:
        setup = Setup(name, options.seed)
        per_knot[name] = per_knot_comparison(setup, options.blocks, options.repeats)
        print(per_knot_lines(name, per_knot[name]))
    info["load_average_1min_at_end"] = os.getloadavg()[0]
    print(f"machine: {_common.describe_machine(info)}; load average "
          f"{info['load_average_1min_at_end']:.1f} at the end")
    json_path = os.path.join(options.out, "ocp_per_knot.json")
    _common.write_json(json_path, dict(machine=info, repeats=options.repeats,
                                       blocks=options.blocks, per_knot=per_knot))
    print(f"wrote {json_path}")


if __name__ == "__main__":
    main()
