"""solo12 jump: crouch on four feet, take off, fly, land, stand, solved by FDDP.

A stance phase (four 3D point contacts), a flight phase (floating base, no
contact) during which the centre of mass is asked to rise ``JUMP_HEIGHT``
above its standing height, a touchdown impulse (restitution 0, the feet stop
at the impact) and a stance phase back to the standing state; the stages come
from ``gait_stages``, the guess is the standing state repeated with
quasi-static controls (Mastalli et al., "Crocoddyl", ICRA 2020, the jumping
quadruped of its examples).

    python -m geppetto.examples.solo12_jump [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
JUMP_HEIGHT = 0.1


def main(reduced=False, out="geppetto-examples/solo12_jump", live=False):
    robot = gp.robots.load("solo12")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    data = model.create_data()
    com0 = gp.dynamics.center_of_mass(model, data, robot.q0).copy()
    ground = [gp.ocp.FrameTranslationResidual(
        model, foot, gp.dynamics.frame_placement(model, data, model.frame_id(foot))[1])
        for foot in FEET]
    dt = 0.02
    stance, flight, landing = (8, 8, 6) if reduced else (20, 14, 20)

    state = gp.ocp.StateMultibody(model)
    weights = np.r_[np.zeros(3), np.full(3, 500.0), np.full(model.nv - 6, 0.01),
                    np.full(6, 10.0), np.ones(model.nv - 6)]
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(state, x0), gp.ocp.WeightedQuadratic(weights),
                        weight=10.0)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(model.nv - 6), weight=0.1)
    apex = gp.ocp.Cost(gp.ocp.CenterOfMassResidual(model, com0 + [0.0, 0.0, JUMP_HEIGHT]),
                       gp.ocp.WeightedQuadratic([0.0, 0.0, 1.0]), weight=1e4)

    def costs(phase):
        if phase.impulse:          # no controls; the feet land where they took off
            return [x_reg] + [gp.ocp.Cost(foot, weight=1e6) for foot in ground]
        terms = [x_reg, u_reg]
        if not phase.feet:
            return terms + [apex]
        for foot in phase.feet:
            cone = gp.ocp.FrictionConeResidual(phase.dynamics, foot, mu=0.7)
            terms.append(gp.ocp.Cost(cone, gp.ocp.QuadraticBarrier(*cone.bounds), weight=10.0))
        return terms

    gait = [(FEET, stance), ((), flight), (FEET, landing)]
    stages, phases = gp.ocp.gait_stages(model, gait, costs, dt=dt, Kd=50.0)
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(x_reg.residual, x_reg.activation,
                                                        weight=1e3)])
    problem = gp.ocp.ShootingProblem(x0, stages, terminal)
    result = gp.solvers.FDDP(problem).solve(*_common.standing_guess(problem),
                                            max_iter=15 if reduced else 100, verbose=True)
    _common.show_and_plot(robot, result, dt, out, "solo12_jump", live, reduced, (1.0, -1.5, 0.6),
                          "FL_FOOT", "front_left_foot.png")
    return problem, result


if __name__ == "__main__":
    _common.run(main, "solo12_jump", __doc__)
