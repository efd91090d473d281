"""ALDDP (augmented-Lagrangian DDP) beside IPOPT on constrained reaching tasks.

    python -m geppetto.benchmarks.constrained [--robots ur5 panda] [--knots 100]
                                              [--repeats 3] [--casadi] [--out DIR]

Tasks (per robot, 100 knots, dt = 10 ms, semi-implicit Euler, the costs of
:mod:`.nlp`'s reaching task: frame translation to (0.4, 0.2, 0.4), state and
control regularization):

- ``plane``: the tool exactly at the target at the last knot (a terminal
  equality) and at z >= 0.45 on knots 50..89 (a path inequality);
- ``stiff``: the same with the plane up to knot 99, so that the tool must drop
  5 cm to the target in the last step;
- ``nlp`` (``--tasks nlp``): :mod:`.nlp`'s constrained task (other weights, the
  plane on knots 50..99 at a height from the unconstrained optimum), on which
  the Gauss-Newton IPOPT does not converge for panda.

Starts: ``cold`` (xs = [x0] * (N + 1), us quasi-static) and ``fddp`` (FDDP's
unconstrained optimum).  Solvers: ALDDP (default options: th_stop 1e-10,
violation <= 1e-8), IPOPT (tol 1e-8) on :class:`geppetto.solvers.NLP` with
analytical derivatives (Gauss-Newton Hessian) and, with ``--casadi``, the
CasADi exact Hessian; FDDP on the same problem (it leaves the constraints
out: the unconstrained optimum, the ``fddp`` start) for the time per
iteration.  Columns: iterations, final cost, largest constraint violation,
dynamics gaps, status, wall and CPU time (of the calling thread, which runs
IPOPT and MUMPS too) of ``solve`` (the run of least CPU time of ``repeats``
for the DDP solvers, one run for IPOPT) and CPU time per iteration.  Numba
was compiled by a warm-up solve.  On a shared machine the CPU time is the
figure to compare (the machine line gives the load average); compare solvers
by their ratio in the same run.

Writes ``results/constrained.json`` and ``results/constrained.md`` beside this file.
"""
import argparse
import json
import os
import time

import numpy as np

import geppetto as gp
from geppetto.benchmarks import nlp
from geppetto.benchmarks._common import RESULTS_DIR, describe_machine, machine
from geppetto.solvers.nlp import NLP

DT = 0.01
PLANE_Z = 0.45


def reaching(name, knots, plane_z=None, first=None, last=None):
    """benchmarks/nlp.py's reaching problem; with ``plane_z`` the tool at the target at
    the last knot (equality) and at z >= plane_z on knots first..last-1 (default
    N/2 .. 0.9 N)."""
    last = int(0.9 * knots) if last is None else last
    return nlp.reaching(name, knots, plane_z, first, last)


def _best(solve, repeats):
    """(wall seconds, CPU seconds of this thread, result) of the fastest of ``repeats``."""
    best = None
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.thread_time()
        result = solve()
        cpu = time.thread_time() - cpu_start
        total = time.perf_counter() - start
        if best is None or cpu < best[1]:
            best = (total, cpu, result)
    return best


def devs_problem(robot, knots):
    """:mod:`.nlp`'s constrained task (its costs, its plane halfway between the
    unconstrained optimum's tool height at the middle knot and the target's)."""
    free = gp.solvers.FDDP(nlp.reaching(robot, knots)).solve(max_iter=200)
    plane_z = 0.5 * (nlp.tool_heights(robot, free.xs)[knots // 2, 2] + nlp.TARGET[2])
    return nlp.reaching(robot, knots, plane_z)


def run(robot, task, knots, repeats, casadi):
    if task == "nlp":
        problem = devs_problem(robot, knots)
    else:
        last = int(0.9 * knots) if task == "plane" else knots
        problem = reaching(robot, knots, PLANE_Z, knots // 2, last)
    fddp = gp.solvers.FDDP(problem)              # FDDP leaves the constraints out
    fddp.solve(max_iter=200)                                       # compile
    total, cpu, warm = _best(lambda: fddp.solve(max_iter=200), repeats)
    rows = [dict(solver="FDDP (no constraints)", start="cold", total=total, cpu=cpu,
                 result=warm)]
    alddp = gp.solvers.ALDDP(problem)
    measure = gp.solvers.ALDDP(problem)          # the violation of any trajectory
    starts = {"cold": (None, None), "fddp": (warm.xs, warm.us)}
    alddp.solve(max_iter=500)                                      # compile
    for start, (xs, us) in starts.items():
        total, cpu, result = _best(lambda: alddp.solve(xs, us, max_iter=500), repeats)
        rows.append(dict(solver="ALDDP", start=start, total=total, cpu=cpu, result=result))
    modes = ["analytical"] + (["casadi"] if casadi else [])
    for mode in modes:
        nlp = NLP(problem, derivatives=mode)
        nlp.solve(max_iter=3)                                      # compile, create IPOPT
        for start, (xs, us) in starts.items():
            total, cpu, result = _best(lambda: nlp.solve(xs, us, max_iter=500), 1)
            label = {"analytical": "IPOPT analytical (GN)", "casadi": "IPOPT CasADi (exact)"}
            rows.append(dict(solver=label[mode], start=start, total=total, cpu=cpu,
                             result=result))
    out = []
    for row in rows:
        result = row.pop("result")
        if row["solver"].startswith("FDDP"):
            violation = np.nan
        else:
            violation = measure.max_violation(result.xs, result.us)
        out.append(dict(row, robot=robot, task=task, iterations=result.iterations,
                        cost=result.cost, violation=violation, gaps=result.gaps,
                        status=result.status,
                        per_iteration=row["cpu"] / max(result.iterations, 1)))
    return out


def markdown(rows):
    lines = ["| robot | task | start | solver | iters | cost | violation | gaps | status | "
             "wall ms | CPU ms | CPU ms / iter |",
             "|---|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['robot']} | {r['task']} | {r['start']} | {r['solver']} | "
                     f"{r['iterations']} | {r['cost']:.9g} | {r['violation']:.1e} | "
                     f"{r['gaps']:.1e} | {r['status']} | {1e3 * r['total']:.1f} | "
                     f"{1e3 * r['cpu']:.1f} | {1e3 * r['per_iteration']:.2f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=["ur5", "panda"])
    parser.add_argument("--tasks", nargs="+", default=["plane", "stiff"],
                        choices=["plane", "stiff", "nlp"])
    parser.add_argument("--knots", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--casadi", action="store_true", help="also IPOPT with CasADi's exact "
                        "Hessian")
    parser.add_argument("--out", default=RESULTS_DIR)
    args = parser.parse_args()
    info = machine()
    print(describe_machine(info))
    rows = []
    for robot in args.robots:
        for task in args.tasks:
            rows += run(robot, task, args.knots, args.repeats, args.casadi)
            print(markdown([r for r in rows if r["robot"] == robot and r["task"] == task]),
                  flush=True)
    info["load_average_end"] = os.getloadavg()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "constrained.json"), "w") as f:
        json.dump(dict(machine=info, rows=rows), f, indent=1, default=float)
    with open(os.path.join(args.out, "constrained.md"), "w") as f:
        f.write(f"Machine: {describe_machine(info)}\n\n{markdown(rows)}\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
