"""Torque-limited pendulum swing-up with BoxFDDP: it has to pump.

Demonstrates control bounds (``StageModel(control_bounds=...)``) handled by
BoxFDDP (Mastalli et al., "A feasibility-driven approach to control-limited
DDP", Autonomous Robots 2022): each backward pass solves a box QP by
projected Newton (Tassa et al., ICRA 2014) and the rollout clamps the
controls.  With |u| <= 3 N m against a gravity torque of up to m g l = 9.81
N m, lifting the pendulum straight up is impossible: the solution swings it
back and forth, the torque saturating, until it reaches the top at t = 4 s.

    python -m geppetto.examples.pendulum_swingup_box [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.solvers import plots

TORQUE_LIMIT = 3.0


def main(reduced=False, out="geppetto-examples/pendulum_swingup_box", live=False):
    robot = _common.pendulum_robot()                  # 1 m, 1 kg, revolute about y
    model = robot.model
    dynamics = gp.ocp.FreeDynamics(model)
    down, up = np.zeros(2), np.array([np.pi, 0.0])   # x = (q, v)
    goal = gp.ocp.StateResidual(dynamics.state, up)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=1e-3)
    N, dt = 200, 0.02
    running = gp.ocp.StageModel(dynamics, [u_reg], dt=dt,
                                control_bounds=([-TORQUE_LIMIT], [TORQUE_LIMIT]))
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(goal, weight=1e3)])
    problem = gp.ocp.ShootingProblem(down, [running] * N, terminal)

    result = gp.solvers.BoxFDDP(problem).solve(max_iter=8 if reduced else 200, verbose=True)
    print(result, f"final state {result.xs[-1]}, max |u| = {np.abs(result.us).max():.3f}")

    _common.show(robot, result.xs, dt, out, "pendulum_swingup_box", live,
                 camera_position=(0.0, -3.0, 0.0))
    if out is not None:
        plots.plot_trajectories(result.xs, result.us, dt, model,
                                u_bounds=(running.u_lower, running.u_upper),
                                path=_common.output(out, "trajectory.png"))
        plots.plot_convergence(result, path=_common.output(out, "convergence.png"))
    return problem, result


if __name__ == "__main__":
    _common.run(main, "pendulum_swingup_box", __doc__)
