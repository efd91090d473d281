"""Partial derivatives of the constraint acceleration and of the constraint forces.

Notation of :mod:`.constraints`.  A tangent perturbation of dof d (joint j,
parent lambda) moves the subtree of j rigidly, so for a joint i that d
supports (``s_i(d)``) the world motions vary as (Carpentier & Mansard 2018,
identity (13), with u = ov_lambda x J_d):

    dov_i/dq_d = u - ov_i x J_d              dov_i/dv_d = J_d
    doa_i/dq_d = oa_lambda x J_d + ov_lambda x u - oa_i x J_d - ov_i x u
    doa_i/dv_d = ov_j x J_d + u - ov_i x J_d          doa_i/da_d = J_d

and a point p of body i moves by ``dp = J_d.lin + J_d.ang x p``.  The
derivatives of c(q, v, a) = Jc a + gamma then follow its three formulas line
by line (:func:`constraint_acceleration_derivatives_state`); the Baumgarte
term of a 6D constraint uses d log6(c1Mc2)/dq_d = (s_2 - s_1) Jlog6(c1Mc2)
X2^-1 J_d, with Jlog6 the inverse right Jacobian of SE(3).

Forces.  With the multipliers applied as external forces (F on body 1, -F on
body 2), the world-frame RNEA derivatives treat each force as attached to its
body: dF/dq_d = s_body(d) J_d x* F.  The constraint forces are not all
attached (the direction of a 3D force is attached to body 1 but it acts on
body 2 at pc_2; a LOCAL_WORLD_ALIGNED force keeps its world axes), so
:func:`constraint_force_derivatives_state` adds, for every dof c of the
support, -J_c . (dF_1 - s_1 J_d x* F_1) on body 1 and +J_c . (dF_2 - s_2 J_d
x* F_2) on body 2, where dF is the exact variation: then
dtau/dq = d(ID(q, v, a) - Jc(q)^T lambda)/dq exactly.
"""
import numpy as np

from .config import inline_kernel, kernel
from .constraints import (CONTACT_3D, add_cross, as_constraint_set, constraint_jacobian_state,
                          constraint_placements_state, constraint_values, constraint_workspace,
                          rotate, rotate_transpose, supports, translate_motion,
                          world_constraint_forces)
from .joints import placements
from .kinematics import LOCAL, joint_jacobians_state, world_motions
from .liegroup_derivatives import _se3_jr_inverse
from .spatial import force_cross, inv_act_motion, motion_cross
from .validation import as_configurations, as_stack, check_data

# Rows of the scratch w (20, 6): 0 J_d, 1 dov_1, 2 doa_1, 3 dov_2, 4 doa_2,
# 5 u = ov_lambda x J_d, 6 dp (:3 body 1, 3: body 2), 7 and 8 point derivatives,
# 9-15 constraint_values, 16-19 temporaries.
_JD, _DV1, _DA1, _DV2, _DA2, _U, _DP, _PD1, _PD2 = range(9)
_W, _PM1, _PM2, _LOG, _DOV, _RLOG = 10, 11, 12, 13, 14, 15


@inline_kernel
def _body_derivatives(ov, oa, i, lam, j, wrt_q, w, dv, da):
    """w[dv], w[da] = derivatives of ov_i, oa_i along q_d (wrt_q) or v_d (module docstring);
    rows _JD and _U hold J_d and u; rows 16, 17 scratch."""
    if wrt_q:
        motion_cross(ov, i, w, _JD, w, 16)
        for r in range(6):
            w[dv, r] = w[_U, r] - w[16, r]
        motion_cross(oa, lam, w, _JD, w, 16)
        motion_cross(ov, lam, w, _U, w, 17)
        for r in range(6):
            w[da, r] = w[16, r] + w[17, r]
        motion_cross(oa, i, w, _JD, w, 16)
        motion_cross(ov, i, w, _U, w, 17)
        for r in range(6):
            w[da, r] -= w[16, r] + w[17, r]
    else:
        motion_cross(ov, j, w, _JD, w, 16)
        motion_cross(ov, i, w, _JD, w, 17)
        for r in range(6):
            w[dv, r] = w[_JD, r]
            w[da, r] = w[16, r] + w[_U, r] - w[17, r]


@inline_kernel
def _point_derivative(ov, oa, i, p, k, w, dv, da, dpo, vp, out):
    """w[out, :3] = d vp = dov.lin + dov.ang x p + ov.ang x dp;
    w[out, 3:] = d ap = doa.lin + doa.ang x p + oa.ang x dp + dov.ang x vp + ov.ang x d vp
    (dp = w[_DP, dpo:dpo+3], vp = w[vp, :3])."""
    for r in range(3):
        w[out, r] = w[dv, r]
        w[out, 3 + r] = w[da, r]
    add_cross(w, dv, 3, p, k, 0, w, out, 0, 1.0)
    add_cross(ov, i, 3, w, _DP, dpo, w, out, 0, 1.0)
    add_cross(w, da, 3, p, k, 0, w, out, 3, 1.0)
    add_cross(oa, i, 3, w, _DP, dpo, w, out, 3, 1.0)
    add_cross(w, dv, 3, w, vp, 0, w, out, 3, 1.0)
    add_cross(ov, i, 3, w, out, 0, w, out, 3, 1.0)


@inline_kernel
def _point_derivative_or_zero(ov, oa, i, p, k, moved, w, dv, da, dpo, vp, out):
    if moved:
        _point_derivative(ov, oa, i, p, k, w, dv, da, dpo, vp, out)
    else:
        for r in range(6):
            w[out, r] = 0.0


@inline_kernel
def _point_velocity(J, c, p, k, s, w, o, oo):
    """w[o, oo:oo+3] = s * (J_c.lin + J_c.ang x p[k]): the motion of p along dof c."""
    if s:
        w[o, oo] = J[0, c] + J[4, c] * p[k, 2] - J[5, c] * p[k, 1]
        w[o, oo + 1] = J[1, c] + J[5, c] * p[k, 0] - J[3, c] * p[k, 2]
        w[o, oo + 2] = J[2, c] + J[3, c] * p[k, 1] - J[4, c] * p[k, 0]
    else:
        for r in range(3):
            w[o, oo + r] = 0.0


@inline_kernel
def _column_3d(k, i1, i2, Kp, Kd, r0, local, ov, oa, cp1, cp2, cR1, wrt_q, s1, s2, w, out, d):
    """A point that dof d does not move (s1 or s2 false: its motion derivatives and dp
    are zero) has zero derivatives: not computed (the ground of a foot contact)."""
    _point_derivative_or_zero(ov, oa, i1, cp1, k, s1, w, _DV1, _DA1, 0, _PM1, _PD1)
    _point_derivative_or_zero(ov, oa, i2, cp2, k, s2, w, _DV2, _DA2, 3, _PM2, _PD2)
    for r in range(3):
        w[18, r] = (w[_PD1, 3 + r] - w[_PD2, 3 + r] - Kp * (w[_DP, 3 + r] - w[_DP, r])
                    + Kd * (w[_PD1, r] - w[_PD2, r]))
    if local:
        if wrt_q and s1:
            add_cross(w, _JD, 3, w, _W, 0, w, 18, 0, -1.0)
        rotate_transpose(cR1, k, w, 18, 0, w, 18, 0, 1.0)
    for r in range(3):
        out[r0 + r, d] = w[18, r]


@inline_kernel
def _column_6d(k, i2, Kp, Kd, r0, local, ov, cR1, cp1, cR2, cp2, Jlog, wrt_q, s1, s2, w, out,
               d):
    for r in range(6):
        w[19, r] = w[_DV1, r] - w[_DV2, r]
        w[18, r] = w[_DA1, r] - w[_DA2, r] + Kd * w[19, r]
    if local:
        motion_cross(w, 19, ov, i2, w, 16)
        motion_cross(w, _DOV, w, _DV2, w, 17)
        for r in range(6):
            w[18, r] += w[16, r] + w[17, r]
        if wrt_q and s1:
            motion_cross(w, _JD, w, _W, w, 16)
            for r in range(6):
                w[18, r] -= w[16, r]
        inv_act_motion(cR1, cp1, k, w, 18, w, 17)
    else:
        translate_motion(cp1, k, w, 18, w, 17)
        if wrt_q and s1:
            add_cross(w, _W, 3, w, _DP, 0, w, 17, 0, 1.0)
    if wrt_q and Kp != 0.0:
        if s1 != s2:
            # dlog6 = (s2 - s1) Jlog X2^-1 J_d; row 19 = Jlog X2^-1 J_d
            inv_act_motion(cR2, cp2, k, w, _JD, w, 16)
            for r in range(6):
                t = 0.0
                for c in range(6):
                    t += Jlog[r, c] * w[16, c]
                w[19, r] = t
            if not local:
                rotate(cR1, k, w, 19, 0, w, 19, 0)
                rotate(cR1, k, w, 19, 3, w, 19, 3)
            scale = Kp if s1 else -Kp
            for r in range(6):
                w[17, r] += scale * w[19, r]
        if not local and s1:
            add_cross(w, _JD, 3, w, _RLOG, 0, w, 17, 0, -Kp)
            add_cross(w, _JD, 3, w, _RLOG, 3, w, 17, 3, -Kp)
    for r in range(6):
        out[r0 + r, d] = w[17, r]


@kernel
def constraint_acceleration_derivatives_state(m, ca, J, ov, oa, cR1, cp1, cR2, cp2, dc_dq,
                                              dc_dv, w, xi, RM, pM, t3, Jlog, S):
    """dc_dq, dc_dv (nrows, nv) of c(q, v, a) for the world motions ov, oa of one
    state (oa at the acceleration a; dc/da = Jc).  Jlog (6, 6), S (9, 3, 3) scratch."""
    parents, dof_joint, subtree_end, nv = m.parents, m.dof_joint, m.subtree_end, m.nv
    rows, joint1, joint2, kinds, references, Kps, Kds = (ca.row, ca.joint1, ca.joint2, ca.kind,
                                                         ca.reference, ca.Kp, ca.Kd)
    dc_dq[:, :] = 0.0
    dc_dv[:, :] = 0.0
    for k in range(ca.n):
        i1, i2, r0, Kp, Kd = joint1[k], joint2[k], rows[k], Kps[k], Kds[k]
        point, local = kinds[k] == CONTACT_3D, references[k] == LOCAL
        constraint_values(ca, k, ov, oa, cR1, cp1, cR2, cp2, w, xi, RM, pM, t3)
        if not point and Kp != 0.0:
            _se3_jr_inverse(xi, 1.0, Jlog, S)
        for d in range(nv):
            j = dof_joint[d]
            s1 = supports(subtree_end, j, i1)
            s2 = supports(subtree_end, j, i2)
            if not (s1 or s2):
                continue
            lam = parents[j]
            for r in range(6):
                w[_JD, r] = J[r, d]
            motion_cross(ov, lam, w, _JD, w, _U)
            _point_velocity(J, d, cp1, k, s1, w, _DP, 0)
            _point_velocity(J, d, cp2, k, s2, w, _DP, 3)
            for mode in range(2):
                wrt_q = mode == 0
                out = dc_dq if wrt_q else dc_dv
                if not wrt_q:
                    for r in range(6):
                        w[_DP, r] = 0.0
                for r in range(6):
                    w[_DV2, r] = 0.0
                    w[_DA2, r] = 0.0
                    w[_DV1, r] = 0.0
                    w[_DA1, r] = 0.0
                if s1:
                    _body_derivatives(ov, oa, i1, lam, j, wrt_q, w, _DV1, _DA1)
                if s2:
                    _body_derivatives(ov, oa, i2, lam, j, wrt_q, w, _DV2, _DA2)
                if point:
                    _column_3d(k, i1, i2, Kp, Kd, r0, local, ov, oa, cp1, cp2, cR1, wrt_q, s1, s2,
                               w, out, d)
                else:
                    _column_6d(k, i2, Kp, Kd, r0, local, ov, cR1, cp1, cR2, cp2, Jlog, wrt_q, s1,
                               s2, w, out, d)


@kernel
def constraint_force_derivatives_state(m, ca, J, cR1, cp1, cp2, lam, dtau_dq, w):
    """dtau_dq += the derivative of -Jc^T lambda that the RNEA derivatives with
    the constraint forces as f_ext leave out (module docstring).  w (20, 6) scratch:
    0 F_1, 1 F_2, 2 J_d, 3 motions of pc_1 (:3), pc_2 (3:), 4 dF_1, 5 dF_2, 6-7 scratch."""
    dof_joint, subtree_end, nv = m.dof_joint, m.subtree_end, m.nv
    joint1, joint2, kinds, references = ca.joint1, ca.joint2, ca.kind, ca.reference
    for k in range(ca.n):
        i1, i2 = joint1[k], joint2[k]
        point, local = kinds[k] == CONTACT_3D, references[k] == LOCAL
        world_constraint_forces(ca, k, cR1, cp1, cp2, lam, w)
        for d in range(nv):
            j = dof_joint[d]
            s1 = supports(subtree_end, j, i1)
            s2 = supports(subtree_end, j, i2)
            if not (s1 or s2):
                continue
            for r in range(6):
                w[2, r] = J[r, d]
                w[4, r] = 0.0
                w[5, r] = 0.0
            _point_velocity(J, d, cp1, k, s1, w, 3, 0)
            _point_velocity(J, d, cp2, k, s2, w, 3, 3)
            if point:
                # f = w[0, :3]; df = w_d x f when f turns with body 1
                if local and s1:
                    add_cross(w, 2, 3, w, 0, 0, w, 4, 0, 1.0)
                for r in range(3):
                    w[5, r] = w[4, r]
                add_cross(w, 3, 0, w, 0, 0, w, 4, 3, 1.0)
                add_cross(cp1, k, 0, w, 4, 0, w, 4, 3, 1.0)
                add_cross(w, 3, 3, w, 0, 0, w, 5, 3, 1.0)
                add_cross(cp2, k, 0, w, 5, 0, w, 5, 3, 1.0)
            elif local:
                if s1:
                    force_cross(w, 2, w, 0, w, 4)
                for r in range(6):
                    w[5, r] = w[4, r]
            else:
                add_cross(w, 3, 0, w, 0, 0, w, 4, 3, 1.0)
                for r in range(6):
                    w[5, r] = w[4, r]
            # corrections dF - s J_d x* F
            if s1:
                force_cross(w, 2, w, 0, w, 6)
                for r in range(6):
                    w[4, r] -= w[6, r]
            if s2:
                force_cross(w, 2, w, 1, w, 6)
                for r in range(6):
                    w[5, r] -= w[6, r]
            for c in range(nv):
                jc = dof_joint[c]
                t = 0.0
                if supports(subtree_end, jc, i1):
                    for r in range(6):
                        t -= J[r, c] * w[4, r]
                if supports(subtree_end, jc, i2):
                    for r in range(6):
                        t += J[r, c] * w[5, r]
                dtau_dq[c, d] += t


def constraint_derivatives_workspace():
    """Jlog (6, 6) and S (9, 3, 3): the extra scratch of the derivative kernels."""
    return np.zeros((6, 6)), np.zeros((9, 3, 3))


@kernel
def _constraint_acceleration_derivatives(m, ca, q, v, a, liR, lip, oR, op, J, ov, oa, dc_dq,
                                         dc_dv, dc_da, cR1, cp1, cR2, cp2, w, xi, RM, pM, t3,
                                         Jlog, S):
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    w6 = np.empty((2, 6))
    for k in range(q.shape[0]):
        placements(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k])
        joint_jacobians_state(m, oR[k], op[k], J[k])
        constraint_placements_state(ca, oR[k], op[k], cR1, cp1, cR2, cp2)
        constraint_jacobian_state(m, ca, J[k], cR1, cp1, cp2, dc_da[k])
        world_motions(m, v[k], a[k], 2, False, J[k], ov, oa, w6)
        constraint_acceleration_derivatives_state(m, ca, J[k], ov, oa, cR1, cp1, cR2, cp2,
                                                  dc_dq[k], dc_dv[k], w, xi, RM, pM, t3, Jlog,
                                                  S)


def constraint_acceleration_derivatives(model, data, q, v, a, constraints):
    """Partial derivatives of the constraint acceleration c(q, v, a) = Jc a + gamma
    (:func:`~geppetto.dynamics.constraints.constraint_acceleration`).

    Returns ``(dc_dq, dc_dv, dc_da)``, (nrows, nv) each or (K, nrows, nv);
    dc_dq in the tangent space of q, dc_da = Jc.  For a contact without gains
    these are Pinocchio's ``getFrameAccelerationDerivatives`` (6D LOCAL) or
    ``getPointClassicAccelerationDerivatives`` (3D) of the contact frame.
    """
    cs = as_constraint_set(model, constraints)
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs, _ = as_stack(v, model.nv, "v", (K, single))
    accs, _ = as_stack(a, model.nv, "a", (K, single))
    check_data(model, data, K, single)
    ca = cs.arrays
    out = [np.empty((K, ca.nrows, model.nv)) for _ in range(3)]
    ov = np.empty((model.njoints, 6))
    oa = np.empty((model.njoints, 6))
    _constraint_acceleration_derivatives(model.arrays, ca, qs, vs, accs, data.liR, data.lip,
                                         data.oR, data.op, data.J, ov, oa, *out,
                                         *constraint_workspace(ca),
                                         *constraint_derivatives_workspace())
    return tuple(x[0] if single else x for x in out)
