"""Cartpole balancing under pushes, by MPC on a plant heavier than the model.

Demonstrates closing the loop against disturbances and model mismatch: the
controller's model has a 0.1 kg pole, the simulated plant a 0.15 kg one
(:class:`geppetto.solvers.Simulator`, RK4 at 1 ms), and two pushes of 0.1 s
(:class:`geppetto.solvers.Push`, a force on the pole's hinge, i.e. on the
cart) knock the cart and the pole off the upright equilibrium.  Only the cart
is actuated (``Actuation.selection``); MPC runs one FDDP iteration per 20 ms
step on a one-second horizon and applies the feedback policy u0 - K0 dx.

    python -m geppetto.examples.cartpole_mpc_push [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.solvers import plots


def main(reduced=False, out="geppetto-examples/cartpole_mpc_push", live=False):
    robot = _common.cartpole_robot()
    model = robot.model
    dynamics = gp.ocp.FreeDynamics(model, gp.ocp.Actuation.selection(model, [0]))
    upright = np.zeros(model.nq + model.nv)             # (x, theta, dx, dtheta)
    balance = gp.ocp.StateResidual(dynamics.state, upright)
    weights = gp.ocp.WeightedQuadratic([1.0, 10.0, 0.1, 0.1])
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=1e-2)
    N, dt = 50, 0.02
    running = gp.ocp.StageModel(dynamics, [gp.ocp.Cost(balance, weights), u_reg], dt=dt)
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(balance, weights, 100.0)])
    problem = gp.ocp.ShootingProblem(upright, [running] * N, terminal)

    mpc = gp.solvers.MPC(problem, gp.solvers.FDDP, max_iter=1, use_feedback=True)
    hinge, duration = model.joint_id("hinge"), 2.0 if reduced else 6.0
    pushes = [gp.solvers.Push(hinge, [20.0, 0.0, 0.0], 0.5, 0.1),
              gp.solvers.Push(hinge, [-30.0, 0.0, 0.0], 3.0, 0.1)]
    plant = gp.solvers.Simulator(gp.robots.cartpole(pole_mass=0.15), dt=1e-3,
                                 actuation=dynamics.actuation, pushes=pushes)
    log = gp.solvers.run_mpc(mpc, plant, upright, duration, dt)
    deviation = np.linalg.norm(log.xs[:, :2], axis=1)    # |(x, theta)| from upright
    print(f"largest deviation {deviation.max():.3f} at t = {dt * deviation.argmax():.2f} s, "
          f"{deviation[-1]:.4f} at the end; pole angle at most "
          f"{np.degrees(np.abs(log.xs[:, 1]).max()):.1f} deg")

    _common.show(robot, log.xs, dt, out, "cartpole_mpc_push", live, camera_position=(0, -1.6, 0.3))
    if out is not None:
        plots.plot_trajectories(log.xs, log.us, dt, model, u_labels=["cart force"],
                                u_units="N", path=_common.output(out, "states.png"))
        plots.plot_tracking(dt * np.arange(len(deviation)), deviation,
                            ylabel="|(x [m], theta [rad])|",
                            path=_common.output(out, "deviation.png"))
        plots.plot_solve_times(log, budget=dt, path=_common.output(out, "solve_times.png"))
    return log, deviation


if __name__ == "__main__":
    _common.run(main, "cartpole_mpc_push", __doc__)
