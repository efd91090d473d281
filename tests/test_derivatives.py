"""Analytical derivatives of RNEA and ABA (Carpentier & Mansard, RSS 2018), checked
three ways: against Pinocchio, against central finite differences on the
manifold, and against the identities that tie them to CRBA and M^-1.

Notation (Pinocchio's): tau = RNEA(q, v, a, f_ext), ddq = ABA(q, v, tau, f_ext);
``dtau_dq, dtau_dv, dtau_da`` and ``dddq_dq, dddq_dv, dddq_dtau`` are (nv, nv),
derivatives with respect to q taken in the tangent space (nv columns);
``f_ext`` is (njoints, 6), one spatial force [linear; angular] per joint in its
LOCAL frame (the universe's entry is ignored).

Every test draws 20 seeded random states (``DynamicsCase.states``) on every
model of ``DYNAMICS_MODELS`` (ur5, panda, solo12, hyq, talos and the built-in
models with every joint type) unless it says otherwise.  Errors are scaled by
the size of the reference, ``max|ours - ref| <= rtol * max(1, max|ref|)``.

- Pinocchio (``computeRNEADerivatives``, ``computeABADerivatives``): 1e-9.
- Central differences on the manifold (step h = eps^(1/3) ~ 6e-6): truncation
  O(h^2) ~ 4e-11 and rounding O(eps |y| / h) ~ 4e-11 |y|, with y the
  differentiated function (tau or ddq); ABA of light limbs reaches |ddq| ~ 1e4,
  so the scale also includes max|y|: 1e-6.
- Identities (dtau_da = M, dddq_dtau = M^-1, dddq_du = -M^-1 dtau_du at
  ddq): 1e-9.
- The paper's precision experiment (Sec. V-B), on a zero-gravity copy of each
  robot: exact zeros against finite-difference noise.
"""

import numpy as np
import pytest

import geppetto.dynamics as gd
from geppetto.dynamics.finite_differences import (aba_derivatives_fd, numerical_jacobian,
                                                  rnea_derivatives_fd)

pin = pytest.importorskip("pinocchio")

N_STATES = 20
RTOL_PIN = 1e-9
RTOL_FD = 1e-6
RTOL_IDENTITY = 1e-9
REAL_ROBOTS = ("ur5", "panda", "solo12", "hyq", "talos")


def pin_forces(f_ext):
    return [pin.Force(np.array(f)) for f in f_ext]


def symmetrized_upper(M):
    """Pinocchio may fill only the upper triangle of M and M^-1."""
    M = np.array(M, dtype=float)
    return np.triu(M) + np.triu(M, 1).T


def without_gravity(model):
    """A shallow copy of ``model`` whose kernels see zero gravity (the Model is
    immutable; only its ``arrays`` tuple is replaced)."""
    return model.with_changes(gravity=np.zeros(3))


def assert_fd_close(actual, finite_difference, value, err_msg):
    """``actual`` against a central difference of the function whose value is ``value``.

    The rounding error of a central difference is ~ eps |value| / h, so the
    scale is max(1, max|finite_difference|, max|value|).
    """
    actual, finite_difference = np.asarray(actual), np.asarray(finite_difference)
    assert actual.shape == finite_difference.shape, err_msg
    scale = max(1.0, float(np.max(np.abs(finite_difference))), float(np.max(np.abs(value))))
    worst = float(np.max(np.abs(actual - finite_difference)))
    assert worst <= RTOL_FD * scale, (
        f"{err_msg}: max |analytical - finite difference| = {worst:.3e} > "
        f"{RTOL_FD:.0e} * {scale:.3e}")


@pytest.fixture(scope="module", params=REAL_ROBOTS)
def robot_case(request, load_case):
    return load_case(request.param)


# --- Pinocchio ------------------------------------------------------------------

def _assert_derivatives_equal_pinocchio(case, states, with_f_ext, assert_close, ours, theirs,
                                        u, names, expected):
    """``ours`` (rnea_derivatives or aba_derivatives of the third input ``u``), then the
    value it leaves in the Data, equal Pinocchio's ``theirs`` at every state:
    ``expected(pin data)`` gives Pinocchio's four, ``names`` ours (the last a Data field)."""
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    for k in range(N_STATES):
        f_ext = s.f_ext[k] if with_f_ext else None
        extra = (pin_forces(f_ext),) if with_f_ext else ()
        derivatives = ours(m, d, s.q[k], s.v[k], u[k], f_ext)
        theirs(pm, pd, s.q[k], s.v[k], u[k], *extra)
        values = tuple(derivatives) + (getattr(d, names[-1])[0],)
        for name, value, reference in zip(names, values, expected(pd)):
            assert_close(value, reference, RTOL_PIN, f"{name} state {k}")


@pytest.mark.parametrize("with_f_ext", [False, True], ids=["no_f_ext", "f_ext"])
def test_rnea_derivatives_match_pinocchio(case, states, with_f_ext, assert_close):
    _assert_derivatives_equal_pinocchio(
        case, states, with_f_ext, assert_close, gd.rnea_derivatives, pin.computeRNEADerivatives,
        states.a, ("dtau_dq", "dtau_dv", "dtau_da", "tau"),
        lambda pd: (pd.dtau_dq, pd.dtau_dv, symmetrized_upper(pd.M), pd.tau))


@pytest.mark.parametrize("with_f_ext", [False, True], ids=["no_f_ext", "f_ext"])
def test_aba_derivatives_match_pinocchio(case, states, with_f_ext, assert_close):
    _assert_derivatives_equal_pinocchio(
        case, states, with_f_ext, assert_close, gd.aba_derivatives, pin.computeABADerivatives,
        states.tau, ("dddq_dq", "dddq_dv", "dddq_dtau", "ddq"),
        lambda pd: (pd.ddq_dq, pd.ddq_dv, symmetrized_upper(pd.Minv), pd.ddq))


def test_aba_derivative_f_ext_matches_pinocchio(case, states, assert_close):
    """dddq/df_i = M^-1 J_i^T with J_i the LOCAL Jacobian of joint i, from Pinocchio."""
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    for k in range(N_STATES):
        q = states.q[k]
        ours = gd.aba_derivative_f_ext(m, d, q)
        assert ours.shape == (m.nv, m.njoints, 6)
        Minv = symmetrized_upper(pin.computeMinverse(pm, pd, q))
        pin.computeJointJacobians(pm, pd, q)
        expected = np.zeros((m.nv, m.njoints, 6))
        for i in range(1, m.njoints):
            J = np.array(pin.getJointJacobian(pm, pd, i, pin.LOCAL)).reshape(6, m.nv)
            expected[:, i, :] = Minv @ J.T
        assert_close(ours, expected, RTOL_PIN, f"aba_derivative_f_ext state {k}")


# --- Central finite differences on the manifold ----------------------------------

def _assert_derivatives_match_finite_differences(case, states, function, derivatives,
                                                 finite_differences, u, names):
    """``derivatives`` of ``function`` (rnea or aba, third input ``u``) at every state
    equal their central differences."""
    m, d = case.model, case.data()
    s = states
    analytical = derivatives(m, d, s.q, s.v, u, s.f_ext)
    value = function(m, d, s.q, s.v, u, s.f_ext)
    numerical = finite_differences(m, d, s.q, s.v, u, s.f_ext, method="central")
    for name, ours, fd in zip(names, analytical, numerical):
        for k in range(N_STATES):
            assert_fd_close(ours[k], fd[k], value[k], f"{name} state {k}")


def test_rnea_derivatives_match_finite_differences(case, states):
    _assert_derivatives_match_finite_differences(
        case, states, gd.rnea, gd.rnea_derivatives, rnea_derivatives_fd, states.a,
        ("dtau_dq", "dtau_dv", "dtau_da"))


def test_aba_derivatives_match_finite_differences(case, states):
    _assert_derivatives_match_finite_differences(
        case, states, gd.aba, gd.aba_derivatives, aba_derivatives_fd, states.tau,
        ("dddq_dq", "dddq_dv", "dddq_dtau"))


def test_derivatives_wrt_q_match_generic_manifold_jacobian(case, states):
    """The same q-derivatives by ``numerical_jacobian`` (perturbations through the
    public ``integrate``, all of them in one stacked rnea/aba call): a second
    finite-difference code path."""
    m, d = case.model, case.data()
    s = states
    for k in range(3):
        def tau_of(Q, k=k):
            n = Q.shape[0]
            return gd.rnea(m, d, Q, np.tile(s.v[k], (n, 1)), np.tile(s.a[k], (n, 1)),
                           np.tile(s.f_ext[k], (n, 1, 1)))

        def ddq_of(Q, k=k):
            n = Q.shape[0]
            return gd.aba(m, d, Q, np.tile(s.v[k], (n, 1)), np.tile(s.tau[k], (n, 1)),
                          np.tile(s.f_ext[k], (n, 1, 1)))

        dtau_dq = gd.rnea_derivatives(m, d, s.q[k], s.v[k], s.a[k], s.f_ext[k])[0]
        tau = gd.rnea(m, d, s.q[k], s.v[k], s.a[k], s.f_ext[k])
        assert_fd_close(dtau_dq, numerical_jacobian(tau_of, s.q[k], m), tau,
                        f"dtau_dq state {k}")
        dddq_dq = gd.aba_derivatives(m, d, s.q[k], s.v[k], s.tau[k], s.f_ext[k])[0]
        ddq = gd.aba(m, d, s.q[k], s.v[k], s.tau[k], s.f_ext[k])
        assert_fd_close(dddq_dq, numerical_jacobian(ddq_of, s.q[k], m), ddq,
                        f"dddq_dq state {k}")


def test_aba_derivative_f_ext_matches_finite_differences(case, states):
    m, d = case.model, case.data()
    s = states
    for k in range(5):
        def ddq_of(F, k=k):
            n = F.shape[0]
            return gd.aba(m, d, np.tile(s.q[k], (n, 1)), np.tile(s.v[k], (n, 1)),
                          np.tile(s.tau[k], (n, 1)), F.reshape(n, m.njoints, 6))

        numerical = numerical_jacobian(ddq_of, s.f_ext[k].ravel())
        ddq = gd.aba(m, d, s.q[k], s.v[k], s.tau[k], s.f_ext[k])
        ours = gd.aba_derivative_f_ext(m, d, s.q[k])
        assert_fd_close(ours.reshape(m.nv, -1), numerical, ddq, f"dddq_df_ext state {k}")
        assert np.all(ours[:, 0, :] == 0.0), "the universe's force must not act"


# --- Identities ------------------------------------------------------------------

def test_dtau_da_is_crba(case, states, assert_close):
    m, d = case.model, case.data()
    s = states
    dtau_da = gd.rnea_derivatives(m, d, s.q, s.v, s.a, s.f_ext)[2]
    assert_close(dtau_da, gd.crba(m, d, s.q), RTOL_IDENTITY, "dtau_da == crba")
    # the entries against a joint's descendants are copied from the descendants' rows,
    # which computed them with the same products in the same order: exactly symmetric
    # but within a multi-dof joint's own block, on a stack and on one state
    joint_of_dof = np.repeat(np.arange(m.njoints), m.arrays.nvs)
    other_joint = joint_of_dof[:, None] != joint_of_dof[None, :]
    transposed = np.swapaxes(dtau_da, 1, 2)
    np.testing.assert_array_equal(dtau_da[:, other_joint], transposed[:, other_joint])
    one = gd.rnea_derivatives(m, d, s.q[0], s.v[0], s.a[0], s.f_ext[0])[2]
    np.testing.assert_array_equal(one[other_joint], one.T[other_joint])
    np.testing.assert_array_equal(one, dtau_da[0])


def test_dddq_dtau_is_minverse(case, states, assert_close):
    m, d = case.model, case.data()
    s = states
    dddq_dtau = gd.aba_derivatives(m, d, s.q, s.v, s.tau, s.f_ext)[2]
    assert_close(dddq_dtau, gd.compute_minverse(m, d, s.q), RTOL_IDENTITY,
                 "dddq_dtau == compute_minverse")


def test_aba_derivatives_are_minus_minverse_times_rnea_derivatives(case, states,
                                                                   assert_close):
    """Eq. 24: dFD/du = -M^-1 dID/du evaluated at ddq = FD(q, v, tau)."""
    m, d = case.model, case.data()
    s = states
    dddq_dq, dddq_dv, _ = gd.aba_derivatives(m, d, s.q, s.v, s.tau, s.f_ext)
    ddq = gd.aba(m, d, s.q, s.v, s.tau, s.f_ext)
    dtau_dq, dtau_dv, _ = gd.rnea_derivatives(m, d, s.q, s.v, ddq, s.f_ext)
    Minv = gd.compute_minverse(m, d, s.q)
    assert_close(dddq_dq, -Minv @ dtau_dq, RTOL_IDENTITY, "dddq_dq == -Minv dtau_dq")
    assert_close(dddq_dv, -Minv @ dtau_dv, RTOL_IDENTITY, "dddq_dv == -Minv dtau_dv")
    # and back: at ddq, RNEA returns the torque ABA was given
    assert_close(gd.rnea(m, d, s.q, s.v, ddq, s.f_ext), s.tau, RTOL_IDENTITY, "rnea(aba)")


# --- Stacks ----------------------------------------------------------------------

@pytest.mark.parametrize("with_f_ext", [False, True], ids=["no_f_ext", "f_ext"])
def test_stack_equals_single_calls(case, states, with_f_ext, assert_close):
    m, s = case.model, states
    f_ext = s.f_ext if with_f_ext else None
    stacked_data, single_data = case.data(), case.data()
    rnea_stack = gd.rnea_derivatives(m, stacked_data, s.q, s.v, s.a, f_ext)
    aba_stack = gd.aba_derivatives(m, stacked_data, s.q, s.v, s.tau, f_ext)
    f_stack = gd.aba_derivative_f_ext(m, stacked_data, s.q)
    for out in rnea_stack + aba_stack:
        assert out.shape == (N_STATES, m.nv, m.nv)
    assert f_stack.shape == (N_STATES, m.nv, m.njoints, 6)
    for k in range(N_STATES):
        fk = None if f_ext is None else f_ext[k]
        rnea_single = gd.rnea_derivatives(m, single_data, s.q[k], s.v[k], s.a[k], fk)
        aba_single = gd.aba_derivatives(m, single_data, s.q[k], s.v[k], s.tau[k], fk)
        for name, stacked, single in zip(
                ("dtau_dq", "dtau_dv", "dtau_da", "dddq_dq", "dddq_dv", "dddq_dtau"),
                rnea_stack + aba_stack, rnea_single + aba_single):
            assert single.shape == (m.nv, m.nv)
            assert_close(stacked[k], single, 1e-13, f"{name}: stack vs single, state {k}")
        assert_close(f_stack[k], gd.aba_derivative_f_ext(m, single_data, s.q[k]), 1e-13,
                     f"dddq_df_ext: stack vs single, state {k}")


def test_stack_writes_its_results_and_placements_only(case, states):
    """A stack keeps its intermediates in scratch: it returns the same bits as one call
    per state, fills data.tau (ID), data.ddq (FD) and oMi for every state, and leaves
    the Data fields it does not return (composites, forces, the matrices) as they were."""
    m, s = case.model, states
    d = case.data()
    tau_stack = gd.rnea(m, d, s.q, s.v, s.a)
    untouched = {name: getattr(d, name).copy() for name in ("oYcrb", "of", "dtau_dq", "M",
                                                            "ddq_dq", "Minv", "f")}
    dq, dv, M = gd.rnea_derivatives(m, d, s.q, s.v, s.a)
    # tau at a (rnea takes libm's sines, its derivatives the vectorized table: 1 ulp)
    np.testing.assert_allclose(d.tau[:N_STATES], tau_stack, rtol=1e-12, atol=1e-12)
    dq_f, dv_f, Minv = gd.aba_derivatives(m, d, s.q, s.v, s.tau)
    for name, before in untouched.items():
        np.testing.assert_array_equal(getattr(d, name), before, err_msg=name)
    one = case.data()
    for k in (0, N_STATES - 1):
        for x, y in zip((dq[k], dv[k], M[k]), gd.rnea_derivatives(m, one, s.q[k], s.v[k], s.a[k])):
            np.testing.assert_array_equal(x, y)
        for x, y in zip((dq_f[k], dv_f[k], Minv[k]),
                        gd.aba_derivatives(m, one, s.q[k], s.v[k], s.tau[k])):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(d.ddq[k], one.ddq[0])
        np.testing.assert_array_equal(d.oR[k], one.oR[0])
        np.testing.assert_array_equal(d.op[k], one.op[0])
        assert np.abs(one.M[0]).max() > 0  # one state fills Data as Pinocchio


def test_one_f_ext_is_broadcast_over_a_stack(case, states, assert_close):
    m, d, s = case.model, case.data(), states
    one = s.f_ext[0]
    tiled = np.tile(one, (N_STATES, 1, 1))
    for broadcast, explicit in zip(gd.rnea_derivatives(m, d, s.q, s.v, s.a, one),
                                   gd.rnea_derivatives(m, d, s.q, s.v, s.a, tiled)):
        assert_close(broadcast, explicit, 1e-13, "rnea_derivatives, one f_ext")
    for broadcast, explicit in zip(gd.aba_derivatives(m, d, s.q, s.v, s.tau, one),
                                   gd.aba_derivatives(m, d, s.q, s.v, s.tau, tiled)):
        assert_close(broadcast, explicit, 1e-13, "aba_derivatives, one f_ext")


# --- The paper's precision experiment (Sec. V-B) ---------------------------------

def test_zero_gravity_copy(robot_case):
    m = robot_case.model
    zero_g = without_gravity(m)
    assert np.all(zero_g.gravity == 0.0) and np.any(m.gravity != 0.0)
    q = robot_case.states(1).q[0]
    z = np.zeros(m.nv)
    assert np.all(gd.rnea(zero_g, zero_g.create_data(), q, z, z) == 0.0)
    assert np.any(gd.rnea(m, m.create_data(), q, z, z) != 0.0)


def _motion_cross_matrix(x):
    """[x]x for a motion [lin; ang]: y -> x x y."""
    X = np.zeros((6, 6))
    for block, part in (((0, 0), x[3:]), ((0, 3), x[:3]), ((3, 3), x[3:])):
        r, c = block
        X[r:r + 3, c:c + 3] = [[0.0, -part[2], part[1]], [part[2], 0.0, -part[0]],
                               [-part[1], part[0], 0.0]]
    return X


def test_inertia_structure_matches_dense_algebra():
    """The RNEA derivatives use the structure of a rigid inertia in the world: Y x
    from its ten parameters, and B = v x* Y - Y v x + h x-bar* = [0, -2 [h_lin]x;
    0, B_ang] stored as 12 numbers (rnea_derivatives' docstring), against the dense
    6x6 formulas on random bodies, velocities and forces."""
    from geppetto.dynamics.model import spatial_inertia
    from geppetto.dynamics.rnea_derivatives import inertia_action, inertia_variation
    rng = np.random.default_rng(5)
    for _ in range(10):
        A = rng.standard_normal((3, 3))
        Y = spatial_inertia(rng.uniform(0.1, 5.0), rng.standard_normal(3), A @ A.T)[None]
        v = rng.standard_normal((1, 6))
        h = np.empty((1, 6))
        inertia_action(Y, 0, v, 0, h, 0)
        np.testing.assert_allclose(h[0], Y[0] @ v[0], rtol=0, atol=1e-13)
        B = np.empty((1, 4, 3))
        inertia_variation(Y, 0, v, h, B)
        dense = (-_motion_cross_matrix(v[0]).T @ Y[0] - Y[0] @ _motion_cross_matrix(v[0])
                 + np.column_stack([-_motion_cross_matrix(e).T @ h[0] for e in np.eye(6)]))
        compact = np.zeros((6, 6))
        b = B[0, 3]
        compact[:3, 3:] = -np.array([[0.0, -b[2], b[1]], [b[2], 0.0, -b[0]],
                                     [-b[1], b[0], 0.0]])
        compact[3:, 3:] = B[0, :3]
        np.testing.assert_allclose(compact, dense, rtol=0, atol=1e-12)


def test_precision_experiment(robot_case):
    """Random q, zero v and a, zero gravity, no f_ext: tau(q, v, 0) = C(q, v) v is
    quadratic in v, so dtau/dv = 0 (and tau = 0 for every q, so dtau/dq = 0).

    The analytical derivatives return exact zeros.  Forward differences (the
    paper's, one extra RNEA per column) return C(q, h e_j) e_j = O(h) noise,
    h = sqrt(eps) ~ 1.5e-8.  Central differences return exact zeros here too:
    with a = g = 0 RNEA is even in v bit for bit (IEEE negation is exact and
    velocities enter as products of two), so tau(+h e_j) - tau(-h e_j) == 0.
    The same holds for ABA's derivatives at tau = 0.
    """
    m = without_gravity(robot_case.model)
    d = m.create_data()
    q = robot_case.states(N_STATES).q
    zero = np.zeros((N_STATES, m.nv))
    dtau_dq, dtau_dv, dtau_da = gd.rnea_derivatives(m, d, q, zero, zero)
    assert np.all(dtau_dv == 0.0), "analytical dtau_dv must be exactly zero"
    assert np.all(dtau_dq == 0.0), "analytical dtau_dq must be exactly zero"
    assert np.all(np.diagonal(dtau_da, axis1=1, axis2=2) > 0.0)
    dddq_dq, dddq_dv, _ = gd.aba_derivatives(m, d, q, zero, zero)
    assert np.all(dddq_dv == 0.0) and np.all(dddq_dq == 0.0)

    forward_dq, forward_dv, _ = rnea_derivatives_fd(m, d, q, zero, zero, method="forward")
    noise = float(np.max(np.abs(forward_dv)))
    assert 0.0 < noise < 1e-6, f"forward-difference dtau_dv noise {noise:.3e}"
    assert np.all(forward_dq == 0.0)
    aba_noise = float(np.max(np.abs(aba_derivatives_fd(m, d, q, zero, zero,
                                                       method="forward")[1])))
    assert 0.0 < aba_noise < 1e-6, f"forward-difference dddq_dv noise {aba_noise:.3e}"

    central_dv = rnea_derivatives_fd(m, d, q, zero, zero, method="central")[1]
    assert np.all(central_dv == 0.0)


# --- Bad input -------------------------------------------------------------------

def test_bad_input_raises_value_error(load_case):
    case = load_case("solo12")  # a free flyer: its quaternion is checked
    m, d, s = case.model, case.data(), case.states(3)
    q, v, a = s.q[0], s.v[0], s.a[0]
    bad_quaternion = q.copy()
    bad_quaternion[3:7] *= 1.1
    nan_v = v.copy()
    nan_v[2] = np.nan
    inf_a = a.copy()
    inf_a[0] = np.inf
    other = load_case("ur5").model.create_data()
    bad_calls = {
        "short q": lambda f: f(m, d, q[:-1], v, a),
        "q as a 3-d array": lambda f: f(m, d, q[None, None], v, a),
        "long v": lambda f: f(m, d, q, np.append(v, 0.0), a),
        "NaN in v": lambda f: f(m, d, q, nan_v, a),
        "inf in a": lambda f: f(m, d, q, v, inf_a),
        "unnormalized quaternion": lambda f: f(m, d, bad_quaternion, v, a),
        "complex a": lambda f: f(m, d, q, v, a.astype(complex)),
        "strings": lambda f: f(m, d, q, v, ["x"] * m.nv),
        "stack sizes differ": lambda f: f(m, d, s.q, s.v[:2], s.a),
        "single q with a stack of v": lambda f: f(m, d, q, s.v, a),
        "f_ext of the wrong shape": lambda f: f(m, d, q, v, a, np.zeros((m.njoints - 1, 6))),
        "f_ext with NaN": lambda f: f(m, d, q, v, a, np.full((m.njoints, 6), np.nan)),
        "f_ext stack of another size": lambda f: f(m, d, s.q, s.v, s.a, s.f_ext[:2]),
        "data of another model": lambda f: f(m, other, q, v, a),
    }
    for function in (gd.rnea_derivatives, gd.aba_derivatives, rnea_derivatives_fd,
                     aba_derivatives_fd):
        for label, call in bad_calls.items():
            with pytest.raises(ValueError):
                call(function)
                pytest.fail(f"{function.__name__}: {label} did not raise")
    for bad_q in (q[:-1], bad_quaternion, np.full(m.nq, np.nan)):
        with pytest.raises(ValueError):
            gd.aba_derivative_f_ext(m, d, bad_q)
