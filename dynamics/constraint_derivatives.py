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

Against the ground (joint2 = 0) the correction has a closed form.  A LOCAL
force or wrench turns and moves with body 1: it is attached, dF_1 = J_d x*
F_1, the correction is zero and nothing is computed.  A LOCAL_WORLD_ALIGNED
one (f, n) at pc_1 keeps its world axes: dF_1 = [0; dp x f], and with
g = w_d x f (w_d = J_d.ang) the Jacobi identity gives dF_1 - J_d x* F_1 =
-[g; pc_1 x g + w_d x n], so dtau_dq[c, d] += (J_c.lin + J_c.ang x pc_1) . g
+ J_c.ang . (w_d x n) for the dofs c, d that support body 1 (n = 0 for a
3D contact): three or six products per entry instead of the general
corrections.
"""
import numpy as np

from .config import inline_kernel, kernel
from .constraints import (CONTACT_3D, add_cross, as_constraint_set, constraint_kinematics_state,
                          constraint_values, constraint_workspace, rotate, rotate_transpose,
                          supports, translate_motion, world_constraint_forces)
from .kinematics import LOCAL
from .liegroup_derivatives import _se3_jr_inverse
from .spatial import cross, force_cross, inv_act_motion, motion_cross
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


@inline_kernel
def _cross_motion(ms, i, l0, l1, l2, w0, w1, w2):
    """ms[i] x [l; w] (spatial motion cross product) as six values."""
    a0, a1, a2 = cross(ms[i, 3], ms[i, 4], ms[i, 5], l0, l1, l2)
    b0, b1, b2 = cross(ms[i, 0], ms[i, 1], ms[i, 2], w0, w1, w2)
    c0, c1, c2 = cross(ms[i, 3], ms[i, 4], ms[i, 5], w0, w1, w2)
    return a0 + b0, a1 + b1, a2 + b2, c0, c1, c2


@inline_kernel
def _ground_point_columns(m, J, ov, oa, i, cp1, cR1, k, Kp, Kd, r0, local, w, dc_dq, dc_dv):
    """The columns of dc_dq, dc_dv of a 3D contact of body i against the ground: the
    formulas of :func:`_body_derivatives` and :func:`_point_derivative` on values
    (the point pc_2 does not move), for the dofs d that support body i.  w holds
    constraint_values' rows W (10) and the point's motion vp (11)."""
    parents, dof_joint, subtree_end = m.parents, m.dof_joint, m.subtree_end
    p = (cp1[k, 0], cp1[k, 1], cp1[k, 2])
    body = (ov[i, 3], ov[i, 4], ov[i, 5], oa[i, 3], oa[i, 4], oa[i, 5],   # omega_i, alpha_i
            w[11, 0], w[11, 1], w[11, 2], w[10, 0], w[10, 1], w[10, 2])   # vp, W
    for d in range(m.nv):
        j = dof_joint[d]
        if not supports(subtree_end, j, i):
            continue
        lam = parents[j]
        l0, l1, l2, n0, n1, n2 = J[0, d], J[1, d], J[2, d], J[3, d], J[4, d], J[5, d]
        u0, u1, u2, u3, u4, u5 = _cross_motion(ov, lam, l0, l1, l2, n0, n1, n2)
        x0, x1, x2, x3, x4, x5 = _cross_motion(ov, i, l0, l1, l2, n0, n1, n2)
        # the point's motion along d: dp (q) = d vp (v) = J_d.lin + J_d.ang x p
        t0, t1, t2 = cross(n0, n1, n2, p[0], p[1], p[2])
        dp = (l0 + t0, l1 + t1, l2 + t2)
        # q: dov = u - ov_i x J_d, doa = oa_lam x J_d + ov_lam x u - oa_i x J_d - ov_i x u
        a0, a1, a2, a3, a4, a5 = _cross_motion(oa, lam, l0, l1, l2, n0, n1, n2)
        b0, b1, b2, b3, b4, b5 = _cross_motion(ov, lam, u0, u1, u2, u3, u4, u5)
        c0, c1, c2, c3, c4, c5 = _cross_motion(oa, i, l0, l1, l2, n0, n1, n2)
        g0, g1, g2, g3, g4, g5 = _cross_motion(ov, i, u0, u1, u2, u3, u4, u5)
        _point_column((u0 - x0, u1 - x1, u2 - x2, u3 - x3, u4 - x4, u5 - x5),
                      ((a0 + b0) - (c0 + g0), (a1 + b1) - (c1 + g1), (a2 + b2) - (c2 + g2),
                       (a3 + b3) - (c3 + g3), (a4 + b4) - (c4 + g4), (a5 + b5) - (c5 + g5)),
                      dp, True, Kp, Kd, p, body, local, (n0, n1, n2), cR1, k, r0, dc_dq, d)
        # v: dov = J_d, doa = ov_j x J_d + u - ov_i x J_d, dp = 0
        a0, a1, a2, a3, a4, a5 = _cross_motion(ov, j, l0, l1, l2, n0, n1, n2)
        _point_column((l0, l1, l2, n0, n1, n2),
                      (a0 + u0 - x0, a1 + u1 - x1, a2 + u2 - x2, a3 + u3 - x3, a4 + u4 - x4,
                       a5 + u5 - x5),
                      dp, False, Kp, Kd, p, body, local, (n0, n1, n2), cR1, k, r0, dc_dv, d)


@inline_kernel
def _point_column(dv, da, dp, wrt_q, Kp, Kd, p, body, local, n, cR1, k, r0, out, d):
    """out[r0:r0+3, d] = :func:`point_column_values` (body = (omega_i, alpha_i, vp, W),
    twelve values), rotated by R^T (cR1[k]) when LOCAL."""
    e0, e1, e2, h0, h1, h2, s0, s1, s2, W0, W1, W2 = body
    x0, x1, x2 = point_column_values(dv, da, dp, wrt_q, local, Kp, Kd, p, (e0, e1, e2),
                                     (h0, h1, h2), (s0, s1, s2), (W0, W1, W2), n)
    if local:
        for r in range(3):
            out[r0 + r, d] = cR1[k, 0, r] * x0 + cR1[k, 1, r] * x1 + cR1[k, 2, r] * x2
    else:
        out[r0, d], out[r0 + 1, d], out[r0 + 2, d] = x0, x1, x2


@inline_kernel
def point_column_values(dv, da, dp, wrt_q, local, Kp, Kd, p, omega, alpha, vp, W, n):
    """The column along q_d (``wrt_q``) or v_d of a 3D contact's c = ap + Kp (p - p*)
    + Kd vp, before LOCAL's R^T, from the body's motion derivatives dv = dov, da = doa
    along d (6 values each) and the point's dp = d p (q; unused for v):
    d vp = dov.lin + dov.ang x p + omega x dp, d ap = doa.lin + doa.ang x p + alpha x dp
    + dov.ang x vp + omega x d vp, then d ap + Kp dp + Kd d vp; LOCAL subtracts n x W
    for q (n = J_d.ang, W = c's value).  omega, alpha: the body's angular velocity and
    acceleration; vp: the point's velocity (3 values each).  Three values, in the order
    of operations of both the stack and the lanes derivatives."""
    t0, t1, t2 = cross(dv[3], dv[4], dv[5], p[0], p[1], p[2])
    if wrt_q:
        y0, y1, y2 = cross(omega[0], omega[1], omega[2], dp[0], dp[1], dp[2])
        q0, q1, q2 = dv[0] + t0 + y0, dv[1] + t1 + y1, dv[2] + t2 + y2
        z0, z1, z2 = cross(alpha[0], alpha[1], alpha[2], dp[0], dp[1], dp[2])
        k0, k1, k2 = Kp * dp[0], Kp * dp[1], Kp * dp[2]
    else:
        q0, q1, q2 = dv[0] + t0, dv[1] + t1, dv[2] + t2
        z0, z1, z2 = 0.0, 0.0, 0.0
        k0, k1, k2 = 0.0, 0.0, 0.0
    c0, c1, c2 = cross(da[3], da[4], da[5], p[0], p[1], p[2])
    f0, f1, f2 = cross(dv[3], dv[4], dv[5], vp[0], vp[1], vp[2])
    g0, g1, g2 = cross(omega[0], omega[1], omega[2], q0, q1, q2)
    x0 = da[0] + c0 + z0 + f0 + g0 + k0 + Kd * q0
    x1 = da[1] + c1 + z1 + f1 + g1 + k1 + Kd * q1
    x2 = da[2] + c2 + z2 + f2 + g2 + k2 + Kd * q2
    if local and wrt_q:
        y0, y1, y2 = cross(n[0], n[1], n[2], W[0], W[1], W[2])
        x0, x1, x2 = x0 - y0, x1 - y1, x2 - y2
    return x0, x1, x2


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
        if point and i2 == 0:
            _ground_point_columns(m, J, ov, oa, i1, cp1, cR1, k, Kp, Kd, r0, local, w, dc_dq,
                                  dc_dv)
            continue
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


@inline_kernel
def _world_aligned_force_derivatives(m, ca, k, J, cp1, lam, dtau_dq):
    """dtau_dq[c, d] += (J_c.lin + J_c.ang x pc_1) . (w_d x f) + J_c.ang . (w_d x n) for
    a LOCAL_WORLD_ALIGNED constraint k against the ground (module docstring)."""
    dof_joint, subtree_end, nv = m.dof_joint, m.subtree_end, m.nv
    i1, r0 = ca.joint1[k], ca.row[k]
    f0, f1, f2 = lam[r0], lam[r0 + 1], lam[r0 + 2]
    n0, n1, n2 = 0.0, 0.0, 0.0
    if ca.kind[k] != CONTACT_3D:
        n0, n1, n2 = lam[r0 + 3], lam[r0 + 4], lam[r0 + 5]
    p0, p1, p2 = cp1[k, 0], cp1[k, 1], cp1[k, 2]
    for d in range(nv):
        if not supports(subtree_end, dof_joint[d], i1):
            continue
        w0, w1, w2 = J[3, d], J[4, d], J[5, d]
        g0, g1, g2 = w1 * f2 - w2 * f1, w2 * f0 - w0 * f2, w0 * f1 - w1 * f0
        h0, h1, h2 = w1 * n2 - w2 * n1, w2 * n0 - w0 * n2, w0 * n1 - w1 * n0
        for c in range(nv):
            if not supports(subtree_end, dof_joint[c], i1):
                continue
            a0, a1, a2 = J[3, c], J[4, c], J[5, c]
            l0 = J[0, c] + a1 * p2 - a2 * p1
            l1 = J[1, c] + a2 * p0 - a0 * p2
            l2 = J[2, c] + a0 * p1 - a1 * p0
            dtau_dq[c, d] += l0 * g0 + l1 * g1 + l2 * g2 + a0 * h0 + a1 * h1 + a2 * h2


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
        if i2 == 0:  # against the ground: the closed forms of the module docstring
            if not local:
                _world_aligned_force_derivatives(m, ca, k, J, cp1, lam, dtau_dq)
            continue
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
        constraint_kinematics_state(m, ca, q[k], v[k], a[k], True, liR[k], lip[k], oR[k], op[k],
                                    J[k], ov, oa, cR1, cp1, cR2, cp2, dc_da[k], XR, Xp, w6)
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
