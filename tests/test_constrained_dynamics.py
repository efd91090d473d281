"""Constrained dynamics: contacts and loop closures (issue 8).

Ladder: the constraint Jacobian, drift, ddq, lambda, their derivatives and
impulses against Pinocchio 4.1 (``RigidConstraintModel``,
``constraintDynamics``, ``computeConstraintDynamicsDerivatives``,
``impulseDynamics``) on solo12 (four 3D feet) and talos (two 6D feet), and on
loop closures of a random tree; every derivative against central finite
differences on the manifold; identities (aba with the constraint forces as
f_ext gives ddq, the constraint acceleration vanishes); the four-bar linkage
stays closed along a simulation.  Pinocchio's derivatives differ from the
exact ones in two places (6D LOCAL_WORLD_ALIGNED with Kp != 0, 6D
LOCAL_WORLD_ALIGNED loop closures): there only finite differences judge.
"""
import numpy as np
import pytest

import geppetto as gp
from geppetto.dynamics import LOCAL, LOCAL_WORLD_ALIGNED, numerical_jacobian
from geppetto.dynamics.constrained_dynamics import (constraint_dynamics,
                                                    constraint_dynamics_derivatives,
                                                    impulse_dynamics,
                                                    impulse_dynamics_derivatives)
from geppetto.dynamics.constraint_derivatives import constraint_acceleration_derivatives
from geppetto.dynamics.constraints import (CONTACT_3D, CONTACT_6D, ConstraintSet, RigidConstraint,
                                           constraint_acceleration, constraint_drift,
                                           constraint_forces, constraint_jacobian, contact_3d,
                                           contact_6d, loop_closure, supporting_dofs)

pin = pytest.importorskip("pinocchio")

FEET = {"solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
        "talos": ("left_sole_link", "right_sole_link")}
KIND = {"solo12": CONTACT_3D, "talos": CONTACT_6D}
REFERENCES = {"LOCAL": LOCAL, "LOCAL_WORLD_ALIGNED": LOCAL_WORLD_ALIGNED}
GAINS = {"no gains": (0.0, 0.0), "Kp Kd": (3.0, 2.0)}
DERIVATIVE_NAMES = ("ddq_dq", "ddq_dv", "ddq_dtau", "dlambda_dq", "dlambda_dv", "dlambda_dtau")


# --- Pinocchio twins ---------------------------------------------------------

def pin_constraints(pin_model, constraints):
    """The pin.RigidConstraintModel twins (and their data) of a ConstraintSet."""
    models = []
    for c in constraints:
        kind = pin.ContactType.CONTACT_3D if c.kind == CONTACT_3D else pin.ContactType.CONTACT_6D
        reference = (pin.ReferenceFrame.LOCAL if c.reference == LOCAL
                     else pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        cm = pin.RigidConstraintModel(kind, pin_model, c.joint1, pin.SE3(c.R1, c.p1), c.joint2,
                                      pin.SE3(c.R2, c.p2), reference)
        cm.m_baumgarte_parameters.Kp = c.Kp
        cm.m_baumgarte_parameters.Kd = c.Kd
        models.append(cm)
    return models, [cm.createData() for cm in models]


def pin_constraint_dynamics(case, constraints, q, v, tau, mu=0.0, iterations=1, accuracy=1e-12):
    """(data, models, datas, settings, ddq, lambda) of pin.constraintDynamics."""
    data = case.pin_data()
    models, datas = pin_constraints(case.pin_model, constraints)
    pin.initConstraintDynamics(case.pin_model, data, models, datas)
    settings = pin.ProximalSettings(accuracy, accuracy, mu, iterations)
    ddq = pin.constraintDynamics(case.pin_model, data, q, v, tau, models, datas, settings)
    return data, models, datas, settings, ddq.copy(), data.lambda_c.copy()


def feet_constraints(case, reference, gains, seed=0):
    """The feet of solo12 (3D) or talos (6D) in contact, targets at random placements
    (they only matter through Kp)."""
    rng = np.random.default_rng(seed)
    m = case.model
    return ConstraintSet(m, [
        RigidConstraint(m, KIND[case.name], frame, reference=reference, Kp=gains[0],
                        Kd=gains[1], target=(_rotation(rng), rng.uniform(-0.5, 0.5, 3)))
        for frame in FEET[case.name]])


def _rotation(rng):
    Q, R = np.linalg.qr(rng.standard_normal((3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q * np.linalg.det(Q)


def _tile(q, stack):
    """q repeated for every row of a stack (a stack of states needs a stack of q)."""
    return np.repeat(q[None], len(stack), axis=0)


def random_state(case, seed=0):
    s = case.states(1, seed)
    return s.q[0], s.v[0], s.tau[0]


@pytest.fixture(scope="module", params=sorted(FEET))
def robot_case(request, load_case):
    return load_case(request.param)


@pytest.fixture(scope="module")
def tree_case(load_case):
    return load_case("random_tree")


# Frames of random_tree(12, seed=3) on two branches, and on one chain (frame3's
# joint is an ancestor of frame8's).
LOOPS = {"branches": ("frame6", "frame9"), "chain": ("frame8", "frame3"),
         "across the root": ("frame5", "frame11")}


# --- The constraint model ------------------------------------------------------

@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("gains", GAINS)
def test_jacobian_and_drift_match_pinocchio(robot_case, reference, gains, assert_close):
    cs = feet_constraints(robot_case, REFERENCES[reference], GAINS[gains])
    q, v, tau = random_state(robot_case)
    data = robot_case.data()
    pdata, models, datas, _, _, _ = pin_constraint_dynamics(robot_case, cs, q, v, tau)
    assert_close(constraint_jacobian(robot_case.model, data, q, cs),
                 pin.getConstraintsJacobian(robot_case.pin_model, pdata, models, datas), 1e-12,
                 "Jc")
    # Pinocchio's right-hand side of the constraint rows is -gamma
    assert_close(constraint_drift(robot_case.model, data, q, v, cs), -pdata.primal_rhs_contact,
                 1e-12, "gamma")


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("size", (3, 6))
@pytest.mark.parametrize("reference", REFERENCES)
def test_loop_closure_jacobian_and_drift_match_pinocchio(tree_case, loop, size, reference,
                                                         assert_close):
    m = tree_case.model
    cs = ConstraintSet(m, [loop_closure(m, *LOOPS[loop], size=size,
                                        reference=REFERENCES[reference], Kp=3.0, Kd=2.0)])
    q, v, tau = random_state(tree_case, 1)
    pdata, models, datas, _, _, _ = pin_constraint_dynamics(tree_case, cs, q, v, tau)
    data = tree_case.data()
    assert_close(constraint_jacobian(m, data, q, cs),
                 pin.getConstraintsJacobian(tree_case.pin_model, pdata, models, datas), 1e-12,
                 "Jc")
    assert_close(constraint_drift(m, data, q, v, cs), -pdata.primal_rhs_contact, 1e-11, "gamma")


# --- Forward dynamics -----------------------------------------------------------

@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("gains", GAINS)
def test_constraint_dynamics_matches_pinocchio(robot_case, reference, gains, assert_close):
    cs = feet_constraints(robot_case, REFERENCES[reference], GAINS[gains])
    data = robot_case.data()
    for seed in range(3):
        q, v, tau = random_state(robot_case, seed)
        ddq, lam = constraint_dynamics(robot_case.model, data, q, v, tau, cs)
        _, _, _, _, pin_ddq, pin_lam = pin_constraint_dynamics(robot_case, cs, q, v, tau)
        assert_close(ddq, pin_ddq, 1e-9, "ddq")
        assert_close(lam, pin_lam, 1e-9, "lambda")


@pytest.mark.parametrize("loop", LOOPS)
def test_loop_closure_dynamics_matches_pinocchio(tree_case, loop, assert_close):
    m = tree_case.model
    q, v, tau = random_state(tree_case, 1)
    for size, reference in ((3, LOCAL), (3, LOCAL_WORLD_ALIGNED), (6, LOCAL)):
        cs = ConstraintSet(m, [loop_closure(m, *LOOPS[loop], size=size, reference=reference,
                                            Kp=3.0, Kd=2.0)])
        try:
            ddq, lam = constraint_dynamics(m, tree_case.data(), q, v, tau, cs)
        except ValueError:
            # a 6D closure of two frames whose chains have fewer than 6 dofs
            assert size == 6
            continue
        _, _, _, _, pin_ddq, pin_lam = pin_constraint_dynamics(tree_case, cs, q, v, tau)
        assert_close(ddq, pin_ddq, 1e-9, f"ddq size {size}")
        assert_close(lam, pin_lam, 1e-9, f"lambda size {size}")


def test_constraint_forces_and_acceleration_identities(robot_case, assert_close):
    """aba with lambda's forces as f_ext is ddq; the constraint acceleration vanishes;
    lambda's generalized force is Jc^T lambda."""
    m = robot_case.model
    data = robot_case.data()
    cs = feet_constraints(robot_case, LOCAL_WORLD_ALIGNED, (3.0, 2.0))
    q, v, tau = random_state(robot_case, 4)
    ddq, lam = constraint_dynamics(m, data, q, v, tau, cs)
    f_ext = constraint_forces(m, data, q, lam, cs)
    assert_close(gp.dynamics.aba(m, data, q, v, tau, f_ext=f_ext), ddq, 1e-9, "aba(f_ext)")
    assert_close(constraint_acceleration(m, data, q, v, ddq, cs), np.zeros(cs.size), 1e-9,
                 "c(q, v, ddq)")
    Jc = constraint_jacobian(m, data, q, cs)
    zero = np.zeros(m.nv)
    generalized = (gp.dynamics.rnea(m, data, q, zero, zero)
                   - gp.dynamics.rnea(m, data, q, zero, zero, f_ext=f_ext))
    assert_close(generalized, Jc.T @ lam, 1e-10, "J^T lambda")


def test_stacks_equal_single_states(robot_case, assert_close):
    m = robot_case.model
    cs = feet_constraints(robot_case, LOCAL, (0.0, 2.0))
    s = robot_case.states(3, seed=5)
    data = robot_case.data()
    ddq, lam = constraint_dynamics(m, data, s.q, s.v, s.tau, cs)
    derivatives = constraint_dynamics_derivatives(m, data, s.q, s.v, s.tau, cs)
    assert ddq.shape == (3, m.nv) and lam.shape == (3, cs.size)
    for k in range(3):
        one = constraint_dynamics(m, robot_case.data(), s.q[k], s.v[k], s.tau[k], cs)
        assert_close(ddq[k], one[0], 1e-12, "ddq")
        assert_close(lam[k], one[1], 1e-12, "lambda")
        single = constraint_dynamics_derivatives(m, robot_case.data(), s.q[k], s.v[k],
                                                 s.tau[k], cs)
        for name, stacked, alone in zip(DERIVATIVE_NAMES, derivatives, single):
            assert_close(stacked[k], alone, 1e-12, name)
    # results the caller holds are never reused by the next call on the same data;
    # dropped ones are (validation.output_arrays)
    kept = [x.copy() for x in derivatives]
    again = constraint_dynamics_derivatives(m, data, s.q[::-1].copy(), s.v, s.tau, cs)
    for held, copy, new in zip(derivatives, kept, again):
        assert np.array_equal(held, copy) and not np.shares_memory(held, new)
    address = again[0].ctypes.data
    del again, new  # the loop's variable holds one of them
    assert constraint_dynamics_derivatives(m, data, s.q, s.v, s.tau, cs)[0].ctypes.data == address


# --- Derivatives -------------------------------------------------------------------

def _fd_constraint_dynamics(m, cs, q, v, tau, **settings):
    """Central differences (on the manifold for q) of (ddq, lambda)."""
    nv = m.nv
    data = m.create_data()

    def both(qs, vs, taus):
        ddq, lam = constraint_dynamics(m, data, qs, vs, taus, cs, **settings)
        return np.concatenate([ddq, lam], axis=-1)

    d_dq = numerical_jacobian(lambda qs: both(qs, v, tau), q, model=m)
    d_dv = numerical_jacobian(lambda vs: both(_tile(q, vs), vs, tau), v)
    d_dtau = numerical_jacobian(lambda ts: both(_tile(q, ts), v, ts), tau)
    return (d_dq[:nv], d_dv[:nv], d_dtau[:nv], d_dq[nv:], d_dv[nv:], d_dtau[nv:])


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("gains", GAINS)
def test_derivatives_match_pinocchio(robot_case, reference, gains, assert_close):
    m = robot_case.model
    cs = feet_constraints(robot_case, REFERENCES[reference], GAINS[gains])
    q, v, tau = random_state(robot_case, 2)
    ours = constraint_dynamics_derivatives(m, robot_case.data(), q, v, tau, cs)
    if robot_case.name == "talos" and reference == "LOCAL_WORLD_ALIGNED" and gains == "Kp Kd":
        # Pinocchio 4.1 leaves out the rotation of the 6D LOCAL_WORLD_ALIGNED corrector:
        # here the oracle is central finite differences
        for name, a, b in zip(DERIVATIVE_NAMES, ours, _fd_constraint_dynamics(m, cs, q, v, tau)):
            assert_close(a, b, 1e-5, name)
        return
    pdata, models, datas, settings, _, _ = pin_constraint_dynamics(robot_case, cs, q, v, tau)
    theirs = pin.computeConstraintDynamicsDerivatives(robot_case.pin_model, pdata, models, datas,
                                                      settings)
    for name, a, b in zip(DERIVATIVE_NAMES, ours, theirs):
        assert_close(a, b, 1e-8, name)


@pytest.mark.parametrize("reference", REFERENCES)
def test_derivatives_match_finite_differences(robot_case, reference, assert_close):
    m = robot_case.model
    cs = feet_constraints(robot_case, REFERENCES[reference], (3.0, 2.0))
    q, v, tau = random_state(robot_case, 3)
    ours = constraint_dynamics_derivatives(m, robot_case.data(), q, v, tau, cs)
    for name, a, b in zip(DERIVATIVE_NAMES, ours, _fd_constraint_dynamics(m, cs, q, v, tau)):
        assert_close(a, b, 1e-5, name)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("reference", REFERENCES)
def test_loop_closure_derivatives_match_finite_differences(tree_case, loop, reference,
                                                           assert_close):
    m = tree_case.model
    q, v, tau = random_state(tree_case, 1)
    for size in (3, 6):
        cs = ConstraintSet(m, [loop_closure(m, *LOOPS[loop], size=size,
                                            reference=REFERENCES[reference], Kp=3.0, Kd=2.0)])
        try:
            ours = constraint_dynamics_derivatives(m, tree_case.data(), q, v, tau, cs)
        except ValueError:
            assert size == 6
            continue
        fd = _fd_constraint_dynamics(m, cs, q, v, tau)
        for name, a, b in zip(DERIVATIVE_NAMES, ours, fd):
            assert_close(a, b, 1e-5, f"{name} size {size}")
        if reference == "LOCAL":
            pdata, models, datas, settings, _, _ = pin_constraint_dynamics(tree_case, cs, q, v,
                                                                           tau)
            theirs = pin.computeConstraintDynamicsDerivatives(tree_case.pin_model, pdata, models,
                                                              datas, settings)
            for name, a, b in zip(DERIVATIVE_NAMES, ours, theirs):
                assert_close(a, b, 1e-8, f"{name} size {size} vs Pinocchio")


@pytest.mark.parametrize("name", ["solo12", "talos", "random_tree"])
def test_supporting_dofs_are_the_dofs_of_pinocchios_supports(load_case, name):
    """supporting_dofs (the kernels' supports predicate) against Pinocchio's
    model.supports (the joints from the root to the joint), on every joint."""
    case = load_case(name)
    pm = case.pin_model
    for joint in range(1, pm.njoints):
        expected = [pm.joints[j].idx_v + r for j in pm.supports[joint] if j > 0
                    for r in range(pm.joints[j].nv)]
        assert supporting_dofs(case.model, joint) == sorted(expected)
    assert len(supporting_dofs(case.model, pm.njoints - 1)) > 1


def test_constraint_acceleration_derivatives(load_case, assert_close):
    """dc/dq, dc/dv by central differences; dc/da = Jc; 6D contacts on a free-flyer
    tree, loop closures on a fixed-base one."""
    for name, make in (("random_tree_ff", lambda m: [contact_6d(m, "frame4", Kp=2.0, Kd=1.0),
                                                     contact_3d(m, "frame7", LOCAL_WORLD_ALIGNED,
                                                                Kp=2.0, Kd=1.0)]),
                       ("random_tree", lambda m: [loop_closure(m, "frame6", "frame9", 6,
                                                               LOCAL_WORLD_ALIGNED, 3.0, 2.0)])):
        case = load_case(name)
        m = case.model
        cs = ConstraintSet(m, make(m))
        s = case.states(1, seed=6)
        q, v, a = s.q[0], s.v[0], s.a[0]
        data = case.data()
        dc_dq, dc_dv, dc_da = constraint_acceleration_derivatives(m, data, q, v, a, cs)
        assert_close(dc_da, constraint_jacobian(m, data, q, cs), 1e-14, "dc_da")
        fd_dq = numerical_jacobian(lambda qs: constraint_acceleration(m, data, qs, v, a, cs), q,
                                   model=m)
        fd_dv = numerical_jacobian(
            lambda vs: constraint_acceleration(m, data, _tile(q, vs), vs, a, cs), v)
        assert_close(dc_dq, fd_dq, 1e-6, f"{name} dc_dq")
        assert_close(dc_dv, fd_dv, 1e-6, f"{name} dc_dv")


# --- Redundant constraints: the proximal variant --------------------------------

def test_proximal_variant_on_redundant_constraints(load_case, assert_close):
    """A foot listed twice: G is singular, mu = 0 refuses, mu > 0 gives the ddq of the
    foot listed once, splits its force in two equal halves, and matches Pinocchio."""
    case = load_case("solo12")
    m = case.model
    feet = list(FEET["solo12"])
    once = ConstraintSet(m, [contact_3d(m, f, Kd=2.0) for f in feet])
    twice = ConstraintSet(m, [contact_3d(m, f, Kd=2.0) for f in feet + feet[:1]])
    q, v, tau = random_state(case, 7)
    data = case.data()
    with pytest.raises(ValueError, match="redundant"):
        constraint_dynamics(m, data, q, v, tau, twice)
    ddq, lam = constraint_dynamics(m, data, q, v, tau, once)
    prox = dict(mu=1e-4, max_iterations=50, accuracy=1e-13)
    ddq2, lam2 = constraint_dynamics(m, data, q, v, tau, twice, **prox)
    assert_close(ddq2, ddq, 1e-9, "ddq")
    assert_close(lam2[:3] + lam2[12:], lam[:3], 1e-9, "total force of the doubled foot")
    assert_close(lam2[:3], lam2[12:], 1e-6, "equal halves")
    _, _, _, _, pin_ddq, pin_lam = pin_constraint_dynamics(case, twice, q, v, tau, 1e-4, 50,
                                                           1e-13)
    assert_close(ddq2, pin_ddq, 1e-9, "ddq vs Pinocchio")
    assert_close(lam2, pin_lam, 1e-8, "lambda vs Pinocchio")
    # ddq's derivatives do not depend on how lambda is split
    exact = constraint_dynamics_derivatives(m, data, q, v, tau, once)
    proximal = constraint_dynamics_derivatives(m, data, q, v, tau, twice, **prox)
    for name, a, b in zip(DERIVATIVE_NAMES[:3], proximal, exact):
        assert_close(a, b, 1e-7, name)


def test_proximal_iterations_match_pinocchio(load_case, assert_close):
    """A fixed number of damped iterations (accuracy 0) on talos: values and
    derivatives as Pinocchio's."""
    case = load_case("talos")
    cs = feet_constraints(case, LOCAL, (0.0, 2.0))
    q, v, tau = random_state(case, 8)
    settings = dict(mu=1e-3, max_iterations=4, accuracy=0.0)
    data = case.data()
    ddq, lam = constraint_dynamics(case.model, data, q, v, tau, cs, **settings)
    assert data.constraint_iterations[0] == 4
    ours = constraint_dynamics_derivatives(case.model, data, q, v, tau, cs, **settings)
    pdata, models, datas, pin_settings, pin_ddq, pin_lam = pin_constraint_dynamics(
        case, cs, q, v, tau, 1e-3, 4, 0.0)
    assert pin_settings.iter == 4
    assert_close(ddq, pin_ddq, 1e-9, "ddq")
    assert_close(lam, pin_lam, 1e-9, "lambda")
    theirs = pin.computeConstraintDynamicsDerivatives(case.pin_model, pdata, models, datas,
                                                      pin_settings)
    for name, a, b in zip(DERIVATIVE_NAMES, ours, theirs):
        assert_close(a, b, 1e-8, name)


# --- Impulses --------------------------------------------------------------------

@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("restitution", (0.0, 0.4))
def test_impulse_dynamics_matches_pinocchio(robot_case, reference, restitution, assert_close):
    m = robot_case.model
    cs = feet_constraints(robot_case, REFERENCES[reference], (0.0, 0.0))
    q, v, _ = random_state(robot_case, 9)
    data = robot_case.data()
    v_after, impulse = impulse_dynamics(m, data, q, v, cs, restitution)
    derivatives = impulse_dynamics_derivatives(m, data, q, v, cs, restitution)
    pdata = robot_case.pin_data()
    models, datas = pin_constraints(robot_case.pin_model, cs)
    pin.initConstraintDynamics(robot_case.pin_model, pdata, models, datas)
    settings = pin.ProximalSettings(1e-12, 1e-12, 0.0, 1)
    pin_v = pin.impulseDynamics(robot_case.pin_model, pdata, q, v, models, datas, restitution,
                                settings)
    assert_close(v_after, pin_v, 1e-9, "v after")
    assert_close(impulse, pdata.impulse_c, 1e-9, "impulse")
    assert_close(constraint_jacobian(m, data, q, cs) @ v_after,
                 -restitution * constraint_jacobian(m, data, q, cs) @ v, 1e-10, "Jc v+")
    pin.computeImpulseDynamicsDerivatives(robot_case.pin_model, pdata, models, datas,
                                          restitution, settings)
    # Pinocchio's ddq_dv is the derivative of the jump v+ - v-
    theirs = (pdata.ddq_dq, pdata.ddq_dv + np.eye(m.nv), pdata.dlambda_dq, pdata.dlambda_dv)
    names = ("dv_dq", "dv_dv", "dimpulse_dq", "dimpulse_dv")
    for name, a, b in zip(names, derivatives, theirs):
        assert_close(a, b, 1e-8, name)

    def both(qs, vs):
        va, imp = impulse_dynamics(m, data, qs, vs, cs, restitution)
        return np.concatenate([va, imp], axis=-1)

    fd_dq = numerical_jacobian(lambda qs: both(qs, v), q, model=m)
    fd_dv = numerical_jacobian(lambda vs: both(_tile(q, vs), vs), v)
    nv = m.nv
    for name, a, b in zip(names, derivatives, (fd_dq[:nv], fd_dv[:nv], fd_dq[nv:], fd_dv[nv:])):
        assert_close(a, b, 1e-5, f"{name} vs finite differences")


def test_impulse_on_a_loop_closure_stops_the_relative_motion(tree_case, assert_close):
    m = tree_case.model
    cs = ConstraintSet(m, [loop_closure(m, "frame6", "frame9", size=3)])
    q, v, _ = random_state(tree_case, 10)
    data = tree_case.data()
    v_after, impulse = impulse_dynamics(m, data, q, v, cs)
    assert_close(constraint_jacobian(m, data, q, cs) @ v_after, np.zeros(3), 1e-10, "Jc v+")
    # the jump is the impulse's: M (v+ - v-) = Jc^T impulse
    M = gp.dynamics.crba(m, data, q)
    assert_close(M @ (v_after - v), constraint_jacobian(m, data, q, cs).T @ impulse, 1e-10,
                 "momentum")
    derivatives = impulse_dynamics_derivatives(m, data, q, v, cs)
    fd_dq = numerical_jacobian(lambda qs: impulse_dynamics(m, data, qs, v, cs)[0], q, model=m)
    assert_close(derivatives[0], fd_dq, 1e-5, "dv_dq")


# --- The four-bar linkage ---------------------------------------------------------

def _simulate_four_bar(Kp, Kd, dt=5e-3, duration=2.0):
    """RK4 from the assembled configuration with the crank at 3 rad/s and no torque;
    returns the distance between the two halves of the cut pin and the crank angle
    at every step."""
    m = gp.robots.four_bar()
    data = m.create_data()
    # the 3D closure of a planar linkage has one redundant row (along the axes):
    # the proximal variant handles it
    cs = ConstraintSet(m, [loop_closure(m, "coupler_tip", "rocker_tip", size=3, Kp=Kp, Kd=Kd)])
    q = m.reference_configurations["assembled"].copy()
    Jc = constraint_jacobian(m, data, q, cs)
    v = np.array([3.0, 0.0, 0.0])
    v[1:] = -np.linalg.lstsq(Jc[:, 1:], Jc[:, 0] * v[0], rcond=None)[0]
    tau = np.zeros(3)

    def f(q, v):
        return constraint_dynamics(m, data, q, v, tau, cs, mu=1e-9, max_iterations=5)[0]

    def step(q, dv):
        return gp.dynamics.integrate(m, q, dv)

    gaps, crank = [], []
    for _ in range(int(round(duration / dt))):
        a1 = f(q, v)
        v2 = v + dt / 2 * a1
        a2 = f(step(q, dt / 2 * v), v2)
        v3 = v + dt / 2 * a2
        a3 = f(step(q, dt / 2 * v2), v3)
        v4 = v + dt * a3
        a4 = f(step(q, dt * v3), v4)
        q = step(q, dt / 6 * (v + 2 * v2 + 2 * v3 + v4))
        v = v + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        p1 = gp.dynamics.frame_placement(m, data, "coupler_tip", q)[1]
        p2 = gp.dynamics.frame_placement(m, data, "rocker_tip", q)[1]
        gaps.append(np.linalg.norm(p1 - p2))
        crank.append(q[0])
    return np.array(gaps), np.array(crank)


def test_four_bar_stays_closed_with_baumgarte_gains():
    """Without gains the integration error accumulates in the closure; with Kp = 100,
    Kd = 20 (critically damped, 10 rad/s) it stays bounded, orders of magnitude lower."""
    free, _ = _simulate_four_bar(0.0, 0.0)
    corrected, crank = _simulate_four_bar(100.0, 20.0)
    half = len(free) // 2
    assert free[-1] > 2 * free[:half].max(), "without gains the drift grows"
    assert corrected.max() < 1e-7
    assert corrected[half:].max() < 2 * corrected[:half].max() + 1e-9, "bounded"
    assert corrected.max() < 1e-2 * free.max()
    # the linkage moved through a large part of its range
    assert crank.max() - crank.min() > 1.0


# --- Bad input ---------------------------------------------------------------------

def test_bad_constraints_are_refused(load_case):
    m = load_case("solo12").model
    with pytest.raises(ValueError, match="WORLD"):
        contact_3d(m, "FL_FOOT", reference="WORLD")
    with pytest.raises(KeyError, match="NO_FOOT"):
        contact_3d(m, "NO_FOOT")
    with pytest.raises(ValueError, match="universe"):
        contact_6d(m, "universe")
    with pytest.raises(ValueError, match="same joint"):
        loop_closure(m, "FL_FOOT", "FL_KFE")
    with pytest.raises(ValueError, match="Kd"):
        contact_3d(m, "FL_FOOT", Kd=-1.0)
    with pytest.raises(ValueError, match="kind"):
        RigidConstraint(m, 4, "FL_FOOT")
    with pytest.raises(ValueError, match="orthonormal"):
        contact_6d(m, "FL_FOOT", target=(2 * np.eye(3), np.zeros(3)))
    cs = ConstraintSet(m, [contact_3d(m, "FL_FOOT")])
    other = load_case("talos").model
    with pytest.raises(ValueError, match="does not belong to model"):
        constraint_dynamics(other, other.create_data(), gp.dynamics.neutral(other),
                            np.zeros(other.nv), np.zeros(other.nv), cs)
    q = gp.dynamics.neutral(m)
    with pytest.raises(ValueError, match="lam"):
        constraint_forces(m, m.create_data(), q, np.zeros(4), cs)
    with pytest.raises(ValueError, match="mu"):
        constraint_dynamics(m, m.create_data(), q, np.zeros(m.nv), np.zeros(m.nv), cs, mu=-1.0)
    with pytest.raises(ValueError, match="restitution"):
        impulse_dynamics(m, m.create_data(), q, np.zeros(m.nv), cs, restitution=2.0)


def test_parallel_phase_kernels_equal_the_serial_ones(load_case, assert_close):
    """The prange kernels a contact stage runs on a phase give the serial results."""
    from geppetto.dynamics.constrained_dynamics import (
        constraint_dynamics_derivatives_parallel, constraint_dynamics_parallel)
    case = load_case("solo12")
    m = case.model
    cs = feet_constraints(case, LOCAL, (0.0, 2.0))
    s = case.states(5, seed=11)
    K, nv, nc = 5, m.nv, cs.size
    data = m.create_data()
    data.resize(K)
    ddq, lam = constraint_dynamics(m, m.create_data(), s.q, s.v, s.tau, cs)
    derivatives = constraint_dynamics_derivatives(m, m.create_data(), s.q, s.v, s.tau, cs)
    for n_chunks in (1, 3):
        lam_p, iterations, regular = np.empty((K, nc)), np.zeros(K, np.int64), np.zeros(K, bool)
        constraint_dynamics_parallel(m.arrays, cs.arrays, s.q, s.v, s.tau, 0.0, 1, 1e-12,
                                     data.liR, data.lip, data.oR, data.op, data.J, data.Ycrb,
                                     data.M, data.ddq, lam_p, iterations, regular, n_chunks)
        assert regular.all()
        assert_close(data.ddq, ddq, 1e-14, "ddq")
        assert_close(lam_p, lam, 1e-14, "lambda")
        out = [np.empty((K, nv, nv)) for _ in range(3)] + [np.empty((K, nc, nv)) for _ in range(3)]
        constraint_dynamics_derivatives_parallel(
            m.arrays, cs.arrays, s.q, s.v, s.tau, 0.0, 1, 1e-12, data.liR, data.lip, data.oR,
            data.op, data.J, data.Ycrb, data.M, data.ddq, lam_p, iterations, regular, *out,
            n_chunks)
        for name, a, b in zip(DERIVATIVE_NAMES, out, derivatives):
            assert_close(a, b, 1e-14, name)


def test_copies_keep_the_constraint_arrays_read_only(load_case):
    """A pickled or deep-copied ConstraintSet (a Dask worker's, a builder's closure) and
    an ImpulseDynamics keep the kernels' arrays read-only, with the packings cached on
    the set: NumPy unpickles read-only arrays writable, which Numba types apart (every
    constrained kernel would compile again for the copy)."""
    import copy
    import pickle

    from geppetto.dynamics.constrained_dynamics import _without_gains
    from geppetto.dynamics.constraint_lanes import contact_chains
    case = load_case("solo12")
    m = case.model
    cs = ConstraintSet(m, [contact_3d(m, f, Kd=2.0) for f in FEET["solo12"]])
    contact_chains(m, cs)
    _without_gains(cs)
    impulse = gp.ocp.ImpulseDynamics(m, cs)
    for label, copied in (("deep copy", copy.deepcopy(cs)), ("pickled", pickle.loads(pickle.dumps(cs)))):
        arrays = [*copied.arrays, *copied._lanes_chains, *copied._arrays_without_gains]
        frozen = [a for a in arrays if isinstance(a, np.ndarray)]
        assert len(frozen) > 15, label
        assert not any(a.flags.writeable for a in frozen), label
        assert np.array_equal(copied.arrays.joint1, cs.arrays.joint1), label
    for label, copied in (("deep copy", copy.deepcopy(impulse)),
                          ("pickled", pickle.loads(pickle.dumps(impulse)))):
        arrays = [*copied.arrays_without_gravity, *copied.constraints_without_gains]
        frozen = [a for a in arrays if isinstance(a, np.ndarray)]
        assert not any(a.flags.writeable for a in frozen), label
