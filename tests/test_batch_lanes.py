"""The kernels over stacks laid out across SIMD lanes (dynamics/batch_lanes.py,
dynamics/lane_tiles.py, dynamics/derivative_lanes.py)
against Pinocchio, state by state, on every model of conftest.DYNAMICS_MODELS
(real robots, built-in models, random trees with every joint type, unaligned
axes, a free-flyer root and armature)."""
import math

import numpy as np
import pytest

import geppetto.dynamics as gd
from geppetto import robots
from geppetto.dynamics import lane_tiles
from geppetto.dynamics.config import kernel

N_STATES = 2 * lane_tiles.TILE + 5  # two full tiles and a padded one
RTOL = 1e-12
# M^-1 and the derivatives: the stack kernels' tolerance (test_dynamics_pinocchio.py); both
# differ from Pinocchio by ~1e-12 of the largest entry on solo12 (M^-1 entries ~1e4)
RTOL_DERIVATIVES = 1e-10


def test_rnea_batch_matches_pinocchio(case, states, assert_close):
    import pinocchio as pin
    s, pd = states, case.pin_data()
    tau = gd.rnea_batch(case.model, s.q, s.v, s.a)
    for k in range(N_STATES):
        assert_close(tau[k], pin.rnea(case.pin_model, pd, s.q[k], s.v[k], s.a[k]), RTOL,
                     f"{case.name} rnea_batch state {k}")


def test_aba_batch_matches_pinocchio(case, states, assert_close):
    import pinocchio as pin
    s, pd = states, case.pin_data()
    ddq = gd.aba_batch(case.model, s.q, s.v, s.tau)
    for k in range(N_STATES):
        assert_close(ddq[k], pin.aba(case.pin_model, pd, s.q[k], s.v[k], s.tau[k]), RTOL,
                     f"{case.name} aba_batch state {k}")


def test_crba_batch_matches_pinocchio(case, states, assert_close):
    """Pinocchio fills the upper triangle; ours is the full symmetric M."""
    import pinocchio as pin
    s, pd = states, case.pin_data()
    M = gd.crba_batch(case.model, s.q)
    np.testing.assert_array_equal(M, M.transpose(0, 2, 1))
    for k in range(N_STATES):
        assert_close(np.triu(M[k]), np.triu(pin.crba(case.pin_model, pd, s.q[k])), RTOL,
                     f"{case.name} crba_batch state {k}")


def test_compute_minverse_batch_matches_pinocchio(case, states, assert_close):
    import pinocchio as pin
    s, pd = states, case.pin_data()
    Minv = gd.compute_minverse_batch(case.model, s.q)
    np.testing.assert_array_equal(Minv, Minv.transpose(0, 2, 1))
    for k in range(N_STATES):
        expected = pin.computeMinverse(case.pin_model, pd, s.q[k])
        assert_close(np.triu(Minv[k]), np.triu(expected), RTOL_DERIVATIVES,
                     f"{case.name} compute_minverse_batch state {k}")


def test_rnea_derivatives_batch_matches_pinocchio(case, states, assert_close):
    import pinocchio as pin
    s, pd = states, case.pin_data()
    dq, dv, M = gd.rnea_derivatives_batch(case.model, s.q, s.v, s.a)
    for k in range(N_STATES):
        pin.computeRNEADerivatives(case.pin_model, pd, s.q[k], s.v[k], s.a[k])
        for ours, theirs, name in ((dq[k], pd.dtau_dq, "dtau_dq"), (dv[k], pd.dtau_dv, "dtau_dv"),
                                   (np.triu(M[k]), np.triu(pd.M), "M")):
            assert_close(ours, theirs, RTOL_DERIVATIVES,
                         f"{case.name} rnea_derivatives_batch {name} state {k}")


def test_aba_derivatives_batch_matches_pinocchio(case, states, assert_close):
    import pinocchio as pin
    s, pd = states, case.pin_data()
    ddq, dq, dv, Minv = gd.aba_derivatives_batch(case.model, s.q, s.v, s.tau)
    for k in range(N_STATES):
        pin.computeABADerivatives(case.pin_model, pd, s.q[k], s.v[k], s.tau[k])
        for ours, theirs, name in ((ddq[k], pd.ddq, "ddq"), (dq[k], pd.ddq_dq, "ddq_dq"),
                                   (dv[k], pd.ddq_dv, "ddq_dv"),
                                   (np.triu(Minv[k]), np.triu(pd.Minv), "Minv")):
            assert_close(ours, theirs, RTOL_DERIVATIVES,
                         f"{case.name} aba_derivatives_batch {name} state {k}")


def test_lanes_layout_gives_the_same_bits(case, states):
    """(nq, K) and (K, nq) inputs run the same arithmetic: identical results."""
    s, m = states, case.model
    np.testing.assert_array_equal(gd.rnea_lanes(m, s.q.T, s.v.T, s.a.T),
                                  gd.rnea_batch(m, s.q, s.v, s.a).T)
    np.testing.assert_array_equal(gd.aba_lanes(m, s.q.T, s.v.T, s.tau.T),
                                  gd.aba_batch(m, s.q, s.v, s.tau).T)
    np.testing.assert_array_equal(gd.crba_lanes(m, s.q.T), gd.crba_batch(m, s.q).transpose(1, 2, 0))
    np.testing.assert_array_equal(gd.compute_minverse_lanes(m, s.q.T),
                                  gd.compute_minverse_batch(m, s.q).transpose(1, 2, 0))
    for x, y in zip(gd.rnea_derivatives_lanes(m, s.q.T, s.v.T, s.a.T),
                    gd.rnea_derivatives_batch(m, s.q, s.v, s.a)):
        np.testing.assert_array_equal(x, np.moveaxis(y, 0, -1))
    for x, y in zip(gd.aba_derivatives_lanes(m, s.q.T, s.v.T, s.tau.T),
                    gd.aba_derivatives_batch(m, s.q, s.v, s.tau)):
        np.testing.assert_array_equal(x, np.moveaxis(y, 0, -1))


def test_aba_inverts_rnea_on_a_short_stack(load_case, assert_close):
    """K = 3 < TILE: one tile, mostly padding lanes; aba(rnea(a)) = a."""
    case = load_case("random_tree_ff")
    s = case.states(3)
    tau = gd.rnea_batch(case.model, s.q, s.v, s.a)
    assert_close(gd.aba_batch(case.model, s.q, s.v, tau), s.a, 1e-10, "aba(rnea(a))")


@kernel
def _sincos(angles, out):
    """out (2, n) = cos, sin of angles (n,), n a multiple of TILE, through the lanes."""
    T = lane_tiles.TILE
    cs = np.empty(2 * T)
    for b in range(0, angles.shape[0], T):
        lane_tiles.sincos_lanes(angles, b, cs)
        for s in range(T):
            out[0, b + s] = cs[s]
            out[1, b + s] = cs[T + s]


def test_vectorized_sincos_matches_libm():
    """Within 1 ulp-ish of math.cos/sin: random angles, the quadrant boundaries, and
    angles beyond the reduction's range (taken by libm)."""
    rng = np.random.default_rng(4)
    angles = np.concatenate([rng.uniform(-10.0, 10.0, 2000), rng.uniform(-1e4, 1e4, 500),
                             np.arange(-8, 9) * (math.pi / 4), [0.0, -0.0, 1e5 + 0.3,
                                                                -3e6, 1e12, 5e-300]])
    angles = np.concatenate([angles, np.zeros(-angles.size % lane_tiles.TILE)])
    out = np.empty((2, angles.size))
    _sincos(angles, out)
    expected = np.array([[math.cos(x) for x in angles], [math.sin(x) for x in angles]])
    scale = np.maximum(1.0, np.abs(angles)) * 2.3e-16
    assert np.all(np.abs(out - expected) <= scale), np.max(np.abs(out - expected) / scale)


def test_large_joint_angles(load_case, assert_close):
    """Angles where the lanes' reduction hands over to libm give Pinocchio's torques."""
    import pinocchio as pin
    case = load_case("double_pendulum")
    q = np.array([[1e6, -2.5], [1e5 + 0.3, 7.0], [-math.pi / 2, math.pi], [40.0, -1e7]])
    v = np.ones_like(q)
    tau = gd.rnea_batch(case.model, q, v, v)
    for k in range(4):
        assert_close(tau[k], pin.rnea(case.pin_model, case.pin_data(), q[k], v[k], v[k]),
                     1e-9, f"state {k}")


def test_bad_input_is_named():
    model = robots.random_tree(5, seed=1, root_joint="free-flyer")
    rng = np.random.default_rng(0)
    q = gd.random_configuration(model, rng, size=4)
    v = np.zeros((4, model.nv))
    with pytest.raises(ValueError, match="q: expected a float array of shape"):
        gd.rnea_lanes(model, q, v.T, v.T)                 # (K, nq) given as lanes
    with pytest.raises(ValueError, match="a: expected 4 columns"):
        gd.rnea_lanes(model, q.T, v.T, v.T[:, :3])
    bad = v.T.copy()
    bad[0, 2] = np.nan
    with pytest.raises(ValueError, match="tau: contains NaN"):
        gd.aba_lanes(model, q.T, v.T, bad)
    q[1, 3:7] *= 2.0
    with pytest.raises(ValueError, match="q: the unit block"):
        gd.rnea_lanes(model, q.T, v.T, v.T)
    with pytest.raises(ValueError, match="norm"):
        gd.rnea_batch(model, q, v, v)
    with pytest.raises(ValueError, match="expected a stack"):
        gd.aba_batch(model, gd.neutral(model), v[0], v[0])


def test_mimic_model_is_refused():
    mimic_model = gd.MimicModel.__new__(gd.MimicModel)
    with pytest.raises(TypeError, match="MimicModel"):
        gd.rnea_lanes(mimic_model, np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)))


def test_streamed_outputs_equal_the_plain_ones(load_case):
    """Outputs larger than lane_tiles.STREAM_DOUBLES are written with non-temporal
    stores (talos, K states with K not a multiple of 8, so that rows start mid-line):
    the same bits as the plain stores of the same states in smaller stacks."""
    case = load_case("talos")
    m, nv = case.model, case.model.nv
    K = lane_tiles.STREAM_DOUBLES // (nv * nv) + 5
    assert K * nv * nv > lane_tiles.STREAM_DOUBLES and K % 8 != 0
    s = case.states(K)
    parts = [slice(0, K // 2), slice(K // 2, K)]  # each below the threshold: plain stores
    for name, args in (("crba", (s.q,)), ("compute_minverse", (s.q,)),
                       ("rnea_derivatives", (s.q, s.v, s.a)),
                       ("aba_derivatives", (s.q, s.v, s.tau))):
        batch, lanes = getattr(gd, name + "_batch"), getattr(gd, name + "_lanes")
        whole = _as_tuple(batch(m, *args))
        whole_lanes = _as_tuple(lanes(m, *(x.T for x in args)))
        for part in parts:
            piece = _as_tuple(batch(m, *(x[part] for x in args)))
            for x, y, z in zip(whole, piece, whole_lanes):
                np.testing.assert_array_equal(x[part], y, err_msg=f"{name}_batch")
                np.testing.assert_array_equal(np.moveaxis(z, -1, 0)[part], y,
                                              err_msg=f"{name}_lanes")


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def test_streamed_store_on_an_unaligned_output():
    """store_tile and store_symmetric_tile into outputs that start on a cache line or 8
    bytes past one, both layouts, streamed (non-temporal) and plain, nv odd and even (the
    (K, nv nv) symmetric store streams the lines of even states, then those of odd
    states, which start mid-line, when nv nv is a multiple of 4 and the output aligned):
    every entry written."""
    for nv, lead in ((37, 1), (38, 1), (38, 0)):
        _check_stores(nv, lead)


def _check_stores(nv, lead):
    T = lane_tiles.TILE
    K = lane_tiles.STREAM_DOUBLES // (nv * nv) + 3
    rng = np.random.default_rng(2)
    tile = rng.standard_normal(nv * nv * T)
    slot = np.arange(nv * nv).reshape(nv, nv)
    slot = np.minimum(slot, slot.T)
    slot[0, 5] = slot[5, 0] = -1  # a structural zero
    for lanes_major in (True, False):
        shape = (nv * nv, K) if lanes_major else (K, nv * nv)
        for store in ("store_tile", "store_symmetric_tile"):
            raw = lane_tiles.aligned_empty((nv * nv * K + 1,))
            out = raw[lead:lead + nv * nv * K].reshape(shape)
            out[...] = np.nan
            for b in range(0, K, T):
                n = min(T, K - b)
                if store == "store_tile":
                    lane_tiles.store_tile(tile, b, n, lanes_major, out)
                else:
                    lane_tiles.store_symmetric_tile(tile, slot, b, n, lanes_major, out)
            states = out if not lanes_major else out.T
            lanes = np.arange(K) % T
            rows = (np.arange(nv * nv) if store == "store_tile" else slot.reshape(-1))
            expected = np.where(rows[None, :] < 0, 0.0,
                                tile.reshape(nv * nv, T)[np.maximum(rows, 0)][:, lanes].T)
            np.testing.assert_array_equal(states, expected,
                                          err_msg=f"{store} lanes_major={lanes_major} "
                                                  f"nv={nv} lead={lead}")


def test_singular_mass_matrix_is_refused_by_minverse():
    """A massless last link (URDF without <inertial>): M(q) is singular, the factor
    divides by sqrt(0), and compute_minverse_batch / _lanes raise instead of returning
    inf or NaN (they check M^-1's diagonal only: every NaN of L^-1 shows there)."""
    inertial = ('<inertial><origin xyz="0.1 0 0.2"/><mass value="1"/><inertia ixx="0.3" '
                'ixy="0" ixz="0" iyy="0.4" iyz="0" izz="0.5"/></inertial>')
    def joint(name, parent, child, axis):
        return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/>'
                f'<child link="{child}"/><origin xyz="0.1 0.2 0.3"/><axis xyz="{axis}"/>'
                '<limit lower="-1" upper="2" effort="3" velocity="4"/></joint>')
    xml = (f'<robot name="massless_tip"><link name="a"/><link name="b">{inertial}</link>'
           f'<link name="c"/>{joint("j1", "a", "b", "0 0 1")}{joint("j2", "b", "c", "0 1 0")}'
           '</robot>')
    with pytest.warns(robots.URDFWarning, match="singular"):
        model = robots.build_model_from_urdf_string(xml)
    q = gd.random_configuration(model, np.random.default_rng(3), size=N_STATES)
    with pytest.raises(ValueError, match="singular"):
        gd.compute_minverse_batch(model, q)
    with pytest.raises(ValueError, match="singular"):
        gd.compute_minverse_lanes(model, q.T)


def _aba_tiles_outputs(model, q, v, tau, work):
    """aba_tiles' outputs (ddq, ddq_dq, ddq_dv, Minv, oR, op, J) for the stacks q, v, tau."""
    from geppetto.dynamics.derivative_lanes import aba_tiles
    K, nv, nj = q.shape[0], model.nv, model.njoints
    out = (np.zeros((K, nv)), np.zeros((K, nv * nv)), np.zeros((K, nv * nv)),
           np.zeros((K, nv * nv)), np.zeros((K, nj * 9)), np.zeros((K, nj * 3)),
           np.zeros((K, 6 * nv)))
    aba_tiles(model.arrays, np.ascontiguousarray(q), np.ascontiguousarray(v),
              np.ascontiguousarray(tau), True, work, *out)
    return out


@pytest.mark.parametrize("knots", [5, 13, 65])
def test_short_tiles_compute_only_their_active_lanes(load_case, assert_close, knots):
    """A tile of n < TILE states runs its lane loops over its first active_width(n)
    lanes (n rounded up to 8).  The lanes past that width hold NaN here (a whole tile of
    NaN states ran first in the same workspace): no result may read them.  Every state
    equals, bit for bit, the same state computed in a full tile, and the per-state
    ABA derivatives within tolerance (a free-flyer tree: the 6-dof D^-1 of the root)."""
    from geppetto.dynamics.derivative_lanes import aba_tiles_workspace
    case = load_case("random_tree_ff")
    m, T = case.model, lane_tiles.TILE
    assert lane_tiles.active_width(1) == 8 and lane_tiles.active_width(T + 3) == T
    full = case.states(2 * T, seed=3)
    work = aba_tiles_workspace(m.arrays)
    nan = np.full((T, m.nq), np.nan), np.full((T, m.nv), np.nan)
    poisoned = _aba_tiles_outputs(m, nan[0], nan[1], nan[1], work)
    assert np.isnan(poisoned[0]).all()
    q, v, tau = full.q[:knots], full.v[:knots], full.tau[:knots]
    short = _aba_tiles_outputs(m, q, v, tau, work)
    reference = _aba_tiles_outputs(m, full.q, full.v, full.tau, aba_tiles_workspace(m.arrays))
    for ours, theirs in zip(short, reference):
        assert np.isfinite(ours).all()
        np.testing.assert_array_equal(ours, theirs[:knots])
    data = m.create_data()
    for k in range(knots):
        dq, dv, Minv = gd.aba_derivatives(m, data, q[k], v[k], tau[k])
        assert_close(short[0][k], np.ravel(data.ddq), RTOL_DERIVATIVES, f"ddq state {k} of {knots}")
        for ours, theirs, name in ((short[1][k], dq, "ddq_dq"), (short[2][k], dv, "ddq_dv"),
                                   (short[3][k], Minv, "Minv")):
            assert_close(ours.reshape(m.nv, m.nv), theirs, RTOL_DERIVATIVES,
                         f"{name} state {k} of {knots}")
