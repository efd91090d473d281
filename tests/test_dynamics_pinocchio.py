"""Every dynamics function against Pinocchio, the oracle, to 1e-10.

Each test runs 20 seeded random states on every model of ``DYNAMICS_MODELS``
(ur5, panda, solo12, hyq, talos from example-robot-data, and the built-in
pendulum, double pendulum, cartpole, branched chain and random trees with
every joint type).  Errors are scaled by the size of the reference:
``max|ours - pin| <= 1e-10 * max(1, max|pin|)``.
"""
import numpy as np
import pytest

import geppetto.dynamics as gd

pin = pytest.importorskip("pinocchio")

RTOL = 1e-10
N_STATES = 20
REFERENCES = ((gd.LOCAL, "LOCAL"), (gd.WORLD, "WORLD"),
              (gd.LOCAL_WORLD_ALIGNED, "LOCAL_WORLD_ALIGNED"))


def pin_reference(code):
    return {gd.LOCAL: pin.LOCAL, gd.WORLD: pin.WORLD,
            gd.LOCAL_WORLD_ALIGNED: pin.LOCAL_WORLD_ALIGNED}[code]


def pin_forces(f_ext):
    return [pin.Force(np.array(f)) for f in f_ext]


def symmetrized_upper(M):
    """Pinocchio fills only the upper triangle of M and M^-1."""
    return np.triu(M) + np.triu(M, 1).T


def matrix(x, rows, cols):
    """A copy of a Pinocchio matrix as (rows, cols) (its bindings return a
    (rows,) vector when cols == 1)."""
    return np.array(x, dtype=float).reshape(rows, cols)


def test_twin_has_same_layout(case):
    m, pm = case.model, case.pin_model
    assert (m.nq, m.nv, m.njoints, m.nframes) == (pm.nq, pm.nv, pm.njoints, pm.nframes)
    assert m.names == list(pm.names)
    np.testing.assert_array_equal(m.idx_qs[1:], [j.idx_q for j in pm.joints][1:])
    np.testing.assert_array_equal(m.idx_vs[1:], [j.idx_v for j in pm.joints][1:])
    np.testing.assert_array_equal(m.parents, list(pm.parents))
    np.testing.assert_allclose(m.gravity, pm.gravity.linear, rtol=0, atol=0)


def test_neutral(case):
    np.testing.assert_array_equal(gd.neutral(case.model), pin.neutral(case.pin_model))


def _assert_equals_pinocchio(case, states, assert_close, name, ours, theirs, u):
    """``ours(model, data, q, v, u[, f_ext])`` equals Pinocchio's ``theirs`` at every
    state, without and with external forces."""
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    for k in range(N_STATES):
        assert_close(ours(m, d, s.q[k], s.v[k], u[k]), theirs(pm, pd, s.q[k], s.v[k], u[k]),
                     RTOL, f"{name} state {k}")
        assert_close(ours(m, d, s.q[k], s.v[k], u[k], s.f_ext[k]),
                     theirs(pm, pd, s.q[k], s.v[k], u[k], pin_forces(s.f_ext[k])),
                     RTOL, f"{name} with f_ext, state {k}")


def test_rnea(case, states, assert_close):
    _assert_equals_pinocchio(case, states, assert_close, "rnea", gd.rnea, pin.rnea, states.a)


def test_nonlinear_effects_and_gravity(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    for k in range(N_STATES):
        assert_close(gd.nonlinear_effects(m, d, s.q[k], s.v[k]),
                     pin.nonLinearEffects(pm, pd, s.q[k], s.v[k]), RTOL,
                     f"nonlinear_effects state {k}")
        assert_close(gd.generalized_gravity(m, d, s.q[k]),
                     pin.computeGeneralizedGravity(pm, pd, s.q[k]), RTOL,
                     f"generalized_gravity state {k}")


def test_crba(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    for k in range(N_STATES):
        M_pin = symmetrized_upper(pin.crba(pm, pd, states.q[k]))
        assert_close(gd.crba(m, d, states.q[k]), M_pin, RTOL, f"crba state {k}")


def test_crba_and_minverse_fill_what_they_document(case, states, assert_close):
    """On a stack, crba and compute_minverse fill oMi for every state, equal to
    Pinocchio's Data after crba in the WORLD convention (liMi, J and the composite
    inertias are crba's scratch): a frame's placement read after them is the one of
    the same configuration."""
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    K, frame = 5, m.nframes - 1
    gd.crba(m, d, states.q[:K])
    for function in ("crba", "compute_minverse"):
        gd.forward_kinematics(m, d, states.q[K:2 * K])  # other placements in data
        getattr(gd, function)(m, d, states.q[:K])
        R, p = gd.frame_placement(m, d, frame)
        for k in range(K):
            pin.crba(pm, pd, states.q[k], pin.Convention.WORLD)
            pin.updateFramePlacements(pm, pd)
            assert_close(d.oR[k], np.array([M.rotation for M in pd.oMi]), RTOL,
                         f"data.oR after {function}, state {k}")
            assert_close(d.op[k], np.array([M.translation for M in pd.oMi]), RTOL,
                         f"data.op after {function}, state {k}")
            assert_close(R[k], pd.oMf[frame].rotation, RTOL, f"frame R after {function}")
            assert_close(p[k], pd.oMf[frame].translation, RTOL, f"frame p after {function}")


def test_aba(case, states, assert_close):
    _assert_equals_pinocchio(case, states, assert_close, "aba", gd.aba, pin.aba, states.tau)


def test_compute_minverse(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    for k in range(N_STATES):
        Minv_pin = symmetrized_upper(pin.computeMinverse(pm, pd, states.q[k]))
        assert_close(gd.compute_minverse(m, d, states.q[k]), Minv_pin, RTOL,
                     f"compute_minverse state {k}")


def test_forward_kinematics(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    for k in range(N_STATES):
        pin.forwardKinematics(pm, pd, s.q[k], s.v[k], s.a[k])
        oR_pin = np.array([M.rotation for M in pd.oMi])
        op_pin = np.array([M.translation for M in pd.oMi])
        v_pin = np.array([x.vector for x in pd.v])
        a_pin = np.array([x.vector for x in pd.a])
        oR, op = gd.forward_kinematics(m, d, s.q[k])
        assert_close(oR, oR_pin, RTOL, f"oR (q only) state {k}")
        assert_close(op, op_pin, RTOL, f"op (q only) state {k}")
        oR, op = gd.forward_kinematics(m, d, s.q[k], s.v[k], s.a[k])
        assert_close(oR, oR_pin, RTOL, f"oR state {k}")
        assert_close(op, op_pin, RTOL, f"op state {k}")
        assert_close(d.oR[0], oR_pin, RTOL, f"data.oR state {k}")
        assert_close(d.op[0], op_pin, RTOL, f"data.op state {k}")
        assert_close(d.v[0], v_pin, RTOL, f"data.v state {k}")
        assert_close(d.a[0], a_pin, RTOL, f"data.a state {k}")
        pin.forwardKinematics(pm, pd, s.q[k], s.v[k])
        gd.forward_kinematics(m, d, s.q[k], s.v[k])
        assert_close(d.v[0], np.array([x.vector for x in pd.v]), RTOL,
                     f"data.v (no a) state {k}")


def motions(xs):
    return np.array([x.vector for x in xs])


def inertias(Ys):
    return np.array([np.array(Y if isinstance(Y, np.ndarray) else Y.matrix()) for Y in Ys])


def test_data_fields_keep_one_frame(case, states, assert_close):
    """Whichever function fills them, data.v, a, a_gf, f are joint-frame and
    data.ov, oa, oa_gf, of, oYcrb, IA world-frame, each equal to the field of the
    same name in Pinocchio's Data after the same algorithm."""
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    for k in range(5):
        q, v, a, tau = s.q[k], s.v[k], s.a[k], s.tau[k]
        pin.rnea(pm, pd, q, v, a)
        gd.rnea(m, d, q, v, a)
        v_rnea = d.v[0].copy()
        for name in ("v", "a_gf", "f"):
            assert_close(getattr(d, name)[0], motions(getattr(pd, name)), RTOL,
                         f"data.{name} after rnea, state {k}")
        pin.computeRNEADerivatives(pm, pd, q, v, a)
        gd.rnea_derivatives(m, d, q, v, a)
        assert_close(d.v[0], v_rnea, RTOL, f"data.v, rnea_derivatives vs rnea, state {k}")
        for name in ("v", "a", "ov", "oa", "oa_gf", "of"):
            assert_close(getattr(d, name)[0], motions(getattr(pd, name)), RTOL,
                         f"data.{name} after rnea_derivatives, state {k}")
        assert_close(d.oYcrb[0, 1:], inertias(pd.oYcrb)[1:], RTOL,
                     f"data.oYcrb after rnea_derivatives, state {k}")
        pin.computeABADerivatives(pm, pd, q, v, tau)
        gd.aba_derivatives(m, d, q, v, tau)
        for name in ("ov", "oa_gf"):
            assert_close(getattr(d, name)[0], motions(getattr(pd, name)), RTOL,
                         f"data.{name} after aba_derivatives, state {k}")
        gd.aba(m, d, q, v, tau)
        for name in ("ov", "oa_gf"):
            assert_close(getattr(d, name)[0], motions(getattr(pd, name)), RTOL,
                         f"data.{name} after aba, state {k}")
        # data.IA is Featherstone's I^A_i; Pinocchio's oYaba[i] keeps the inertia
        # handed to the parent, I^A_i - U_i D_i^-1 U_i^T, for a joint not on the root
        IA_aba = d.IA[0].copy()
        handed = IA_aba.copy()
        for i in range(1, m.njoints):
            if m.parents[i] > 0:
                cols = slice(m.idx_vs[i], m.idx_vs[i] + m.nvs[i])
                U = d.U[0][:, cols]
                handed[i] -= U @ d.Dinv[0][cols, :m.nvs[i]] @ U.T
        assert_close(handed[1:], inertias(pd.oYaba)[1:], RTOL, f"data.IA after aba, state {k}")
        U_aba, Dinv_aba = d.U[0].copy(), d.Dinv[0].copy()
        gd.compute_minverse(m, d, q)  # the same U and D^-1 (IA is its scratch)
        assert_close(d.U[0], U_aba, RTOL, f"data.U after compute_minverse, state {k}")
        assert_close(d.Dinv[0], Dinv_aba, RTOL, f"data.Dinv after compute_minverse, state {k}")


def test_frame_placements(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    for k in range(N_STATES):
        q = states.q[k]
        pin.framesForwardKinematics(pm, pd, q)
        gd.forward_kinematics(m, d, q)
        gd.update_frame_placements(m, d)
        for fid, frame in enumerate(m.frames):
            pin_id = pm.getFrameId(frame.name)
            assert pin_id == fid
            oMf = pd.oMf[pin_id]
            R, p = gd.frame_placement(m, d, frame.name)
            assert_close(R, oMf.rotation, RTOL, f"frame {frame.name!r} R, state {k}")
            assert_close(p, oMf.translation, RTOL, f"frame {frame.name!r} p, state {k}")
            R, p = gd.frame_placement(m, d, fid)
            assert_close(R, oMf.rotation, RTOL, f"frame {fid} R, state {k}")
            assert_close(p, oMf.translation, RTOL, f"frame {fid} p, state {k}")
            assert_close(d.oRf[0, fid], oMf.rotation, RTOL, f"data.oRf {fid}, state {k}")
            assert_close(d.opf[0, fid], oMf.translation, RTOL, f"data.opf {fid}, state {k}")
    # frame_placement with q runs the kinematics itself
    q = states.q[0]
    pin.framesForwardKinematics(pm, pd, q)
    gd.forward_kinematics(m, d, states.q[1])
    R, p = gd.frame_placement(m, d, m.nframes - 1, q=q)
    assert_close(R, pd.oMf[m.nframes - 1].rotation, RTOL, "frame_placement(q=...) R")
    assert_close(p, pd.oMf[m.nframes - 1].translation, RTOL, "frame_placement(q=...) p")


def test_frame_jacobian(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    # every frame on a few states, a few frames on every state
    frames = [(k, fid) for k in range(3) for fid in range(m.nframes)]
    frames += [(k, fid) for k in range(3, N_STATES) for fid in (m.nframes - 1, m.nframes // 2)]
    for k, fid in frames:
        q = states.q[k]
        for code, label in REFERENCES:
            J_pin = pin.computeFrameJacobian(pm, pd, q, fid, pin_reference(code))
            assert_close(gd.frame_jacobian(m, d, q, fid, code), matrix(J_pin, 6, m.nv), RTOL,
                         f"frame_jacobian {m.frames[fid].name!r} {label}, state {k}")
    q = states.q[0]
    name = m.frames[-1].name
    for code, label in REFERENCES:
        J_pin = pin.computeFrameJacobian(pm, pd, q, m.nframes - 1, pin_reference(code))
        assert_close(gd.frame_jacobian(m, d, q, name, label), matrix(J_pin, 6, m.nv), RTOL,
                     f"frame_jacobian by name {name!r} and reference {label!r}")


def test_joint_jacobians(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    for k in range(N_STATES):
        q = states.q[k]
        J_pin = matrix(pin.computeJointJacobians(pm, pd, q), 6, m.nv)
        assert_close(gd.compute_joint_jacobians(m, d, q), J_pin, RTOL,
                     f"compute_joint_jacobians state {k}")
        assert_close(d.J[0], J_pin, RTOL, f"data.J state {k}")
        joints = range(m.njoints) if k < 5 else (m.njoints - 1,)
        for joint in joints:
            for code, label in REFERENCES:
                expected = matrix(pin.getJointJacobian(pm, pd, joint, pin_reference(code)),
                                  6, m.nv)
                assert_close(gd.joint_jacobian(m, d, q, joint, code), expected, RTOL,
                             f"joint_jacobian {joint} {label}, state {k}")
        joint = m.names[-1]
        assert_close(gd.joint_jacobian(m, d, q, joint),
                     matrix(pin.getJointJacobian(pm, pd, m.njoints - 1, pin.LOCAL), 6, m.nv),
                     RTOL,
                     f"joint_jacobian by name {joint!r}, LOCAL by default")


def test_center_of_mass(case, states, assert_close):
    """geppetto's data.com[k, i] is the centre of mass of the subtree of joint i
    in the world.  Pinocchio's centerOfMass(..., True) leaves the subtree coms
    in the joint frames (com[0] alone in the world); its jacobianCenterOfMass
    leaves them in the world."""
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    for k in range(N_STATES):
        q = states.q[k]
        com_pin = pin.centerOfMass(pm, pd, q, True).copy()
        subtree_coms = np.array([M.act(c) for M, c in zip(pd.oMi, pd.com)])
        subtree_masses = np.array(pd.mass)
        assert_close(gd.center_of_mass(m, d, q), com_pin, RTOL, f"center_of_mass state {k}")
        assert_close(d.com[0, 1:], subtree_coms[1:], RTOL, f"data.com (subtrees) state {k}")
        assert_close(d.com[0, 0], com_pin, RTOL, f"data.com[0] state {k}")
        assert_close(d.mass[0], subtree_masses, RTOL, f"data.mass (subtrees) state {k}")
        Jcom_pin = matrix(pin.jacobianCenterOfMass(pm, pd, q, True), 3, m.nv)
        assert_close(gd.jacobian_center_of_mass(m, d, q), Jcom_pin, RTOL,
                     f"jacobian_center_of_mass state {k}")
        assert_close(d.com[0], np.array(pd.com), RTOL, f"data.com after Jcom, state {k}")


def test_energy(case, states, assert_close):
    """Pinocchio 4.1's computeKineticEnergy leaves out the armature of
    JointModelRevoluteUnaligned joints (not of the others), unlike its crba:
    with armature, the reference is 1/2 v^T M v with Pinocchio's M."""
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    has_armature = np.any(np.asarray(m.armature) != 0.0)
    for k in range(N_STATES):
        if has_armature:
            M_pin = symmetrized_upper(pin.crba(pm, pd, s.q[k]))
            T_pin = 0.5 * s.v[k] @ M_pin @ s.v[k]
        else:
            T_pin = pin.computeKineticEnergy(pm, pd, s.q[k], s.v[k])
        assert_close(gd.kinetic_energy(m, d, s.q[k], s.v[k]), T_pin, RTOL,
                     f"kinetic_energy state {k}")
        assert_close(gd.potential_energy(m, d, s.q[k]),
                     pin.computePotentialEnergy(pm, pd, s.q[k]), RTOL,
                     f"potential_energy state {k}")


def test_integrate(case, states, assert_close):
    m, pm = case.model, case.pin_model
    s = states
    for k in range(N_STATES):
        q_ours = gd.integrate(m, s.q[k], s.v[k])
        q_pin = pin.integrate(pm, s.q[k], s.v[k])
        # quaternions may differ in sign: compare on the manifold
        assert_close(pin.difference(pm, q_pin, q_ours), np.zeros(m.nv), RTOL,
                     f"integrate state {k}")
        assert_close(gd.normalize(m, q_ours), q_ours, 1e-14, f"integrate unit norms {k}")


def test_difference(case, states, assert_close):
    m, pm = case.model, case.pin_model
    s = states
    for k in range(N_STATES):
        assert_close(gd.difference(m, s.q[k], s.q1[k]), pin.difference(pm, s.q[k], s.q1[k]),
                     RTOL, f"difference state {k}")


def test_interpolate(case, states, assert_close):
    m, pm = case.model, case.pin_model
    s = states
    for k in range(N_STATES):
        for u in (0.0, s.u[k], 1.0):
            q_ours = gd.interpolate(m, s.q[k], s.q1[k], u)
            q_pin = pin.interpolate(pm, s.q[k], s.q1[k], u)
            assert_close(pin.difference(pm, q_pin, q_ours), np.zeros(m.nv), RTOL,
                         f"interpolate u={u} state {k}")
