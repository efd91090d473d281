"""FDDP on the reaching task, FDDP on the solo12 trot, BoxFDDP on the talos squat, beside
Crocoddyl's SolverFDDP / SolverBoxFDDP.

    python -m geppetto.benchmarks.solvers [--robots ur5 panda] [--problems solo12_trot
                                          talos_squat] [--threads 1 2] [--repeats 10]
                                          [--rounds 2] [--profile] [--out DIR] [--name NAME]

``--robots --problems untuned --threads 1 --name solvers_untuned`` runs instead the
problems nobody tuned for (:data:`UNTUNED_PROBLEMS`: talos' 7-dof arm reaching a
placement, 90 knots; hyq and anymal walking with touchdown impulses, 88 knots;
kinova's 6-dof arm with continuous joints under RK4, 50 knots), with one line per
problem against Crocoddyl in CPU time (:func:`crocoddyl_lines`: iterations, final
costs, time per iteration and calc_diff alone), into ``results/solvers_untuned.json``.
``--problems untuned2`` runs the second such set (:data:`UNTUNED2_PROBLEMS`: small arms
over short horizons under RK2 / RK4 with frame translation, rotation and a state
barrier, a 2-dof chain over 15 knots, a 300-knot arm, go1 and a1 walks, the whole talos
on both soles); ``--problems untuned3`` the third (:data:`UNTUNED3_PROBLEMS`: frame
velocity towards a twist with weighted control regularization on arms over 5, 40 (RK4) and
300 knots, a free-flyer in free fall, quadrupeds on 3D point contacts, one under control
bounds with BoxFDDP, bolt on its two point feet, talos on one sole).

The contact problems are built on both sides from one description
(``tests/crocoddyl_problems.py``, so a source checkout): the solo12 trot is
Crocoddyl's ``createTrottingProblem`` (two diagonal steps with touchdown
impulses) and ``examples/solo12_trot.py``, solved by FDDP; the talos squat is
``talos_task`` (both soles in 6D contact, the centre of mass 5 cm sideways and
down, 30 knots of 30 ms) with the URDF's effort limits as control bounds, solved
by BoxFDDP.  Both start from x0 repeated and the quasi-static controls.  Each
round runs Crocoddyl's solves (one subprocess) and then ours with 1 and 2
threads, so that a busy spell of the machine hits both sides.  Two threads run
calc_diff as one parallel region (the knots in two chunks, :mod:`geppetto.ocp.parallel`),
the backward pass starting on the calling thread's chunk while the other is evaluated;
the forward pass stays serial.  Besides the wall clock, the CPU time of the solve's
critical path on two threads (:func:`critical_path`) over one thread's CPU time gives
the speed-up the work allows whatever the load (``thread_lines``); the speed-up quoted is
the median of small interleaved blocks, one thread against two, with its range
(:func:`interleaved_thread_ratio`).

The task is the one of :mod:`.ocp` (frame translation + state and control
regularization, semi-implicit Euler, dt = 10 ms, 100 knots), built the same
way on both sides; both solvers start from xs = [x0] * (N + 1), us =
quasi-static, with th_stop = 1e-9 and Crocoddyl's other defaults.

Per robot: iterations, final cost, total time of ``solve``, time per
iteration, and its split into calc_diff (derivatives and gaps), backward pass
and forward pass (every line-search trial: rollout + costs).  Ours come from
``SolverResult.history`` of the fastest (wall clock) of ``rounds x repeats``
solves, with 1 and 2 Numba threads (``problem.nthreads``).  Crocoddyl (its
own virtual environment, :mod:`.crocoddyl_env`; one thread, its wheel has no
multithreading) is timed in the same run: the fastest of as many solves,
without callbacks; its split is the time per call of ``solver.calcDiff()``,
``backwardPass()`` and ``tryStep(1)`` at the solution (best of repeats)
times the number of calls its profiler counted in one solve, and "other" is
what remains of its fastest total (negative when the load disturbed the
totals more than the per-call timings).  For one thread, the CPU time of the
calling thread per iteration (smallest over the solves) is given too: on a
loaded machine it is the steadier figure.

Iterations are counted as backward passes, both sides: Crocoddyl's
``solver.iter`` is one less when it converges (it returns from inside the
loop).  The two solvers can stop on different tests (when this was written,
ours stopped at ``sum_t |Qu_t|^2 < th_stop``, the stop column of its verbose
table; Crocoddyl 3.2 stops when the iterate is feasible and ``|d1 + d2 / 2| <
th_stop``, the expected improvement of a full step,
``SolverDDP::stoppingCriteria``).  So the table also runs ours to
Crocoddyl's test (evaluated on our per-iteration record, our own test off)
to tell a difference of iterates from a difference of stopping rule, and
compares the costs iteration by iteration.

Targets (issue 6): iterations within +-20 %, final cost within 1e-6
relative, our time per iteration (one thread) <= Crocoddyl's.

``--profile``: cProfile of one solve (one thread) with every Numba kernel
that Python calls as its own entry (see :func:`.ocp.profile_calls`).

Writes ``results/solvers.json`` and ``results/solvers.png`` (cost and stop
per iteration, ours and Crocoddyl's) beside this file.
"""
import argparse
import gc
import os
import sys
import time

import numba
import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common, crocoddyl_env
from geppetto.benchmarks.ocp import (CROCODDYL_REACHING, FRAMES, KNOTS, TIMING_SOURCE,
                                     profile_calls, reaching_problem, reaching_task,
                                     use_threads)

TH_STOP = 1e-9
MAX_ITER = 200
# interleaved blocks of the two-thread speed-up (:func:`interleaved_thread_ratio`)
THREAD_BLOCKS = 15
TARGET_ITERATIONS = 0.2  # relative
TARGET_COST = 1e-6  # relative

# Crocoddyl's side of both scripts below: a solve's total time over repeats and its split
# (calls per solve of calcDiff, backwardPass and tryStep from Crocoddyl's profiler, then
# the time per call of each), on time_runs (TIMING_SOURCE)
CROCODDYL_SPLIT_SOURCE = TIMING_SOURCE + '''
import gc
import statistics
import time


def per_call(run, repeats, calls):
    def loop():
        for _ in range(calls):
            run()
    loop()
    return time_runs({"run": loop}, calls, repeats)["run"]


def total_times(solve_once, repeats):
    """{best, median, cpu_best} seconds of solve_once(), which returns (..., wall, cpu),
    over ``repeats`` calls with the garbage collector off."""
    walls, cpus = [], []
    for _ in range(repeats):
        gc.disable()
        wall, cpu = solve_once()[-2:]
        gc.enable()
        walls.append(wall)
        cpus.append(cpu)
    return dict(best=min(walls), median=statistics.median(walls), cpu_best=min(cpus))


def solver_split(solver, solve_once, repeats, calls):
    """The calls per solve (one solve_once() under Crocoddyl's profiler) of calcDiff,
    backwardPass and tryStep and their total time there, then ``solver``'s time per
    call of each (per_call)."""
    crocoddyl.stop_watch_reset_all()
    crocoddyl.enable_profiler()
    solve_once()
    crocoddyl.disable_profiler()
    names = dict(calc_diff="SolverDDP::calcDiff", backward="SolverDDP::backwardPass",
                 forward="SolverDDP::tryStep")
    counts = {key: round(crocoddyl.stop_watch_get_total_time(name)
                         / crocoddyl.stop_watch_get_average_time(name))
              for key, name in names.items()}
    profiled = {key: crocoddyl.stop_watch_get_total_time(name) for key, name in names.items()}
    solver.calcDiff()
    per = {key: per_call(run, repeats, calls) for key, run in (
        ("calc_diff", solver.calcDiff), ("backward", solver.backwardPass),
        ("forward", lambda: solver.tryStep(1.0)))}
    return dict(calls_per_solve=counts, per_call_s={k: v["best"] for k, v in per.items()},
                per_call_cpu_s={k: v["cpu_best"] for k, v in per.items()},
                profiled_total_s=profiled)
'''

CROCODDYL_SOLVER_SCRIPT = CROCODDYL_REACHING + CROCODDYL_SPLIT_SOURCE + '''

def initial_guess(problem, x0, knots):
    xs = [x0.copy() for _ in range(knots + 1)]
    return xs, list(problem.quasiStatic(xs[:-1]))


def solve(problem, x0, task, payload, callbacks=()):
    solver = crocoddyl.SolverFDDP(problem)
    solver.th_stop = payload["th_stop"]
    if callbacks:
        solver.setCallbacks(list(callbacks))
    xs, us = initial_guess(problem, x0, task["knots"])
    wall, cpu = time.perf_counter(), time.thread_time()
    converged = solver.solve(xs, us, payload["max_iter"], False)
    return solver, converged, time.perf_counter() - wall, time.thread_time() - cpu


payload = json.load(sys.stdin)
result = dict(versions=versions(), robots={})
for task in payload["tasks"]:
    problem, x0, model = reaching_problem(task)
    logger = crocoddyl.CallbackLogger()
    solver, converged, _, _ = solve(problem, x0, task, payload, [logger])
    row = dict(converged=bool(converged), solver_iter=solver.iter, cost=solver.cost,
               iterations=len(logger.costs), history=dict(
                   cost=list(logger.costs), stop=list(logger.stops), step=list(logger.steps),
                   grad=list(logger.grads), preg=list(logger.pregs)))
    row["total_s"] = total_times(lambda: solve(problem, x0, task, payload), payload["repeats"])
    row["split"] = solver_split(solver, lambda: solve(problem, x0, task, payload), 20, 5)
    result["robots"][task["robot"]] = row
print(json.dumps(result))
'''


class _Reached(Exception):
    """Raised by :class:`CrocoddylStop` to end a solve."""


class CrocoddylStop:
    """A callback that ends our solve at Crocoddyl 3.2's test: feasible and
    ``|d1 + d2 / 2| < th_stop``, with d1 and d2 recovered from the record
    (``grad`` = d1, ``dV_exp`` = a (d1 + a d2 / 2) at the step a).  Keeps
    the records it saw; ``reached`` is the iteration, or None."""

    def __init__(self, th_stop):
        self.th_stop = th_stop
        self.records = []
        self.reached = None

    @staticmethod
    def criterion(record):
        alpha, d1, dv_exp = record["step"], record["grad"], record["dV_exp"]
        if not np.isfinite(dv_exp):
            return np.inf
        half_d2 = (dv_exp / alpha - d1) / alpha
        return abs(d1 + half_d2)

    def __call__(self, solver, iteration, record):
        self.records.append(dict(record, crocoddyl_stop=self.criterion(record)))
        if record["gaps"] == 0.0 and self.records[-1]["crocoddyl_stop"] < self.th_stop:
            self.reached = iteration
            raise _Reached


def solve_ours(problem, callbacks=(), th_stop=TH_STOP, solver_class=gp.solvers.FDDP,
               guess=(None, None)):
    """(result, wall-clock seconds, CPU seconds of this thread) of one solve."""
    solver = solver_class(problem, th_stop=th_stop)
    wall, cpu = time.perf_counter(), time.thread_time()
    result = solver.solve(*guess, max_iter=MAX_ITER, callbacks=callbacks)
    return result, time.perf_counter() - wall, time.thread_time() - cpu


def summarize(result, total):
    """Iterations, cost and the time split of one of our solves (seconds)."""
    history = result.history
    split = {key: float(np.sum(history[f"time_{key}"]))
             for key in ("calc_diff", "backward", "forward")}
    split["other"] = total - sum(split.values())
    return dict(iterations=result.iterations, cost=result.cost, converged=result.converged,
                status=result.status, total_s=total, split_s=split)


def time_ours(problem, threads, repeats, solver_class=gp.solvers.FDDP, guess=(None, None)):
    """The fastest of ``repeats`` solves with ``threads`` threads (wall clock),
    with every total, the smallest CPU time (meaningful for one thread) and the CPU time
    of calc_diff at the solution (:func:`calc_diff_cpu`)."""
    use_threads(problem, threads)
    solve_ours(problem, solver_class=solver_class, guess=guess)
    best, walls, cpus = None, [], []
    gc.disable()
    try:
        for _ in range(repeats):
            result, wall, cpu = solve_ours(problem, solver_class=solver_class, guess=guess)
            walls.append(wall)
            cpus.append(cpu)
            if best is None or wall < best["total_s"]:
                best = summarize(result, wall)
    finally:
        gc.enable()
    best.update(totals_s=walls, cpu_s=min(cpus),
                calc_diff_cpu_s=calc_diff_cpu(problem, result.xs, result.us))
    if threads > 1:
        paths = [critical_path(problem, solver_class, guess) for _ in range(repeats)]
        best["critical_path_cpu_s"] = [min(low for low, _ in paths),
                                       min(high for _, high in paths)]
    return best


def interleaved_thread_ratio(problem, solver_class=gp.solvers.FDDP, guess=(None, None),
                             blocks=THREAD_BLOCKS, per_block=3):
    """One thread's solve time over two threads' (wall clock), measured in ``blocks``
    small interleaved blocks: in each, the fastest of ``per_block`` solves on one thread
    and on two (which goes first alternates from block to block), their ratio; returns
    the median ratio, its range and the ratios.  A shared machine's load moves both
    sides of a block alike, where the best of each side's own block of solves (the
    table's wall-clock columns) can catch one side in a quiet minute and the other in a
    busy one."""
    ratios = []
    gc.disable()
    try:
        for block in range(blocks):
            best = {}
            for threads in ((1, 2) if block % 2 == 0 else (2, 1)):
                use_threads(problem, threads)
                best[threads] = min(solve_ours(problem, solver_class=solver_class,
                                               guess=guess)[1] for _ in range(per_block))
            ratios.append(best[1] / best[2])
    finally:
        gc.enable()
        use_threads(problem, 1)
    return dict(median=float(np.median(ratios)), low=float(min(ratios)),
                high=float(max(ratios)), ratios=[float(r) for r in ratios],
                blocks=blocks, per_block=per_block)


def critical_path(problem, solver_class, guess):
    """(low, high) estimates of the CPU seconds of a solve's critical path on several
    threads: the calling thread's CPU time, plus, in each iteration's parallel
    calc_diff, what the longest other chunk took beyond the calling thread's share
    (low), plus also what the backward pass waited there for the knots below (high:
    wall clock, which a loaded machine stretches when it deschedules the other thread).
    With a core per thread and no other load the critical path lies between them."""
    waits, pipeline = [], []

    def record(solver, iteration, values):
        cpu = problem.chunk_cpu()
        waits.append(max(0.0, max(cpu[1:]) - cpu[0]))
        pipeline.append(problem.pipeline_wait)

    gc.disable()
    try:
        _, _, cpu = solve_ours(problem, [record], solver_class=solver_class, guess=guess)
    finally:
        gc.enable()
    return cpu + sum(waits), cpu + sum(waits) + sum(pipeline)


def calc_diff_cpu(problem, xs, us, calls=20):
    """CPU seconds of one calc_diff at (xs, us), the median of ``calls``: of the calling
    thread (``caller``), and on several threads each chunk's thread in the parallel
    region (``chunks``, :meth:`~geppetto.ocp.ShootingProblem.chunk_cpu`): their maximum
    is the region's critical path, whatever the load of the machine."""
    problem.calc_diff(xs, us)
    caller, chunks = [], []
    for _ in range(calls):
        cpu = time.thread_time()
        problem.calc_diff(xs, us, validate=False)
        caller.append(time.thread_time() - cpu)
        chunks.append(problem.chunk_cpu())
    out = dict(caller=float(np.median(caller)))
    if problem.nthreads > 1:
        out["chunks"] = [float(c) for c in np.median(np.array(chunks), axis=0)]
    return out


def thread_lines(row):
    """The 2-thread lines of a row: wall-clock speed-up, same iterates, and the CPU-time
    figures: calc_diff's chunks (at the solution, without the backward pass's start) and
    the speed-up of the solve's critical path (:func:`critical_path`) over one thread's
    CPU time; and the interleaved blocks' median speed-up and range
    (:func:`interleaved_thread_ratio`)."""
    one, two = row["ours"]["1"], row["ours"]["2"]
    chunks = two["calc_diff_cpu_s"]["chunks"]
    serial_calc_diff = one["calc_diff_cpu_s"]["caller"]
    low, high = two["critical_path_cpu_s"]
    ratio = two.get("thread_ratio")
    return [f"{row['robot']}: 2 threads over 1, wall clock: solve "
            f"{one['total_s'] / two['total_s']:.2f}x; iterations {one['iterations']} / "
            f"{two['iterations']}, final costs differ by {abs(one['cost'] - two['cost']):.1e}",
            f"  CPU time: solve {one['cpu_s'] * 1e3:.2f} ms on one thread, critical path "
            f"on two {low * 1e3:.2f}-{high * 1e3:.2f} ms: {one['cpu_s'] / high:.2f}x-"
            f"{one['cpu_s'] / low:.2f}x; calc_diff at the solution "
            f"{serial_calc_diff * 1e3:.3f} ms on one thread, chunks "
            + " / ".join(f"{c * 1e3:.3f}" for c in chunks) + " ms"] + ([
            f"  interleaved ({ratio['blocks']} blocks, each the fastest of "
            f"{ratio['per_block']} solves per side): one thread over two "
            f"{ratio['median']:.2f}x median, range {ratio['low']:.2f}-{ratio['high']:.2f}x"]
            if ratio else [])


def crocoddyl_lines(row):
    """One thread against Crocoddyl, CPU time of the calling thread: iterations, the final
    costs' relative difference, the time per iteration (the least CPU time of a solve over
    its iterations) and calc_diff alone (ours at our solution, the median of calls;
    Crocoddyl's the best per-call time at its solution), each with its ratio."""
    ours, croc = row["ours"]["1"], row["crocoddyl"]
    ours_iteration = ours["cpu_s"] / ours["iterations"]
    croc_iteration = croc["total_s"]["cpu_best"] / croc["iterations"]
    ours_calc_diff = ours["calc_diff_cpu_s"]["caller"]
    croc_calc_diff = croc["split"]["per_call_cpu_s"]["calc_diff"]
    return [f"{row['robot']}: iterations {ours['iterations']} / {croc['iterations']}, final "
            f"costs differ by {abs(ours['cost'] - croc['cost']) / abs(croc['cost']):.1e} "
            f"(relative); CPU ms per iteration {ours_iteration * 1e3:.3f} / "
            f"{croc_iteration * 1e3:.3f} = {ours_iteration / croc_iteration:.2f}x; calc_diff "
            f"alone {ours_calc_diff * 1e3:.3f} / {croc_calc_diff * 1e3:.3f} ms = "
            f"{ours_calc_diff / croc_calc_diff:.2f}x"]


def to_crocoddyl_stop(problem):
    """Our solve ended by Crocoddyl's test alone (our own test off): (iterations,
    cost, records, status)."""
    use_threads(problem, 1)
    stopper = CrocoddylStop(TH_STOP)
    try:
        result, _, _ = solve_ours(problem, [stopper], th_stop=0.0)
        return result.iterations, result.cost, stopper.records, result.status
    except _Reached:
        return stopper.reached, stopper.records[-1]["cost"], stopper.records, "converged"


def crocoddyl_split(row):
    """Crocoddyl's calc_diff / backward / forward seconds per solve."""
    split = row["split"]
    out = {key: split["per_call_s"][key] * split["calls_per_solve"][key]
           for key in ("calc_diff", "backward", "forward")}
    out["other"] = row["total_s"]["best"] - sum(out.values())
    return out


# -- problems with contacts, built on both sides from tests/crocoddyl_problems.py --------
EXTRA_PROBLEMS = ("solo12_trot", "talos_squat")

CROCODDYL_PROBLEMS_TIMING = CROCODDYL_SPLIT_SOURCE + """
SOLVERS = dict(FDDP=crocoddyl.SolverFDDP, BoxFDDP=crocoddyl.SolverBoxFDDP)


def solve(problem, task, xs, us, payload, callbacks=()):
    solver = SOLVERS[task["solver"]](problem)
    solver.th_stop = payload["th_stop"]
    if callbacks:
        solver.setCallbacks(list(callbacks))
    wall, cpu = time.perf_counter(), time.thread_time()
    solver.solve(xs, us, payload["max_iter"], False)
    return solver, time.perf_counter() - wall, time.thread_time() - cpu


payload = json.load(sys.stdin)
result = dict(versions=versions(), problems={})
for task in payload["tasks"]:
    problem = make_problem(task)
    xs, us = stdvec(task["guess"]["xs"]), stdvec(task["guess"]["us"])
    logger = crocoddyl.CallbackLogger()
    solver, _, _ = solve(problem, task, xs, us, payload, [logger])
    row = dict(cost=float(solver.cost), iterations=len(logger.costs),
               history=dict(cost=list(logger.costs)))
    row["total_s"] = total_times(lambda: solve(problem, task, xs, us, payload),
                                 payload["repeats"])
    row["split"] = solver_split(solver, lambda: solve(problem, task, xs, us, payload), 10, 3)
    result["problems"][task["name"]] = row
print(json.dumps(result))
"""


# problems nobody tuned for (issue 16's outside measurements, round 31): a 7-dof arm
# other than panda reaching a placement (90 knots), two quadrupeds other than solo12
# walking one foot at a time with touchdown impulses (88 knots), and a 6-dof arm with
# continuous joints (nq != nv) under RK4.  ``--problems untuned`` runs them.
UNTUNED_PROBLEMS = ("talos_arm_se3", "hyq_walk", "anymal_walk", "kinova_rk4")
# the second set (round 34), where fixed per-call costs weigh most or the terms differ:
# small arms over short horizons under RK2 / RK4 with frame translation, rotation and a
# state barrier, a 2-dof chain over 15 knots, a long horizon (300 knots), two more
# quadrupeds' walks (one in 20 ms knots, 40 knots) and the whole talos on both soles.
# ``--problems untuned2`` runs them.
UNTUNED2_PROBLEMS = ("ur3_rk2_short", "z1_rk4_barrier", "double_pendulum_short",
                     "ur10_long", "go1_walk", "a1_walk_short", "talos_full_6d")
# the third set (round 35), residuals, dynamics and horizons no earlier set had: a LOCAL
# frame-velocity cost towards a non-zero twist with a terminal frame rotation and weighted
# control regularization (kinova over 5 knots, ur10 under RK4, z1 over 300 knots with a
# state barrier), a free-flyer without contacts (solo12 in free fall turning its base),
# quadrupeds on 3D point contacts (anymal on three feet lifting the fourth, a1 on four
# feet under control bounds, BoxFDDP), a biped on two point feet (bolt) and talos on one
# sole (6D) lifting the other.
# ``--problems untuned3`` runs them.
UNTUNED3_PROBLEMS = ("kinova_velocity_5", "ur10_rk4_velocity", "z1_long_barrier",
                     "solo12_free_fall", "anymal_three_feet", "a1_box_stance",
                     "talos_one_foot", "bolt_two_feet")


def problem_tasks(cp, names):
    """{name: task} of the problems of :data:`EXTRA_PROBLEMS`, :data:`UNTUNED_PROBLEMS`,
    :data:`UNTUNED2_PROBLEMS` and :data:`UNTUNED3_PROBLEMS` in ``names``, each with the
    solver that solves it."""
    makers = dict(
        solo12_trot=lambda: dict(cp.trot_task(), solver="FDDP"),
        talos_squat=lambda: _squat_task(cp),
        talos_arm_se3=lambda: dict(cp.arm_task("talos_arm_se3", "talos_arm",
                                               "gripper_left_joint", (0.3, 0.3, -0.45),
                                               knots=90, dt=0.01, turn=0.3), solver="FDDP"),
        hyq_walk=lambda: dict(cp.walk_task("hyq", step_knots=20, support_knots=2, dt=0.01),
                              solver="FDDP"),
        anymal_walk=lambda: dict(cp.walk_task("anymal", step_knots=20, support_knots=2,
                                              dt=0.01), solver="FDDP"),
        kinova_rk4=lambda: dict(cp.arm_task("kinova_rk4", "kinova", "j2s6s200_end_effector",
                                            (0.5, 0.3, 0.5), knots=50, dt=0.02,
                                            integrator="rk4"), solver="FDDP"),
        ur3_rk2_short=lambda: dict(cp.reach_task("ur3_rk2_short", "ur3", "tool0",
                                                 (0.3, 0.25, 0.25), knots=20, dt=0.03,
                                                 integrator="rk2", keep_orientation=True),
                                   solver="FDDP"),
        z1_rk4_barrier=lambda: dict(cp.reach_task("z1_rk4_barrier", "z1", "link06",
                                                  (0.25, 0.1, 0.35), knots=30, dt=0.02,
                                                  integrator="rk4", position_band=0.8),
                                    solver="FDDP"),
        double_pendulum_short=lambda: dict(cp.reach_task(
            "double_pendulum_short", "double_pendulum", "link2", (0.03, -0.06, 0.12),
            knots=15, dt=0.02), solver="FDDP"),
        ur10_long=lambda: dict(cp.reach_task("ur10_long", "ur10", "tool0", (0.8, 0.4, 0.5),
                                             knots=300, dt=0.005, keep_orientation=True),
                               solver="FDDP"),
        go1_walk=lambda: dict(cp.walk_task("go1", step_knots=15, support_knots=2, dt=0.01),
                              solver="FDDP"),
        a1_walk_short=lambda: dict(cp.walk_task("a1", step_knots=8, support_knots=2,
                                                dt=0.02), name="a1_walk_short",
                                   solver="FDDP"),
        talos_full_6d=lambda: dict(cp.talos_task(knots=20, robot="talos_full",
                                                 name="talos_full_6d"), solver="FDDP"),
        kinova_velocity_5=lambda: dict(cp.velocity_task(
            "kinova_velocity_5", "kinova", "j2s6s200_end_effector",
            (0.1, 0.0, 0.05, 0.0, 0.0, 0.3), knots=5, dt=0.05), solver="FDDP"),
        ur10_rk4_velocity=lambda: dict(cp.velocity_task(
            "ur10_rk4_velocity", "ur10", "tool0", (0.05, 0.1, 0.0, 0.2, 0.0, 0.0), knots=40,
            dt=0.02, integrator="rk4"), solver="FDDP"),
        z1_long_barrier=lambda: dict(cp.velocity_task(
            "z1_long_barrier", "z1", "link06", (0.0, 0.05, 0.05, 0.0, 0.3, 0.0), knots=300,
            dt=0.005, position_band=0.5), solver="FDDP"),
        solo12_free_fall=lambda: dict(cp.floating_task("solo12_free_fall", "solo12",
                                                       "base_link"), solver="FDDP"),
        anymal_three_feet=lambda: dict(cp.stance_task("anymal_three_feet", "anymal",
                                                      lifted=3), solver="FDDP"),
        a1_box_stance=lambda: dict(cp.stance_task("a1_box_stance", "a1", torque_limit=1.05),
                                   solver="BoxFDDP"),
        talos_one_foot=lambda: dict(cp.one_foot_task(), solver="FDDP"),
        bolt_two_feet=lambda: dict(cp.stance_task("bolt_two_feet", "bolt", knots=30,
                                                  com_shift=(0.0, 0.02, -0.02)),
                                   solver="FDDP"))
    return {name: makers[name]() for name in names}


def _squat_task(cp):
    squat = cp.talos_task(knots=30)
    effort = gp.robots.load("talos").model.effort_limit[6:]
    squat.update(name="talos_squat", solver="BoxFDDP",
                 control_bounds=[(-effort).tolist(), effort.tolist()])
    return squat


def extra_problems(names=EXTRA_PROBLEMS):
    """({name: (task, our problem, (xs, us) guess, Crocoddyl's controls)}, the source that
    builds them on Crocoddyl's side) for the problems ``names`` (:func:`problem_tasks`),
    or (None, reason) without tests/crocoddyl_problems.py (a source checkout has it)."""
    try:
        from geppetto.tests import crocoddyl_problems as cp
    except ImportError as error:
        return None, f"tests/crocoddyl_problems.py not importable ({error})"
    out = {}
    for name, task in problem_tasks(cp, names).items():
        problem = cp.build(task)
        xs, us = cp.initial_guess(problem)
        out[name] = (task, problem, (xs, us), cp.crocoddyl_controls(problem, us))
    return out, cp.CROCODDYL_SCRIPT[:cp.CROCODDYL_SCRIPT.index("payload = json.load")]


def time_extra(problem, task, guess, threads, repeats):
    """:func:`time_ours` for a problem of :func:`extra_problems` from its guess."""
    return time_ours(problem, threads, repeats, getattr(gp.solvers, task["solver"]), guess)


# -- output ------------------------------------------------------------------
def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def solver_table(rows, threads):
    headers = ["robot", "solver", "iter", "final cost", "total ms", "ms/iter", "calc_diff",
               "backward", "forward", "other", "/Croc", "CPU ms/iter", "/Croc CPU"]
    lines = []
    for row in rows:
        croc = row["crocoddyl"]
        if croc:
            croc_iter = croc["total_s"]["best"] / croc["iterations"] * 1e3
            croc_cpu = croc["total_s"]["cpu_best"] / croc["iterations"] * 1e3
        for t in threads:
            ours = row["ours"][str(t)]
            per_iter = ours["total_s"] * 1e3 / ours["iterations"]
            cpu = ours["cpu_s"] * 1e3 / ours["iterations"] if t == 1 else None
            lines.append([row["robot"], f"geppetto {row['solver']} {t} thr", ours["iterations"],
                          f"{ours['cost']:.10f}", _fmt(ours["total_s"] * 1e3, 1),
                          _fmt(per_iter)] + [
                _fmt(ours["split_s"][k] * 1e3 / ours["iterations"])
                for k in ("calc_diff", "backward", "forward", "other")]
                + [_fmt(per_iter / croc_iter if croc else None), _fmt(cpu),
                   _fmt(cpu / croc_cpu if croc and cpu else None)])
        if croc:
            split = crocoddyl_split(croc)
            lines.append([row["robot"], f"Crocoddyl 3.2 {row['solver']}", croc["iterations"],
                          f"{croc['cost']:.10f}", _fmt(croc["total_s"]["best"] * 1e3, 1),
                          _fmt(croc_iter)] + [
                _fmt(split[k] * 1e3 / croc["iterations"])
                for k in ("calc_diff", "backward", "forward", "other")]
                + ["1.00", _fmt(croc_cpu), "1.00"])
            diag = row.get("ours_to_crocoddyl_stop")
            if diag:
                lines.append([row["robot"], "geppetto, Croc. stop", diag["iterations"],
                              f"{diag['cost']:.10f}"] + ["-"] * 9)
    return _common.format_table(headers, lines)


def targets(row):
    """{target: (met, text)} for one robot (ours with one thread)."""
    croc, ours = row["crocoddyl"], row["ours"]["1"]
    out = {}
    ratio = ours["iterations"] / croc["iterations"]
    out["iterations within 20%"] = (abs(ratio - 1) <= TARGET_ITERATIONS,
                                    f"{ours['iterations']} vs {croc['iterations']}")
    relative = abs(ours["cost"] - croc["cost"]) / abs(croc["cost"])
    out["final cost within 1e-6"] = (relative <= TARGET_COST, f"relative {relative:.1e}")
    wall = (ours["total_s"] / ours["iterations"]) / (croc["total_s"]["best"] / croc["iterations"])
    cpu = (ours["cpu_s"] / ours["iterations"]) / (croc["total_s"]["cpu_best"] / croc["iterations"])
    out["time/iter (1 thread) <= Crocoddyl's"] = (
        max(wall, cpu) <= 1.0, f"{cpu:.2f}x in CPU time, {wall:.2f}x wall clock")
    return out


def chart(path, rows, machine_line):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(rows), 2, figsize=(11, 3.6 * len(rows)), squeeze=False)
    for (cost_axis, stop_axis), row in zip(axes, rows):
        croc, diag = row["crocoddyl"], row["ours_to_crocoddyl_stop"]
        reference = croc["cost"] if croc else row["ours"]["1"]["cost"]
        records = diag["records"]
        iterations = np.arange(1, len(records) + 1)
        ours_cost = np.array([r["cost"] for r in records])
        ours_end = row["ours"]["1"]["iterations"]
        cost_axis.semilogy(iterations, np.maximum(ours_cost - reference, 1e-16), "o-",
                           label="geppetto FDDP")
        cost_axis.axvline(ours_end, color="C0", ls=":", label="geppetto stops (own test)")
        stop_axis.semilogy(iterations, [r["stop"] for r in records], "o-",
                           label="geppetto's stop (its own test)")
        stop_axis.semilogy(iterations, [r["crocoddyl_stop"] for r in records], "^--",
                           color="C0", mfc="none", label="geppetto, Crocoddyl's test")
        if croc:
            croc_iterations = np.arange(1, croc["iterations"] + 1)
            cost_axis.semilogy(croc_iterations,
                               np.maximum(np.array(croc["history"]["cost"]) - reference, 1e-16),
                               "x--", color="C3", label="Crocoddyl SolverFDDP")
            stop_axis.semilogy(croc_iterations, croc["history"]["stop"], "x--", color="C3",
                               label="Crocoddyl's stop: |d1 + d2/2|")
        stop_axis.axhline(TH_STOP, color="grey", lw=0.8, ls="--", label="th_stop")
        cost_axis.set_title(f"{row['robot']}: cost - Crocoddyl's final cost")
        stop_axis.set_title(f"{row['robot']}: stopping criterion")
        for axis in (cost_axis, stop_axis):
            axis.set_xlabel("iteration")
            axis.grid(alpha=0.3, which="both")
            axis.legend(fontsize=7)
    figure.suptitle(f"FDDP, reaching task, {KNOTS} knots, th_stop = {TH_STOP:g}\n"
                    f"{machine_line}", fontsize=9)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="*", default=list(FRAMES), choices=list(FRAMES))
    parser.add_argument("--problems", nargs="*", default=list(EXTRA_PROBLEMS),
                        choices=list(EXTRA_PROBLEMS) + list(UNTUNED_PROBLEMS) +
                        list(UNTUNED2_PROBLEMS) + list(UNTUNED3_PROBLEMS) +
                        ["untuned", "untuned2", "untuned3"],
                        help="the contact problems (solo12 trot FDDP, talos squat BoxFDDP) "
                             "and the untuned ones (UNTUNED_PROBLEMS, UNTUNED2_PROBLEMS, "
                             "UNTUNED3_PROBLEMS; 'untuned', 'untuned2', 'untuned3': all of "
                             "one set)")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", action="store_true",
                        help="also profile one solve kernel by kernel (one thread)")
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    parser.add_argument("--name", default="solvers",
                        help="the results' file names: NAME.json, NAME.png")
    options = parser.parse_args(argv)
    for group, members in (("untuned", UNTUNED_PROBLEMS), ("untuned2", UNTUNED2_PROBLEMS),
                           ("untuned3", UNTUNED3_PROBLEMS)):
        if group in options.problems:
            options.problems = [p for p in options.problems if p != group] + [
                p for p in members if p not in options.problems]
    threads = [t for t in options.threads if t <= numba.config.NUMBA_NUM_THREADS]
    if 1 not in threads:
        threads.insert(0, 1)
    info = _common.machine()
    tasks = {name: reaching_task(name) for name in options.robots}
    problems = {name: reaching_problem(task)[0] for name, task in tasks.items()}
    payload = dict(tasks=list(tasks.values()), th_stop=TH_STOP, max_iter=MAX_ITER,
                   repeats=options.repeats)
    extra, extra_source = ({}, None) if not options.problems else extra_problems(
        options.problems)
    if extra is None:
        print(f"contact problems skipped: {extra_source}")
        extra = {}
    extra = {name: value for name, value in extra.items() if name in options.problems}
    extra_payload = dict(th_stop=TH_STOP, max_iter=MAX_ITER, repeats=options.repeats, tasks=[
        dict(task, guess=dict(xs=np.asarray(guess[0]).tolist(), us=croc_us))
        for task, _, guess, croc_us in extra.values()])
    crocoddyl_rounds, reason = [], None
    extra_rounds = []
    ours_rounds = {(name, t): [] for name in list(tasks) + list(extra) for t in threads}
    for round_index in range(options.rounds):
        if reason is None and tasks:
            result, reason = crocoddyl_env.run(CROCODDYL_SOLVER_SCRIPT, payload)
            if result is not None:
                crocoddyl_rounds.append(result)
        for name, problem in problems.items():
            for t in threads:
                ours_rounds[name, t].append(time_ours(problem, t, options.repeats))
        if reason is None and extra:
            result, reason = crocoddyl_env.run(
                extra_source + CROCODDYL_PROBLEMS_TIMING, extra_payload)
            if result is not None:
                extra_rounds.append(result)
        for name, (task, problem, guess, _) in extra.items():
            for t in threads:
                ours_rounds[name, t].append(time_extra(problem, task, guess, t,
                                                       options.repeats))
        print(f"  round {round_index + 1}/{options.rounds} done", file=sys.stderr, flush=True)
    ratios = {}
    if 2 in threads:
        for name, problem in problems.items():
            ratios[name] = interleaved_thread_ratio(problem)
        for name, (task, problem, guess, _) in extra.items():
            ratios[name] = interleaved_thread_ratio(problem, getattr(gp.solvers,
                                                                     task["solver"]), guess)
        print("  two-thread blocks done", file=sys.stderr, flush=True)
    crocoddyl_rounds = crocoddyl_rounds or extra_rounds
    if crocoddyl_rounds:
        info.update(crocoddyl_rounds[0]["versions"])
    if 2 in threads:
        info["threads"] = "Python threads over nogil kernels (geppetto.ocp.parallel)"
    machine_line = _common.describe_machine(info)
    rows = []
    for name, problem in problems.items():
        ours = {str(t): min(ours_rounds[name, t], key=lambda r: r["total_s"]) for t in threads}
        for t in threads:
            ours[str(t)]["totals_s"] = [s for r in ours_rounds[name, t] for s in r["totals_s"]]
        croc = None
        if crocoddyl_rounds:
            croc = min((r["robots"][name] for r in crocoddyl_rounds),
                       key=lambda r: r["total_s"]["best"])
            croc = dict(croc, split=dict(croc["split"], per_call_s={
                key: min(r["robots"][name]["split"]["per_call_s"][key]
                         for r in crocoddyl_rounds)
                for key in ("calc_diff", "backward", "forward")}))
        iterations, cost, records, status = to_crocoddyl_stop(problem)
        diag = dict(iterations=iterations, cost=cost, status=status, records=records)
        if croc:
            common = min(len(records), croc["iterations"])
            ours_costs = np.array([r["cost"] for r in records[:common]])
            diag["largest_cost_difference_per_iteration"] = float(np.max(
                np.abs(ours_costs - croc["history"]["cost"][:common]) / np.abs(ours_costs)))
        if name in ratios:
            ours["2"]["thread_ratio"] = ratios[name]
        rows.append(dict(robot=name, solver="FDDP", ours=ours, crocoddyl=croc,
                         ours_to_crocoddyl_stop=diag))
    for name, (task, problem, guess, _) in extra.items():
        ours = {str(t): min(ours_rounds[name, t], key=lambda r: r["total_s"]) for t in threads}
        croc = None
        if extra_rounds:
            croc = min((r["problems"][name] for r in extra_rounds),
                       key=lambda r: r["total_s"]["best"])
            croc = dict(croc, split=dict(croc["split"], per_call_s={
                key: min(r["problems"][name]["split"]["per_call_s"][key] for r in extra_rounds)
                for key in ("calc_diff", "backward", "forward")}))
        if name in ratios:
            ours["2"]["thread_ratio"] = ratios[name]
        rows.append(dict(robot=name, solver=task["solver"], ours=ours, crocoddyl=croc))
    print(f"machine: {machine_line}")
    print("The machine may be loaded by other work: each time is the fastest of "
          f"{options.rounds} rounds x {options.repeats} solves; on a loaded machine trust "
          "the CPU-time columns and the ratios more than the wall clock (load average "
          f"{os.getloadavg()[0]:.1f} at the end, {info['usable_cores']} usable cores).")
    if not crocoddyl_rounds:
        print(crocoddyl_env.skipped(reason))
    print(f"\nFDDP on the reaching task ({KNOTS} knots), FDDP on the solo12 trot, BoxFDDP "
          f"on the talos squat, th_stop = {TH_STOP:g}; time split per iteration in ms (wall "
          "clock); /Croc: our ms/iter over Crocoddyl's, wall clock and CPU time of the "
          "calling thread")
    print(solver_table(rows, threads))
    for row in rows:
        if row["crocoddyl"] and "ours_to_crocoddyl_stop" not in row:
            print("\n".join(crocoddyl_lines(row)))
        if 2 in threads:
            print("\n".join(thread_lines(row)))
        diag = row.get("ours_to_crocoddyl_stop")
        if row["crocoddyl"] and not diag:
            for target, (met, text) in targets(row).items():
                print(f"  {row['robot']}: target {target}: {'met' if met else 'NOT met'} "
                      f"({text})")
        elif row["crocoddyl"]:
            croc = row["crocoddyl"]
            print(f"{row['robot']}: ours stopped by Crocoddyl's test: {diag['iterations']} "
                  f"iterations (Crocoddyl {croc['iterations']}), final cost relative "
                  f"difference {abs(diag['cost'] - croc['cost']) / abs(croc['cost']):.1e}; "
                  "cost per iteration, largest relative difference "
                  f"{diag['largest_cost_difference_per_iteration']:.1e}")
            for target, (met, text) in targets(row).items():
                print(f"  target {target}: {'met' if met else 'NOT met'} ({text})")
    profiles = {}
    if options.profile:
        for name, problem in problems.items():
            use_threads(problem, 1)
            iterations = solve_ours(problem)[0].iterations
            text, profiles[name] = profile_calls(lambda: solve_ours(problem), 1,
                                                 KNOTS * iterations)
            print(f"\nProfile of one FDDP solve, {name}, one thread, {iterations} iterations "
                  "(self time per solve; us/knot is per knot and iteration):")
            print(text)
    info["load_average_1min_at_end"] = os.getloadavg()[0]
    json_path = os.path.join(options.out, f"{options.name}.json")
    png_path = os.path.join(options.out, f"{options.name}.png")
    _common.write_json(json_path, dict(
        machine=info, task=tasks, th_stop=TH_STOP, rounds=options.rounds,
        repeats=options.repeats, threads=threads, unit="seconds",
        crocoddyl_skipped=None if crocoddyl_rounds else reason,
        problems={name: task for name, (task, _, _, _) in extra.items()},
        results=[dict(row, ours_to_crocoddyl_stop=dict(
            row["ours_to_crocoddyl_stop"],
            records=[{k: float(v) for k, v in r.items()}
                     for r in row["ours_to_crocoddyl_stop"]["records"]]))
            if "ours_to_crocoddyl_stop" in row else row for row in rows], profile=profiles))
    reaching_rows = [row for row in rows if "ours_to_crocoddyl_stop" in row]
    if reaching_rows:
        chart(png_path, reaching_rows, machine_line)
    print(f"\nwrote {json_path}" + (f" and {png_path}" if reaching_rows else ""))


if __name__ == "__main__":
    main()
