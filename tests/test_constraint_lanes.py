"""Constraint dynamics across SIMD lanes (dynamics/constraint_lanes.py, issue 15).

``constraint_dynamics_batch`` ((K, n) stacks) and ``constraint_dynamics_lanes``
((n, K) layout) against Pinocchio 4.1's ``constraintDynamics`` state by state and
against the stack kernel ``constraint_dynamics``, on solo12 (four 3D feet), talos
(two 6D soles) and a built-in random tree on a free flyer with every joint type and
armature (3D and 6D contacts mixed), LOCAL and LOCAL_WORLD_ALIGNED, with and
without Baumgarte gains, mu = 0 and the proximal iterations; the refusals.  Every
call runs one compiled specialization (two full tiles and a padded one)."""
import numpy as np
import pytest

import geppetto.dynamics as gd
from geppetto.dynamics import LOCAL, LOCAL_WORLD_ALIGNED, lane_tiles
from geppetto.dynamics.constraints import CONTACT_3D, ConstraintSet, RigidConstraint

pin = pytest.importorskip("pinocchio")

N_STATES = 2 * lane_tiles.TILE + 5
RTOL = 1e-12
FEET = {"solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
        "talos": ("left_sole_link", "right_sole_link")}
REFERENCES = {"LOCAL": LOCAL, "LOCAL_WORLD_ALIGNED": LOCAL_WORLD_ALIGNED}
GAINS = {"no gains": (0.0, 0.0), "Kp Kd": (3.0, 2.0)}


def _rotation(rng):
    Q, R = np.linalg.qr(rng.standard_normal((3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q * np.linalg.det(Q)


def contacts(case, reference, gains, seed=0):
    """solo12's feet (3D), talos' soles (6D), or on random_tree_ff a 6D contact, a 3D
    one in the other reference and a 3D one on a third branch; targets at random
    placements (they matter through Kp)."""
    rng = np.random.default_rng(seed)
    m = case.model
    if case.name in FEET:
        kinds = [CONTACT_3D if case.name == "solo12" else 6] * len(FEET[case.name])
        frames, references = FEET[case.name], [reference] * len(kinds)
    else:
        other = LOCAL if reference == LOCAL_WORLD_ALIGNED else LOCAL_WORLD_ALIGNED
        frames, kinds, references = ("frame5", "frame7", "frame9"), (6, 3, 3), \
            (reference, other, reference)
    return ConstraintSet(m, [
        RigidConstraint(m, kind, frame, reference=ref, Kp=gains[0], Kd=gains[1],
                        target=(_rotation(rng), rng.uniform(-0.5, 0.5, 3)))
        for frame, kind, ref in zip(frames, kinds, references)])


def pin_constraint_models(case, cs):
    """The RigidConstraintModel twins of ``cs``, their datas and a Data initialized for
    them (pin.initConstraintDynamics)."""
    models = []
    for c in cs:
        kind = pin.ContactType.CONTACT_3D if c.kind == CONTACT_3D else pin.ContactType.CONTACT_6D
        reference = (pin.ReferenceFrame.LOCAL if c.reference == LOCAL
                     else pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        cm = pin.RigidConstraintModel(kind, case.pin_model, c.joint1, pin.SE3(c.R1, c.p1),
                                      c.joint2, pin.SE3(c.R2, c.p2), reference)
        cm.m_baumgarte_parameters.Kp = c.Kp
        cm.m_baumgarte_parameters.Kd = c.Kd
        models.append(cm)
    datas = [cm.createData() for cm in models]
    data = case.pin_data()
    pin.initConstraintDynamics(case.pin_model, data, models, datas)
    return models, datas, data


def pin_constraint_dynamics(case, cs, q, v, tau, mu=0.0, iterations=1, accuracy=1e-12):
    """(ddq, lambda) of pin.constraintDynamics with the RigidConstraintModel twins."""
    models, datas, data = pin_constraint_models(case, cs)
    settings = pin.ProximalSettings(accuracy, accuracy, mu, iterations)
    ddq = pin.constraintDynamics(case.pin_model, data, q, v, tau, models, datas, settings)
    return ddq.copy(), data.lambda_c.copy()


@pytest.fixture(scope="module", params=("solo12", "talos", "random_tree_ff"))
def contact_case(request, load_case):
    return load_case(request.param)


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("gains", GAINS)
def test_batch_matches_pinocchio_and_the_stack_kernel(contact_case, reference, gains,
                                                      assert_close):
    case = contact_case
    cs = contacts(case, REFERENCES[reference], GAINS[gains])
    s = case.states(N_STATES)
    ddq, lam = gd.constraint_dynamics_batch(case.model, s.q, s.v, s.tau, cs)
    assert ddq.shape == (N_STATES, case.model.nv) and lam.shape == (N_STATES, cs.size)
    stack_ddq, stack_lam = gd.constraint_dynamics(case.model, case.data(), s.q, s.v, s.tau, cs)
    assert_close(ddq, stack_ddq, RTOL, "ddq vs the stack kernel")
    assert_close(lam, stack_lam, RTOL, "lambda vs the stack kernel")
    for k in (0, 1, 63, 64, 100, N_STATES - 1):  # both tiles, the padded one's last state
        pin_ddq, pin_lam = pin_constraint_dynamics(case, cs, s.q[k], s.v[k], s.tau[k])
        assert_close(ddq[k], pin_ddq, RTOL, f"ddq state {k} vs Pinocchio")
        assert_close(lam[k], pin_lam, RTOL, f"lambda state {k} vs Pinocchio")
    # the lanes layout: the same kernel, the same bits
    ddq_t, lam_t = gd.constraint_dynamics_lanes(case.model, s.q.T, s.v.T, s.tau.T, cs)
    np.testing.assert_array_equal(ddq_t, ddq.T)
    np.testing.assert_array_equal(lam_t, lam.T)


def test_proximal_iterations_match_the_stack_kernel_state_by_state(load_case, assert_close):
    """solo12 with a foot listed twice (G singular: mu = 0 refuses) and talos with a fixed
    number of damped iterations: each lane stops at its own iteration, as the stack
    kernel's state; values as Pinocchio's."""
    case = load_case("solo12")
    m = case.model
    feet = list(FEET["solo12"])
    twice = ConstraintSet(m, [gd.contact_3d(m, f, Kd=2.0) for f in feet + feet[:1]])
    s = case.states(N_STATES, seed=7)
    with pytest.raises(ValueError, match="redundant"):
        gd.constraint_dynamics_batch(m, s.q, s.v, s.tau, twice)
    for name, cs, settings in (
            ("solo12", twice, dict(mu=1e-4, max_iterations=50, accuracy=1e-13)),
            ("talos", None, dict(mu=1e-3, max_iterations=4, accuracy=0.0))):
        case = load_case(name)
        cs = cs or contacts(case, LOCAL, (0.0, 2.0))
        s = case.states(N_STATES, seed=8)
        ddq, lam, iterations = gd.constraint_dynamics_batch(case.model, s.q, s.v, s.tau, cs,
                                                            return_iterations=True, **settings)
        data = case.data()
        stack_ddq, stack_lam = gd.constraint_dynamics(case.model, data, s.q, s.v, s.tau, cs,
                                                      **settings)
        np.testing.assert_array_equal(iterations, data.constraint_iterations)
        assert_close(ddq, stack_ddq, RTOL, f"{name} proximal ddq vs the stack kernel")
        assert_close(lam, stack_lam, 1e-10, f"{name} proximal lambda vs the stack kernel")
        pin_ddq, pin_lam = pin_constraint_dynamics(
            case, cs, s.q[3], s.v[3], s.tau[3], settings["mu"], settings["max_iterations"],
            settings["accuracy"])
        assert_close(ddq[3], pin_ddq, 1e-9, f"{name} proximal ddq vs Pinocchio")
        assert_close(lam[3], pin_lam, 1e-8, f"{name} proximal lambda vs Pinocchio")
    assert set(iterations) == {4}


def test_bad_input_is_refused(load_case):
    case = load_case("random_tree_ff")
    m = case.model
    s = case.states(3)
    cs = contacts(case, LOCAL, (0.0, 0.0))
    loop = ConstraintSet(m, [gd.loop_closure(m, "frame5", "frame9", size=3)])
    with pytest.raises(NotImplementedError, match="loop closure"):
        gd.constraint_dynamics_batch(m, s.q, s.v, s.tau, loop)
    with pytest.raises(ValueError, match="stack"):
        gd.constraint_dynamics_batch(m, s.q[0], s.v[0], s.tau[0], cs)
    with pytest.raises(ValueError, match="tau"):
        gd.constraint_dynamics_batch(m, s.q, s.v, s.tau[:2], cs)
    with pytest.raises(ValueError, match="mu"):
        gd.constraint_dynamics_batch(m, s.q, s.v, s.tau, cs, mu=-1.0)
    with pytest.raises(ValueError, match=r"\(nq, K\)|shape"):
        gd.constraint_dynamics_lanes(m, s.q, s.v.T, s.tau.T, cs)
    bad = s.q.T.copy()
    bad[3:7] *= 2.0  # the free flyer's quaternion
    with pytest.raises(ValueError, match="norm"):
        gd.constraint_dynamics_lanes(m, bad, s.v.T, s.tau.T, cs)


def test_short_stacks_and_no_contacts(load_case, assert_close):
    """A stack of one state (one padded tile) equals the stack kernel; with no contact
    the solve is the unconstrained one (ABA) and lambda is empty."""
    case = load_case("solo12")
    m = case.model
    s = case.states(3, seed=2)
    cs = ConstraintSet(m, [gd.contact_3d(m, "FL_FOOT")])
    ddq, lam = gd.constraint_dynamics_batch(m, s.q[:1], s.v[:1], s.tau[:1], cs)
    stack_ddq, stack_lam = gd.constraint_dynamics(m, case.data(), s.q[:1], s.v[:1], s.tau[:1], cs)
    assert_close(ddq, stack_ddq, RTOL, "ddq, one state")
    assert_close(lam, stack_lam, RTOL, "lambda, one state")
    ddq, lam = gd.constraint_dynamics_batch(m, s.q, s.v, s.tau, ConstraintSet(m, []))
    assert lam.shape == (3, 0)
    assert_close(ddq, gd.aba(m, case.data(), s.q, s.v, s.tau), RTOL, "ddq without contacts")


def test_fixed_base_hand_contact_in_a_third_partial_tile(load_case, assert_close):
    """panda (a fixed base) with a 6D LOCAL_WORLD_ALIGNED hand contact with gains, on
    2 TILE + 37 states: the last tile is partial past a 16-state block (the stores'
    block-and-remainder path); equal to the stack kernel to round-off, both layouts.
    A 6D hand constraint on random configurations of a 9-dof arm meets near-singular
    Delassus matrices (ddq up to about 2e3): the two kernels' different summation orders
    then differ by a few 1e-12 of the largest entry, hence 1e-10 here."""
    case = load_case("panda")
    m = case.model
    cs = ConstraintSet(m, [RigidConstraint(m, 6, "panda_hand", reference=LOCAL_WORLD_ALIGNED,
                                           Kp=3.0, Kd=2.0)])
    s = case.states(2 * lane_tiles.TILE + 37, seed=11)
    ddq, lam = gd.constraint_dynamics_batch(m, s.q, s.v, s.tau, cs)
    stack_ddq, stack_lam = gd.constraint_dynamics(m, case.data(), s.q, s.v, s.tau, cs)
    assert_close(ddq, stack_ddq, 1e-10, "panda hand ddq vs the stack kernel")
    assert_close(lam, stack_lam, 1e-10, "panda hand lambda vs the stack kernel")
    ddq_t, lam_t = gd.constraint_dynamics_lanes(m, s.q.T, s.v.T, s.tau.T, cs)
    np.testing.assert_array_equal(ddq_t, ddq.T)
    np.testing.assert_array_equal(lam_t, lam.T)


# --- The derivatives (dynamics/constraint_derivative_lanes.py) ---------------------------

DERIVATIVES = ("ddq_dq", "ddq_dv", "ddq_dtau", "dlambda_dq", "dlambda_dv", "dlambda_dtau")
DERIVATIVE_RTOL = 1e-11
N_DERIVATIVE_STATES = lane_tiles.TILE + 3


def derivative_contacts(case, reference):
    """:func:`contacts` with the gains of the lanes derivatives' scope: Kp, Kd on 3D
    points, Kd alone on 6D frames."""
    cs = contacts(case, reference, (3.0, 2.0))
    m = case.model
    return ConstraintSet(m, [
        RigidConstraint(m, c.kind, c.frame1, reference=c.reference,
                        Kp=c.Kp if c.kind == CONTACT_3D else 0.0, Kd=c.Kd,
                        target=(c.R2, c.p2)) for c in cs])


def pin_constraint_dynamics_derivatives(case, cs, q, v, tau):
    """The six derivatives of pin.computeConstraintDynamicsDerivatives."""
    models, datas, data = pin_constraint_models(case, cs)
    settings = pin.ProximalSettings(1e-12, 1e-12, 0.0, 1)
    pin.constraintDynamics(case.pin_model, data, q, v, tau, models, datas, settings)
    pin.computeConstraintDynamicsDerivatives(case.pin_model, data, models, datas, settings)
    return (data.ddq_dq, data.ddq_dv, data.ddq_dtau, data.dlambda_dq, data.dlambda_dv,
            data.dlambda_dtau)


@pytest.mark.parametrize("reference", REFERENCES)
def test_derivatives_batch_matches_the_stack_kernel_and_pinocchio(contact_case, reference,
                                                                   assert_close):
    case = contact_case
    cs = derivative_contacts(case, REFERENCES[reference])
    s = case.states(N_DERIVATIVE_STATES, seed=3)
    ddq, lam, out = gd.constraint_dynamics_derivatives_batch(case.model, s.q, s.v, s.tau, cs)
    data = case.data()
    stack = gd.constraint_dynamics_derivatives(case.model, data, s.q, s.v, s.tau, cs)
    assert_close(ddq, data.ddq, RTOL, "ddq vs the stack kernel")
    assert_close(lam, data.lambda_c, RTOL, "lambda vs the stack kernel")
    for name, x, y in zip(DERIVATIVES, out, stack):
        assert x.shape == y.shape
        assert_close(x, y, DERIVATIVE_RTOL, f"{name} vs the stack kernel")
    # the outputs are views of one block: none overlaps another
    results = (ddq, lam) + tuple(out)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(results)
                   for b in results[i + 1:])
    # the lanes layout: the same kernel, the same bits
    ddq_t, lam_t, out_t = gd.constraint_dynamics_derivatives_lanes(case.model, s.q.T, s.v.T,
                                                                   s.tau.T, cs)
    np.testing.assert_array_equal(ddq_t, ddq.T)
    for x, y in zip(out_t, out):
        np.testing.assert_array_equal(x, np.moveaxis(y, 0, -1))
    if case.name == "random_tree_ff" and reference == "LOCAL_WORLD_ALIGNED":
        # Pinocchio 4.1 is off here (2.5 in ddq_dq, as for the 6D LOCAL_WORLD_ALIGNED
        # corrector of tests/test_constrained_dynamics.py): the oracle is central differences
        from test_constrained_dynamics import _fd_constraint_dynamics
        expected = _fd_constraint_dynamics(case.model, cs, s.q[0], s.v[0], s.tau[0])
        for name, x, y in zip(DERIVATIVES, out, expected):
            assert_close(x[0], y, 1e-5, f"{name} state 0 vs finite differences")
        return
    for k in (0, N_DERIVATIVE_STATES - 1):  # the first tile, the padded one's last state
        expected = pin_constraint_dynamics_derivatives(case, cs, s.q[k], s.v[k], s.tau[k])
        for name, x, y in zip(DERIVATIVES, out, expected):
            assert_close(x[k], y, 1e-9, f"{name} state {k} vs Pinocchio")


def test_derivatives_refuse_what_they_do_not_cover(load_case):
    case = load_case("talos")
    m = case.model
    s = case.states(2)
    with pytest.raises(NotImplementedError, match="Kp"):
        gd.constraint_dynamics_derivatives_batch(m, s.q, s.v, s.tau,
                                                 contacts(case, LOCAL, (3.0, 2.0)))
    cs = contacts(case, LOCAL, (0.0, 2.0))
    with pytest.raises(NotImplementedError, match="mu"):
        gd.constraint_dynamics_derivatives_batch(m, s.q, s.v, s.tau, cs, mu=1e-3)
    with pytest.raises(ValueError, match="stack"):
        gd.constraint_dynamics_derivatives_batch(m, s.q[0], s.v[0], s.tau[0], cs)
