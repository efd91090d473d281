"""Pendulum swing-up with FDDP from an infeasible initial guess.

Demonstrates what the F of FDDP buys (Mastalli et al., "Crocoddyl", ICRA
2020): the initial guess is a straight line in state space from hanging
(q = 0) to upright (q = pi) with zero torques, which no torque sequence
follows; FDDP starts from it anyway, closes the gaps between the knots with
its first full step, and converges in about a dozen iterations, where a
feasible quasi-static start takes about fifty.

    python -m geppetto.examples.pendulum_swingup [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.solvers import plots


UP = np.array([np.pi, 0.0])                            # x = (q, v)


def swingup_problem(knots, control_weight, goal_weight=None, control_bounds=None, dt=0.02):
    """(robot, problem): the pendulum (1 m, 1 kg, revolute about y) from hanging still
    (x = 0) to upright and still at the last knot (weight 1e3); running costs: the
    distance to upright (``goal_weight``, none when None) and the torque
    (``control_weight``), ``control_bounds`` on the torque."""
    robot = _common.pendulum_robot()
    dynamics = gp.ocp.FreeDynamics(robot.model)
    goal = gp.ocp.StateResidual(dynamics.state, UP)
    running = [] if goal_weight is None else [gp.ocp.Cost(goal, weight=goal_weight)]
    running.append(gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=control_weight))
    stage = gp.ocp.StageModel(dynamics, running, dt=dt, control_bounds=control_bounds)
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(goal, weight=1e3)])
    return robot, gp.ocp.ShootingProblem(np.zeros(2), [stage] * knots, terminal)


def show_swingup(robot, result, dt, out, name, live, u_bounds=None):
    """The motion (and with ``out`` the trajectories, with ``u_bounds``, and the
    convergence as PNG files)."""
    _common.show(robot, result.xs, dt, out, name, live, camera_position=(0.0, -3.0, 0.0))
    if out is not None:
        plots.plot_trajectories(result.xs, result.us, dt, robot.model, u_bounds=u_bounds,
                                path=_common.output(out, "trajectory.png"))
        plots.plot_convergence(result, path=_common.output(out, "convergence.png"))


def main(reduced=False, out="geppetto-examples/pendulum_swingup", live=False):
    N, dt = 100, 0.02
    robot, problem = swingup_problem(N, control_weight=1e-2, goal_weight=1e-2, dt=dt)
    xs, us = np.linspace(problem.x0, UP, N + 1), np.zeros((N, 1))    # infeasible guess
    result = gp.solvers.FDDP(problem).solve(xs, us, max_iter=30 if reduced else 100,
                                            verbose=True)
    print(result, f"final state {result.xs[-1]}")
    show_swingup(robot, result, dt, out, "pendulum_swingup", live)
    return problem, result


if __name__ == "__main__":
    _common.run(main, "pendulum_swingup", __doc__)
