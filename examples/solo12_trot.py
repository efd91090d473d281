"""solo12 trotting: diagonal pairs of feet step forward in turn, solved by FDDP.

Crocoddyl's ``SimpleQuadrupedalGaitProblem.createTrottingProblem`` (Mastalli
et al., "Crocoddyl", ICRA 2020), term for term, so that both solvers solve
the same OCP (``benchmarks/contacts.py`` runs them side by side): four-feet
support knots, then a diagonal pair swings along an arc (the first step half
as long) while the other pair carries the robot and the centre of mass
follows, a touchdown impulse of the landing feet (restitution 0), and so on;
the problem ends at the last impact.  3D point contacts in world-aligned
axes with Baumgarte Kd = 50, symplectic Euler, the friction cones as
four-facet pyramids under a quadratic barrier, and a barrier on the joint
position and velocity limits.
The guess is the standing state repeated with quasi-static controls.
:func:`walking_problem` builds Crocoddyl's ``createWalkingProblem`` the same way
(one foot at a time, any quadruped given its four feet; the benchmarks' untuned
hyq and anymal walks), both through :func:`gait_problem`.

    python -m geppetto.examples.solo12_trot [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
SWINGING = (("FR_FOOT", "HL_FOOT"), ("FL_FOOT", "HR_FOOT"))    # in turn, Crocoddyl's order
STEP_LENGTH, STEP_HEIGHT, MU = 0.25, 0.15, 0.7
# Crocoddyl's weights (squared in its WeightedQuad activations)
RUNNING_STATE = (0.0, 500.0, 0.01, 10.0, 1.0)     # base position, base rotation, joints, v
IMPULSE_STATE = (1.0, 1.0, 10.0, 10.0, 10.0)


def state_weights(nv, base_position, base_rotation, joints, base_velocity, joint_velocity):
    return np.r_[np.full(3, base_position), np.full(3, base_rotation),
                 np.full(nv - 6, joints), np.full(6, base_velocity),
                 np.full(nv - 6, joint_velocity)] ** 2


def swing_arc(start, length, height, knots):
    """Foot targets (knots, 3) of one step: forward by length (k + 1) / knots,
    up then down in a tent of the given height (Crocoddyl's footstep targets)."""
    k = np.arange(knots)
    half = knots / 2.0
    lift = height * (1.0 - np.abs(k - half) / half)
    return start + np.c_[length * (k + 1) / knots, np.zeros(knots), lift]


def trotting_problem(model, x0, steps=2, step_knots=25, support_knots=2, dt=0.01):
    """The ShootingProblem of ``steps`` diagonal steps from the standing state x0
    (Crocoddyl's ``createTrottingProblem`` for steps = 2)."""
    return gait_problem(model, x0, FEET, [[SWINGING[step % 2]] for step in range(steps)],
                        step_knots, support_knots, dt)


def walking_problem(model, x0, feet, step_knots=25, support_knots=2, dt=0.01):
    """The ShootingProblem of a walk from the standing state x0: the right hind, right
    front, then (after a four-feet support) the left hind and left front foot step in
    turn, each step ending with its touchdown impulse (Crocoddyl's
    ``createWalkingProblem``).  ``feet``: the frames (left front, right front, left
    hind, right hind)."""
    lf, rf, lh, rh = feet
    return gait_problem(model, x0, tuple(feet), [[(rh,), (rf,)], [(lh,), (lf,)]],
                        step_knots, support_knots, dt)


def gait_problem(model, x0, feet, groups, step_knots, support_knots, dt):
    """The ShootingProblem of Crocoddyl's ``SimpleQuadrupedalGaitProblem`` gaits.

    ``feet``: the four foot frames; ``groups``: a list of step groups, each a list of
    swinging-foot tuples that step one after the other, a group preceded by
    ``support_knots`` four-feet knots; the steps of the first group are half as long.
    During a step the centre of mass moves forward by the step length times the
    fraction of the feet that swing."""
    data = model.create_data()
    q0 = x0[:model.nq]
    gp.dynamics.forward_kinematics(model, data, q0)
    feet_position = {f: gp.dynamics.frame_placement(model, data, model.frame_id(f))[1].copy()
                     for f in feet}
    com = np.mean([feet_position[f] for f in feet], axis=0)
    com[2] = gp.dynamics.center_of_mass(model, data, q0)[2]

    state = gp.ocp.StateMultibody(model)
    nv = model.nv
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(state, x0),
                        gp.ocp.WeightedQuadratic(state_weights(nv, *RUNNING_STATE)), weight=10.0)
    x_reg_impulse = gp.ocp.Cost(x_reg.residual,
                                gp.ocp.WeightedQuadratic(state_weights(nv, *IMPULSE_STATE)),
                                weight=10.0)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(nv - 6), weight=0.1)
    free = np.full(6, np.inf)                       # the base: no bounds
    lower = np.r_[-free, model.lower_position_limit[7:], -free, -model.velocity_limit[6:]]
    upper = np.r_[free, model.upper_position_limit[7:], free, model.velocity_limit[6:]]
    x_bounds = gp.ocp.Cost(gp.ocp.StateResidual(state),        # x (-) neutral: q and v
                           gp.ocp.QuadraticBarrier(lower, upper), weight=1e3)

    gait, plan = [], {}
    for group_index, group in enumerate(groups):
        gait.append((feet, support_knots))
        for swing in group:
            plan[len(gait)] = (swing, STEP_LENGTH / 2 if group_index == 0 else STEP_LENGTH)
            gait.append((tuple(f for f in feet if f not in swing), step_knots))
    gait.append((feet, 0))                          # the problem ends at the last impact
    landing_targets = {}

    def costs(phase):
        if phase.impulse:
            return [x_reg_impulse] + [
                gp.ocp.Cost(gp.ocp.FrameTranslationResidual(model, f, landing_targets[f]),
                            weight=1e7) for f in phase.touchdown]
        terms = [x_reg, u_reg, x_bounds]
        for foot in phase.feet:
            cone = gp.ocp.FrictionConeResidual(phase.dynamics, foot, mu=MU, inner=False)
            terms.append(gp.ocp.Cost(cone, gp.ocp.QuadraticBarrier(*cone.bounds), weight=10.0))
        if phase.index in plan:
            swing, length = plan[phase.index]
            s = (np.arange(phase.knots) + 1.0) / phase.knots
            com_shift = len(swing) / len(feet) * length
            com_path = com + np.c_[com_shift * s, np.zeros((phase.knots, 2))]
            terms.append(gp.ocp.Cost(gp.ocp.CenterOfMassResidual(model, com_path), weight=1e6))
            for f in swing:
                arc = swing_arc(feet_position[f], length, STEP_HEIGHT, phase.knots)
                terms.append(gp.ocp.Cost(gp.ocp.FrameTranslationResidual(model, f, arc),
                                         weight=1e6))
                landing_targets[f] = arc[-1]
                feet_position[f] = feet_position[f] + [length, 0.0, 0.0]
            com[:] = com_path[-1]
        return terms

    # gait_stages' default scheme is symplectic Euler, Crocoddyl's Euler
    stages, _ = gp.ocp.gait_stages(model, gait, costs, dt=dt, Kd=50.0, impulse_feet="touchdown")
    terminal = gp.ocp.TerminalModel(state, [x_reg, x_bounds])
    return gp.ocp.ShootingProblem(x0, stages, terminal)


def main(reduced=False, out="geppetto-examples/solo12_trot", live=False):
    robot = gp.robots.load("solo12")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    step_knots, dt = (8, 0.03) if reduced else (25, 0.01)
    problem = trotting_problem(model, x0, step_knots=step_knots, dt=dt)
    result = gp.solvers.FDDP(problem).solve(*_common.standing_guess(problem),
                                            max_iter=10 if reduced else 100, verbose=True)
    _common.show_and_plot(robot, result, dt, out, "solo12_trot", live, reduced, (1.0, -1.5, 0.8),
                          "FL_FOOT", "front_left_foot.png")
    return problem, result


if __name__ == "__main__":
    _common.run(main, "solo12_trot", __doc__)
