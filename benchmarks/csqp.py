"""CSQP (ours: stagewise SQP, ADMM QP on Riccati sweeps) beside ALDDP and IPOPT on the
constrained reaching tasks of :mod:`.constrained`.

    python -m geppetto.benchmarks.csqp [--robots ur5 panda] [--tasks plane stiff vbound
                                       torque] [--knots 100] [--repeats 3] [--out FILE]

Per robot, task and start (``cold``: xs = [x0] * (N + 1), quasi-static us; ``fddp``:
FDDP's unconstrained optimum): CSQP and ALDDP (default options) interleaved in
``repeats`` rounds, each solve timed alone by the CPU time of the calling thread
(median over the rounds), IPOPT (:class:`geppetto.solvers.NLP`, analytical derivatives,
Gauss-Newton Hessian, tol 1e-8) once, and FDDP on the same problem without the
constraints (best of ``repeats``) for the time per iteration.  Numba is compiled by a
warm-up solve of each solver.  Columns: iterations (CSQP: SQP iterations and total
ADMM iterations), cost, relative cost difference to IPOPT's from the same start,
largest violation (measured by one function on every result), status, CPU ms, CPU ms
per iteration over FDDP's, CPU time over IPOPT's.  On a shared machine compare ratios
of the same run; the load average is printed.
"""
import argparse
import json
import os
import time

import numpy as np

import geppetto as gp
from geppetto.solvers import NLP

from .constrained import PLANE_Z, reaching, untuned


def _timed(solve):
    start = time.thread_time()
    result = solve()
    return time.thread_time() - start, result


def problem_of(robot, task, knots):
    if task in ("vbound", "torque"):
        return untuned(robot, knots, task)
    last = int(0.9 * knots) if task == "plane" else knots
    return reaching(robot, knots, PLANE_Z, knots // 2, last)


def run(robot, task, knots, repeats):
    problem = problem_of(robot, task, knots)
    fddp = gp.solvers.FDDP(problem)                 # leaves the constraints out
    fddp.solve(max_iter=200)
    fddp_cpu, warm = min((_timed(lambda: fddp.solve(max_iter=200)) for _ in range(repeats)),
                         key=lambda t: t[0])
    fddp_per_iteration = fddp_cpu / max(warm.iterations, 1)
    starts = {"cold": (None, None), "fddp": (warm.xs, warm.us)}
    solvers = {"CSQP": gp.solvers.CSQP(problem), "ALDDP": gp.solvers.ALDDP(problem)}
    for solver in solvers.values():
        solver.solve(max_iter=500)                  # compile
    measure = gp.solvers.CSQP(problem)
    times = {(name, start): [] for name in solvers for start in starts}
    results = {}
    for _ in range(repeats):
        for start, (xs, us) in starts.items():
            for name, solver in solvers.items():
                cpu, results[name, start] = _timed(lambda: solver.solve(xs, us, max_iter=500))
                times[name, start].append(cpu)
    nlp = NLP(problem)
    nlp.solve(max_iter=3)
    for start, (xs, us) in starts.items():
        cpu, results["IPOPT", start] = _timed(lambda: nlp.solve(xs, us, max_iter=500))
        times["IPOPT", start] = [cpu]
    rows = []
    for (name, start), result in results.items():
        cpu = float(np.median(times[name, start]))
        reference = results["IPOPT", start]
        history = getattr(result, "history", {}) or {}
        rows.append(dict(robot=robot, task=task, start=start, solver=name,
                         iterations=result.iterations,
                         qp_iterations=int(sum(history.get("qp_iterations", [0]))),
                         cost=result.cost, vs_ipopt=(result.cost - reference.cost) / reference.cost,
                         violation=measure.max_violation(result.xs, result.us),
                         status=result.status, cpu=cpu, cpu_rounds=times[name, start],
                         per_iteration_vs_fddp=cpu / max(result.iterations, 1) /
                         fddp_per_iteration,
                         vs_ipopt_time=cpu / float(np.median(times["IPOPT", start]))))
    return rows


def markdown(rows):
    lines = ["| robot | task | start | solver | iters (QP) | cost | vs IPOPT cost | violation | "
             "status | CPU ms | per iter / FDDP | time / IPOPT |",
             "|---|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        iters = f"{r['iterations']}" + (f" ({r['qp_iterations']})" if r["solver"] == "CSQP"
                                        else "")
        lines.append(f"| {r['robot']} | {r['task']} | {r['start']} | {r['solver']} | {iters} | "
                     f"{r['cost']:.9g} | {r['vs_ipopt']:.1e} | {r['violation']:.1e} | "
                     f"{r['status']} | {1e3 * r['cpu']:.1f} | "
                     f"{r['per_iteration_vs_fddp']:.2f} | {r['vs_ipopt_time']:.3f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=["ur5", "panda"])
    parser.add_argument("--tasks", nargs="+", default=["plane", "stiff", "vbound", "torque"])
    parser.add_argument("--knots", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="a JSON file for the rows")
    args = parser.parse_args()
    rows = []
    for robot in args.robots:
        for task in args.tasks:
            rows += run(robot, task, args.knots, args.repeats)
            print(markdown(rows[-6:]), flush=True)
    print(f"\nload average {os.getloadavg()}\n")
    print(markdown(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1, default=float)


if __name__ == "__main__":
    main()
