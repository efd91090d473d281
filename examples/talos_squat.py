"""talos squat: both soles on the ground (6D contacts), the centre of mass goes
down by ``DEPTH`` and back up, solved by BoxFDDP within the torque limits.

One contact stage (``ContactDynamics`` on two 6D sole contacts, Baumgarte
gains against drift, the torque limits as control bounds): a centre-of-mass
reference per knot (a cosine dip), state and control regularization, and each
sole's centre of pressure kept inside the foot by a barrier (Mastalli et al.,
"Crocoddyl", ICRA 2020, the humanoid examples).  The guess is the standing
state repeated with quasi-static controls.

    python -m geppetto.examples.talos_squat [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common

SOLES = ("left_sole_link", "right_sole_link")
DEPTH = 0.1


def main(reduced=False, out="geppetto-examples/talos_squat", live=False):
    robot = gp.robots.load("talos")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    com0 = gp.dynamics.center_of_mass(model, model.create_data(), robot.q0).copy()
    N, dt = (16, 0.05) if reduced else (80, 0.02)
    s = np.arange(N) / (N - 1)
    com_path = com0 + np.c_[np.zeros((N, 2)), -0.5 * DEPTH * (1 - np.cos(2 * np.pi * s))]

    state = gp.ocp.StateMultibody(model)
    weights = np.r_[np.zeros(3), np.full(3, 500.0), np.full(model.nv - 6, 0.01),
                    np.full(6, 10.0), np.ones(model.nv - 6)]
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(state, x0), gp.ocp.WeightedQuadratic(weights),
                        weight=1.0)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(model.nv - 6), weight=1e-3)

    contacts = [gp.dynamics.contact_6d(model, sole, reference=gp.dynamics.LOCAL_WORLD_ALIGNED,
                                       Kp=5.0, Kd=2.0) for sole in SOLES]
    dynamics = gp.ocp.ContactDynamics(model, contacts)
    com = gp.ocp.Cost(gp.ocp.CenterOfMassResidual(model, com_path), weight=1e4)
    cops = [gp.ocp.CenterOfPressureResidual(dynamics, sole, 0.2, 0.1) for sole in SOLES]
    cop_costs = [gp.ocp.Cost(c, gp.ocp.QuadraticBarrier(*c.bounds), weight=10.0) for c in cops]
    limit = model.effort_limit[6:]
    running = gp.ocp.StageModel(dynamics, [com, x_reg, u_reg] + cop_costs, dt=dt,
                                control_bounds=(-limit, limit))
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(x_reg.residual, x_reg.activation,
                                                        weight=100.0)])
    problem = gp.ocp.ShootingProblem(x0, [running] * N, terminal)
    result = gp.solvers.BoxFDDP(problem).solve(
        *_common.standing_guess(problem), max_iter=10 if reduced else 100, verbose=True)
    _common.show_and_plot(robot, result, dt, out, "talos_squat", live, reduced, (2.5, -2.0, 1.2),
                          "base_link", "base_path.png", u_bounds=(-limit, limit))
    return problem, result


if __name__ == "__main__":
    _common.run(main, "talos_squat", __doc__)
