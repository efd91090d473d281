"""Contact stages: :class:`geppetto.ocp.ContactDynamics` and the contact-force residuals
on solo12 standing on its four feet (3D point contacts) and talos on its two soles
(6D contacts: the centre of pressure).

- f_x, f_u of the contact dynamics, and the Jacobians of the force and friction-cone
  residuals, against central finite differences on the manifold
  (``check_dynamics``, ``check_residual``), for LOCAL and LOCAL_WORLD_ALIGNED
  contacts with Baumgarte gains and joint damping; tolerance 1e-6 (scaled errors,
  as in test_ocp_derivatives.py);
- the stage's discrete dynamics (euler, rk2) against finite differences;
- the kinematics the stage leaves for the kinematic residuals are those of the knots;
- the residuals read the forces of the same knots from the stage, and evaluate them
  themselves when the stamp does not match (a line search);
- quasi_static holds the robot still (ddq = 0);
- impulse stages (touchdown, restitution 0 and 0.5): the field and its Jacobians
  against finite differences, x' = (q, v+) of ``impulse_dynamics``, the impulse
  residual's Jacobians;
- a short standing problem solved by FDDP from zero controls: the cost decreases and
  the solution is feasible, with the feet's vertical forces carrying the weight;
  a flight - touchdown - stance problem solved by FDDP;
- gait_stages: the stages of a trot step (stance, two feet swinging, touchdown
  impulse, stance), solved by FDDP with the swing feet lifted; a gait ending at
  an impact, impulses of the landing feet only;
- the smooth (second-order) friction cone: hand-computed rows, Jacobians against
  finite differences, a standing problem held inside it;
- the jitted contact and impact steps and the contact forward pass equal the
  stage models; the row-sparse cost accumulation equals the dense one;
- through impulse knots, the gradient of the rollout cost assembled by the
  adjoint recursion (Fx, Fu, Lx, Lu) against finite differences;
- the solo12 trot of examples/solo12_trot.py (Crocoddyl's structure, symplectic
  Euler, the gait_stages default) converges: explicit Euler made FDDP creep.
"""
import functools

import numpy as np
import pytest

import geppetto as gp
from geppetto import ocp
from geppetto.dynamics import LOCAL_WORLD_ALIGNED, contact_3d

from ocp_cases import rng_for

RTOL_FD = 1e-6
FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
K = 3


@functools.lru_cache(maxsize=None)
def solo12():
    return gp.robots.load("solo12")


@functools.lru_cache(maxsize=None)
def contact_dynamics(reference="LOCAL", Kp=0.0, Kd=0.0, damped=False):
    model = solo12().model
    damping = np.r_[np.zeros(6), np.full(model.nv - 6, 0.1)] if damped else None
    contacts = [contact_3d(model, foot, reference=reference, Kp=Kp, Kd=Kd) for foot in FEET]
    return ocp.ContactDynamics(model, contacts, damping=damping)


def standing_state():
    robot = solo12()
    return np.r_[robot.q0, np.zeros(robot.model.nv)]


def perturbed_states(dynamics, seed=0, scale=0.1):
    """K states near the standing one, and controls near the quasi-static ones."""
    rng = rng_for("solo12-contacts", seed)
    x0 = np.repeat(standing_state()[None], K, axis=0)
    xs = dynamics.state.integrate(x0, scale * rng.standard_normal((K, dynamics.state.ndx)))
    us = dynamics.quasi_static(xs) + 0.3 * rng.standard_normal((K, dynamics.nu))
    return xs, us


DYNAMICS_CASES = {
    "local": dict(reference="LOCAL"),
    "world_aligned_gains_damping": dict(reference=LOCAL_WORLD_ALIGNED, Kp=10.0, Kd=3.0,
                                        damped=True),
}


@pytest.mark.parametrize("case", sorted(DYNAMICS_CASES))
def test_contact_dynamics_jacobians(case):
    dynamics = contact_dynamics(**DYNAMICS_CASES[case])
    assert dynamics.nu == 12 and dynamics.nc == 12
    xs, us = perturbed_states(dynamics)
    errors = ocp.check_dynamics(dynamics, xs, us)
    assert max(errors) < RTOL_FD, errors


@pytest.mark.parametrize("case", sorted(DYNAMICS_CASES))
def test_contact_dynamics_matches_constraint_dynamics(case):
    """f, lambda and their derivatives are those of the dynamics layer, tau = B u - D v;
    data.dynamics holds the knots' placements and world Jacobians."""
    dynamics = contact_dynamics(**DYNAMICS_CASES[case])
    model, nv = dynamics.model, dynamics.model.nv
    xs, us = perturbed_states(dynamics, seed=1)
    data = dynamics.create_data(K)
    f, f_x, f_u = dynamics.calc_diff(data, xs, us)
    tau = us @ dynamics.actuation.B.T - dynamics.damping * xs[:, model.nq:]
    reference = model.create_data()
    q, v = xs[:, :model.nq], xs[:, model.nq:]
    ddq, lam = gp.dynamics.constraint_dynamics(model, reference, q, v, tau, dynamics.constraints)
    np.testing.assert_allclose(f[:, nv:], ddq, atol=1e-10)
    np.testing.assert_allclose(f[:, :nv], v, atol=0.0)
    np.testing.assert_allclose(data.lam, lam, atol=1e-10)
    _, _, ddq_dtau, dlam_dq, _, dlam_dtau = gp.dynamics.constraint_dynamics_derivatives(
        model, reference, q, v, tau, dynamics.constraints)
    np.testing.assert_allclose(f_u[:, nv:], ddq_dtau @ dynamics.actuation.B, atol=1e-9)
    np.testing.assert_allclose(data.lam_u, dlam_dtau @ dynamics.actuation.B, atol=1e-9)
    np.testing.assert_allclose(data.lam_x[:, :, :nv], dlam_dq, atol=1e-9)
    kinematics = model.create_data()
    for k in range(K):
        J = gp.dynamics.compute_joint_jacobians(model, kinematics, q[k])
        np.testing.assert_allclose(data.dynamics.J[k], J, atol=1e-12)
        np.testing.assert_allclose(data.dynamics.oR[k], kinematics.oR[0], atol=1e-12)
        np.testing.assert_allclose(data.dynamics.op[k], kinematics.op[0], atol=1e-12)


@pytest.mark.parametrize("case", sorted(DYNAMICS_CASES))
@pytest.mark.parametrize("foot", [0, 3])
def test_force_residual_jacobians(case, foot):
    dynamics = contact_dynamics(**DYNAMICS_CASES[case])
    xs, us = perturbed_states(dynamics, seed=2)
    force = ocp.ContactForceResidual(dynamics, FEET[foot], [0.0, 0.0, 5.0])
    errors = ocp.check_residual(force, dynamics.state, xs, us)
    assert max(errors) < RTOL_FD, errors
    cone = ocp.FrictionConeResidual(dynamics, foot, mu=0.7)
    errors = ocp.check_residual(cone, dynamics.state, xs, us)
    assert max(errors) < RTOL_FD, errors


def test_residuals_read_the_stage_forces():
    """In a stage, the residuals take lambda from the dynamics of the same knots; when
    the stamp differs (a line search at new states) they evaluate it themselves."""
    dynamics = contact_dynamics()
    xs, us = perturbed_states(dynamics, seed=3)
    force = ocp.ContactForceResidual(dynamics, 1)
    cone = ocp.FrictionConeResidual(dynamics, "FR_FOOT", mu=0.5, inner=False, min_force=1.0)
    stage = ocp.StageModel(dynamics, [ocp.Cost(force), ocp.Cost(
        cone, ocp.QuadraticBarrier(*cone.bounds))], dt=0.01)
    outputs = ocp.stage.StageOutputs(np.zeros(K), np.zeros((K, 36)), np.zeros((K, 12)),
                                     np.zeros((K, 36, 36)), np.zeros((K, 12, 12)),
                                     np.zeros((K, 36, 12)))
    data = stage.create_data(K, outputs)
    stage.calc_diff(data, xs, us)
    contact = data.kinematics.contact
    assert contact is data.integrator.stages[0]
    assert not hasattr(data.kinematics, "contact_scratch")     # nothing evaluated twice
    rdata = data.costs[0].residual
    np.testing.assert_array_equal(rdata.r, contact.lam[:, 3:6])
    np.testing.assert_array_equal(rdata.Ru, contact.lam_u[:, 3:6])
    # new states, placements refreshed but not the dynamics: the residual recomputes
    xs2, us2 = perturbed_states(dynamics, seed=4)
    stage.calc_costs(data, xs2, us2)
    fresh = dynamics.create_data(K)
    dynamics.calc(fresh, xs2, us2)
    np.testing.assert_allclose(rdata.r, fresh.lam[:, 3:6], atol=1e-12)
    assert np.all(np.isfinite(outputs.cost))


def test_friction_cone_rows():
    """The rows are >= 0 exactly inside the pyramid; bounds (0, inf) with min_force."""
    dynamics = contact_dynamics(reference=LOCAL_WORLD_ALIGNED)
    cone = ocp.FrictionConeResidual(dynamics, 0, mu=0.5, inner=False, min_force=2.0)
    np.testing.assert_allclose(cone.A @ [0.0, 0.0, 10.0], [5.0, 5.0, 5.0, 5.0, 10.0])
    assert np.all(cone.A @ [4.9, 0.0, 10.0] >= 0.0)
    assert np.any(cone.A @ [5.1, 0.0, 10.0] < 0.0)
    assert np.any(cone.A @ [0.0, -5.1, 10.0] < 0.0)
    np.testing.assert_array_equal(cone.bounds[0], [0, 0, 0, 0, 2.0])
    with pytest.raises(ValueError, match="friction coefficient"):
        ocp.FrictionConeResidual(dynamics, 0, mu=0.0)
    with pytest.raises(KeyError, match="NO_FOOT"):
        ocp.ContactForceResidual(dynamics, "NO_FOOT")
    with pytest.raises(ValueError, match="ContactDynamics"):
        ocp.ContactForceResidual(ocp.FreeDynamics(dynamics.model), 0)


def total_weight(model):
    """m |g|: the robot's weight (N)."""
    return -model.arrays.gravity[2] * model.arrays.inertia[1:, 0, 0].sum()


def test_quasi_static_holds_the_robot():
    """quasi_static: ddq = 0 at v = 0, the feet's vertical forces carry the weight."""
    dynamics = contact_dynamics(reference=LOCAL_WORLD_ALIGNED)
    xs = np.repeat(standing_state()[None], 2, axis=0)
    us = dynamics.quasi_static(xs)
    data = dynamics.create_data(2)
    f = dynamics.calc(data, xs, us)
    assert np.abs(f).max() < 1e-9
    vertical = data.lam.reshape(2, 4, 3)[:, :, 2].sum(axis=1)
    np.testing.assert_allclose(vertical, total_weight(dynamics.model), rtol=1e-9)


def cone_residual(dynamics, foot, smooth):
    if smooth:
        return ocp.SmoothFrictionConeResidual(dynamics, foot, mu=0.7)
    return ocp.FrictionConeResidual(dynamics, foot, mu=0.7)


@pytest.mark.parametrize("smooth", [False, True])
def test_standing_problem_fddp(smooth):
    """solo12 standing on four feet, N = 10: FDDP from zero controls (the robot falls
    into its contacts) ends feasible, at less than half the cost of letting it slump,
    the contact forces carrying the robot's weight, inside the friction cone (pyramid
    or smooth)."""
    robot = solo12()
    model = robot.model
    dynamics = contact_dynamics(reference=LOCAL_WORLD_ALIGNED)
    x0 = standing_state()
    weights = np.r_[np.full(6, 10.0), np.full(model.nv - 6, 1.0), np.full(model.nv, 0.1)]
    x_reg = ocp.Cost(ocp.StateResidual(dynamics.state, x0), ocp.WeightedQuadratic(weights))
    u_reg = ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-3)
    cones = [cone_residual(dynamics, foot, smooth) for foot in FEET]
    friction = [ocp.Cost(c, ocp.QuadraticBarrier(*c.bounds), weight=10.0) for c in cones]
    running = ocp.StageModel(dynamics, [x_reg, u_reg] + friction, dt=0.02)
    terminal = ocp.TerminalModel(dynamics.state, [ocp.Cost(x_reg.residual, x_reg.activation,
                                                           weight=10.0)])
    N = 10
    problem = ocp.ShootingProblem(x0, [running] * N, terminal)
    xs = np.repeat(x0[None], N + 1, axis=0)
    us = np.zeros((N, dynamics.nu))
    slumping = problem.calc(problem.rollout(us), us)       # the zero controls, feasible
    result = gp.solvers.FDDP(problem).solve(xs, us, max_iter=50)
    assert result.cost < 0.5 * slumping, (result, slumping)
    assert result.gaps < 1e-8, result
    assert result.converged, result
    # the rollout of the controls reproduces the states (feasible)
    np.testing.assert_allclose(problem.rollout(result.us), result.xs, atol=1e-8)
    data = dynamics.create_data(N)
    dynamics.calc(data, result.xs[:N], result.us)
    forces = data.lam.reshape(N, 4, 3)
    np.testing.assert_allclose(forces[:, :, 2].sum(axis=1), total_weight(model), rtol=0.2)
    tangential = np.linalg.norm(forces[:, :, :2], axis=2)
    assert np.all(tangential <= 0.7 * forces[:, :, 2] + 1e-6), tangential


@pytest.mark.parametrize("scheme", ["euler", "explicit_euler", "rk2"])
def test_contact_stage_integrator(scheme):
    dynamics = contact_dynamics(reference=LOCAL_WORLD_ALIGNED, Kp=10.0, Kd=3.0)
    xs, us = perturbed_states(dynamics, seed=5)
    stage = ocp.StageModel(dynamics, dt=0.01, integrator=scheme)
    errors = ocp.check_integrator(stage, xs, us)
    assert max(errors) < RTOL_FD, errors


SOLES = ("left_sole_link", "right_sole_link")


@functools.lru_cache(maxsize=None)
def talos_on_soles(reference):
    model = gp.robots.load("talos").model
    contacts = [gp.dynamics.contact_6d(model, sole, reference=reference, Kp=5.0, Kd=2.0)
                for sole in SOLES]
    return ocp.ContactDynamics(model, contacts)


@pytest.mark.parametrize("reference", ["LOCAL", "LOCAL_WORLD_ALIGNED"])
def test_six_d_contact_residual_jacobians(reference):
    """talos on its two soles (6D): contact dynamics, wrench, friction cone and
    centre-of-pressure Jacobians against finite differences, near half-sitting."""
    dynamics = talos_on_soles(reference)
    robot = gp.robots.load("talos")
    rng = rng_for("talos-contacts")
    x0 = np.repeat(np.r_[robot.q0, np.zeros(robot.model.nv)][None], 2, axis=0)
    xs = dynamics.state.integrate(x0, 0.05 * rng.standard_normal((2, dynamics.state.ndx)))
    us = dynamics.quasi_static(xs) + 0.3 * rng.standard_normal((2, dynamics.nu))
    if reference == "LOCAL":
        errors = ocp.check_dynamics(dynamics, xs, us)
        assert max(errors) < RTOL_FD, errors
    residuals = [ocp.ContactForceResidual(dynamics, SOLES[1]),
                 ocp.FrictionConeResidual(dynamics, 0, mu=0.8),
                 ocp.CenterOfPressureResidual(dynamics, SOLES[0], length=0.2, width=0.1)]
    for residual in residuals:
        errors = ocp.check_residual(residual, dynamics.state, xs, us)
        assert max(errors) < RTOL_FD, (type(residual).__name__, errors)


def test_center_of_pressure_rows():
    """With the quasi-static forces at half-sitting, the rows are the documented ones,
    positive for a generous sole (the CoP lies inside); a point contact is refused."""
    dynamics = talos_on_soles("LOCAL")
    robot = gp.robots.load("talos")
    xs = np.r_[robot.q0, np.zeros(robot.model.nv)][None]
    us = dynamics.quasi_static(xs)
    wide = ocp.CenterOfPressureResidual(dynamics, 0, length=1.0, width=1.0)
    data = wide.create_data(1, dynamics.state.ndx, dynamics.nu)
    wide.calc(data, None, xs, us)
    assert np.all(data.r > 0.0)
    contact = dynamics.create_data(1)
    dynamics.calc(contact, xs, us)
    f, tau = contact.lam[0, 0:3], contact.lam[0, 3:6]
    cop = np.array([-tau[1] / f[2], tau[0] / f[2]])
    half = 0.5 * np.array([1.0, 1.0])
    np.testing.assert_allclose(data.r[0], [half[0] * f[2] + tau[1], half[0] * f[2] - tau[1],
                                           half[1] * f[2] - tau[0], half[1] * f[2] + tau[0]])
    assert np.all(np.abs(cop) < 0.5)
    with pytest.raises(ValueError, match="6D contact"):
        ocp.CenterOfPressureResidual(contact_dynamics(), 0, 0.2, 0.1)


@pytest.mark.parametrize("restitution", [0.0, 0.5])
def test_impulse_stage(restitution):
    model = solo12().model
    impulse = ocp.ImpulseDynamics(model, contact_dynamics().constraints, restitution=restitution)
    xs, us = perturbed_states(impulse, seed=6)
    errors = ocp.check_dynamics(impulse, xs, us)
    assert max(errors) < RTOL_FD, errors
    stage = ocp.StageModel(impulse, dt=1.0)
    errors = ocp.check_integrator(stage, xs, us)
    assert max(errors) < RTOL_FD, errors
    errors = ocp.check_residual(ocp.ContactForceResidual(impulse, 2), impulse.state, xs, us)
    assert max(errors) < RTOL_FD, errors
    data = stage.integrator.create_data(K)
    xnext = stage.integrator.calc(data, xs, us)
    q, v = xs[:, :model.nq], xs[:, model.nq:]
    v_after, Lambda = gp.dynamics.impulse_dynamics(model, model.create_data(), q, v,
                                                   impulse.constraints, restitution=restitution)
    np.testing.assert_allclose(xnext[:, :model.nq], q, atol=1e-14)
    np.testing.assert_allclose(xnext[:, model.nq:], v_after, atol=1e-12)
    np.testing.assert_allclose(data.stages[0].lam, Lambda, atol=1e-12)


def test_touchdown_problem_fddp():
    """Flight (floating base, no contact) for 3 knots, a touchdown impulse, then 4
    stance knots: FDDP from zero controls ends feasible with the cost decreased, and
    the feet stop at the impact (restitution 0)."""
    problem = touchdown_problem(targets=False)
    model, x0, stance = solo12().model, problem.x0, problem.running_models[-1].dynamics
    N = problem.N
    us = np.zeros((N, stance.nu))
    initial = problem.calc(problem.rollout(us), us)
    result = gp.solvers.FDDP(problem).solve(np.repeat(x0[None], N + 1, axis=0), us,
                                            max_iter=50)
    assert result.gaps < 1e-8, result
    assert result.cost < initial, result
    assert result.converged, result
    foot_velocity = gp.dynamics.constraint_jacobian(
        model, model.create_data(), result.xs[4, :model.nq], stance.constraints) @ \
        result.xs[4, model.nq:]
    assert np.abs(foot_velocity).max() < 1e-9


def test_gait_stages_trot_step():
    model = solo12().model
    swing = ("FR_FOOT", "HL_FOOT")
    diagonal = ("FL_FOOT", "HR_FOOT")
    x0 = standing_state()
    data = model.create_data()
    gp.dynamics.forward_kinematics(model, data, x0[:model.nq])
    ground = {foot: gp.dynamics.frame_placement(model, data, model.frame_id(foot))[1]
              for foot in FEET}
    weights = np.r_[np.full(6, 10.0), np.full(model.nv - 6, 1.0), np.full(model.nv, 0.1)]
    x_reg = ocp.Cost(ocp.StateResidual(ocp.StateMultibody(model), x0),
                     ocp.WeightedQuadratic(weights))
    u_reg = ocp.Cost(ocp.ControlResidual(12), weight=1e-3)
    lift = {foot: ocp.FrameTranslationResidual(model, foot, ground[foot] + [0.0, 0.0, 0.05],
                                               axes=[2]) for foot in swing}

    def costs(phase):
        if phase.impulse:
            return [x_reg]
        terms = [x_reg, u_reg]
        for foot in phase.feet:
            cone = ocp.FrictionConeResidual(phase.dynamics, foot, mu=0.7)
            terms.append(ocp.Cost(cone, ocp.QuadraticBarrier(*cone.bounds), weight=10.0))
        for foot in set(FEET) - set(phase.feet):
            terms.append(ocp.Cost(lift[foot], weight=1e3))
        return terms

    gait = [(FEET, 3), (diagonal, 5), (FEET, 3)]
    stages, phases = ocp.gait_stages(model, gait, costs, dt=0.02)
    assert len(stages) == 3 + 5 + 1 + 3
    assert [p.impulse for p in phases] == [False, False, True, False]
    assert [(p.start, p.knots) for p in phases] == [(0, 3), (3, 5), (8, 1), (9, 3)]
    assert stages[8].dt == 1.0 and isinstance(stages[8].dynamics, ocp.ImpulseDynamics)
    assert stages[3] is stages[7] and stages[2] is not stages[3]
    assert phases[1].dynamics.constraints.names == list(diagonal)
    problem = ocp.ShootingProblem(x0, stages, ocp.TerminalModel(ocp.StateMultibody(model),
                                                                [x_reg]))
    N = problem.N
    result = gp.solvers.FDDP(problem).solve(np.repeat(x0[None], N + 1, axis=0),
                                            np.zeros((N, 12)), max_iter=100)
    assert result.converged and result.gaps < 1e-8, result
    for foot in swing:                  # lifted during the swing (knots 4 to 8)
        heights = []
        for x in result.xs[4:9]:
            gp.dynamics.forward_kinematics(model, data, x[:model.nq])
            heights.append(gp.dynamics.frame_placement(model, data, model.frame_id(foot))[1][2])
        assert max(heights) > ground[foot][2] + 0.01, (foot, heights)
    with pytest.raises(ValueError, match="at least one knot"):
        ocp.gait_stages(model, [(FEET, 0)], costs, dt=0.02)


def test_gait_ending_at_an_impact():
    """A last gait entry of 0 knots ends the problem with its touchdown impulse;
    impulse_feet="touchdown" puts only the landing feet in the impulse; GaitPhase
    tells which feet land; the impulse's quasi-static controls are zero."""
    model = solo12().model
    swing = ("FR_FOOT", "HL_FOOT")
    stance = ("FL_FOOT", "HR_FOOT")
    seen = []

    def costs(phase):
        seen.append(phase)
        return [] if phase.impulse else [ocp.Cost(ocp.ControlResidual(12), weight=1e-3)]

    stages, phases = ocp.gait_stages(model, [(FEET, 2), (stance, 3), (FEET, 0)], costs,
                                     dt=0.02, impulse_feet="touchdown")
    assert len(stages) == 2 + 3 + 1 and seen == phases
    impulse = stages[-1]
    assert isinstance(impulse.dynamics, ocp.ImpulseDynamics) and impulse.dt == 1.0
    assert impulse.dynamics.constraints.names == list(swing)
    assert phases[-1].impulse and phases[-1].touchdown == swing
    assert phases[1].touchdown == () and not phases[1].impulse
    assert stages[0].integrator.scheme == "euler"       # symplectic, Crocoddyl's
    assert impulse.integrator.scheme == "explicit_euler"
    all_feet, _ = ocp.gait_stages(model, [(FEET, 2), (stance, 3), (FEET, 0)], costs, dt=0.02)
    assert all_feet[-1].dynamics.constraints.names == list(FEET)
    xs = np.repeat(standing_state()[None], 2, axis=0)
    assert impulse.nu == 0 and stages[0].nu == 12
    np.testing.assert_array_equal(impulse.dynamics.quasi_static(xs), np.zeros((2, 0)))
    with pytest.raises(ValueError, match="at least one knot"):
        ocp.gait_stages(model, [(FEET, 2), (FEET, 0)], costs, dt=0.02)   # nothing lands
    with pytest.raises(ValueError, match="impulse_feet"):
        ocp.gait_stages(model, [(FEET, 2)], costs, dt=0.02, impulse_feet="some")


def test_smooth_friction_cone_rows():
    """r = mu f_n - sqrt(|f_t|^2 + eps^2) at hand-computed forces; >= 0 inside the cone."""
    dynamics = contact_dynamics(reference=LOCAL_WORLD_ALIGNED)
    cone = ocp.SmoothFrictionConeResidual(dynamics, 0, mu=0.5, eps=1e-3)
    f = np.array([[3.0, 4.0, 12.0], [3.0, 4.0, 8.0], [0.0, 0.0, 10.0]])
    r, dr_df = cone._row(f)
    s = np.sqrt(25.0 + 1e-6)
    np.testing.assert_allclose(r, [6.0 - s, 4.0 - s, 5.0 - 1e-3], rtol=1e-14)
    np.testing.assert_allclose(dr_df[0], [-3.0 / s, -4.0 / s, 0.5], rtol=1e-14)
    np.testing.assert_allclose(dr_df[2], [0.0, 0.0, 0.5], atol=1e-15)
    assert r[0] > 0.0 > r[1]                 # |f_t| = 5: inside at f_n = 12, outside at 8
    tilted = ocp.SmoothFrictionConeResidual(dynamics, 0, mu=1.0, normal=(1.0, 0.0, 0.0))
    np.testing.assert_allclose(tilted._row(np.array([[2.0, 0.0, 0.0]]))[0], [2.0 - 1e-3])
    np.testing.assert_array_equal(cone.bounds[0], [0.0])
    with pytest.raises(ValueError, match="eps"):
        ocp.SmoothFrictionConeResidual(dynamics, 0, mu=0.5, eps=0.0)
    with pytest.raises(ValueError, match="friction coefficient"):
        ocp.SmoothFrictionConeResidual(dynamics, 0, mu=-1.0)


@pytest.mark.parametrize("case", sorted(DYNAMICS_CASES))
@pytest.mark.parametrize("eps", [1e-3, 1.0])
def test_smooth_friction_cone_jacobians(case, eps):
    dynamics = contact_dynamics(**DYNAMICS_CASES[case])
    xs, us = perturbed_states(dynamics, seed=7)
    cone = ocp.SmoothFrictionConeResidual(dynamics, "HL_FOOT", mu=0.7, eps=eps)
    errors = ocp.check_residual(cone, dynamics.state, xs, us)
    assert max(errors) < RTOL_FD, errors


@pytest.mark.parametrize("scheme", ["explicit_euler", "euler"])
def test_contact_trial_rollout_matches_the_stages(scheme):
    """The trial-rollout kernel of a contact phase and of an impact (contact_step,
    impulse_step), through the stage model's ``rollout_trial``, steps the knots exactly
    as the stage models (dt, scheme, Baumgarte gains, damping, restitution)."""
    dynamics = contact_dynamics(reference=LOCAL_WORLD_ALIGNED, Kp=10.0, Kd=3.0, damped=True)
    impulse = ocp.ImpulseDynamics(solo12().model, dynamics.constraints, restitution=0.3)
    xs, us = perturbed_states(dynamics, seed=8)
    for stage in (ocp.StageModel(dynamics, dt=0.01, integrator=scheme),
                  ocp.StageModel(impulse, dt=1.0)):           # the impulse: nu = 0
        nu = stage.nu
        stage_us = np.ascontiguousarray(us[:, :nu])
        expected = stage.integrator.calc(stage.integrator.create_data(K), xs, stage_us)
        ws = stage.trial_workspace()
        xs_try, us_try, xnext = np.empty_like(xs), np.empty_like(stage_us), np.empty_like(xs)
        no_gains = (np.zeros((1, nu)), np.zeros((1, nu, 36)), np.zeros((1, 36)))
        for t in range(K):        # alpha = 0, no gains: each knot stepped from xs[t]
            window = slice(t, t + 1)
            inputs = (xs[window], stage_us[window], *no_gains, stage_us[window],
                      stage_us[window], 0.0, False, False)
            failed = stage.rollout_trial(inputs, xs[t],
                                         (xs_try[window], us_try[window], xnext[window]), ws)
            assert failed == -1
        np.testing.assert_allclose(xnext, expected, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(us_try, stage_us)


def _stage_outputs(n, ndx, nu):
    return ocp.stage.StageOutputs(np.zeros(n), np.zeros((n, ndx)), np.zeros((n, nu)),
                                  np.zeros((n, ndx, ndx)), np.zeros((n, nu, nu)),
                                  np.zeros((n, ndx, nu)))


def test_contact_trial_stores_what_its_costs_read():
    """The trial rollout of a contact phase and of an impact (geppetto.ocp.trial.
    rollout_contact) stores each knot's placements, world Jacobians and contact forces
    (impulses) from its step's solve in the phase data, with the contact data's stamp:
    the forces equal a fresh solve at the trial states (1e-12), the costs computed from
    them (calc_costs right after the rollout: the fused phase's TRIAL mode, no
    dynamics, no kinematics) equal a fresh calc, and calc_costs at other states (a
    copy) solves the contacts again.  A contact phase's rollout also keeps each knot's
    solve, which calc_diff at the trial point differentiates without solving again."""
    from geppetto.ocp.contact_step import VALUES
    model = solo12().model
    dynamics = contact_dynamics()                               # LOCAL: the cone rotates
    impulse = ocp.ImpulseDynamics(model, dynamics.constraints, restitution=0.2)
    x0 = standing_state()
    stages = []
    for field, dt in ((dynamics, 0.01), (impulse, 1.0)):
        cone = ocp.FrictionConeResidual(field, "FR_FOOT", mu=0.7)
        costs = [ocp.Cost(ocp.StateResidual(field.state, x0), weight=1e-1),
                 ocp.Cost(ocp.FrameTranslationResidual(model, "FL_FOOT", [0.2, 0.1, 0.0])),
                 ocp.Cost(ocp.ContactForceResidual(field, 2, [0.0, 0.0, 20.0]), weight=1e-3),
                 ocp.Cost(cone, ocp.QuadraticBarrier(*cone.bounds), weight=10.0)]
        if field.nu:
            costs.append(ocp.Cost(ocp.ControlResidual(field.nu), weight=1e-3))
        stages.append(ocp.StageModel(field, costs, dt=dt))
    for stage, seed in zip(stages, (11, 12)):
        field, nu, ndx = stage.dynamics, stage.nu, stage.state.ndx
        rng = np.random.default_rng(seed)
        xs, us = perturbed_states(dynamics, seed=seed, scale=0.05)
        us = np.ascontiguousarray(us[:, :nu])
        data = stage.create_data(K, _stage_outputs(K, ndx, nu))
        stage.calc_diff(data, xs, us)
        assert isinstance(data.fused, ocp.fused.FusedPhase)
        inputs = (xs, us, rng.standard_normal((K, nu)), 0.1 * rng.standard_normal((K, nu, ndx)),
                  0.01 * rng.standard_normal((K, ndx)), us, us, 0.5, True, False)
        outputs = tuple(np.empty(shape) for shape in ((K, xs.shape[1]), (K, nu),
                                                      (K, xs.shape[1])))
        kin, contact = data.kinematics, data.kinematics.contact
        stored = (kin.oR[:, 1:], kin.op[:, 1:], kin.J, contact.lam)
        for array in stored:
            array[...] = np.nan
        assert stage.rollout_trial(inputs, x0, outputs, stage.trial_workspace(data)) == -1
        xs_try, us_try = outputs[0], outputs[1]
        assert contact.holds(field, xs_try, us_try, VALUES)
        fresh = field.create_data(K)
        field.calc(fresh, xs_try, us_try)
        np.testing.assert_allclose(contact.lam, fresh.lam, rtol=0, atol=1e-12)
        np.testing.assert_allclose(kin.J, fresh.dynamics.J, rtol=0, atol=1e-12)
        np.testing.assert_allclose(kin.oR[:, 1:], fresh.dynamics.oR[:, 1:], rtol=0, atol=1e-12)
        stage.calc_costs(data, xs_try, us_try)                  # TRIAL: reads what it stored
        trial_costs = data.outputs.cost.copy()
        for array in stored:
            array[...] = np.nan
        stage.calc_costs(data, xs_try.copy(), us_try)           # other memory: solved again
        np.testing.assert_allclose(data.outputs.cost, trial_costs, rtol=1e-12, atol=0)
        stage.calc(data, xs_try, us_try)
        np.testing.assert_allclose(data.outputs.cost, trial_costs, rtol=1e-12, atol=0)
        assert np.all(trial_costs > 0)
        if field.keeps_trial_solve:
            _check_calc_diff_reuses_the_trial_solve(stage, data, xs_try, us_try)


def test_contact_trial_stops_at_a_knot_that_fails():
    """The trial rollout of a contact phase (geppetto.ocp.trial.rollout_contact, whose
    arrays are borrowed and whose scratch lives to its single exit) returns the first
    knot whose step is not finite, with the knots before it rolled out as a rollout
    that does not fail rolls them out (to the bit), and leaves the contact data
    without the VALUES stamp (its forces are not those of the trial)."""
    from geppetto.ocp.contact_step import VALUES
    dynamics = contact_dynamics()
    x0 = standing_state()
    costs = [ocp.Cost(ocp.StateResidual(dynamics.state, x0), weight=1e-1),
             ocp.Cost(ocp.ContactForceResidual(dynamics, 2, [0.0, 0.0, 20.0]), weight=1e-3),
             ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-3)]
    stage = ocp.StageModel(dynamics, costs, dt=0.01)
    nu, ndx = stage.nu, stage.state.ndx
    rng = np.random.default_rng(13)
    xs, us = perturbed_states(dynamics, seed=13, scale=0.05)
    us = np.ascontiguousarray(us[:, :nu])
    data = stage.create_data(K, _stage_outputs(K, ndx, nu))
    stage.calc_diff(data, xs, us)
    k = rng.standard_normal((K, nu))
    feedback = 0.1 * rng.standard_normal((K, nu, ndx))
    gaps = 0.01 * rng.standard_normal((K, ndx))
    failing = K // 2
    runs = []
    for bad in (None, failing):
        k_run = k.copy()
        if bad is not None:
            k_run[bad] = np.nan
        inputs = (xs, us, k_run, feedback, gaps, us, us, 0.5, True, False)
        outputs = tuple(np.zeros(shape) for shape in ((K, xs.shape[1]), (K, nu),
                                                     (K, xs.shape[1])))
        failed = stage.rollout_trial(inputs, x0, outputs, stage.trial_workspace(data))
        runs.append((failed, outputs, data.kinematics.contact.holds(
            dynamics, outputs[0], outputs[1], VALUES)))
    (ok, good, held_good), (failed, bad, held_bad) = runs
    assert ok == -1 and held_good
    assert failed == failing and not held_bad
    for good_array, bad_array in zip(good, bad):
        np.testing.assert_array_equal(bad_array[:failing], good_array[:failing])


@pytest.mark.parametrize("case", sorted(DYNAMICS_CASES))
def test_fused_contact_derivatives_match_the_raw_partials(case):
    """The fused phase's calc_diff of a contact stage (one thread) equals the per-term
    ContactDynamics.calc_diff (raw partials, then f_u = ddq_dtau B, lam_u = dlam_dtau B):
    with a floating base and no damping ("local") the fused KKT pass differentiates in u
    directly (the actuated dofs' columns, no product with B) and writes f_x, f_u, lam_x,
    lam_u per knot; with damping it takes the raw partials.  Also at a point the trial
    did not solve (the solve done again)."""
    dynamics = contact_dynamics(**DYNAMICS_CASES[case])
    nv = dynamics.model.nv
    direct = dynamics._actuated_dofs()
    if case == "local":
        np.testing.assert_array_equal(direct, np.arange(6, nv))
    else:
        assert direct is None
    xs, us = perturbed_states(dynamics, seed=3)
    stage = ocp.StageModel(dynamics, [ocp.Cost(ocp.ControlResidual(dynamics.nu), weight=1e-3)],
                           dt=0.01)
    data = stage.create_data(K, _stage_outputs(K, stage.state.ndx, stage.nu))
    stage.calc_diff(data, xs, us)
    assert isinstance(data.fused, ocp.fused.FusedPhase)
    fused = data.kinematics.contact
    reference = dynamics.create_data(K)
    dynamics.calc_diff(reference, xs, us)
    for name in ("f", "f_x", "f_u", "lam", "lam_x", "lam_u"):
        np.testing.assert_allclose(getattr(fused, name), getattr(reference, name), rtol=0,
                                   atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(fused.f_x[:, :nv, nv:], np.repeat(np.eye(nv)[None], K, 0))


def _check_calc_diff_reuses_the_trial_solve(stage, data, xs, us):
    """calc_diff at the trial point takes each knot's solve that the rollout kept (the
    stamp holds the point) and gives the same bits as with the solve done again (stamp
    cleared); a kept solve is read (a changed lambda comes out)."""
    contact = data.kinematics.contact
    stamp = contact.solved[12]
    np.testing.assert_array_equal(stamp, xs)
    outputs = lambda: [a.copy() for a in (data.integrator.Fx, data.integrator.Fu,
                                          data.outputs.Lx, data.outputs.Lxx, data.outputs.Lu,
                                          contact.lam, contact.lam_x, contact.lam_u)]
    stage.calc_diff(data, xs, us)
    kept = outputs()
    stamp[:] = np.nan
    stage.calc_diff(data, xs, us)
    for a, b in zip(kept, outputs()):
        np.testing.assert_array_equal(a, b)
    stamp[1] = xs[1]
    contact.solved[7][1] += 1.0            # the kept lambda of knot 1, changed
    stage.calc_diff(data, xs, us)
    np.testing.assert_array_equal(contact.lam[1], kept[5][1] + 1.0)
    np.testing.assert_array_equal(contact.lam[0], kept[5][0])


def test_row_sparse_accumulation_matches_the_dense_one():
    """Cost.add accumulates diagonal activations row by row over the non-zero Jacobian
    entries (a row mostly non-zero, an active cone row, along whole rows of Lxx): the
    same Lx, Lu, Lxx, Luu, Lxu as the dense kernel, Lxx symmetric."""
    from geppetto.ocp import costs as C
    dynamics = contact_dynamics(reference=LOCAL_WORLD_ALIGNED)
    xs, us = perturbed_states(dynamics, seed=9)
    model = dynamics.model
    cone = ocp.FrictionConeResidual(dynamics, 0, mu=0.3)
    terms = [ocp.Cost(ocp.StateResidual(dynamics.state, standing_state()),
                      ocp.WeightedQuadratic(np.linspace(0.5, 3.0, 36))),
             ocp.Cost(ocp.StateResidual(dynamics.state),
                      ocp.QuadraticBarrier(-0.1 * np.ones(36), 0.1 * np.ones(36)), weight=3.0),
             ocp.Cost(cone, ocp.QuadraticBarrier(*cone.bounds), weight=10.0),
             ocp.Cost(ocp.FrameTranslationResidual(model, "FR_FOOT", [0.1, 0.2, 0.0]), weight=5.0),
             ocp.Cost(ocp.ControlResidual(12), weight=0.1)]
    stage = ocp.StageModel(dynamics, terms, dt=0.01)

    def derivatives(add):
        outputs = ocp.stage.StageOutputs(np.zeros(K), np.zeros((K, 36)), np.zeros((K, 12)),
                                         np.zeros((K, 36, 36)), np.zeros((K, 12, 12)),
                                         np.zeros((K, 36, 12)))
        data = stage.create_data(K, outputs)
        stage.integrator.calc_diff(data.integrator, xs, us)
        outputs.clear(True)
        for cost, cdata in zip(stage.costs, data.costs):
            add(cost, cdata, data.kinematics, xs, us, 0.01, outputs)
        return outputs, data.costs[2]

    def dense(cost, data, kinematics, xs, us, scale, out):
        cost.residual.calc_diff(data.residual, kinematics, xs, us)
        C._activate(cost.activation.code, data.params, data.residual.r, data.value, data.a_r,
                    data.A_rr)
        C._accumulate(np.full(K, scale * cost.weight), data.value, data.a_r, data.A_rr,
                      data.residual.Rx, data.residual.Ru, out.cost, out.Lx, out.Lu, out.Lxx,
                      out.Luu, out.Lxu, cost.residual.uses_control, True, True,
                      cost.residual.depends_on_state)

    rows, cone_data = derivatives(lambda cost, *args: cost.add(*args, True))
    reference, _ = derivatives(dense)
    active = np.diagonal(cone_data.A_rr, axis1=1, axis2=2) != 0
    mostly_nonzero = 2 * np.count_nonzero(cone_data.residual.Rx, axis=2) >= 36
    assert np.any(active & mostly_nonzero)          # an active row along whole Lxx rows
    assert np.count_nonzero(reference.Lxx) > 0 and np.count_nonzero(reference.Lxu) > 0
    for name in ("cost", "Lx", "Lu", "Lxx", "Luu", "Lxu"):
        a, b = getattr(rows, name), getattr(reference, name)
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13 * np.abs(b).max(), err_msg=name)
    np.testing.assert_array_equal(rows.Lxx, np.swapaxes(rows.Lxx, 1, 2))


def touchdown_problem(targets=True):
    """Flight (3 knots), a touchdown impulse, stance (4 knots), from a falling state;
    ``targets``: with a foot target at the impulse and friction cones in stance, beside
    the state and control regularizations."""
    model = solo12().model
    stance = contact_dynamics(reference=LOCAL_WORLD_ALIGNED)
    flight = ocp.FreeDynamics(model, ocp.Actuation.floating_base(model))
    impulse = ocp.ImpulseDynamics(model, stance.constraints)
    x0 = standing_state()
    x0[model.nq + 2] = -0.3                     # falling at 0.3 m/s
    weights = np.r_[np.full(6, 10.0), np.full(model.nv - 6, 1.0), np.full(model.nv, 0.1)]
    x_reg = ocp.Cost(ocp.StateResidual(stance.state, standing_state()),
                     ocp.WeightedQuadratic(weights))
    u_reg = ocp.Cost(ocp.ControlResidual(stance.nu), weight=1e-3)
    foot = ocp.Cost(ocp.FrameTranslationResidual(model, "FL_FOOT", [0.2, 0.15, 0.0]), weight=10.0)
    cone = ocp.FrictionConeResidual(stance, 0, mu=0.7)
    at_impulse = [foot] if targets else []
    in_stance = [ocp.Cost(cone, ocp.QuadraticBarrier(*cone.bounds), weight=10.0)] if targets \
        else []
    models = ([ocp.StageModel(flight, [x_reg, u_reg], dt=0.01)] * 3
              + [ocp.StageModel(impulse, [x_reg] + at_impulse, dt=1.0)]
              + [ocp.StageModel(stance, [x_reg, u_reg] + in_stance, dt=0.02)] * 4)
    terminal = ocp.TerminalModel(stance.state, [x_reg])
    return ocp.ShootingProblem(x0, models, terminal)


def test_rollout_gradient_through_the_impulse():
    """The gradient of J(us) = cost of rollout(us) assembled by the adjoint recursion
    lambda_t = Lx_t + Fx_t^T lambda_(t+1), dJ/du_t = Lu_t + Fu_t^T lambda_(t+1) (what
    DDP's backward pass uses) matches central differences, impulse knot included."""
    problem = touchdown_problem()
    N = problem.N
    rng = rng_for("touchdown-gradient")
    us = problem.quasi_static(np.repeat(problem.x0[None], N + 1, axis=0))
    us += 0.5 * rng.standard_normal(us.shape)
    xs = problem.rollout(us)
    problem.calc_diff(xs, us)
    lam = problem.Lx[N].copy()
    gradient = np.empty_like(us)
    for t in range(N - 1, -1, -1):
        gradient[t] = problem.Lu[t] + problem.Fu[t].T @ lam
        lam = problem.Lx[t] + problem.Fx[t].T @ lam

    def J(u):
        return problem.calc(problem.rollout(u), u)

    numerical = np.empty_like(us)
    h = 1e-6
    for t in range(N):
        for j in range(problem.nu):
            du = np.zeros_like(us)
            du[t, j] = h
            numerical[t, j] = (J(us + du) - J(us - du)) / (2 * h)
    np.testing.assert_allclose(gradient, numerical, rtol=1e-5, atol=1e-6 * np.abs(numerical).max())
    assert problem.nus[3] == 0 and np.all(gradient[3] == 0.0)       # the impulse: padding
    assert np.abs(gradient[2]).max() > 1e-3


def test_trot_converges():
    """The trot of examples/solo12_trot.py (Crocoddyl's createTrottingProblem, two steps
    of 8 knots at dt = 30 ms, touchdown impulses) converges to th_stop = 1e-9 in 35
    FDDP iterations (27 measured).  With explicit Euler (gait_stages' former default)
    the same problem was not converged after 100 (stop 7e-5): the Gauss-Newton model
    missed most of the curvature near the touchdowns and the steps were halved."""
    from geppetto.examples import solo12_trot
    robot = solo12()
    x0 = np.r_[robot.q0, np.zeros(robot.model.nv)]
    problem = solo12_trot.trotting_problem(robot.model, x0, step_knots=8, dt=0.03)
    assert problem.N == 2 + 8 + 1 + 2 + 8 + 1
    assert all(m.integrator.scheme == "euler" for m in problem.running_models
               if not isinstance(m.dynamics, ocp.ImpulseDynamics))
    xs = np.repeat(x0[None], problem.N + 1, axis=0)
    result = gp.solvers.FDDP(problem).solve(xs, problem.quasi_static(xs), max_iter=35)
    assert result.converged and result.gaps < 1e-10, result
    assert result.stop < 1e-9
