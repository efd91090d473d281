"""solo12 trotting: diagonal pairs of feet step forward in turn, solved by FDDP.

The trotting problem of Crocoddyl's ``SimpleQuadrupedalGaitProblem`` (Mastalli
et al., "Crocoddyl", ICRA 2020): four-feet support knots, then one diagonal
pair swings along an arc (step length 0.25 m, height 0.15 m) while the other
carries the robot, a touchdown impulse (restitution 0), and so on; the centre
of mass follows the feet forward.  The stages come from ``gait_stages`` (3D
point contacts, floating-base actuation), the initial guess is the standing
state repeated with quasi-static controls, every knot's derivatives from the
analytical constrained-dynamics derivatives.

    python -m geppetto.examples.solo12_trot [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.solvers import plots

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
PAIRS = (("FL_FOOT", "HR_FOOT"), ("FR_FOOT", "HL_FOOT"))     # swinging diagonals
STEP_LENGTH, STEP_HEIGHT = 0.25, 0.15


def swing_arc(start, knots):
    """Foot targets (knots, 3) of a step from ``start``: forward linearly, up then down."""
    s = (np.arange(knots) + 1.0) / knots
    return start + np.c_[STEP_LENGTH * s, np.zeros(knots), STEP_HEIGHT * (1 - np.abs(2 * s - 1))]


def trotting_problem(model, x0, steps, step_knots, support_knots, dt):
    """The ShootingProblem of ``steps`` diagonal steps from the standing state x0
    (also what benchmarks/contacts.py solves beside Crocoddyl)."""
    data = model.create_data()
    q0 = x0[:model.nq]
    gp.dynamics.forward_kinematics(model, data, q0)
    feet = {f: gp.dynamics.frame_placement(model, data, model.frame_id(f))[1].copy() for f in FEET}
    com0 = gp.dynamics.center_of_mass(model, data, q0).copy()
    com0[:2] = np.mean([feet[f][:2] for f in FEET], axis=0)       # above the feet's centre

    state = gp.ocp.StateMultibody(model)
    weights = np.r_[np.zeros(3), np.full(3, 500.0), np.full(model.nv - 6, 0.01),
                    np.full(6, 10.0), np.ones(model.nv - 6)]
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(state, x0), gp.ocp.WeightedQuadratic(weights**2),
                        weight=10.0)
    weights = np.r_[np.ones(6), np.full(model.nv - 6, 10.0), np.full(model.nv, 10.0)]
    x_reg_impulse = gp.ocp.Cost(x_reg.residual, gp.ocp.WeightedQuadratic(weights**2), weight=10.0)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(model.nv - 6), weight=0.1)

    gait, plan = [(FEET, support_knots)], {}
    for step in range(steps):
        gait += [(tuple(f for f in FEET if f not in PAIRS[step % 2]), step_knots),
                 (FEET, support_knots)]
        plan[2 * step + 1] = PAIRS[step % 2]

    def costs(phase):
        swing = plan.get(phase.index, ())
        if phase.impulse:          # the feet that touched down land where the step ends
            return [x_reg_impulse, u_reg] + [gp.ocp.Cost(gp.ocp.FrameTranslationResidual(
                model, foot, feet[foot]), weight=1e7) for foot in plan.get(phase.index - 1, ())]
        terms = [x_reg, u_reg]
        for foot in phase.feet:
            cone = gp.ocp.FrictionConeResidual(phase.dynamics, foot, mu=0.7)
            terms.append(gp.ocp.Cost(cone, gp.ocp.QuadraticBarrier(*cone.bounds), weight=10.0))
        if swing:
            targets = {f: swing_arc(feet[f], phase.knots) for f in swing}
            s = (np.arange(phase.knots) + 1.0) / phase.knots
            com = com0 + np.c_[0.5 * STEP_LENGTH * s, np.zeros((phase.knots, 2))]
            terms.append(gp.ocp.Cost(gp.ocp.CenterOfMassResidual(model, com), weight=1e6))
            for f in swing:
                terms.append(gp.ocp.Cost(gp.ocp.FrameTranslationResidual(model, f, targets[f]),
                                         weight=1e6))
                feet[f] = targets[f][-1].copy()
            com0[:] = com[-1]
        return terms

    stages, phases = gp.ocp.gait_stages(model, gait, costs, dt=dt, Kd=50.0)
    terminal = gp.ocp.TerminalModel(state, [x_reg])
    return gp.ocp.ShootingProblem(x0, stages, terminal)


def main(reduced=False, out="geppetto-examples/solo12_trot", live=False):
    robot = gp.robots.load("solo12")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    steps, step_knots, support_knots = (2, 8, 2) if reduced else (4, 25, 2)
    dt = 0.02 if reduced else 0.01
    problem = trotting_problem(model, x0, steps, step_knots, support_knots, dt)
    xs = np.repeat(x0[None], problem.N + 1, axis=0)
    solver = gp.solvers.FDDP(problem)
    result = solver.solve(xs, problem.quasi_static(xs), max_iter=10 if reduced else 100,
                          verbose=True)
    print(result)

    _common.show(robot, result.xs, dt, out, "solo12_trot", live, camera_position=(1.0, -1.5, 0.8))
    if out is not None:
        if not reduced:            # a hundred panels: the tests skip them
            plots.plot_trajectories(result.xs, result.us, dt, model,
                                    path=_common.output(out, "joints.png"))
        plots.plot_end_effector(result.xs, model, "FL_FOOT",
                                path=_common.output(out, "front_left_foot.png"))
        plots.plot_convergence(result, path=_common.output(out, "convergence.png"))
    return problem, result


if __name__ == "__main__":
    _common.run(main, "solo12_trot", __doc__)
