"""Same name, same meaning: the OCP layer against Crocoddyl's semantics (issue 13).

- the reported cost is the true cost: on a solo12 problem with every residual type
  on free, contact, impulse, RK and terminal stages, every cost FDDP's line search
  computes (``calc_costs``) and the cost it reports equal a fresh ``problem.calc``
  at the same point (1e-12 relative); a frame-velocity cost is among them;
- integrator names: "euler" is symplectic Euler (Crocoddyl's
  ``IntegratedActionModelEuler``, "semi_implicit_euler" its alias), "explicit_euler"
  x' = x (+) dt f, written out from Pinocchio's ABA; an impulse stage is a jump;
- RK cost quadrature (Crocoddyl's ``IntegratedActionModelRK``): the running cost is
  dt sum_j b_j l(y_j, u) over the stage points; Lx, Lu against central differences
  of the stage cost, the Gauss-Newton Lxx, Lxu, Luu against the residual Jacobians
  through the stage points by central differences;
- knots grouped by structure: one stage object per knot (different references and
  weights) makes one phase whose costs and derivatives equal each knot's own
  evaluation (1e-13); ``set_reference`` and weights set after the build reach the
  right knots; structures that differ stay apart.
"""
import functools

import numpy as np
import pinocchio as pin
import pytest

import geppetto as gp
from geppetto import ocp
from geppetto.dynamics import contact_3d, contact_6d

from ocp_cases import rng_for
from pin_bridge import to_pin_model

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
RTOL_FD = 1e-6


@functools.lru_cache(maxsize=None)
def solo12():
    return gp.robots.load("solo12")


def _kinematic_costs(model, rng, x0):
    """A cost of every multibody residual (the torque residual: controls as accelerations)."""
    state = ocp.StateMultibody(model)
    nu = model.nv
    return [
        ocp.Cost(ocp.StateResidual(state, x0), weight=1e-1),
        ocp.Cost(ocp.ControlResidual(nu), weight=1e-3),
        ocp.Cost(ocp.FrameTranslationResidual(model, "FL_FOOT", rng.uniform(-0.3, 0.3, 3))),
        ocp.Cost(ocp.FrameRotationResidual(model, "base_link", np.eye(3)), weight=0.5),
        ocp.Cost(ocp.FramePlacementResidual(model, "HR_FOOT", np.eye(3),
                                            rng.uniform(-0.3, 0.3, 3)), weight=0.3),
        ocp.Cost(ocp.FrameVelocityResidual(model, "FR_FOOT", rng.standard_normal(6),
                                           "LOCAL_WORLD_ALIGNED"), weight=0.2),
        ocp.Cost(ocp.FrameVelocityResidual(model, "HL_FOOT", None, "LOCAL"),
                 ocp.Smooth2Norm(1e-2), weight=0.1),
        ocp.Cost(ocp.CenterOfMassResidual(model, [0.0, 0.0, 0.3]), weight=2.0),
        ocp.Cost(ocp.JointTorqueResidual(model), weight=1e-4),
    ]


def _contact_costs(dynamics):
    cone = ocp.FrictionConeResidual(dynamics, "FR_FOOT", mu=0.7)
    smooth = ocp.SmoothFrictionConeResidual(dynamics, "HL_FOOT", mu=0.7)
    terms = [ocp.Cost(ocp.ContactForceResidual(dynamics, "HR_FOOT", [0.0, 0.0, 20.0]),
                      weight=1e-3),
             ocp.Cost(cone, ocp.QuadraticBarrier(*cone.bounds), weight=1e-2),
             ocp.Cost(smooth, ocp.QuadraticBarrier(*smooth.bounds), weight=1e-2)]
    if dynamics.constraints.constraints[0].size == 6:
        cop = ocp.CenterOfPressureResidual(dynamics, "FL_FOOT", length=0.04, width=0.02)
        terms.append(ocp.Cost(cop, ocp.QuadraticBarrier(*cop.bounds), weight=1e-2))
    return terms


def every_residual_problem():
    """solo12, fully actuated (nu = nv, for the torque residual), stages: contact (FL sole
    6D, three point feet) x3, flight x2, flight rk4 x2, touchdown impulse, four point feet
    x2, terminal; every residual type on them."""
    model = solo12().model
    rng = rng_for("parity", 1)
    x0 = np.r_[solo12().q0, np.zeros(model.nv)]
    actuation = ocp.Actuation.full(model)
    mixed = ocp.ContactDynamics(model, [contact_6d(model, "FL_FOOT", Kp=10.0, Kd=3.0)] + [
        contact_3d(model, foot, Kp=10.0, Kd=3.0) for foot in FEET[1:]], actuation)
    points = ocp.ContactDynamics(model, [contact_3d(model, foot) for foot in FEET], actuation)
    impulse = ocp.ImpulseDynamics(model, [contact_3d(model, foot) for foot in FEET])
    free = ocp.FreeDynamics(model, actuation)
    kinematic = _kinematic_costs(model, rng, x0)
    stance = ocp.StageModel(mixed, kinematic + _contact_costs(mixed), dt=0.02)
    flight = ocp.StageModel(free, kinematic, dt=0.02)
    flight_rk4 = ocp.StageModel(free, kinematic, dt=0.02, integrator="rk4")
    impact = ocp.StageModel(impulse, kinematic[:1] + [
        ocp.Cost(ocp.ContactForceResidual(impulse, "FL_FOOT"), weight=1e-2),
        ocp.Cost(ocp.FrameVelocityResidual(model, "FL_FOOT"), weight=0.5)], dt=1.0)
    landed = ocp.StageModel(points, kinematic + _contact_costs(points), dt=0.02)
    terminal = ocp.TerminalModel(free.state, [c for c in kinematic if not c.residual.uses_control])
    stages = [stance] * 3 + [flight] * 2 + [flight_rk4] * 2 + [impact] + [landed] * 2
    return ocp.ShootingProblem(x0, stages, terminal)


def _recording(problem):
    """Wrap problem.calc_costs to record every (xs, us, cost) it returns."""
    trials, original = [], problem.calc_costs

    def calc_costs(xs, us, xnext=None):
        cost = original(xs, us, xnext)
        trials.append((np.array(xs), np.array(us), cost))
        return cost

    problem.calc_costs = calc_costs
    return trials


def test_reported_and_line_search_costs_equal_a_fresh_calc():
    problem = every_residual_problem()
    kinds = {type(c.residual).__name__ for m in problem.running_models for c in m.costs}
    assert kinds >= {"StateResidual", "ControlResidual", "FrameTranslationResidual",
                     "FrameRotationResidual", "FramePlacementResidual",
                     "FrameVelocityResidual", "CenterOfMassResidual", "JointTorqueResidual",
                     "ContactForceResidual", "FrictionConeResidual",
                     "SmoothFrictionConeResidual", "CenterOfPressureResidual"}
    trials = _recording(problem)
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    result = gp.solvers.FDDP(problem).solve(xs, problem.quasi_static(xs), max_iter=4)
    assert result.iterations == 4 and len(trials) >= 4
    for xs_try, us_try, cost in trials:
        assert cost == pytest.approx(problem.calc(xs_try, us_try), rel=1e-12, abs=0.0)
    assert result.cost == pytest.approx(problem.calc(result.xs, result.us), rel=1e-12, abs=0.0)


def test_calc_costs_refreshes_the_jacobians_of_a_velocity_cost():
    """The issue's reproduction: calc_costs after calc_diff at another point."""
    problem = every_residual_problem()
    rng = rng_for("parity", 2)
    xs = problem.state.integrate(np.repeat(problem.x0[None], problem.N + 1, axis=0),
                                 0.2 * rng.standard_normal((problem.N + 1, problem.ndx)))
    us = problem.quasi_static(xs) + rng.standard_normal((problem.N, problem.nu))
    problem.calc_diff(xs, us)
    xs2 = problem.state.integrate(xs, 0.3 * rng.standard_normal(xs.shape[:1] + (problem.ndx,)))
    cost = problem.calc_costs(xs2, us)
    costs = problem.costs.copy()
    assert cost == pytest.approx(problem.calc(xs2, us), rel=1e-12, abs=0.0)
    np.testing.assert_allclose(costs, problem.costs, rtol=1e-12, atol=0.0)


def test_constraint_values_are_those_of_the_point_asked():
    """problem.constraints(xs, us) after an evaluation at another point: the running
    stages' frame constraints read fresh placements (ALDDP.max_violation of any
    trajectory relies on it)."""
    model = gp.robots.load("ur5").model
    dynamics = ocp.FreeDynamics(model)
    state = dynamics.state
    x0 = np.r_[gp.robots.load("ur5").q0, np.zeros(model.nv)]
    above = ocp.Constraint(ocp.FrameTranslationResidual(model, "tool0", [0, 0, 0.45], axes=[2]),
                           0.0, np.inf)
    running = ocp.StageModel(dynamics, [ocp.Cost(ocp.ControlResidual(model.nv))], [above],
                             dt=0.02)
    terminal = ocp.TerminalModel(state, [], [ocp.Constraint(ocp.FrameTranslationResidual(
        model, "tool0", [0.4, 0.2, 0.4]), 0.0, 0.0)])
    problem = ocp.ShootingProblem(x0, [running] * 6, terminal)
    rng = rng_for("parity", 3)
    points = [state.integrate(np.repeat(x0[None], 7, axis=0), 0.3 * rng.standard_normal((7, 12)))
              for _ in range(2)]
    us = rng.standard_normal((6, 6))

    def values(xs):
        return np.concatenate([np.ravel(d.r) for _, _, _, data in problem.constraints(xs, us)
                               for d in data])

    first = values(points[0]).copy()
    problem.calc(points[1], us)
    np.testing.assert_array_equal(values(points[0]), first)
    assert not np.allclose(values(points[1]), first)


# --- integrator names ----------------------------------------------------------------------

def test_euler_is_symplectic_and_explicit_euler_is_explicit():
    """From Pinocchio's ABA: euler v' = v + dt a, q' = q (+) dt v' (Crocoddyl's
    IntegratedActionModelEuler); explicit_euler q' = q (+) dt v."""
    model = solo12().model                  # a free-flyer: integrate on SE(3)
    pmodel = to_pin_model(model)
    pdata = pmodel.createData()
    dynamics = ocp.FreeDynamics(model)
    rng = rng_for("parity", 3)
    dt, K = 0.05, 3
    q = gp.dynamics.random_configuration(model, rng, size=K)
    v = rng.standard_normal((K, model.nv))
    u = rng.standard_normal((K, model.nv))
    xs = np.hstack([q, v])
    a = np.array([pin.aba(pmodel, pdata, q[k], v[k], u[k]) for k in range(K)])
    symplectic = np.hstack([[pin.integrate(pmodel, q[k], dt * (v[k] + dt * a[k]))
                             for k in range(K)], v + dt * a])
    explicit = np.hstack([[pin.integrate(pmodel, q[k], dt * v[k]) for k in range(K)],
                          v + dt * a])
    for name, expected in (("euler", symplectic), ("semi_implicit_euler", symplectic),
                           ("explicit_euler", explicit)):
        integrator = ocp.Integrator(dynamics, dt, name)
        assert integrator.scheme == ("explicit_euler" if name == "explicit_euler" else "euler")
        out = integrator.calc(integrator.create_data(K), xs, u)
        np.testing.assert_allclose(out, expected, rtol=0,
                                   atol=1e-12 * max(1.0, np.abs(expected).max()), err_msg=name)
    assert ocp.StageModel(dynamics).integrator.scheme == "euler"


def test_an_impulse_stage_is_an_explicit_jump():
    model = solo12().model
    impulse = ocp.ImpulseDynamics(model, [contact_3d(model, foot) for foot in FEET])
    assert ocp.StageModel(impulse, dt=1.0).integrator.scheme == "explicit_euler"
    with pytest.raises(ValueError, match="explicit_euler"):
        ocp.StageModel(impulse, dt=1.0, integrator="euler")


# --- RK cost quadrature ------------------------------------------------------------------

def _arm_costs(model, state, x0, rng):
    return [ocp.Cost(ocp.FrameTranslationResidual(model, "tool0", [0.4, 0.2, 0.4])),
            ocp.Cost(ocp.FrameVelocityResidual(model, "tool0", None, "LOCAL"),
                     ocp.WeightedQuadratic(rng.uniform(0.5, 2.0, 6)), weight=0.1),
            ocp.Cost(ocp.StateResidual(state, x0), weight=1e-2),
            ocp.Cost(ocp.ControlResidual(model.nv, rng.standard_normal(model.nv)),
                     weight=1e-3)]


def _arm_point(K, seed):
    robot = gp.robots.load("ur5")
    rng = rng_for("parity-rk", seed)
    q = gp.dynamics.random_configuration(robot.model, rng, size=K)
    xs = np.hstack([q, rng.standard_normal((K, robot.model.nv))])
    return robot, xs, 3.0 * rng.standard_normal((K, robot.model.nv)), rng


def _arm_stage_inputs(K, seed):
    """(robot, its FreeDynamics, x0, :func:`_arm_costs`, xs, us) at the seeded random
    point of :func:`_arm_point`."""
    robot, xs, us, rng = _arm_point(K, seed)
    model = robot.model
    dynamics = ocp.FreeDynamics(model)
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    return robot, dynamics, x0, _arm_costs(model, dynamics.state, x0, rng), xs, us


def _stage_outputs(stage, xs, us, with_derivatives):
    K, ndx, nu = xs.shape[0], stage.state.ndx, stage.nu
    out = ocp.stage.StageOutputs(np.zeros(K), np.zeros((K, ndx)), np.zeros((K, nu)),
                                 np.zeros((K, ndx, ndx)), np.zeros((K, nu, nu)),
                                 np.zeros((K, ndx, nu)))
    data = stage.create_data(K, out)
    (stage.calc_diff if with_derivatives else stage.calc)(data, xs, us)
    return out, data


@pytest.mark.parametrize("scheme", ["rk2", "rk3", "rk4"])
def test_rk_running_cost_is_the_quadrature_over_the_stage_points(scheme):
    K = 3
    _, dynamics, _, costs, xs, us = _arm_stage_inputs(K, 1)
    dt = 0.05
    stage = ocp.StageModel(dynamics, costs, dt=dt, integrator=scheme)
    knot = ocp.StageModel(dynamics, costs, dt=dt, integrator=scheme, cost_quadrature=False)
    out, data = _stage_outputs(stage, xs, us, False)
    # the stage points by hand: y_1 = x, y_i = x (+) c_i dt f(y_(i-1), u)
    nodes, b = ocp.integrators.RK_TABLEAUS[scheme]
    fdata = dynamics.create_data(K)
    points, f = [xs], dynamics.calc(fdata, xs, us).copy()
    for c in nodes:
        points.append(dynamics.state.integrate(xs, c * dt * f))
        f = dynamics.calc(fdata, points[-1], us).copy()
    expected = sum(b_j * _stage_outputs(knot, y, us, False)[0].cost
                   for b_j, y in zip(b, points))
    np.testing.assert_allclose(out.cost, expected, rtol=1e-12, atol=0.0)
    knot_cost = _stage_outputs(knot, xs, us, False)[0].cost
    assert np.all(np.abs(out.cost - knot_cost) > 1e-6 * np.abs(knot_cost))


class _VelocityPlusControl(ocp.residuals.Residual):
    """r = v + B u - reference (nv): a residual of both the state and the controls, so
    the stage-point derivatives have an Lyu block (no built-in residual of a free-dynamics
    stage has one)."""

    uses_control = True

    def __init__(self, nv, B, reference):
        self.nr, self.nv = nv, nv
        self.B, self.reference = np.asarray(B, float), np.asarray(reference, float)

    def create_data(self, K, ndx, nu):
        return ocp.residuals.ResidualData(K, self.nr, ndx, nu,
                                          np.broadcast_to(self.reference, (K, self.nr)).copy())

    def calc(self, data, kinematics, xs, us):
        data.r[:] = xs[:, -self.nv:] + us @ self.B.T - data.reference
        return data.r

    def calc_diff(self, data, kinematics, xs, us):
        self.calc(data, kinematics, xs, us)
        data.Rx[:] = 0.0
        data.Rx[:, :, -self.nv:] = np.eye(self.nv)
        data.Ru[:] = self.B
        return data


@pytest.mark.parametrize("mixed", [False, True])
@pytest.mark.parametrize("scheme", ["rk2", "rk3", "rk4"])
def test_rk_cost_derivatives_against_finite_differences(scheme, mixed):
    """Lx, Lu: central differences of the stage cost; Lxx, Lxu, Luu: the Gauss-Newton
    dt sum_j b_j w J_j^T A J_j with J_j the Jacobian of r(y_j(x, u), u) by central
    differences (Quadratic / WeightedQuadratic activations: A constant).  ``mixed`` adds a
    residual of both x and u (the stage points' Lyu block, chained once per stage)."""
    K = 2
    _, dynamics, _, costs, xs, us = _arm_stage_inputs(K, 2)
    state = dynamics.state
    if mixed:
        nv = state.nv
        mix = np.random.default_rng(5)
        costs = costs + [ocp.Cost(_VelocityPlusControl(nv, mix.standard_normal((nv, nv)),
                                                       mix.standard_normal(nv)),
                                  ocp.WeightedQuadratic(mix.uniform(0.5, 2.0, nv)),
                                  weight=0.3)]
    stage = ocp.StageModel(dynamics, costs, dt=0.05, integrator=scheme)
    out, _ = _stage_outputs(stage, xs, us, True)
    step = 1e-6

    def cost(x, u):
        return _stage_outputs(stage, x, u, False)[0].cost[:, None]

    Lx = ocp.checks._central_x(lambda x: cost(x, us), state, xs, step)[:, 0]
    Lu = ocp.checks._central_u(lambda u: cost(xs, u), us, step)[:, 0]
    assert ocp.checks.scaled_error(out.Lx, Lx) < RTOL_FD
    assert ocp.checks.scaled_error(out.Lu, Lu) < RTOL_FD

    def residuals(x, u):
        """r(y_j(x, u), u) of every cost at every cost point, rows stacked (K, m)."""
        _, data = _stage_outputs(stage, x, u, False)
        rows = []
        for j, _ in stage.cost_points:
            y = x if j == 0 else data.integrator.points[j]
            kin = data.kinematics if j == 0 else data.integrator.stages[j].dynamics
            for c, cd in zip(stage.costs, data.costs):
                c.residual.calc(cd.residual, kin, y, u)
                rows.append(cd.residual.r.copy())
        return np.hstack(rows)

    Jx = ocp.checks._central_x(lambda x: residuals(x, us), state, xs, step)
    Ju = ocp.checks._central_u(lambda u: residuals(xs, u), us, step)
    diagonal = []
    for j, b in stage.cost_points:
        for c in stage.costs:
            params = c.activation.parameters(c.residual.nr)
            a = params[0] if c.activation.code == ocp.costs.WEIGHTED else np.ones(c.residual.nr)
            diagonal.append(stage.dt * b * c.weight * a)
    A = np.concatenate(diagonal)
    Lxx = np.einsum("kri,r,krj->kij", Jx, A, Jx)
    Lxu = np.einsum("kri,r,krj->kij", Jx, A, Ju)
    Luu = np.einsum("kri,r,krj->kij", Ju, A, Ju)
    for name, analytical, numerical in (("Lxx", out.Lxx, Lxx), ("Lxu", out.Lxu, Lxu),
                                        ("Luu", out.Luu, Luu)):
        assert ocp.checks.scaled_error(analytical, numerical) < RTOL_FD, name


class _one_numba_thread:
    """Numba's thread count 1 inside (the stage models' fused paths run only there)."""

    def __enter__(self):
        import numba
        self.count = numba.get_num_threads()
        numba.set_num_threads(1)

    def __exit__(self, *_):
        import numba
        numba.set_num_threads(self.count)


def _rk_program_costs(model, state, x0, rng):
    """:func:`_arm_costs` and terms of the other activations and residual kinds (each has
    a fused step): a barrier on the state, a Smooth2Norm on a frame placement."""
    return _arm_costs(model, state, x0, rng) + [
        ocp.Cost(ocp.StateResidual(state, x0),
                 ocp.QuadraticBarrier(-0.3 * np.ones(state.ndx), 0.3 * np.ones(state.ndx)),
                 weight=0.5),
        ocp.Cost(ocp.FramePlacementResidual(model, "tool0", np.eye(3), [0.3, 0.1, 0.5]),
                 ocp.Smooth2Norm(1e-3), weight=0.2)]


@pytest.mark.parametrize("scheme", ["rk2", "rk3", "rk4"])
def test_rk_stage_programs_agree_with_the_per_term_path(scheme, monkeypatch):
    """On one Numba thread an RK free stage runs each cost point's terms as one
    interpreted program and its stages' dynamics by their fused (lanes) steps; without
    them (several threads, or a term without a fused step) one call per term and the
    per-state ABA kernels.  Both give the same costs and derivatives, to rounding."""
    K = 5
    robot, dynamics, x0, _, xs, us = _arm_stage_inputs(K, 4)
    costs = _rk_program_costs(robot.model, dynamics.state, x0, rng_for("rk-programs", 0))
    stage = ocp.StageModel(dynamics, costs, dt=0.05, integrator=scheme)
    with _one_numba_thread():
        fast = [_stage_outputs(stage, xs, us, d) for d in (False, True)]
        data = fast[1][1]
        assert data.point_programs and data.integrator.stage_steps is not None
        monkeypatch.setattr(ocp.StageModel, "_point_programs", lambda self, data: None)
        slow = [_stage_outputs(stage, xs, us, d) for d in (False, True)]
        assert slow[1][1].integrator.stage_steps is None
    for (a, _), (b, _) in zip(fast, slow):
        np.testing.assert_allclose(a.cost, b.cost, rtol=1e-12)
    for name in ("Lx", "Lu", "Lxx", "Luu", "Lxu"):
        a, b = getattr(fast[1][0], name), getattr(slow[1][0], name)
        assert np.abs(a).max() > 0, name
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10 * np.abs(b).max(), err_msg=name)


def test_rk_stage_with_an_unfused_constraint_keeps_the_per_state_dynamics():
    """A constraint whose residual has no fused step may read more of the dynamics' Data
    than the fused steps leave: its RK stage keeps the programs for its costs but the
    per-state ABA kernels for its stages, and its values stay those of (xs, us)."""
    K = 3
    robot, dynamics, x0, costs, xs, us = _arm_stage_inputs(K, 6)
    nv = dynamics.state.nv
    mix = np.random.default_rng(7)
    limit = ocp.Constraint(_VelocityPlusControl(nv, mix.standard_normal((nv, nv)),
                                                np.zeros(nv)), -np.ones(nv), np.ones(nv))
    stage = ocp.StageModel(dynamics, costs, [limit], dt=0.05, integrator="rk4")
    plain = ocp.StageModel(dynamics, costs, dt=0.05, integrator="rk4")
    with _one_numba_thread():
        out, data = _stage_outputs(stage, xs, us, True)
        reference, plain_data = _stage_outputs(plain, xs, us, True)
        values = stage.calc_constraints(data, xs, us, False)[0].r
    assert data.point_programs and data.integrator.stage_steps is None
    assert plain_data.integrator.stage_steps is not None
    np.testing.assert_allclose(values, xs[:, -nv:] + us @ limit.residual.B.T, rtol=1e-12)
    for name in ("cost", "Lx", "Lu", "Lxx", "Luu", "Lxu"):
        b = getattr(reference, name)
        np.testing.assert_allclose(getattr(out, name), b, rtol=0,
                                   atol=1e-10 * np.abs(b).max(), err_msg=name)


# --- knots grouped by structure ------------------------------------------------------------

def _reaching_stages(per_knot, N, rng):
    """ur5 reaching stages: one object per knot (targets and weights per knot) or one
    shared object; returns (stages, terminal, targets (N+1, 3), reach weights (N,))."""
    robot = gp.robots.load("ur5")
    model = robot.model
    dynamics = ocp.FreeDynamics(model)
    state = dynamics.state
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    targets = np.array([0.4, 0.2, 0.4]) + 0.05 * rng.standard_normal((N + 1, 3))
    weights = rng.uniform(0.5, 2.0, N)
    x_reg = ocp.Cost(ocp.StateResidual(state, x0), weight=1e-2)
    u_reg = ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-4)
    speed = ocp.FrameVelocityResidual(model, "tool0")
    reach = ocp.FrameTranslationResidual(model, "tool0", targets[N])
    terminal = ocp.TerminalModel(state, [ocp.Cost(reach, weight=1e3)])
    if not per_knot:
        shared = ocp.StageModel(dynamics, [ocp.Cost(reach), x_reg, u_reg,
                                           ocp.Cost(speed, weight=0.1)], dt=0.01)
        return [shared] * N, terminal, targets, weights, reach
    stages = [ocp.StageModel(dynamics, [
        ocp.Cost(ocp.FrameTranslationResidual(model, "tool0", targets[k]), weight=weights[k]),
        ocp.Cost(ocp.StateResidual(state, x0), weight=1e-2),
        ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-4),
        ocp.Cost(ocp.FrameVelocityResidual(model, "tool0"), weight=0.1)], dt=0.01)
        for k in range(N)]
    return stages, terminal, targets, weights, reach


OUTPUTS = ("costs", "Lx", "Lu", "Lxx", "Luu", "Lxu", "Fx", "Fu", "xnext")


def test_one_object_per_knot_is_one_phase_equal_to_each_knot_alone():
    N = 6
    stages, terminal, targets, weights, _ = _reaching_stages(True, N, rng_for("group", 1))
    problem = ocp.ShootingProblem(stages[0].dynamics.state.zero(), stages, terminal)
    assert len(problem.phases) == 1 and len(problem.phases[0][3].runs) == N
    _, xs, us, _ = _arm_point(N + 1, 3)
    us = us[:N]
    problem.calc_diff(xs, us)
    for k, stage in enumerate(stages):
        out, data = _stage_outputs(stage, xs[k:k + 1], us[k:k + 1], True)
        for name in ("cost", "Lx", "Lu", "Lxx", "Luu", "Lxu"):
            mine = getattr(problem, "costs" if name == "cost" else name)[k:k + 1]
            np.testing.assert_allclose(mine, getattr(out, name), rtol=1e-13,
                                       atol=1e-13 * np.abs(getattr(out, name)).max(),
                                       err_msg=f"{name} at knot {k}")
    # a weight set after the build reaches its knot only
    problem.calc(xs, us)
    before = problem.costs.copy()
    stages[2].costs[0].weight = 2.0 * weights[2]
    problem.calc(xs, us)
    others = np.arange(N + 1) != 2
    np.testing.assert_array_equal(problem.costs[others], before[others])
    assert problem.costs[2] > before[2]


def test_per_knot_build_equals_the_shared_build():
    """The same problem built with one object per knot and with one shared object
    (per-knot targets by set_reference): identical costs and derivatives."""
    N = 8
    per_knot, terminal_a, targets, _, _ = _reaching_stages(True, N, rng_for("group", 4))
    for stage in per_knot:
        stage.costs[0].weight = 1.0
    shared, terminal_b, _, _, reach = _reaching_stages(False, N, rng_for("group", 4))
    x0 = per_knot[0].dynamics.state.zero()
    a = ocp.ShootingProblem(x0, per_knot, terminal_a)
    b = ocp.ShootingProblem(x0, shared, terminal_b)
    b.set_reference(reach, targets)
    assert len(a.phases) == len(b.phases) == 1
    _, xs, us, _ = _arm_point(N + 1, 5)
    us = us[:N]
    assert a.calc_diff(xs, us) == b.calc_diff(xs, us)
    for name in OUTPUTS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    # set_reference on a per-knot residual moves that knot's target only
    moved = targets.copy()
    moved[3] += 0.1
    a.set_reference(per_knot[3].costs[0].residual, moved[3])
    b.set_reference(reach, moved)
    assert a.calc(xs, us) == b.calc(xs, us)
    np.testing.assert_array_equal(a.costs, b.costs)


def test_different_structures_stay_in_different_phases():
    N = 4
    stages, terminal, _, _, _ = _reaching_stages(True, N, rng_for("group", 6))
    dynamics, costs = stages[0].dynamics, stages[0].costs
    other_dt = ocp.StageModel(dynamics, costs, dt=0.02)
    other_activation = ocp.StageModel(dynamics, [ocp.Cost(
        costs[0].residual, ocp.WeightedQuadratic([1.0, 2.0, 3.0]))] + costs[1:], dt=0.01)
    other_scheme = ocp.StageModel(dynamics, costs, dt=0.01, integrator="rk2")
    models = stages[:2] + [other_dt, other_activation, other_scheme] + stages[2:]
    problem = ocp.ShootingProblem(dynamics.state.zero(), models, terminal)
    assert [(start, stop) for _, start, stop, _ in problem.phases] == [
        (0, 2), (2, 3), (3, 4), (4, 5), (5, 7)]


# --- against Crocoddyl itself ------------------------------------------------------------

CROCODDYL_STAGE = '''
import json, sys
import numpy as np
import pinocchio
import crocoddyl

task = json.load(sys.stdin)
model = pinocchio.buildModelFromUrdf(task["urdf"])
state = crocoddyl.StateMultibody(model)
actuation = crocoddyl.ActuationModelFull(state)
nu = actuation.nu
frame = model.getFrameId(task["frame"])
costs = crocoddyl.CostModelSum(state, nu)
costs.addCost("reach", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelFrameTranslation(
    state, frame, np.array(task["target"]), nu)), 1.0)
costs.addCost("speed", crocoddyl.CostModelResidual(
    state, crocoddyl.ActivationModelWeightedQuad(np.array(task["speed_weights"])),
    crocoddyl.ResidualModelFrameVelocity(state, frame, pinocchio.Motion.Zero(),
                                         pinocchio.ReferenceFrame.LOCAL, nu)),
    0.1)
costs.addCost("x_reg", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelState(
    state, np.array(task["x0"]), nu)), 1e-2)
costs.addCost("u_reg", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(
    state, np.array(task["u_ref"]))), 1e-3)
differential = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
out = {}
for scheme in task["schemes"]:
    if scheme == "euler":
        action = crocoddyl.IntegratedActionModelEuler(differential, task["dt"])
    else:
        rk = {"rk2": crocoddyl.RKType.two, "rk3": crocoddyl.RKType.three,
              "rk4": crocoddyl.RKType.four}[scheme]
        action = crocoddyl.IntegratedActionModelRK(differential, rk, task["dt"])
    data = action.createData()
    rows = {name: [] for name in ("cost", "xnext", "Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu")}
    for x, u in zip(task["xs"], task["us"]):
        x, u = np.array(x), np.array(u)
        action.calc(data, x, u)
        action.calcDiff(data, x, u)
        for name in rows:
            rows[name].append(np.asarray(getattr(data, name)).tolist())
    out[scheme] = rows
print(json.dumps(out))
'''


def test_euler_and_rk_stages_match_crocoddyl():
    """Crocoddyl 3.2's IntegratedActionModelEuler and IntegratedActionModelRK (two, three,
    four) on the same ur5 stage (frame translation, LOCAL frame velocity with a weighted
    activation, state and control regularization) at random points: cost, x' and every
    calc_diff output agree to 1e-10 (relative to each array's largest entry).
    (A LOCAL_WORLD_ALIGNED velocity is left out: Crocoddyl 3.2's Jacobians of it,
    inside an action model, differ from central differences by ~30% on this stage,
    its values agree; ours match central differences, see the test above.  RK3: the
    values only: Crocoddyl 3.2's rk.hxx writes dk_1/dv = dt/2 dk/dq for the first
    stage point of every scheme, c_1 dt only for RK2 and RK4 (RK3's c_1 = 1/3), so its
    RK3 Fx, Fu and cost derivatives are not those of its own values; ours match
    central differences, test_ocp_derivatives.py and the test above.)"""
    from geppetto.benchmarks import crocoddyl_env
    K = 3
    robot, dynamics, x0, costs, xs, us = _arm_stage_inputs(K, 7)
    target = costs[0].residual.reference
    speed_weights = costs[1].activation.weights
    u_ref = costs[3].residual.reference
    schemes = ["euler", "rk2", "rk3", "rk4"]
    task = dict(urdf=robot.urdf_path, frame="tool0", target=target.tolist(),
                speed_weights=speed_weights.tolist(), x0=x0.tolist(), u_ref=u_ref.tolist(),
                dt=0.05, schemes=schemes, xs=xs.tolist(), us=us.tolist())
    theirs, reason = crocoddyl_env.run(CROCODDYL_STAGE, task, timeout=600)
    if theirs is None:
        pytest.skip(f"Crocoddyl's environment: {reason}")
    for scheme in schemes:
        stage = ocp.StageModel(dynamics, costs, dt=0.05, integrator=scheme)
        out, data = _stage_outputs(stage, xs, us, True)
        ours = dict(cost=out.cost, xnext=data.integrator.xnext, Fx=data.integrator.Fx,
                    Fu=data.integrator.Fu, Lx=out.Lx, Lu=out.Lu, Lxx=out.Lxx, Luu=out.Luu,
                    Lxu=out.Lxu)
        for name, value in ours.items():
            if scheme == "rk3" and name not in ("cost", "xnext"):
                continue
            expected = np.array(theirs[scheme][name])
            np.testing.assert_allclose(value, expected, rtol=0,
                                       atol=1e-10 * np.abs(expected).max(),
                                       err_msg=f"{scheme} {name}")


def test_one_dynamics_object_per_knot_groups_too():
    """Crocoddyl's examples also build the dynamics per knot: equal structure (model,
    actuation, armature, damping) groups them; a damped one stays apart."""
    N = 4
    robot = gp.robots.load("ur5")
    model = robot.model
    x0 = np.r_[robot.q0, np.zeros(model.nv)]

    def stage(dynamics):
        return ocp.StageModel(dynamics, [
            ocp.Cost(ocp.FrameTranslationResidual(model, "tool0", [0.4, 0.2, 0.4])),
            ocp.Cost(ocp.StateResidual(dynamics.state, x0), weight=1e-2),
            ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-4)], dt=0.01)

    shared = ocp.FreeDynamics(model)
    terminal = ocp.TerminalModel(shared.state)
    a = ocp.ShootingProblem(x0, [stage(ocp.FreeDynamics(model)) for _ in range(N)], terminal)
    b = ocp.ShootingProblem(x0, [stage(shared)] * N, terminal)
    assert len(a.phases) == 1
    _, xs, us, _ = _arm_point(N + 1, 8)
    assert a.calc_diff(xs, us[:N]) == b.calc_diff(xs, us[:N])
    for name in OUTPUTS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    damped = stage(ocp.FreeDynamics(model, damping=np.full(model.nv, 0.1)))
    c = ocp.ShootingProblem(x0, [stage(shared)] * 2 + [damped] + [stage(shared)], terminal)
    assert [(start, stop) for _, start, stop, _ in c.phases] == [(0, 2), (2, 3), (3, 4)]
