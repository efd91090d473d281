"""Finite differences on the manifold, the oracle of every derivative test.

Checked on functions with known Jacobians, on kinematics (the FD of a frame
placement is its LOCAL Jacobian), and the Numba kernels for RNEA/ABA against
Pinocchio's computeRNEADerivatives / computeABADerivatives (with f_ext).
Errors are scaled by the size of what is differenced: a difference quotient
loses eps |y| / h to rounding, and ABA of light-legged robots reaches
|ddq| ~ 1e4, so ``max|fd - J| <= rtol * max(1, max|J|, max|y|)`` with rtol
1e-6 (central) and 1e-4 (forward).  Last, the paper's precision experiment
(Carpentier & Mansard 2018, Sec. V-B).
"""

import numpy as np
import pytest

import geppetto.dynamics as gd
from geppetto.dynamics.finite_differences import (CENTRAL_STEP, FORWARD_STEP,
                                                  aba_derivatives_fd, homogeneous,
                                                  numerical_jacobian, rnea_derivatives_fd,
                                                  se3_difference, step_size,
                                                  tangent_magnitudes)

pin = pytest.importorskip("pinocchio")

RTOL = {"central": 1e-6, "forward": 1e-4}
MODELS = ("ur5", "solo12", "talos", "random_tree", "random_tree_ff")


def assert_fd_close(fd, exact, y, method, err_msg):
    scale = max(1.0, float(np.abs(exact).max()), float(np.abs(y).max()))
    error = float(np.abs(fd - exact).max())
    assert error <= RTOL[method] * scale, (
        f"{err_msg}: max error {error:.2e} > {RTOL[method]:.0e} * {scale:.2e}")


def upper_to_full(M):
    """Pinocchio fills the upper triangle of M and M^-1 only."""
    return np.triu(M) + np.triu(M, 1).T


def zero_gravity(model):
    """The same model without gravity (a Model is immutable: a shallow copy with
    other arrays)."""
    return model.with_changes(gravity=np.zeros(3))


# --- The generic helper --------------------------------------------------------

def test_steps():
    assert FORWARD_STEP == step_size("forward") == pytest.approx(1.49e-8, rel=1e-2)
    assert CENTRAL_STEP == step_size("central") == pytest.approx(6.06e-6, rel=1e-2)
    with pytest.raises(ValueError, match="method"):
        step_size("backward")


def test_tangent_magnitudes(load_case):
    model = load_case("random_tree_ff").model
    q = gd.random_configuration(model, 0, lower=np.full(model.nq, -5.0),
                                upper=np.full(model.nq, 5.0))
    mags = tangent_magnitudes(model, q)
    a = model.arrays
    for i in range(1, a.njoints):
        iq, iv, t = a.idx_q[i], a.idx_v[i], a.jtype[i]
        for r in range(a.nvs[i]):
            if t in (gd.REVOLUTE, gd.PRISMATIC, gd.TRANSLATION):
                expected = max(1.0, abs(q[iq + r]))
            else:
                expected = 1.0
            assert mags[iv + r] == expected


def test_vector_function():
    def f(x):
        return np.stack([np.sin(x[..., 0]) * x[..., 1], x[..., 0] ** 2 + np.exp(x[..., 1]),
                         x[..., 2] ** 3], axis=-1)

    def jacobian(x):
        J = np.zeros((3, 3))
        J[0, 0], J[0, 1] = np.cos(x[0]) * x[1], np.sin(x[0])
        J[1, 0], J[1, 1] = 2 * x[0], np.exp(x[1])
        J[2, 2] = 3 * x[2] ** 2
        return J

    xs = np.random.default_rng(0).uniform(-2, 2, size=(4, 3)) * [1, 1, 100]
    for method, tol in (("central", 1e-9), ("forward", 1e-6)):
        J = numerical_jacobian(f, xs, method=method)
        assert J.shape == (4, 3, 3)
        for k in range(4):
            exact = jacobian(xs[k])
            np.testing.assert_allclose(J[k], exact, rtol=0, atol=tol * np.abs(exact).max())
            np.testing.assert_array_equal(numerical_jacobian(f, xs[k], method=method), J[k])
            np.testing.assert_array_equal(
                numerical_jacobian(f, xs[k], method=method, vectorized=False), J[k])


def test_steps_taken_are_representable():
    """The steps taken are the representable ones, (x + h) - x: a scaling by
    powers of two comes out exactly, even where |x| makes h unrepresentable."""
    x = np.array([0.1, 1e3, -7.77e5, 3.0])
    scale = np.array([1.0, 2.0, 0.5, 4.0])
    for method in ("central", "forward"):
        np.testing.assert_array_equal(
            numerical_jacobian(lambda y: y * scale, x, method=method), np.diag(scale))


def test_bad_input():
    with pytest.raises(ValueError, match="method"):
        numerical_jacobian(np.sin, np.zeros(2), method="complex")
    with pytest.raises(ValueError, match="finite"):
        numerical_jacobian(np.sin, np.array([np.nan, 0.0]))


def test_frame_jacobian(load_case):
    """The FD of a frame placement on the manifold is its LOCAL Jacobian, and the
    FD of its position is the top of the LOCAL_WORLD_ALIGNED one."""
    case = load_case("random_tree_ff")
    model, data = case.model, case.data()
    frame = model.nframes - 1

    def placement(qs):
        return homogeneous(*gd.frame_placement(model, data, frame, qs))

    def position(qs):
        return gd.frame_placement(model, data, frame, qs)[1]

    for q in case.states(3, seed=1).q:
        local = gd.frame_jacobian(model, data, q, frame, gd.LOCAL)
        aligned = gd.frame_jacobian(model, data, q, frame, gd.LOCAL_WORLD_ALIGNED)
        J = numerical_jacobian(placement, q, model, difference=se3_difference)
        np.testing.assert_allclose(J, local, rtol=0, atol=1e-8)
        np.testing.assert_allclose(numerical_jacobian(position, q, model), aligned[:3],
                                   rtol=0, atol=1e-8)


def test_se3_difference_against_pinocchio():
    rng = np.random.default_rng(2)
    pairs = []
    for _ in range(20):
        M0 = pin.SE3.Random()
        angle = rng.choice([1e-10, 1e-4, 1.0, np.pi - 1e-6])
        axis = rng.standard_normal(3)
        M1 = M0 * pin.exp6(np.concatenate([rng.standard_normal(3),
                                           angle * axis / np.linalg.norm(axis)]))
        pairs.append((M0, M1))
    A = np.array([M0.homogeneous for M0, _ in pairs])
    B = np.array([M1.homogeneous for _, M1 in pairs])
    expected = np.array([pin.log6(M0.inverse() * M1).vector for M0, M1 in pairs])
    np.testing.assert_allclose(se3_difference(A, B), expected, rtol=0, atol=1e-9)


def test_aba_f_ext(load_case):
    """dddq/df_ext by the generic helper over the stacked forces (nv, njoints, 6)."""
    case = load_case("solo12")
    model, data = case.model, case.data()
    s = case.states(2, seed=3)
    nj = model.njoints
    for k in range(2):
        def ddq(forces):
            n = forces.shape[0]
            return gd.aba(model, data, np.broadcast_to(s.q[k], (n, model.nq)),
                          np.broadcast_to(s.v[k], (n, model.nv)),
                          np.broadcast_to(s.tau[k], (n, model.nv)), forces.reshape(n, nj, 6))

        J = numerical_jacobian(ddq, s.f_ext[k].ravel()).reshape(model.nv, nj, 6)
        exact = gd.aba_derivative_f_ext(model, data, s.q[k])
        Minv = gd.compute_minverse(model, data, s.q[k])
        for i in range(1, nj):
            np.testing.assert_allclose(
                exact[:, i], Minv @ gd.joint_jacobian(model, data, s.q[k], i, gd.LOCAL).T,
                rtol=0, atol=1e-9 * np.abs(Minv).max())
        J[:, 0] = 0.0   # the universe's force is ignored
        assert_fd_close(J, exact, ddq(s.f_ext[k].reshape(1, -1)), "central", "dddq/df_ext")


# --- RNEA / ABA kernels against Pinocchio -------------------------------------------

def _assert_fd_equals_pinocchio(load_case, name, method, seed, finite_differences, u_name,
                                value, derivatives, exact, labels):
    """The finite differences (``finite_differences``, third input the states' ``u_name``)
    equal Pinocchio's derivatives at 4 states: ``value`` and ``derivatives`` Pinocchio's
    functions, ``exact(pin data)`` its three results."""
    case = load_case(name)
    model, pm = case.model, case.pin_model
    data, pd = case.data(), case.pin_data()
    s = case.states(4, seed=seed)
    u = getattr(s, u_name)
    fds = finite_differences(model, data, s.q, s.v, u, s.f_ext, method=method)
    assert fds[0].shape == (4, model.nv, model.nv)
    for k in range(4):
        forces = [pin.Force(f) for f in s.f_ext[k]]
        y = value(pm, pd, s.q[k], s.v[k], u[k], forces)
        derivatives(pm, pd, s.q[k], s.v[k], u[k], forces)
        for fd, reference, label in zip(fds, exact(pd), labels):
            assert_fd_close(fd[k], reference, y, method, f"{name} {label} state {k}")


@pytest.mark.parametrize("method", ("central", "forward"))
@pytest.mark.parametrize("name", MODELS)
def test_rnea_derivatives_fd(load_case, name, method):
    _assert_fd_equals_pinocchio(load_case, name, method, 4, rnea_derivatives_fd, "a", pin.rnea,
                                pin.computeRNEADerivatives,
                                lambda pd: (pd.dtau_dq, pd.dtau_dv, upper_to_full(pd.M)),
                                ("dtau_dq", "dtau_dv", "dtau_da"))


@pytest.mark.parametrize("method", ("central", "forward"))
@pytest.mark.parametrize("name", MODELS)
def test_aba_derivatives_fd(load_case, name, method):
    _assert_fd_equals_pinocchio(load_case, name, method, 5, aba_derivatives_fd, "tau", pin.aba,
                                pin.computeABADerivatives,
                                lambda pd: (pd.ddq_dq, pd.ddq_dv, upper_to_full(pd.Minv)),
                                ("dddq_dq", "dddq_dv", "dddq_dtau"))


def test_against_analytical_derivatives(load_case):
    """The oracle role: the analytical derivatives agree with central FD."""
    case = load_case("random_tree_ff")
    model, data = case.model, case.data()
    s = case.states(5, seed=6)
    fd = rnea_derivatives_fd(model, data, s.q, s.v, s.a, s.f_ext)
    exact = gd.rnea_derivatives(model, data, s.q, s.v, s.a, s.f_ext)
    tau = gd.rnea(model, data, s.q, s.v, s.a, s.f_ext)
    for a, b, label in zip(fd, exact, ("dtau_dq", "dtau_dv", "dtau_da")):
        assert_fd_close(a, b, tau, "central", label)
    fd = aba_derivatives_fd(model, data, s.q, s.v, s.tau, s.f_ext)
    exact = gd.aba_derivatives(model, data, s.q, s.v, s.tau, s.f_ext)
    ddq = gd.aba(model, data, s.q, s.v, s.tau, s.f_ext)
    for a, b, label in zip(fd, exact, ("dddq_dq", "dddq_dv", "dddq_dtau")):
        assert_fd_close(a, b, ddq, "central", label)


def test_stack_equals_single_states(load_case):
    case = load_case("talos")
    model, data = case.model, case.data()
    s = case.states(3, seed=7)
    for function, u in ((rnea_derivatives_fd, s.a), (aba_derivatives_fd, s.tau)):
        for method in ("central", "forward"):
            stacked = function(model, data, s.q, s.v, u, s.f_ext[0], method=method)
            for k in range(3):
                single = function(model, data, s.q[k], s.v[k], u[k], s.f_ext[0], method=method)
                for a, b in zip(stacked, single):
                    assert b.shape == (model.nv, model.nv)
                    np.testing.assert_array_equal(a[k], b)


def test_bad_arguments(load_case):
    case = load_case("ur5")
    model, data = case.model, case.data()
    q, z = gd.neutral(model), np.zeros(model.nv)
    with pytest.raises(ValueError, match="method"):
        rnea_derivatives_fd(model, data, q, z, z, method="complex")
    with pytest.raises(ValueError, match="shape"):
        aba_derivatives_fd(model, data, q, z[:-1], z)
    with pytest.raises(ValueError, match="f_ext"):
        rnea_derivatives_fd(model, data, q, z, z, np.zeros((2, 6)))


# --- The paper's precision experiment (Sec. V-B) -------------------------------------

@pytest.mark.parametrize("name", ("ur5", "talos"))
def test_precision_experiment(load_case, name):
    """Random q, zero v and a, zero gravity, no f_ext: dtau_dv is exactly zero
    (tau is quadratic in v with no linear term).  Analytical derivatives give
    exactly zero; forward differences show their O(sqrt(eps)) error instead.
    Central differences give exactly zero here, but only by symmetry: tau(h e_j)
    and tau(-h e_j) are the same floating-point numbers."""
    case = load_case(name)
    model = zero_gravity(case.model)
    data = model.create_data()
    q = case.states(10, seed=8).q
    zeros = np.zeros((10, model.nv))
    _, dtau_dv, _ = gd.rnea_derivatives(model, data, q, zeros, zeros)
    assert np.all(dtau_dv == 0.0)
    _, fd_forward, M = rnea_derivatives_fd(model, data, q, zeros, zeros, method="forward")
    noise = np.abs(fd_forward).max()
    assert 0.0 < noise < 1e2 * FORWARD_STEP * max(1.0, np.abs(M).max())
    _, fd_central, _ = rnea_derivatives_fd(model, data, q, zeros, zeros, method="central")
    assert np.all(fd_central == 0.0)
