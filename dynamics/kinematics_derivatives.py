"""Derivatives of kinematics: joint and frame velocities and accelerations, the
Jacobian time variation and the centre of mass (Carpentier & Mansard, RSS 2018,
Sec. III-D; Pinocchio's ``kinematics-derivatives`` and ``center-of-mass-derivatives``).

Notation (world frame, as in :mod:`.rnea_derivatives`): ``J_c`` is column c of
the world Jacobian, j(c) the joint of dof c and lambda its parent; ``ov_i``,
``oa_i`` are the spatial velocity and acceleration of joint i in the world
(gravity not included); x is the motion cross product.  One forward pass
(:func:`compute_forward_kinematics_derivatives`) stores per dof c

    dJ_c   = ov_j(c) x J_c                        (the time derivative of J_c)
    dVdq_c = ov_lambda x J_c
    dAdq_c = oa_lambda x J_c + ov_lambda x dVdq_c
    dAdv_c = dJ_c + dVdq_c

A perturbation of q_c (tangent space) moves the subtree of j(c) rigidly, so
a world motion X attached to it varies as J_c x X (identity (13)).  For a
joint i and a dof c that supports it, in the world:

    dov_i/dq_c = dVdq_c - ov_i x J_c                     dov_i/dv_c = J_c
    doa_i/dq_c = dAdq_c - oa_i x J_c - ov_i x dVdq_c
    doa_i/dv_c = dAdv_c - ov_i x J_c                     doa_i/da_c = J_c

and zero for a dof that does not support i.  A world quantity X seen in a
frame f at oMf = (R, p) is T X: LOCAL T = oMf^-1, d(T X)/dq_c = T (dX/dq_c -
J_c x X); LOCAL_WORLD_ALIGNED T = the translation to p, d(T X)/dq_c =
T dX/dq_c + [X_ang x (T J_c)_lin; 0].  The same rule along ov_i instead of
J_c gives the time variation of the frame Jacobian.  Accelerations are
spatial (Pinocchio's ``getFrameAcceleration``), not classical.

These are the exact derivatives of Pinocchio's ``getFrameVelocity`` and
``getFrameAcceleration`` (checked by finite differences), and equal
Pinocchio 4.1's derivatives except in two places: (1) its
LOCAL_WORLD_ALIGNED derivatives with respect to q leave out the motion of the
origin p (they are T dX/dq_c, without [X_ang x (T J_c)_lin; 0]); (2) its WORLD
acceleration derivative with respect to q has ov_j(c) where the derivation
gives ov_lambda in its last term, which differs when a multi-dof joint
(spherical, planar, translation) other than the root supports the joint.

Centre of mass: with m_i, c_i, vc_i the mass, centre of mass and its velocity
of the subtree of joint i (world) and M the total mass, for a dof c of joint i

    dcom/dq_c  = (m_i / M) (J_c,lin + J_c,ang x c_i)                 = Jcom_c
    dvcom/dq_c = (m_i / M) (J_c,ang x vc_i + u_lin + u_ang x c_i),   u = ov_lambda x J_c

and dvcom/dv = Jcom.
"""
import numpy as np

from .config import inline_kernel, kernel
from .joints import compose, placements
from .kinematics import (LOCAL, WORLD, _reference_code, com_jacobian, joint_jacobians_state,
                         subtree_averages, subtree_mass_and_com, world_motions)
from .spatial import inv_act_motion, motion_cross
from .validation import (as_configurations, as_stack, call_kernel, check_data, check_frame,
                         check_joint, check_model_of, result)

# Frozen like the model's frame_R / frame_p they stand in for, so that joints and
# frames share one compiled _motion_derivatives (Numba types read-only arrays apart).
_IDENTITY_R = np.eye(3).reshape(1, 3, 3)
_ZERO_P = np.zeros((1, 3))
_IDENTITY_R.setflags(write=False)
_ZERO_P.setflags(write=False)


@inline_kernel
def _cross_col(ms, i, X, c, Y, o):
    """Y[:, o] = ms[i] x X[:, c] for (6, n) arrays X, Y (the column form of
    ``motion_cross``); Y must not be X."""
    Y[0, o] = ms[i, 4] * X[2, c] - ms[i, 5] * X[1, c] + ms[i, 1] * X[5, c] - ms[i, 2] * X[4, c]
    Y[1, o] = ms[i, 5] * X[0, c] - ms[i, 3] * X[2, c] + ms[i, 2] * X[3, c] - ms[i, 0] * X[5, c]
    Y[2, o] = ms[i, 3] * X[1, c] - ms[i, 4] * X[0, c] + ms[i, 0] * X[4, c] - ms[i, 1] * X[3, c]
    Y[3, o] = ms[i, 4] * X[5, c] - ms[i, 5] * X[4, c]
    Y[4, o] = ms[i, 5] * X[3, c] - ms[i, 3] * X[5, c]
    Y[5, o] = ms[i, 3] * X[4, c] - ms[i, 4] * X[3, c]


# --- Forward pass -----------------------------------------------------------

@kernel
def _motion_columns(m, order, J, ov, oa, dJ, dVdq, dAdq, dAdv, wc):
    """dJ (and, order 2, dVdq, dAdq, dAdv) column by column; wc (6, 1) scratch."""
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for i in range(1, m.njoints):
        par = parents[i]
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            _cross_col(ov, i, J, c, dJ, c)                     # dJ_c = ov_i x J_c
            if order < 2:
                continue
            _cross_col(ov, par, J, c, dVdq, c)                 # ov_lambda x J_c
            _cross_col(oa, par, J, c, dAdq, c)                 # oa_lambda x J_c
            _cross_col(ov, par, dVdq, c, wc, 0)                # ov_lambda x dVdq_c
            for r in range(6):
                dAdq[r, c] += wc[r, 0]
                dAdv[r, c] = dJ[r, c] + dVdq[r, c]


@kernel
def _kinematics_derivatives_state(m, q, v, a, order, liR, lip, oR, op, J, vel, acc, ov, oa,
                                  dJ, dVdq, dAdq, dAdv, XR, Xp, w6, wc):
    """One state: placements, J, world and local motions, and the columns of
    the module docstring (order 1: velocities and dJ only)."""
    placements(m, q, XR, Xp, liR, lip, oR, op)
    joint_jacobians_state(m, oR, op, J)
    world_motions(m, v, a, order, False, J, ov, oa, w6)
    _motion_columns(m, order, J, ov, oa, dJ, dVdq, dAdq, dAdv, wc)
    for r in range(6):
        vel[0, r] = 0.0
        if order > 1:
            acc[0, r] = 0.0
    for i in range(1, m.njoints):
        inv_act_motion(oR, op, i, ov, i, vel, i)
        if order > 1:
            inv_act_motion(oR, op, i, oa, i, acc, i)


@kernel
def _forward_kinematics_derivatives(m, q, v, a, order, liR, lip, oR, op, J, vel, acc, ov, oa,
                                    dJ, dVdq, dAdq, dAdv):
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    w6 = np.empty((2, 6))
    wc = np.empty((6, 1))
    for k in range(q.shape[0]):
        _kinematics_derivatives_state(m, q[k], v[k], a[k], order, liR[k], lip[k], oR[k], op[k],
                                      J[k], vel[k], acc[k], ov[k], oa[k], dJ[k], dVdq[k],
                                      dAdq[k], dAdv[k], XR, Xp, w6, wc)


# --- Expressing world columns in a frame ------------------------------------

@inline_kernel
def _express_col(reference, Rf, pf, w, s, x, d, out, c):
    """out[:, c] = the world column w[s] expressed in the frame oMf = (Rf[0], pf[0]).

    With x >= 0, w[s] is the derivative of the world motion w[x] along a motion
    w[d] of the frame itself (d/dq_c: w[d] = J_c; d/dt: w[d] = ov), and the
    variation of the frame is added.  Rows 8 and 9 of w are scratch.
    """
    if reference == WORLD:
        for r in range(6):
            out[r, c] = w[s, r]
    elif reference == LOCAL:
        # d(T X) = T (dX - D x X) = T (dX + X x D)
        if x >= 0:
            motion_cross(w, x, w, d, w, 9)
            for r in range(6):
                w[8, r] = w[s, r] + w[9, r]
        else:
            for r in range(6):
                w[8, r] = w[s, r]
        inv_act_motion(Rf, pf, 0, w, 8, w, 9)
        for r in range(6):
            out[r, c] = w[9, r]
    else:
        # translation to p: [l + a x p; a], plus X_ang x (velocity of p along D)
        p0, p1, p2 = pf[0, 0], pf[0, 1], pf[0, 2]
        a0, a1, a2 = w[s, 3], w[s, 4], w[s, 5]
        l0 = w[s, 0] + a1 * p2 - a2 * p1
        l1 = w[s, 1] + a2 * p0 - a0 * p2
        l2 = w[s, 2] + a0 * p1 - a1 * p0
        if x >= 0:
            e0 = w[d, 0] + w[d, 4] * p2 - w[d, 5] * p1
            e1 = w[d, 1] + w[d, 5] * p0 - w[d, 3] * p2
            e2 = w[d, 2] + w[d, 3] * p1 - w[d, 4] * p0
            l0 += w[x, 4] * e2 - w[x, 5] * e1
            l1 += w[x, 5] * e0 - w[x, 3] * e2
            l2 += w[x, 3] * e1 - w[x, 4] * e0
        out[0, c], out[1, c], out[2, c] = l0, l1, l2
        out[3, c], out[4, c], out[5, c] = a0, a1, a2


@kernel
def _motion_derivatives_state(m, joint, reference, order, Rf, pf, ov, oa, J, dVdq, dAdq, dAdv,
                              dv_dq, dv_dv, da_dq, da_dv, w):
    """Columns of the support of ``joint``: velocity (and, order 2, acceleration)
    derivatives of that joint expressed at oMf = (Rf[0], pf[0]).

    Rows of w (10, 6): 0 J_c, 1 ov_i, 2 oa_i, 3 dv_dq, 4 da_dq, 5 da_dv (world), 6-9 scratch.
    """
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for r in range(6):
        w[1, r] = ov[joint, r]
        w[2, r] = oa[joint, r]
    j = joint
    while j > 0:
        for c in range(idx_v[j], idx_v[j] + nvs[j]):
            for r in range(6):
                w[0, r] = J[r, c]
            motion_cross(w, 1, w, 0, w, 6)                         # ov_i x J_c
            for r in range(6):
                w[3, r] = dVdq[r, c] - w[6, r]
            _express_col(reference, Rf, pf, w, 0, -1, 0, dv_dv, c)
            _express_col(reference, Rf, pf, w, 3, 1, 0, dv_dq, c)
            if order < 2:
                continue
            for r in range(6):
                w[5, r] = dAdv[r, c] - w[6, r]
                w[4, r] = dAdq[r, c]
            motion_cross(w, 2, w, 0, w, 6)                         # oa_i x J_c
            for r in range(6):
                w[0, r] = dVdq[r, c]
            motion_cross(w, 1, w, 0, w, 7)                         # ov_i x dVdq_c
            for r in range(6):
                w[4, r] -= w[6, r] + w[7, r]
                w[0, r] = J[r, c]
            _express_col(reference, Rf, pf, w, 4, 2, 0, da_dq, c)
            _express_col(reference, Rf, pf, w, 5, -1, 0, da_dv, c)
        j = parents[j]


@kernel
def _motion_derivatives(m, joint, fR, fp, f, reference, order, oR, op, ov, oa, J, dVdq, dAdq,
                        dAdv, dv_dq, dv_dv, da_dq, da_dv):
    Rf = np.empty((1, 3, 3))
    pf = np.empty((1, 3))
    w = np.empty((10, 6))
    for k in range(oR.shape[0]):
        compose(oR[k], op[k], joint, fR, fp, f, Rf, pf, 0)
        _motion_derivatives_state(m, joint, reference, order, Rf, pf, ov[k], oa[k], J[k],
                                  dVdq[k], dAdq[k], dAdv[k], dv_dq[k], dv_dv[k], da_dq[k],
                                  da_dv[k], w)


@kernel
def _frame_jacobian_time_variation_state(m, joint, reference, Rf, pf, ov, J, dJ, out, w):
    """Columns of the support of ``joint`` of d/dt of the Jacobian at oMf.

    Rows of w (10, 6): 0 J_c, 1 ov_i, 3 dJ_c (world), 8-9 scratch."""
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for r in range(6):
        w[1, r] = ov[joint, r]
    j = joint
    while j > 0:
        for c in range(idx_v[j], idx_v[j] + nvs[j]):
            for r in range(6):
                w[0, r] = J[r, c]
                w[3, r] = dJ[r, c]
            _express_col(reference, Rf, pf, w, 3, 0, 1, out, c)
        j = parents[j]


@kernel
def _frame_jacobian_time_variation(m, q, v, frame, reference, liR, lip, oR, op, J, vel, ov,
                                   dJ, out):
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    w6 = np.empty((2, 6))
    wc = np.empty((6, 1))
    Rf = np.empty((1, 3, 3))
    pf = np.empty((1, 3))
    w = np.empty((10, 6))
    joint = m.frame_joint[frame] if frame >= 0 else 0
    frame_R, frame_p = m.frame_R, m.frame_p
    for k in range(q.shape[0]):
        # order 1 neither reads a nor writes acc, oa, dVdq, dAdq, dAdv: stand-ins
        _kinematics_derivatives_state(m, q[k], v[k], v[k], 1, liR[k], lip[k], oR[k], op[k],
                                      J[k], vel[k], vel[k], ov[k], ov[k], dJ[k], dJ[k], dJ[k],
                                      dJ[k], XR, Xp, w6, wc)
        if frame < 0:
            continue
        compose(oR[k], op[k], joint, frame_R, frame_p, frame, Rf, pf, 0)
        _frame_jacobian_time_variation_state(m, joint, reference, Rf, pf, ov[k], J[k], dJ[k],
                                             out[k], w)


# --- Centre of mass ---------------------------------------------------------

@kernel
def _subtree_com_velocities(m, oR, op, ov, mass, vcom):
    """vcom[i] (world): velocity of the centre of mass of the subtree of joint i,
    from the linear momenta m_k (v_k + w_k x c_k) of its bodies; needs ``mass``."""
    Y = m.inertia
    vcom[0, :] = 0.0
    for i in range(1, m.njoints):
        mi = Y[i, 0, 0]
        h0, h1, h2 = Y[i, 5, 1], Y[i, 3, 2], Y[i, 4, 0]
        # first moment m c in the world: R h + m p
        H0 = oR[i, 0, 0] * h0 + oR[i, 0, 1] * h1 + oR[i, 0, 2] * h2 + mi * op[i, 0]
        H1 = oR[i, 1, 0] * h0 + oR[i, 1, 1] * h1 + oR[i, 1, 2] * h2 + mi * op[i, 1]
        H2 = oR[i, 2, 0] * h0 + oR[i, 2, 1] * h1 + oR[i, 2, 2] * h2 + mi * op[i, 2]
        # m v - H x w
        vcom[i, 0] = mi * ov[i, 0] - (H1 * ov[i, 5] - H2 * ov[i, 4])
        vcom[i, 1] = mi * ov[i, 1] - (H2 * ov[i, 3] - H0 * ov[i, 5])
        vcom[i, 2] = mi * ov[i, 2] - (H0 * ov[i, 4] - H1 * ov[i, 3])
    subtree_averages(m, mass, vcom, False)


@kernel
def _com_velocity_columns(m, J, ov, mass, com, vcom, dvcom_dq, wc):
    """dvcom/dq column by column (module docstring)."""
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    total = mass[0]
    for i in range(1, m.njoints):
        par = parents[i]
        ratio = mass[i] / total
        c0, c1, c2 = com[i, 0], com[i, 1], com[i, 2]
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            w0, w1, w2 = J[3, c], J[4, c], J[5, c]
            _cross_col(ov, par, J, c, wc, 0)                   # u = ov_lambda x J_c
            u3, u4, u5 = wc[3, 0], wc[4, 0], wc[5, 0]
            dvcom_dq[0, c] = ratio * (w1 * vcom[i, 2] - w2 * vcom[i, 1] + wc[0, 0]
                                      + u4 * c2 - u5 * c1)
            dvcom_dq[1, c] = ratio * (w2 * vcom[i, 0] - w0 * vcom[i, 2] + wc[1, 0]
                                      + u5 * c0 - u3 * c2)
            dvcom_dq[2, c] = ratio * (w0 * vcom[i, 1] - w1 * vcom[i, 0] + wc[2, 0]
                                      + u3 * c1 - u4 * c0)


@kernel
def _center_of_mass_derivatives(m, q, v, order, liR, lip, oR, op, J, ov, mass, com, vcom,
                                Jcom, dvcom_dq):
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    w6 = np.empty((2, 6))
    wc = np.empty((6, 1))
    for k in range(q.shape[0]):
        placements(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k])
        joint_jacobians_state(m, oR[k], op[k], J[k])
        subtree_mass_and_com(m, oR[k], op[k], mass[k], com[k])
        if order > 0:
            world_motions(m, v[k], v[k], 1, False, J[k], ov[k], ov[k], w6)
            _subtree_com_velocities(m, oR[k], op[k], ov[k], mass[k], vcom[k])
        com_jacobian(m, k, J, mass, com, Jcom)
        if order > 0:
            _com_velocity_columns(m, J[k], ov[k], mass[k], com[k], vcom[k], dvcom_dq[k], wc)


# --- Public API -------------------------------------------------------------

def compute_forward_kinematics_derivatives(model, data, q, v, a):
    """Forward pass of the kinematics derivatives (Pinocchio's
    ``computeForwardKinematicsDerivatives``; Carpentier & Mansard 2018, Sec. III-D).

    Parameters
    ----------
    q : (nq,) or (K, nq); v, a : (nv,) or (K, nv).

    Fills, for every state (leading K axis of the Data arrays): the placements
    ``liR, lip, oR, op``; the local spatial velocities and accelerations ``v``,
    ``a`` (njoints, 6) (gravity not included) as ``forward_kinematics``; their
    world-frame twins ``ov``, ``oa``; the world Jacobian ``J`` (6, nv) and the
    columns ``dJ = ov_j x J``, ``dVdq``, ``dAdq``, ``dAdv`` (6, nv) of the
    module docstring.  The getters (:func:`joint_velocity_derivatives`,
    :func:`frame_acceleration_derivatives`, ...) read these.  Returns None.
    """
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs, _ = as_stack(v, model.nv, "v", (K, single))
    accs, _ = as_stack(a, model.nv, "a", (K, single))
    check_data(model, data, K, single)
    call_kernel(_forward_kinematics_derivatives, model, qs, vs, accs, 2, data.liR, data.lip,
                data.oR, data.op, data.J, data.v, data.a, data.ov, data.oa, data.dJ, data.dVdq,
                data.dAdq, data.dAdv)
    data._kinematics_derivatives_batch = (K, single)


def _derivatives(model, data, joint, fR, fp, f, reference, order):
    check_model_of(model, data)
    batch = data._kinematics_derivatives_batch
    if batch is None:
        raise RuntimeError("kinematics derivatives need compute_forward_kinematics_derivatives "
                           "on the same data first")
    K, single = batch
    code = _reference_code(reference)
    nv = model.nv
    outs = [np.zeros((K, 6, nv)) for _ in range(4 if order > 1 else 2)]
    if order < 2:
        outs += [outs[0], outs[0]]   # not written
    call_kernel(_motion_derivatives, model, joint, fR, fp, f, code, order, data.oR[:K],
                data.op[:K], data.ov[:K], data.oa[:K], data.J[:K], data.dVdq[:K], data.dAdq[:K],
                data.dAdv[:K], *outs)
    dv_dq, dv_dv, da_dq, da_dv = (x[0] if single else x for x in outs)
    if order < 2:
        return dv_dq, dv_dv
    return dv_dq, da_dq, da_dv, dv_dv.copy()


def joint_velocity_derivatives(model, data, joint, reference=LOCAL):
    """Partial derivatives of the spatial velocity of a joint (Pinocchio's
    ``getJointVelocityDerivatives``).

    Requires :func:`compute_forward_kinematics_derivatives` on the same data;
    ``joint`` an id or a name; ``reference`` LOCAL, WORLD or
    LOCAL_WORLD_ALIGNED (codes or names).  Returns ``(dv_dq, dv_dv)``, (6, nv)
    each or (K, 6, nv) for a stack; dv_dq is in the tangent space of q and
    dv_dv is the joint Jacobian in that reference.
    """
    joint = check_joint(model, joint)
    return _derivatives(model, data, joint, _IDENTITY_R, _ZERO_P, 0, reference, 1)


def joint_acceleration_derivatives(model, data, joint, reference=LOCAL):
    """Partial derivatives of the spatial acceleration of a joint (Pinocchio's
    ``getJointAccelerationDerivatives``).

    Requires :func:`compute_forward_kinematics_derivatives` on the same data.
    Returns ``(dv_dq, da_dq, da_dv, da_da)``, (6, nv) each or (K, 6, nv):
    the velocity derivative with respect to q, then the derivatives of the
    spatial acceleration (gravity not included) with respect to q, v, a.
    """
    joint = check_joint(model, joint)
    return _derivatives(model, data, joint, _IDENTITY_R, _ZERO_P, 0, reference, 2)


def frame_velocity_derivatives(model, data, frame, reference=LOCAL):
    """Partial derivatives of the spatial velocity of a frame (Pinocchio's
    ``getFrameVelocityDerivatives``): as :func:`joint_velocity_derivatives`,
    at the frame's placement.  ``frame`` an id or a name."""
    frame = check_frame(model, frame)
    a = model.arrays
    return _derivatives(model, data, a.frame_joint[frame], a.frame_R, a.frame_p, frame,
                        reference, 1)


def frame_acceleration_derivatives(model, data, frame, reference=LOCAL):
    """Partial derivatives of the spatial acceleration of a frame (Pinocchio's
    ``getFrameAccelerationDerivatives``): as :func:`joint_acceleration_derivatives`,
    at the frame's placement.  Returns ``(dv_dq, da_dq, da_dv, da_da)``."""
    frame = check_frame(model, frame)
    a = model.arrays
    return _derivatives(model, data, a.frame_joint[frame], a.frame_R, a.frame_p, frame,
                        reference, 2)


def compute_joint_jacobians_time_variation(model, data, q, v):
    """Time derivative dJ/dt (6, nv) of the world Jacobian of all joints, column
    c = ov_j(c) x J_c (Pinocchio's ``computeJointJacobiansTimeVariation``).

    ``q`` (nq,) or (K, nq), ``v`` (nv,) or (K, nv).  Fills ``data.J``,
    ``data.dJ``, ``data.ov``, ``data.v`` and the placements; returns dJ (6, nv)
    or (K, 6, nv).
    """
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs, _ = as_stack(v, model.nv, "v", (K, single))
    check_data(model, data, K, single)
    call_kernel(_frame_jacobian_time_variation, model, qs, vs, -1, WORLD, data.liR, data.lip,
                data.oR, data.op, data.J, data.v, data.ov, data.dJ, data.dJ)
    return result(data.dJ, K, single).copy()


def frame_jacobian_time_variation(model, data, q, v, frame, reference=LOCAL):
    """Time derivative dJ/dt (6, nv) of the Jacobian of a frame in LOCAL, WORLD
    or LOCAL_WORLD_ALIGNED (Pinocchio's ``getFrameJacobianTimeVariation`` after
    ``computeJointJacobiansTimeVariation``).

    ``q`` (nq,) or (K, nq), ``v`` (nv,) or (K, nv); returns (6, nv) or
    (K, 6, nv).  Fills what :func:`compute_joint_jacobians_time_variation` fills.
    """
    frame = check_frame(model, frame)
    code = _reference_code(reference)
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs, _ = as_stack(v, model.nv, "v", (K, single))
    check_data(model, data, K, single)
    out = np.zeros((K, 6, model.nv))
    call_kernel(_frame_jacobian_time_variation, model, qs, vs, frame, code, data.liR, data.lip,
                data.oR, data.op, data.J, data.v, data.ov, data.dJ, out)
    return out[0] if single else out


def center_of_mass_derivatives(model, data, q):
    """Derivative of the centre of mass with respect to q (tangent space), (3, nv)
    or (K, 3, nv): the centre-of-mass Jacobian (Pinocchio's ``jacobianCenterOfMass``).

    Fills ``data.mass``, ``data.com`` (subtree masses and centres of mass,
    world) and ``data.Jcom``.
    """
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    call_kernel(_center_of_mass_derivatives, model, qs, np.zeros((K, model.nv)), 0, data.liR,
                data.lip, data.oR, data.op, data.J, data.ov, data.mass, data.com, data.vcom,
                data.Jcom, data.Jcom)
    return result(data.Jcom, K, single).copy()


def center_of_mass_velocity_derivatives(model, data, q, v):
    """Partial derivatives of the centre-of-mass velocity vcom = Jcom(q) v.

    ``q`` (nq,) or (K, nq), ``v`` (nv,) or (K, nv).  Returns ``(dvcom_dq,
    dvcom_dv)``, (3, nv) each or (K, 3, nv): dvcom_dq as Pinocchio's
    ``getCenterOfMassVelocityDerivatives`` (tangent space of q), dvcom_dv =
    Jcom.  Fills ``data.mass``, ``data.com``, ``data.vcom`` (subtree centres
    of mass and their velocities, world), ``data.ov``, ``data.J`` and
    ``data.Jcom``.
    """
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs, _ = as_stack(v, model.nv, "v", (K, single))
    check_data(model, data, K, single)
    dvcom_dq = np.empty((K, 3, model.nv))
    call_kernel(_center_of_mass_derivatives, model, qs, vs, 1, data.liR, data.lip, data.oR,
                data.op, data.J, data.ov, data.mass, data.com, data.vcom, data.Jcom, dvcom_dq)
    Jcom = result(data.Jcom, K, single).copy()
    return (dvcom_dq[0] if single else dvcom_dq), Jcom
