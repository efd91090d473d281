"""solo12 trotting with hard friction cones, solved by ALDDP.

The trot of ``solo12_trot`` (Crocoddyl's ``createTrottingProblem``: support
knots, two diagonal steps, touchdown impulses) with its friction cones moved
from the costs into the constraints: on every contact knot each supporting
foot's force stays inside the four-facet pyramid of friction mu = 0.7
(``FrictionConeResidual`` rows >= 0), exactly, where the quadratic barrier of
the original only charges a price for leaving it.  FDDP first solves the
trot without the cones (no barrier, no constraint), then ALDDP (the PHR
augmented Lagrangian in FDDP's Riccati sweeps) starts from that optimum and
ends with every cone row >= -1e-6.  Measured (2026-11-26): earlier runs
"converged" (the full trot, 25 knots of 10 ms per step, in 274 ALDDP
iterations; the reduced one, 8 knots of 30 ms, in 103) on a stop value that
the growing regularization made small while the line search stalled at
mu = 1e-8; since ALDDP refuses such a stop value (``th_reg``) and its outer
loop no longer updates on one either, the full trot converges in 133
iterations, cost 1310.18715, lowest cone row -1.2e-8 (FDDP without the cones:
28 iterations, lowest row -132), the reduced trot in 279, cost 1375.43461,
lowest row -5.2e-10 (before: the 500-iteration cap, and "no step accepted at
maximum regularization" after 161 iterations).  With each cone row's penalty
scaled by its Jacobian row's squared norm (ALDDP's ``scale_rows``, capped at
100; 2026-11-26): the full trot in 29 iterations (124 without), cost
1310.18715, lowest row -5.9e-8; the reduced trot in 166 (312 without), cost
1375.43461.

    python -m geppetto.examples.solo12_trot_cones [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.examples.solo12_trot import MU, trotting_problem


def hard_cones(problem, mu=MU):
    """(problem with the cones as Constraints, the same without cones): the trot's
    stages without their friction-cone costs, each contact stage given one
    ``Constraint(FrictionConeResidual(...), 0, inf)`` per foot in contact.  Stage
    objects repeated over knots stay shared (one phase each)."""
    hard, soft = {}, {}
    for model in problem.running_models:
        if id(model) in hard:
            continue
        costs = [c for c in model.costs
                 if not isinstance(c.residual, gp.ocp.FrictionConeResidual)]
        dynamics = model.dynamics
        cones = []
        if type(dynamics) is gp.ocp.ContactDynamics:     # not the impulses: no forces over dt
            for foot in dynamics.constraints.names:
                cone = gp.ocp.FrictionConeResidual(dynamics, foot, mu=mu, inner=False)
                cones.append(gp.ocp.Constraint(cone, *cone.bounds))
        options = dict(dt=model.dt, integrator=model.integrator.scheme)
        hard[id(model)] = gp.ocp.StageModel(dynamics, costs, cones, **options)
        soft[id(model)] = gp.ocp.StageModel(dynamics, costs, **options)
    terminal = problem.terminal_model

    def rebuilt(stages):
        return gp.ocp.ShootingProblem(problem.x0, [stages[id(m)] for m in problem.running_models],
                                      terminal)

    return rebuilt(hard), rebuilt(soft)


def cone_rows(problem, xs, us):
    """(knots, 5 * feet) cone rows of every contact knot along (xs, us): >= 0 inside."""
    return [data.r for _, _, _, datas in problem.constraints(xs, us) for data in datas]


def main(reduced=False, out="geppetto-examples/solo12_trot_cones", live=False):
    robot = gp.robots.load("solo12")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    step_knots, dt = (8, 0.03) if reduced else (25, 0.01)
    problem, soft = hard_cones(trotting_problem(model, x0, step_knots=step_knots, dt=dt))
    free = gp.solvers.FDDP(soft).solve(*_common.standing_guess(soft), max_iter=200)
    lowest = min(r.min() for r in cone_rows(problem, free.xs, free.us))
    print(f"FDDP without the cones: {free}; lowest cone row {lowest:.3e}")
    solver = gp.solvers.ALDDP(problem, th_constraint=1e-7)
    result = solver.solve(free.xs, free.us, max_iter=500, verbose=True)
    lowest = min(r.min() for r in cone_rows(problem, result.xs, result.us))
    print(f"{result}; lowest cone row {lowest:.3e}")
    _common.show_and_plot(robot, result, dt, out, "solo12_trot_cones", live, reduced,
                          (1.0, -1.5, 0.8), "FL_FOOT", "front_left_foot.png")
    return problem, result


if __name__ == "__main__":
    _common.run(main, "solo12_trot_cones", __doc__)
