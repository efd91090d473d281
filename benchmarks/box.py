"""DDP, FDDP and BoxFDDP beside Crocoddyl's SolverDDP, SolverFDDP and SolverBoxFDDP on a
torque-limited arm, from the infeasible quasi-static guess.

    python -m geppetto.benchmarks.box [--robot panda] [--limit 1.5] [--perturb 0.1] [--out DIR]

The task is the reaching task of :mod:`.ocp` (frame translation + state and
control regularization, Crocoddyl's symplectic Euler, dt = 10 ms, 50 knots)
with torque bounds ``limit * |g(q0)|`` (at least 1 N m) on every joint: with
limit > 1 the quasi-static guess (xs = [x0] * (N + 1), us = g(q0)) holds the
arm within them and the bounds bind during the reach; with limit < 1 the
guess itself lies outside them.  ``--perturb``: seeded noise on the guess's
states, so that it has gaps.  Both sides get the same problem and guess
(``is_feasible`` false) and their own default options; DDP and FDDP solve the
unbounded problem.  Per solver: iterations (backward passes: Crocoddyl's
``iter`` + 1 when it returned from inside its loop), final cost and the
relative difference, and the cost per iteration.  Target (issue 13):
iterations within +-1, final cost within 1e-8 relative.  Writes
``results/box.json`` beside this file.
"""
import argparse
import json
import os

import numpy as np

import geppetto as gp
from geppetto.benchmarks import crocoddyl_env
from geppetto.benchmarks.ocp import CROCODDYL_REACHING, DT, FRAMES, TARGET, WEIGHTS

KNOTS = 50
MAX_ITER = 200
SOLVERS = ("DDP", "FDDP", "BoxFDDP")

CROCODDYL_SCRIPT = CROCODDYL_REACHING + '''
task = json.load(sys.stdin)
out = dict(versions())
for name in task["solvers"]:
    problem, x0, model = reaching_problem(task)
    if name == "BoxFDDP":
        for running in problem.runningModels:
            running.u_lb = np.array(task["lower"])
            running.u_ub = np.array(task["upper"])
    solver = getattr(crocoddyl, "Solver" + name)(problem)
    logger = crocoddyl.CallbackLogger()
    solver.setCallbacks([logger])
    converged = solver.solve(stdvec(task["xs"]), stdvec(task["us"]), task["max_iter"], False)
    # backward passes: one more than iter when it returned from inside the loop
    inside = converged or solver.iter < task["max_iter"]
    out[name] = dict(converged=bool(converged), iterations=solver.iter + (1 if inside else 0),
                     cost=solver.cost, costs=list(logger.costs), stop=solver.stop)
print(json.dumps(out))
'''


def torque_limited(robot_name, limit, knots=KNOTS):
    """(problem with bounds, the same without, xs, us guess, lower, upper)."""
    robot = gp.robots.load(robot_name)
    model = robot.model
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    g = gp.dynamics.generalized_gravity(model, model.create_data(), robot.q0)
    upper = np.maximum(limit * np.abs(g), 1.0)
    problems = []
    for bounds in ((-upper, upper), None):
        dynamics = gp.ocp.FreeDynamics(model)
        state = dynamics.state
        reach = gp.ocp.FrameTranslationResidual(model, FRAMES[robot_name], np.array(TARGET))
        x_reg = gp.ocp.StateResidual(state, x0)
        costs = [gp.ocp.Cost(reach, weight=WEIGHTS["reach"]),
                 gp.ocp.Cost(x_reg, weight=WEIGHTS["x_reg"]),
                 gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=WEIGHTS["u_reg"])]
        running = gp.ocp.StageModel(dynamics, costs, dt=DT, integrator="semi_implicit_euler",
                                    control_bounds=bounds)
        terminal = gp.ocp.TerminalModel(state, [
            gp.ocp.Cost(reach, weight=WEIGHTS["terminal_reach"]),
            gp.ocp.Cost(x_reg, weight=WEIGHTS["terminal_x_reg"])])
        problems.append(gp.ocp.ShootingProblem(x0, [running] * knots, terminal))
    xs = np.repeat(x0[None], knots + 1, axis=0)
    us = problems[0].quasi_static(xs)
    task = dict(urdf=robot.urdf_path, q0=robot.q0.tolist(), frame=FRAMES[robot_name],
                target=list(TARGET), weights=WEIGHTS, dt=DT, knots=knots)
    return problems, xs, us, -upper, upper, task


def compare(robot_name="panda", limit=1.5, crocoddyl=True, max_iter=MAX_ITER, perturb=0.0):
    (bounded, free), xs, us, lower, upper, task = torque_limited(robot_name, limit)
    if perturb:             # gaps of the guess: seeded noise on the states of knots 1..N
        xs = xs.copy()
        xs[1:] += perturb * np.random.default_rng(0).standard_normal(xs[1:].shape)
    rows = {}
    for name in SOLVERS:
        problem = bounded if name == "BoxFDDP" else free
        result = getattr(gp.solvers, name)(problem).solve(xs, us, max_iter=max_iter)
        rows[name] = dict(ours=dict(iterations=result.iterations, cost=result.cost,
                                    converged=result.converged, costs=result.history["cost"],
                                    status=result.status,
                                    at_bounds=int(np.sum(np.isclose(np.abs(result.us),
                                                                    upper)))))
    reason = "not asked"
    if crocoddyl:
        payload = dict(task, lower=lower.tolist(), upper=upper.tolist(), xs=xs.tolist(),
                       us=us.tolist(), max_iter=max_iter, solvers=list(SOLVERS))
        theirs, reason = crocoddyl_env.run(CROCODDYL_SCRIPT, payload, timeout=900)
        if theirs is not None:
            for name in SOLVERS:
                rows[name]["crocoddyl"] = theirs[name]
                rows[name]["cost_difference"] = (abs(rows[name]["ours"]["cost"]
                                                     - theirs[name]["cost"])
                                                 / abs(theirs[name]["cost"]))
            reason = None
    return rows, reason


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robot", default="panda")
    parser.add_argument("--limit", type=float, default=1.5)
    parser.add_argument("--perturb", type=float, default=0.0,
                        help="noise on the guess's states (gaps; the robot's joints must "
                             "be vector-valued)")
    parser.add_argument("--no-crocoddyl", action="store_true")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args(argv)
    rows, reason = compare(args.robot, args.limit, not args.no_crocoddyl, perturb=args.perturb)
    if reason:
        print(crocoddyl_env.skipped(reason))
    print(f"{args.robot}, {KNOTS} knots, torque bounds {args.limit} |g(q0)|, "
          f"from the quasi-static guess (state noise {args.perturb})")
    print(f"{'solver':8} {'iters ours':>10} {'iters Croc':>10} {'cost ours':>14} "
          f"{'cost Croc':>14} {'rel diff':>9}")
    for name, row in rows.items():
        ours, theirs = row["ours"], row.get("crocoddyl", {})
        print(f"{name:8} {ours['iterations']:>10} {theirs.get('iterations', '-'):>10} "
              f"{ours['cost']:>14.10g} {theirs.get('cost', float('nan')):>14.10g} "
              f"{row.get('cost_difference', float('nan')):>9.1e}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "box.json"), "w") as out:
        json.dump(dict(robot=args.robot, limit=args.limit, perturb=args.perturb, knots=KNOTS,
                       rows=rows), out,
                  default=float)
    return rows


if __name__ == "__main__":
    main()
