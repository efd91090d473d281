"""d_integrate / d_difference: every joint type, against Pinocchio's dIntegrate /
dDifference, central finite differences on the manifold, a 40-digit reference
(series of ad with mpmath) and the identities that tie them together.

Rotation angles are controlled per joint: generic ones, near zero and near pi.
Pinocchio 4.1 itself loses digits at some small angles (1e-9 to 1e-2) and
near pi: up to 1e-7 (measured: SE(3) at 1e-3, SE(2) at 1e-9 and pi - 1e-9).
For those angles the oracle is the 40-digit reference, which we match to
1e-13, and Pinocchio is checked to 1e-6 only.
"""
import numpy as np
import pytest

import geppetto.dynamics as gd
from geppetto.dynamics.finite_differences import numerical_jacobian
from geppetto.dynamics.liegroup_derivatives import d_difference, d_integrate
from geppetto.dynamics.model import (FREE_FLYER, PLANAR, REVOLUTE_UNBOUNDED, SPHERICAL,
                                     ModelBuilder)

pin = pytest.importorskip("pinocchio")
from pin_bridge import to_pin_model  # noqa: E402  (needs pinocchio)

JOINT_TYPES = ("revolute", "revolute_unbounded", "prismatic", "free_flyer", "spherical",
               "planar", "translation")
GENERIC_ANGLES = (0.0, 0.05, 0.3, 1.0, 2.0, 3.0)
HARD_ANGLES = (1e-9, 1e-6, 1e-4, 1e-3, np.pi - 1e-6, np.pi - 1e-9)
PIN_ARGS = {"q": 0, "v": 1, "q0": 0, "q1": 1}


def two_joint_model(joint_type):
    """Two joints of ``joint_type`` in a chain, unaligned axes, a body each."""
    b = ModelBuilder(joint_type)
    axis = (0.0, 0.6, 0.8) if joint_type in ("revolute", "revolute_unbounded",
                                             "prismatic") else None
    parent = 0
    for name, p in (("a", (0.0, 0.0, 0.0)), ("b", (0.1, -0.2, 0.3))):
        parent = b.add_joint(parent, joint_type, name, p=p, axis=axis)
        b.append_body_inertia(parent, 1.0, com=(0.1, 0.2, 0.3), inertia_at_com=np.eye(3))
    return b.build()


def rotation_slices(model):
    """(slice of v) of the rotation part of every joint on a curved group."""
    a = model.arrays
    slices = []
    for i in range(1, a.njoints):
        t, iv = a.jtype[i], a.idx_v[i]
        if t == FREE_FLYER:
            slices.append(slice(iv + 3, iv + 6))
        elif t == SPHERICAL:
            slices.append(slice(iv, iv + 3))
        elif t == PLANAR:
            slices.append(slice(iv + 2, iv + 3))
        elif t == REVOLUTE_UNBOUNDED:
            slices.append(slice(iv, iv + 1))
    return slices


def tangent(model, rng, angle):
    """A random velocity whose rotation parts all have norm ``angle``."""
    v = rng.standard_normal(model.nv)
    for s in rotation_slices(model):
        v[s] *= angle / np.linalg.norm(v[s])
    return v


def stack(x, like):
    """x repeated along the batch axis of ``like``."""
    return np.broadcast_to(x, (like.shape[0],) + x.shape)


def pin_arg(arg):
    return (pin.ARG0, pin.ARG1)[PIN_ARGS[arg]]


def pin_jacobians(pin_model, q, v, q1):
    """Pinocchio's four Jacobians at one state, keyed by our ``arg``."""
    out = {a: pin.dIntegrate(pin_model, q, v, pin_arg(a)) for a in ("q", "v")}
    out.update({a: pin.dDifference(pin_model, q, q1, pin_arg(a)) for a in ("q0", "q1")})
    return out


def our_jacobians(model, q, v, q1):
    out = {a: d_integrate(model, q, v, a) for a in ("q", "v")}
    out.update({a: d_difference(model, q, q1, a) for a in ("q0", "q1")})
    return out


def states(model, angles, seed, per_angle=4):
    """(q, v, q1 = integrate(q, v)) with the rotation angles of v in ``angles``."""
    rng = np.random.default_rng(seed)
    for angle in angles:
        for _ in range(per_angle):
            q = gd.random_configuration(model, rng)
            v = tangent(model, rng, angle)
            yield angle, q, v, gd.integrate(model, q, v)


@pytest.fixture(scope="module", params=JOINT_TYPES)
def joint_case(request):
    model = two_joint_model(request.param)
    return request.param, model, to_pin_model(model)


def _assert_matches_pinocchio(joint_case, angles, seed, atol):
    """Our Jacobians equal Pinocchio's to ``atol`` at states of rotation ``angles``."""
    name, model, pin_model = joint_case
    for angle, q, v, q1 in states(model, angles, seed=seed):
        ours, ref = our_jacobians(model, q, v, q1), pin_jacobians(pin_model, q, v, q1)
        for arg in ours:
            np.testing.assert_allclose(ours[arg], ref[arg], rtol=0, atol=atol,
                                       err_msg=f"{name} arg={arg} angle={angle}")


def test_against_pinocchio_generic_angles(joint_case):
    _assert_matches_pinocchio(joint_case, GENERIC_ANGLES, seed=1, atol=1e-10)


def test_against_pinocchio_hard_angles(joint_case):
    _assert_matches_pinocchio(joint_case, HARD_ANGLES, seed=2, atol=1e-6)


# --- 40-digit reference: Ad(exp(xi)) = exp(ad xi), Jr(xi) = sum (-ad xi)^k / (k+1)! --

_SKEW = ((0, 1, 2, -1), (0, 2, 1, 1), (1, 0, 2, 1), (1, 2, 0, -1), (2, 0, 1, -1),
         (2, 1, 0, 1))    # [w][row, col] = sign * w[index]


def _se3_ad(mp, xi):
    """ad(xi) = [[[w], [v]], [0, [w]]] for xi = (v, w)."""
    A = mp.zeros(6, 6)
    for row, col, index, sign in _SKEW:
        A[row, col] = A[row + 3, col + 3] = sign * xi[3 + index]
        A[row, col + 3] = sign * xi[index]
    return A


def _series(mp, X, shift):
    """sum_k X^k / (k + shift)!, to the working precision."""
    out, term = mp.zeros(6, 6), mp.eye(6)
    for k in range(200):
        step = term / mp.factorial(k + shift)
        out += step
        if k > 2 and mp.mnorm(step, 1) < mp.mpf(10) ** (-mp.mp.dps):
            break
        term = term * X
    return out


def reference_block(mp, jtype, xi_joint, kind):
    """The exact block of one joint (Ad(exp xi), Jr(xi) or Jr(xi)^-1), 40 digits."""
    if jtype == FREE_FLYER:
        xi, rows = list(xi_joint), [0, 1, 2, 3, 4, 5]
    elif jtype == SPHERICAL:
        xi, rows = [0.0, 0.0, 0.0] + list(xi_joint), [3, 4, 5]
    else:  # planar
        xi, rows = [xi_joint[0], xi_joint[1], 0.0, 0.0, 0.0, xi_joint[2]], [0, 1, 5]
    X = _se3_ad(mp, [mp.mpf(float(x)) for x in xi])
    if kind == "ad_exp":
        M = _series(mp, X, 0)
    elif kind == "jr":
        M = _series(mp, -X, 1)
    else:
        M = _series(mp, -X, 1) ** -1
    return np.array(M.tolist(), dtype=float)[np.ix_(rows, rows)]


@pytest.mark.parametrize("joint_type", ("free_flyer", "spherical", "planar"))
def test_against_exact_reference(joint_type):
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    model = two_joint_model(joint_type)
    a = model.arrays
    for angle, q, v, q1 in states(model, GENERIC_ANGLES + HARD_ANGLES, seed=3, per_angle=1):
        d = gd.difference(model, q, q1)
        ours = our_jacobians(model, q, v, q1)
        for i in (1, 2):
            s = slice(a.idx_v[i], a.idx_v[i] + a.nvs[i])
            expected = {"q": reference_block(mp, a.jtype[i], -v[s], "ad_exp"),
                        "v": reference_block(mp, a.jtype[i], v[s], "jr"),
                        "q0": -reference_block(mp, a.jtype[i], -d[s], "jr_inverse"),
                        "q1": reference_block(mp, a.jtype[i], d[s], "jr_inverse")}
            for arg, block in expected.items():
                np.testing.assert_allclose(ours[arg][s, s], block, rtol=0, atol=1e-13,
                                           err_msg=f"{joint_type} {arg} angle={angle}")


# --- Central finite differences on the manifold ----------------------------------

def test_against_finite_differences(joint_case):
    name, model, _ = joint_case
    angles = (0.0, 1e-9, 1e-5, 0.3, 2.0, np.pi - 1e-2)
    for angle, q, v, q1 in states(model, angles, seed=4, per_angle=2):
        diff = lambda y0, y1: gd.difference(model, y0, y1)  # noqa: E731
        fd = {
            "q": numerical_jacobian(lambda qs: gd.integrate(model, qs, v), q, model,
                                    difference=diff),
            "v": numerical_jacobian(lambda vs: gd.integrate(model, stack(q, vs), vs), v,
                                    difference=diff),
            "q0": numerical_jacobian(lambda qs: gd.difference(model, qs, q1), q, model),
            "q1": numerical_jacobian(lambda qs: gd.difference(model, stack(q, qs), qs), q1,
                                     model),
        }
        ours = our_jacobians(model, q, v, q1)
        for arg in ours:
            np.testing.assert_allclose(ours[arg], fd[arg], rtol=0, atol=1e-8,
                                       err_msg=f"{name} arg={arg} angle={angle}")


# --- Identities -------------------------------------------------------------------

def test_identities(joint_case):
    name, model, _ = joint_case
    eye = np.eye(model.nv)
    for angle, q, v, q1 in states(model, (0.0, 1e-7, 0.5, 3.0), seed=5, per_angle=2):
        np.testing.assert_array_equal(d_integrate(model, q, np.zeros(model.nv), "q"), eye)
        np.testing.assert_array_equal(d_integrate(model, q, np.zeros(model.nv), "v"), eye)
        np.testing.assert_allclose(d_difference(model, q, q, "q1"), eye, atol=1e-15)
        np.testing.assert_allclose(d_difference(model, q, q, "q0"), -eye, atol=1e-15)
        # difference(q, integrate(q, v)) = v: the chain rule gives the identity
        chain = d_difference(model, q, q1, "q1") @ d_integrate(model, q, v, "v")
        np.testing.assert_allclose(chain, eye, rtol=0, atol=1e-12, err_msg=f"{name} {angle}")
        # difference(q0, q1) = -difference(q1, q0)
        np.testing.assert_allclose(d_difference(model, q, q1, "q0"),
                                   -d_difference(model, q1, q, "q1"), rtol=0, atol=1e-12)


# --- Real robots and random trees, stacks, errors ------------------------------------

@pytest.mark.parametrize("name", ("solo12", "talos", "random_tree", "random_tree_ff"))
def test_robots_against_pinocchio(load_case, name):
    case = load_case(name)
    s = case.states(10, seed=6)
    for k in range(10):
        ours = our_jacobians(case.model, s.q[k], s.v[k], s.q1[k])
        ref = pin_jacobians(case.pin_model, s.q[k], s.v[k], s.q1[k])
        for arg in ours:
            np.testing.assert_allclose(ours[arg], ref[arg], rtol=0, atol=1e-10,
                                       err_msg=f"{name} arg={arg} state {k}")


def test_stack_equals_single_states(load_case):
    case = load_case("random_tree_ff")
    s = case.states(6, seed=7)
    for arg in ("q", "v"):
        stacked = d_integrate(case.model, s.q, s.v, arg)
        assert stacked.shape == (6, case.model.nv, case.model.nv)
        for k in range(6):
            np.testing.assert_array_equal(stacked[k], d_integrate(case.model, s.q[k], s.v[k], arg))
    for arg in ("q0", "q1"):
        stacked = d_difference(case.model, s.q, s.q1, arg)
        for k in range(6):
            np.testing.assert_array_equal(stacked[k],
                                          d_difference(case.model, s.q[k], s.q1[k], arg))
    # one velocity broadcast over a stack of configurations
    np.testing.assert_array_equal(d_integrate(case.model, s.q, s.v[0], "v")[3],
                                  d_integrate(case.model, s.q[3], s.v[0], "v"))


def test_bad_input_raises():
    model = two_joint_model("free_flyer")
    q, v = gd.neutral(model), np.zeros(model.nv)
    with pytest.raises(ValueError, match="arg"):
        d_integrate(model, q, v, "q0")
    with pytest.raises(ValueError, match="arg"):
        d_difference(model, q, q, 1)
    with pytest.raises(ValueError, match="quaternion"):
        d_integrate(model, 2.0 * q, v)
    with pytest.raises(ValueError, match="shape"):
        d_difference(model, q, q[:-1])
    with pytest.raises(ValueError, match="NaN"):
        d_integrate(model, q, np.full(model.nv, np.nan), "v")
