"""IPOPT on the multiple-shooting NLP: analytical vs CasADi-AD derivatives, beside FDDP.

    python -m geppetto.benchmarks.nlp [--robots ur5 panda] [--knots 100] [--repeats 3]
                                      [--out DIR]

Tasks (per robot, 100 knots, dt = 10 ms, semi-implicit Euler):

- ``reaching``: frame translation to (0.4, 0.2, 0.4) + state and control
  regularization (the task of :mod:`.solvers` and :mod:`.ocp`);
- ``constrained``: the same costs, the end-effector exactly at the target at
  the last knot (a terminal equality) and above a horizontal plane on the
  second half of the knots (a path inequality), the plane's height halfway
  between the unconstrained optimum's tool height at the middle knot and the
  target's (so the unconstrained optimum violates both).

Solvers: FDDP (th_stop 1e-9, unconstrained task only); IPOPT (tol 1e-8,
MUMPS) on :class:`geppetto.solvers.nlp.NLP` with ``derivatives="analytical"``
(Gauss-Newton Hessian from our kernels) and ``derivatives="casadi"`` (the
CasADi twin, exact Hessian by AD, SX virtual machine).  The reaching task
starts cold (xs = [x0] * (N + 1), us = quasi-static) for every solver; the
constrained one is warm-started from FDDP's unconstrained optimum (soft
problem by DDP, then the NLP for the hard constraints).  From the cold start
the Gauss-Newton IPOPT does not converge on the constrained ur5 task (500
iterations, measured once; the exact Hessian takes 36): the curvature of the
terminal equality and of the defects that Gauss-Newton leaves out matters
far from the solution (and, on the redundant panda, near it too: the table
shows it).  Different local optima show as different costs.

Columns: build (seconds to build the NLP's functions: CasADi's AD in casadi
mode; Numba was compiled by a warm-up solve), IPOPT iterations, final cost,
status, total wall time of ``solve`` (best of ``repeats``), time per
iteration, and the time IPOPT spent in the function evaluations (CasADi's
``t_wall_nlp_f + _g + _grad_f + _jac_g + _hess_l`` of that solve) with its
share of the total.  The rest is IPOPT's own linear algebra (MUMPS) and the
Python around it.  Wall-clock times on a loaded machine: the machine line
gives the load average; compare the modes by their ratio, measured in the
same run.

Writes ``results/nlp.json`` and ``results/nlp.md`` beside this file.
"""
import argparse
import datetime
import json
import os
import platform
import time

import numpy as np

import geppetto as gp
from geppetto.solvers.nlp import NLP

FRAMES = {"ur5": "tool0", "panda": "panda_hand"}
TARGET = np.array([0.4, 0.2, 0.4])
DT = 0.01
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
EVALUATIONS = ("nlp_f", "nlp_g", "nlp_grad_f", "nlp_jac_g", "nlp_hess_l")


def reaching(name, knots, plane_z=None, first=None, last=None):
    """The reaching problem; with ``plane_z`` the constrained variant: the tool at the
    target at the last knot (equality) and at z >= plane_z on knots first..last-1
    (default N/2 .. N)."""
    robot = gp.robots.load(name)
    model, frame = robot.model, FRAMES[name]
    dynamics = gp.ocp.FreeDynamics(model)
    state = dynamics.state
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    reach = gp.ocp.FrameTranslationResidual(model, frame, TARGET)
    costs = [gp.ocp.Cost(reach), gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2),
             gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=1e-4)]
    terminal_costs = [gp.ocp.Cost(reach, weight=1e3), costs[1]]
    options = dict(dt=DT, integrator="semi_implicit_euler")
    running = gp.ocp.StageModel(dynamics, costs, **options)
    if plane_z is None:
        return gp.ocp.ShootingProblem(x0, [running] * knots,
                                      gp.ocp.TerminalModel(state, terminal_costs))
    above = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(model, frame, [0, 0, plane_z],
                                                              axes=[2]), 0.0, np.inf)
    at_target = gp.ocp.Constraint(reach, 0.0, 0.0)
    first = knots // 2 if first is None else first
    last = knots if last is None else last
    plane = gp.ocp.StageModel(dynamics, costs, [above], **options)
    models = [plane if first <= k < last else running for k in range(knots)]
    return gp.ocp.ShootingProblem(x0, models,
                                  gp.ocp.TerminalModel(state, terminal_costs, [at_target]))


def tool_heights(name, xs):
    """(N+1, 3) tool positions along xs."""
    model = gp.robots.load(name).model
    data, frame = model.create_data(), model.frame_id(FRAMES[name])
    return np.array([gp.dynamics.frame_placement(model, data, frame, x[:model.nq])[1]
                     for x in xs])


def time_fddp(problem, repeats):
    solver = gp.solvers.FDDP(problem)
    solver.solve(max_iter=200)                                   # compile
    best = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = solver.solve(max_iter=200)
        total = time.perf_counter() - start
        if best is None or total < best[0]:
            best = (total, result)
    total, result = best
    evaluation = float(np.sum(result.history["time_calc_diff"]))
    return dict(solver="FDDP", build=0.0, iterations=result.iterations, cost=result.cost,
                status=result.status, total=total, per_iteration=total / result.iterations,
                evaluations=evaluation, calls={}, result=result)


def time_nlp(problem, mode, repeats, warm=None):
    xs, us = (None, None) if warm is None else (warm.xs, warm.us)
    start = time.perf_counter()
    nlp = NLP(problem, derivatives=mode)
    build = time.perf_counter() - start
    nlp.solve(xs, us, max_iter=500)                              # compile, create IPOPT
    best = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = nlp.solve(xs, us, max_iter=500)
        total = time.perf_counter() - start
        if best is None or total < best[0]:
            best = (total, result, dict(nlp.stats))
    total, result, stats = best
    evaluation = sum(stats[f"t_wall_{name}"] for name in EVALUATIONS)
    calls = {name: int(stats[f"n_call_{name}"]) for name in EVALUATIONS}
    times = {name: float(stats[f"t_wall_{name}"]) for name in EVALUATIONS}
    label = {"analytical": "IPOPT analytical (GN)", "casadi": "IPOPT CasADi AD (exact)"}[mode]
    return dict(solver=label, build=build, iterations=result.iterations, cost=result.cost,
                status=result.status, total=total,
                per_iteration=total / max(result.iterations, 1), evaluations=evaluation,
                calls=calls, times=times, result=result)


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import casadi
    import numba
    return dict(cpu=cpu, cores=len(os.sched_getaffinity(0)), python=platform.python_version(),
                numba=numba.__version__, casadi=casadi.__version__,
                numba_threads=numba.get_num_threads(), load_average=os.getloadavg(),
                date=datetime.datetime.now().isoformat(timespec="seconds"))


def markdown(rows):
    header = ("| robot | task | solver | build s | iters | cost | status | total ms | "
              "ms / iter | eval ms (share) | f+g / grad+jac / hess ms |\n"
              "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|")
    lines = [header]
    for r in rows:
        lines.append(f"| {r['robot']} | {r['task']} | {r['solver']} | {r['build']:.2f} | "
                     f"{r['iterations']} | {r['cost']:.6g} | {r['status']} | "
                     f"{1e3 * r['total']:.1f} | {1e3 * r['per_iteration']:.2f} | "
                     f"{1e3 * r['evaluations']:.1f} "
                     f"({100 * r['evaluations'] / r['total']:.0f} %) | {_split(r)} |")
    return "\n".join(lines)


def _split(row):
    """f + g / grad f + Jacobian / Hessian evaluation times in ms ("-" for FDDP)."""
    times = row.get("times")
    if not times:
        return "-"
    parts = (times["nlp_f"] + times["nlp_g"], times["nlp_grad_f"] + times["nlp_jac_g"],
             times["nlp_hess_l"])
    return " / ".join(f"{1e3 * t:.1f}" for t in parts)


def summary(rows):
    """Which mode is faster, per robot and task, as ratios of total and per-iteration time."""
    lines = []
    for robot in dict.fromkeys(r["robot"] for r in rows):
        for task in ("reaching", "constrained"):
            by = {r["solver"].split()[1]: r for r in rows
                  if r["robot"] == robot and r["task"] == task and r["solver"] != "FDDP"}
            a, c = by["analytical"], by["CasADi"]
            if a["status"] != "converged" or c["status"] != "converged":
                note = f" (analytical {a['status']}, casadi {c['status']})"
            elif abs(a["cost"] - c["cost"]) > 1e-6 * abs(c["cost"]):
                note = " (different local optima)"
            else:
                note = " (same optimum)"
            lines.append(
                f"{robot} {task}{note}: "
                f"analytical {c['total'] / a['total']:.1f}x faster in total "
                f"({a['iterations']} vs {c['iterations']} iterations), "
                f"{c['per_iteration'] / a['per_iteration']:.1f}x per iteration, "
                f"{c['evaluations'] / max(a['evaluations'], 1e-12):.1f}x in evaluations")
            fddp = [r for r in rows if r["robot"] == robot and r["task"] == task
                    and r["solver"] == "FDDP"]
            if fddp:
                lines[-1] += (f"; FDDP {a['total'] / fddp[0]['total']:.1f}x faster than "
                              "analytical IPOPT")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=["ur5", "panda"])
    parser.add_argument("--knots", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=RESULTS_DIR)
    args = parser.parse_args()
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, load average "
          f"{info['load_average'][0]:.1f} (1 min), Python {info['python']}, Numba "
          f"{info['numba']} ({info['numba_threads']} threads), CasADi {info['casadi']}")
    rows = []
    for robot in args.robots:
        problem = reaching(robot, args.knots)
        fddp = time_fddp(problem, args.repeats)
        tool = tool_heights(robot, fddp["result"].xs)
        plane_z = 0.5 * (tool[args.knots // 2, 2] + TARGET[2])
        violation = dict(target=float(np.max(np.abs(tool[-1] - TARGET))),
                         plane=float(plane_z - tool[args.knots // 2:args.knots, 2].min()))
        print(f"{robot}: plane z = {plane_z:.3f}; the unconstrained optimum misses the "
              f"target by {violation['target']:.1e} m and dips {violation['plane']:.3f} m "
              "below the plane")
        tasks = {"reaching": problem, "constrained": reaching(robot, args.knots, plane_z)}
        for task, task_problem in tasks.items():
            entries = [fddp] if task == "reaching" else []
            warm = None if task == "reaching" else fddp["result"]
            entries += [time_nlp(task_problem, mode, args.repeats, warm)
                        for mode in ("analytical", "casadi")]
            for entry in entries:
                rows.append(dict({k: v for k, v in entry.items() if k != "result"},
                                 robot=robot, task=task, plane_z=plane_z,
                                 unconstrained_violation=violation))
                print(f"  {task:12s} {entry['solver']:26s} {entry['iterations']:4d} it "
                      f"cost {entry['cost']:.6g} {entry['status']:10s} "
                      f"total {1e3 * entry['total']:8.1f} ms  "
                      f"eval {1e3 * entry['evaluations']:8.1f} ms")
    table = markdown(rows)
    lines = summary(rows)
    print("\n" + table + "\n\n" + "\n".join(lines))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "nlp.json"), "w") as out:
        json.dump(dict(machine=info, knots=args.knots, rows=rows, summary=lines), out,
                  indent=2)
    with open(os.path.join(args.out, "nlp.md"), "w") as out:
        out.write(f"Machine: {info['cpu']}, {info['cores']} cores, load average "
                  f"{info['load_average'][0]:.1f}, {info['date']}.\n\n{table}\n\n")
        out.write("\n".join(f"- {line}" for line in lines) + "\n")


if __name__ == "__main__":
    main()
