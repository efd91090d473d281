"""Panda reaching with FDDP: the hand goes to a point in one second.

The problem of ``python -m geppetto`` (the main job) and of DESIGN.md's
Crocoddyl anchor: a frame-translation cost on ``panda_hand`` with state and
control regularization, explicit Euler, dt = 10 ms, 100 knots, solved by
FDDP (Mastalli et al., "Crocoddyl", ICRA 2020) from a quasi-static initial
guess, every knot's dynamics derivatives from the analytical ABA derivatives
(Carpentier & Mansard, RSS 2018).

    python -m geppetto.examples.panda_reaching [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.solvers import plots

TARGET = (0.5, 0.3, 0.4)


def main(reduced=False, out="geppetto-examples/panda_reaching", live=False):
    robot = gp.robots.load("panda")
    model, target = robot.model, np.array(TARGET)
    dynamics = gp.ocp.FreeDynamics(model)
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    reach = gp.ocp.FrameTranslationResidual(model, "panda_hand", target)
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(dynamics.state, x0), weight=1e-1)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=1e-4)
    N, dt = (20, 0.05) if reduced else (100, 0.01)
    running = gp.ocp.StageModel(dynamics, [gp.ocp.Cost(reach), x_reg, u_reg], dt=dt)
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(reach, weight=1e3), x_reg])
    problem = gp.ocp.ShootingProblem(x0, [running] * N, terminal)

    result = gp.solvers.FDDP(problem).solve(max_iter=10 if reduced else 100, verbose=True)
    print(result)

    _common.show(robot, result.xs, dt, out, "panda_reaching", live,
                 camera_position=(1.2, 1.0, 0.8))
    if out is not None:
        plots.plot_trajectories(result.xs, result.us, dt, model,
                                path=_common.output(out, "joints.png"))
        plots.plot_end_effector(result.xs, model, "panda_hand", target,
                                path=_common.output(out, "hand_path.png"))
        plots.plot_convergence(result, path=_common.output(out, "convergence.png"))
    return problem, result


if __name__ == "__main__":
    _common.run(main, "panda_reaching", __doc__)
