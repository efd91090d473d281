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


def main(reduced=False, out="geppetto-examples/pendulum_swingup", live=False):
    robot = _common.pendulum_robot()                  # 1 m, 1 kg, revolute about y
    model = robot.model
    dynamics = gp.ocp.FreeDynamics(model)
    down, up = np.zeros(2), np.array([np.pi, 0.0])   # x = (q, v)
    goal = gp.ocp.StateResidual(dynamics.state, up)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=1e-2)
    N, dt = 100, 0.02
    running = gp.ocp.StageModel(dynamics, [gp.ocp.Cost(goal, weight=1e-2), u_reg], dt=dt)
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(goal, weight=1e3)])
    problem = gp.ocp.ShootingProblem(down, [running] * N, terminal)

    xs, us = np.linspace(down, up, N + 1), np.zeros((N, 1))    # infeasible guess
    result = gp.solvers.FDDP(problem).solve(xs, us, max_iter=30 if reduced else 100,
                                            verbose=True)
    print(result, f"final state {result.xs[-1]}")

    _common.show(robot, result.xs, dt, out, "pendulum_swingup", live,
                 camera_position=(0.0, -3.0, 0.0))
    if out is not None:
        plots.plot_trajectories(result.xs, result.us, dt, model,
                                path=_common.output(out, "trajectory.png"))
        plots.plot_convergence(result, path=_common.output(out, "convergence.png"))
    return problem, result


if __name__ == "__main__":
    _common.run(main, "pendulum_swingup", __doc__)
