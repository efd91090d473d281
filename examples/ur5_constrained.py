"""UR5 reaching with hard constraints, solved by ALDDP (augmented-Lagrangian DDP).

The reaching task of ``ur5_reaching`` with two hard constraints: the tool
exactly at the target at the last knot (a terminal equality) and above the
plane z = 0.45 on the knots of 50..89 % of the horizon (a path inequality).
FDDP first solves the task without them (the constraints are not costs:
its optimum misses the target by millimetres and dips under the plane);
ALDDP (the PHR augmented Lagrangian in FDDP's Riccati sweeps, Nocedal &
Wright Alg. 17.4 for the multipliers and the penalty) then starts from that
optimum and ends with both constraints held to 1e-8.

    python -m geppetto.examples.ur5_constrained [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.examples.reaching import reaching_problem
from geppetto.solvers import plots

TARGET = np.array([0.4, 0.2, 0.4])
PLANE_Z = 0.45


def constrained_problem(model, q0, knots, dt):
    """The reaching problem of :func:`~.reaching.reaching_problem` (semi-implicit
    Euler) with the terminal equality and the plane."""
    problem, reach = reaching_problem(model, "tool0", TARGET, q0, knots=knots, dt=dt,
                                      integrator="semi_implicit_euler")
    running = problem.running_models[0]
    above = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(model, "tool0", [0, 0, PLANE_Z],
                                                              axes=[2]), 0.0, np.inf)
    plane = gp.ocp.StageModel(running.dynamics, running.costs, [above], dt=dt,
                              integrator="semi_implicit_euler")
    first, last = knots // 2, int(0.9 * knots)
    models = [plane if first <= k < last else running for k in range(knots)]
    terminal = gp.ocp.TerminalModel(problem.state, problem.terminal_model.costs,
                                    [gp.ocp.Constraint(reach, 0.0, 0.0)])
    return gp.ocp.ShootingProblem(problem.x0, models, terminal)


def main(reduced=False, out="geppetto-examples/ur5_constrained", live=False):
    robot = gp.robots.load("ur5")
    N, dt = (20, 0.05) if reduced else (100, 0.01)
    problem = constrained_problem(robot.model, robot.q0, N, dt)
    soft = gp.solvers.FDDP(problem).solve(max_iter=100)        # the constraints left out
    solver = gp.solvers.ALDDP(problem)
    print(f"FDDP without the constraints: cost {soft.cost:.6g}, violation "
          f"{solver.max_violation(soft.xs, soft.us):.2e}")
    result = solver.solve(soft.xs, soft.us, max_iter=300, verbose=True)
    print(result)
    tool = plots.end_effector_path(result.xs, robot.model, "tool0")
    print(f"tool at the end: {np.round(tool[-1], 9)}; lowest z on the plane's knots: "
          f"{tool[N // 2:int(0.9 * N), 2].min():.9f}")
    _common.show(robot, result.xs, dt, out, "ur5_constrained", live,
                 camera_position=(1.2, 1.2, 0.8))
    if out is not None:
        plots.plot_end_effector(result.xs, robot.model, "tool0", TARGET,
                                path=_common.output(out, "tool_path.png"))
        plots.plot_convergence(result, path=_common.output(out, "convergence.png"))
    return problem, result


if __name__ == "__main__":
    _common.run(main, "ur5_constrained", __doc__)
