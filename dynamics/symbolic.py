"""The CasADi twin of the dynamics: the same algorithms as CasADi SX expressions.

``symbolic_functions(model)`` builds, from the same :class:`Model` as the
Numba kernels and for every joint type, ``casadi.Function`` objects for

    integrate(q, v) -> q_next          difference(q0, q1) -> v
    forward_kinematics(q) -> (oR (3 njoints, 3), op (njoints, 3))
    frame_placement(frame)(q) -> (R (3, 3), p (3,))
    rnea(q, v, a) -> tau               crba(q) -> M
    aba(q, v, tau) -> ddq
    rnea_derivatives(q, v, a) -> (dtau_dq, dtau_dv, dtau_da)
    aba_derivatives(q, v, tau) -> (dddq_dq, dddq_dv, dddq_dtau)

and, per constraint set and proximal settings (methods, the mathematics in
:mod:`.symbolic_constrained`),

    constraint_dynamics(constraints, mu, ...)(q, v, tau) -> (ddq, lambda)
    constraint_dynamics_derivatives(constraints, ...)(q, v, tau)
        -> (ddq_dq, ddq_dv, ddq_dtau, dlambda_dq, dlambda_dv, dlambda_dtau)
    impulse_dynamics(constraints, restitution, ...)(q, v) -> (v_after, impulse)
    impulse_dynamics_derivatives(constraints, ...)(q, v)
        -> (dv_after_dq, dv_after_dv, dimpulse_dq, dimpulse_dv)

The derivatives are CasADi's automatic differentiation (``casadi.jacobian``;
reverse mode for RNEA, forward mode for ABA and the constrained dynamics, see
:data:`AD_MODES`).  Derivatives with respect
to q are in the tangent space (nv columns, Pinocchio's convention): the
function is differentiated through ``integrate(q, dq)`` at dq = 0, so
free-flyer and spherical joints need no special case.

The algorithms are written again here, in the joint frames, as in
Featherstone (2008): RNEA (Table 5.1), CRBA (Table 6.2), ABA (Table 7.1).
The Numba kernels work in the world frame, so the two are independent
implementations of the same mathematics, which is what a check needs.
External forces are not inputs of these Functions.

Evaluating a Function runs CasADi's SX virtual machine; :meth:`compiled`
turns one into C (``CodeGenerator``), compiles it with the system C compiler
(``-O3``) into a shared library in a cache folder outside the repository and
loads it with ``casadi.external``.  ``CodegenUnavailable`` says why when
there is no compiler.

Notation: as :mod:`.model` (``liR, lip`` = liMi, ``oR, op`` = oMi, motions
and forces [linear; angular]); ``S_i`` the constant motion subspace (6, nv_i)
of joint i, ``Y_i`` its 6x6 spatial inertia, ``IA, pA`` articulated inertia
and bias force, ``U = IA S``, ``D = S^T U + armature``, ``u = tau - S^T pA``.

casadi is imported by this module only: ``import geppetto`` does not import it.
"""
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import weakref
from functools import cached_property

import casadi as ca
import numpy as np

from .model import (FREE_FLYER, PLANAR, PRISMATIC, REVOLUTE, REVOLUTE_UNBOUNDED, SPHERICAL,
                    TRANSLATION)

# The thresholds of the Taylor branches in liegroups.py, so that values agree to the last bits.
EXP3_SMALL_ANGLE = 1e-6
SE3_SMALL_ANGLE = 1e-4
LOG3_SMALL_NORM = 1e-8
PLANAR_SMALL_ANGLE = 1e-4

# The AD mode of each Jacobian, the one giving the smaller SX graph (instructions of
# the derivative Functions, forward / reverse): RNEA ur5 5238 / 3912, talos 127783 /
# 94753; ABA ur5 11986 / 19325, solo12 61936 / 187940, talos 317269 / 1044658;
# constraint_dynamics (solo12 4 point feet, talos 2 soles, LOCAL, Kp Kd; the values
# 11205 and 29005) solo12 156176 / 587538 (built in 0.5 / 1.4 s CPU), talos
# 602224 / 2529978 (1.9 / 7.1 s); impulse_dynamics (values 7889, 20897) solo12
# 96075 / 421917, talos 350290 / 1877591.  Reverse mode sweeps once per output row
# (nv + nc); forward mode carries 3 nv (2 nv) directions, those of tau only through
# the KKT solve.
AD_MODES = {"rnea": "reverse", "aba": "forward", "constraint_dynamics": "forward",
            "impulse_dynamics": "forward"}

# Above this many SX instructions, generated C is compiled with -O1 (see default_flags).
LARGE_FUNCTION = 50_000


# --- Spatial algebra on SX ------------------------------------------------------

def _skew(x):
    return ca.vertcat(ca.horzcat(0, -x[2], x[1]), ca.horzcat(x[2], 0, -x[0]),
                      ca.horzcat(-x[1], x[0], 0))


def _inv_act_motion(R, p, m):
    """liMi^-1 m: [R^T (v - p x w); R^T w]."""
    return ca.vertcat(R.T @ (m[:3] - ca.cross(p, m[3:])), R.T @ m[3:])


def _act_force(R, p, f):
    """liMi f: [R f; R n + p x R f]."""
    Rf = R @ f[:3]
    return ca.vertcat(Rf, R @ f[3:] + ca.cross(p, Rf))


def _motion_cross(m1, m2):
    return ca.vertcat(ca.cross(m1[3:], m2[:3]) + ca.cross(m1[:3], m2[3:]),
                      ca.cross(m1[3:], m2[3:]))


def _force_cross(m, f):
    return ca.vertcat(ca.cross(m[3:], f[:3]), ca.cross(m[3:], f[3:]) + ca.cross(m[:3], f[:3]))


def _inv_act_matrix(R, p):
    """The 6x6 matrix of m -> liMi^-1 m; its transpose maps forces child -> parent."""
    RT = R.T
    return ca.vertcat(ca.horzcat(RT, -RT @ _skew(p)), ca.horzcat(ca.SX(3, 3), RT))


def _spd_inverse(A):
    """Inverse of a small symmetric positive-definite SX matrix by LDL^T."""
    n = A.shape[0]
    if n == 1:
        return 1.0 / A
    L = [[None] * n for _ in range(n)]
    d = [None] * n
    for j in range(n):
        d[j] = A[j, j] - sum((L[j][k] ** 2 * d[k] for k in range(j)), ca.SX(0))
        for i in range(j + 1, n):
            L[i][j] = (A[i, j] - sum((L[i][k] * L[j][k] * d[k] for k in range(j)),
                                     ca.SX(0))) / d[j]
    # columns of L^-1 by forward substitution, then A^-1 = L^-T D^-1 L^-1
    Linv = ca.SX(n, n)
    for c in range(n):
        for r in range(c, n):
            s = ca.SX(1.0) if r == c else ca.SX(0)
            for k in range(c, r):
                s -= L[r][k] * Linv[k, c]
            Linv[r, c] = s
    return Linv.T @ ca.diag(ca.vertcat(*[1.0 / dj for dj in d])) @ Linv


def _constant(x):
    """A NumPy constant as a sparse DM: exact zeros are structural, so they vanish from SX."""
    return ca.sparsify(ca.DM(np.asarray(x, dtype=float)))


# --- Joints ------------------------------------------------------------------------

def _quaternion_to_rotation(x, y, z, w):
    return ca.vertcat(
        ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))


def _axis_rotation(axis, c, s):
    """Rodrigues: rotation about the unit axis by the angle (c, s) = (cos, sin)."""
    x, y, z = (float(value) for value in axis)
    t = 1 - c
    return ca.vertcat(
        ca.horzcat(c + t * x * x, t * x * y - s * z, t * x * z + s * y),
        ca.horzcat(t * x * y + s * z, c + t * y * y, t * y * z - s * x),
        ca.horzcat(t * x * z - s * y, t * y * z + s * x, c + t * z * z))


def _joint_transform(jtype, axis, q):
    """XJ(q) = (R, p) of a joint of type ``jtype`` with configuration q (nq_i,)."""
    R, p = ca.SX.eye(3), ca.SX(3, 1)
    if jtype == REVOLUTE:
        R = _axis_rotation(axis, ca.cos(q[0]), ca.sin(q[0]))
    elif jtype == REVOLUTE_UNBOUNDED:
        R = _axis_rotation(axis, q[0], q[1])
    elif jtype == PRISMATIC:
        p = _constant(axis) * q[0]
    elif jtype == FREE_FLYER:
        p, R = q[:3], _quaternion_to_rotation(q[3], q[4], q[5], q[6])
    elif jtype == SPHERICAL:
        R = _quaternion_to_rotation(q[0], q[1], q[2], q[3])
    elif jtype == PLANAR:
        p = ca.vertcat(q[0], q[1], 0)
        R = ca.vertcat(ca.horzcat(q[2], -q[3], 0), ca.horzcat(q[3], q[2], 0),
                       ca.horzcat(0, 0, 1))
    elif jtype == TRANSLATION:
        p = q[:3]
    else:
        raise ValueError(f"unknown joint type code {jtype}")
    return R, p


def _joint_blocks(m):
    """Per joint i >= 1: (i, parent, type, q slice, v slice, S_i as a sparse DM)."""
    for i in range(1, m.njoints):
        iq, iv = int(m.idx_q[i]), int(m.idx_v[i])
        yield (i, int(m.parents[i]), int(m.jtype[i]), slice(iq, iq + int(m.nqs[i])),
               slice(iv, iv + int(m.nvs[i])), _constant(m.S[:, iv:iv + int(m.nvs[i])]))


def _placements(m, q):
    """liMi and oMi of every joint: lists of (R, p), index 0 the universe (identity)."""
    liM = [(ca.SX.eye(3), ca.SX(3, 1))] * m.njoints
    oM = list(liM)
    for i, par, jtype, sq, _, _ in _joint_blocks(m):
        XR, Xp = _joint_transform(jtype, m.axis[i], q[sq])
        jR, jp = _constant(m.jR[i]), _constant(m.jp[i])
        liM[i] = (jR @ XR, jp + jR @ Xp)
        oM[i] = (oM[par][0] @ liM[i][0], oM[par][1] + oM[par][0] @ liM[i][1])
    return liM, oM


# --- Algorithms (Featherstone 2008, in the joint frames) ---------------------------

def _rnea(m, q, v, a, liM=None):
    """tau = ID(q, v, a): RNEA, Table 5.1; a_0 = -g.  ``liM``: the placements of q,
    when the caller has them."""
    liM = _placements(m, q)[0] if liM is None else liM
    vel = [ca.SX(6, 1)] * m.njoints
    acc = [-_constant(m.gravity)] + [None] * (m.njoints - 1)
    f = [None] * m.njoints
    for i, par, _, _, sv, S in _joint_blocks(m):
        vJ = S @ v[sv]
        vel[i] = _inv_act_motion(*liM[i], vel[par]) + vJ
        acc[i] = _inv_act_motion(*liM[i], acc[par]) + _motion_cross(vel[i], vJ) + S @ a[sv]
        Y = _constant(m.inertia[i])
        f[i] = Y @ acc[i] + _force_cross(vel[i], Y @ vel[i])
    tau = [None] * m.nv
    for i, par, _, _, sv, S in reversed(list(_joint_blocks(m))):
        tau_i = S.T @ f[i] + _constant(m.armature[sv]) * a[sv]
        tau[sv] = [tau_i[k] for k in range(tau_i.shape[0])]
        if par > 0:
            f[par] = f[par] + _act_force(*liM[i], f[i])
    return ca.vertcat(*tau)


def _crba(m, q, liM=None):
    """M(q): CRBA, Table 6.2, composite inertias Ic carried to the parent frame."""
    liM = _placements(m, q)[0] if liM is None else liM
    Ic = [_constant(m.inertia[i]) for i in range(m.njoints)]
    M = ca.SX(m.nv, m.nv)
    blocks = list(_joint_blocks(m))
    by_joint = {block[0]: block for block in blocks}
    for i, par, _, _, sv, S in reversed(blocks):
        F = Ic[i] @ S
        M[sv, sv] = S.T @ F + ca.diag(_constant(m.armature[sv]))
        Xinv = _inv_act_matrix(*liM[i])
        if par > 0:
            Ic[par] = Ic[par] + Xinv.T @ Ic[i] @ Xinv
        j = i
        while by_joint[j][1] > 0:
            F = _inv_act_matrix(*liM[j]).T @ F
            j = by_joint[j][1]
            _, _, _, _, sj, Sj = by_joint[j]
            M[sj, sv] = Sj.T @ F
            M[sv, sj] = M[sj, sv].T
    return M


def _aba(m, q, v, tau):
    """ddq = FD(q, v, tau): articulated-body algorithm, Table 7.1."""
    liM, _ = _placements(m, q)
    blocks = list(_joint_blocks(m))
    vel = [ca.SX(6, 1)] * m.njoints
    c, IA, pA = [None] * m.njoints, [None] * m.njoints, [None] * m.njoints
    for i, par, _, _, sv, S in blocks:
        vJ = S @ v[sv]
        vel[i] = _inv_act_motion(*liM[i], vel[par]) + vJ
        c[i] = _motion_cross(vel[i], vJ)
        Y = _constant(m.inertia[i])
        IA[i] = Y
        pA[i] = _force_cross(vel[i], Y @ vel[i])
    U, Dinv, u = {}, {}, {}
    for i, par, _, _, sv, S in reversed(blocks):
        U[i] = IA[i] @ S
        Dinv[i] = _spd_inverse(S.T @ U[i] + ca.diag(_constant(m.armature[sv])))
        u[i] = tau[sv] - S.T @ pA[i]
        if par > 0:
            Ia = IA[i] - U[i] @ Dinv[i] @ U[i].T
            pa = pA[i] + Ia @ c[i] + U[i] @ (Dinv[i] @ u[i])
            Xinv = _inv_act_matrix(*liM[i])
            IA[par] = IA[par] + Xinv.T @ Ia @ Xinv
            pA[par] = pA[par] + _act_force(*liM[i], pa)
    acc = [-_constant(m.gravity)] + [None] * (m.njoints - 1)
    ddq = [None] * m.nv
    for i, par, _, _, sv, S in blocks:
        a_prime = _inv_act_motion(*liM[i], acc[par]) + c[i]
        ddq_i = Dinv[i] @ (u[i] - U[i].T @ a_prime)
        ddq[sv] = [ddq_i[k] for k in range(ddq_i.shape[0])]
        acc[i] = a_prime + S @ ddq_i
    return ca.vertcat(*ddq)


# --- Lie groups (liegroups.py, same formulas and Taylor branches) -----------------

def _quaternion_multiply(a, b):
    """a * b for quaternions stored (x, y, z, w)."""
    return ca.vertcat(a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1],
                      a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0],
                      a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3],
                      a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2])


def _safe(small, value):
    """``value`` where not ``small`` and 1 elsewhere: keeps the exact branch finite."""
    return ca.if_else(small, 1.0, value)


def _exp3_quaternion(w):
    theta2 = ca.sumsqr(w)
    small = ca.sqrt(theta2) < EXP3_SMALL_ANGLE
    theta = ca.sqrt(_safe(small, theta2))
    s = ca.if_else(small, 0.5 - theta2 / 48.0, ca.sin(0.5 * theta) / theta)
    c = ca.if_else(small, 1.0 - theta2 / 8.0 + theta2 * theta2 / 384.0, ca.cos(0.5 * theta))
    return ca.vertcat(s * w, c)


def _log3_quaternion(quat):
    """Rotation vector of a unit quaternion (x, y, z, w), angle in [0, pi]."""
    sign = ca.if_else(quat[3] < 0.0, -1.0, 1.0)
    x, y, z, w = (sign * quat[k] for k in range(4))
    n2 = x * x + y * y + z * z
    small = ca.sqrt(n2) < LOG3_SMALL_NORM
    n = ca.sqrt(_safe(small, n2))
    scale = ca.if_else(small, 2.0 / w * (1.0 - n2 / (3.0 * w * w)), 2.0 * ca.atan2(n, w) / n)
    return scale * ca.vertcat(x, y, z)


def _rotation_quaternion(R):
    """Unit quaternion (x, y, z, w) of a rotation matrix, Shepperd's branches
    (those of constraints.rotation_log).  The square roots of the branches not
    taken are kept finite, so that AD through if_else stays finite."""
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    use_w = tr > 0.0
    use_x = ca.logic_and(R[0, 0] > R[1, 1], R[0, 0] > R[2, 2])
    use_y = R[1, 1] > R[2, 2]

    def root(taken, value):
        return 2.0 * ca.sqrt(ca.if_else(taken, value, 4.0))

    s = root(use_w, tr + 1.0)
    qw = ca.vertcat((R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s,
                    (R[1, 0] - R[0, 1]) / s, 0.25 * s)
    s = root(ca.logic_and(ca.logic_not(use_w), use_x), 1.0 + R[0, 0] - R[1, 1] - R[2, 2])
    qx = ca.vertcat(0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s,
                    (R[2, 1] - R[1, 2]) / s)
    s = root(ca.logic_and(ca.logic_not(use_w), ca.logic_and(ca.logic_not(use_x), use_y)),
             1.0 + R[1, 1] - R[0, 0] - R[2, 2])
    qy = ca.vertcat((R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s,
                    (R[0, 2] - R[2, 0]) / s)
    s = root(ca.logic_not(ca.logic_or(use_w, ca.logic_or(use_x, use_y))),
             1.0 + R[2, 2] - R[0, 0] - R[1, 1])
    qz = ca.vertcat((R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s,
                    (R[1, 0] - R[0, 1]) / s)
    return ca.if_else(use_w, qw, ca.if_else(use_x, qx, ca.if_else(use_y, qy, qz)))


def _log3(R):
    """log3 of a rotation matrix (angle in [0, pi]), through its quaternion."""
    return _log3_quaternion(_rotation_quaternion(R))


def _log6(R, p):
    """log6 of the placement (R, p): [V(w)^-1 p; w], w = log3(R)."""
    w = _log3(R)
    return ca.vertcat(_apply_v(w, p, -0.5, _se3_vinv_coefficient(ca.sumsqr(w))), w)


def _se3_v_coefficients(theta2):
    """(A, B) of V(w) = I + A [w]x + B [w]x^2."""
    small = ca.sqrt(theta2) < SE3_SMALL_ANGLE
    t2 = _safe(small, theta2)
    t = ca.sqrt(t2)
    return (ca.if_else(small, 0.5 - theta2 / 24.0, (1.0 - ca.cos(t)) / t2),
            ca.if_else(small, 1.0 / 6.0 - theta2 / 120.0, (t - ca.sin(t)) / (t2 * t)))


def _se3_vinv_coefficient(theta2):
    """C of V(w)^-1 = I - [w]x / 2 + C [w]x^2."""
    small = ca.sqrt(theta2) < SE3_SMALL_ANGLE
    t2 = _safe(small, theta2)
    t = ca.sqrt(t2)
    return ca.if_else(small, 1.0 / 12.0 + theta2 / 720.0,
                      (1.0 - t * ca.sin(t) / (2.0 * (1.0 - ca.cos(t)))) / t2)


def _apply_v(w, x, a_coef, b_coef):
    """(I + a [w]x + b [w]x^2) x."""
    c = ca.cross(w, x)
    return x + a_coef * c + b_coef * ca.cross(w, c)


def _rotate(quat, x):
    """R(quat) x for a unit quaternion (x, y, z, w)."""
    u, w = quat[:3], quat[3]
    t = 2.0 * ca.cross(u, x)
    return x + w * t + ca.cross(u, t)


def _planar_integrate(q, v):
    th = v[2]
    small = ca.fabs(th) < PLANAR_SMALL_ANGLE
    ths = _safe(small, th)
    c, s = ca.cos(th), ca.sin(th)
    sinc = ca.if_else(small, 1.0 - th * th / 6.0, ca.sin(ths) / ths)
    cosc = ca.if_else(small, th / 2.0 - th * th * th / 24.0, (1.0 - ca.cos(ths)) / ths)
    dx = sinc * v[0] - cosc * v[1]
    dy = cosc * v[0] + sinc * v[1]
    c0, s0 = q[2], q[3]
    return ca.vertcat(q[0] + c0 * dx - s0 * dy, q[1] + s0 * dx + c0 * dy,
                      c0 * c - s0 * s, s0 * c + c0 * s)


def _planar_difference(q0, q1):
    c0, s0, c1, s1 = q0[2], q0[3], q1[2], q1[3]
    th = ca.atan2(c0 * s1 - s0 * c1, c0 * c1 + s0 * s1)
    dx0, dy0 = q1[0] - q0[0], q1[1] - q0[1]
    px, py = c0 * dx0 + s0 * dy0, -s0 * dx0 + c0 * dy0
    small = ca.fabs(th) < PLANAR_SMALL_ANGLE
    ths = _safe(small, th)
    a = ca.if_else(small, 1.0 - th * th / 12.0,
                   0.5 * ths * ca.sin(ths) / (1.0 - ca.cos(ths)))
    b = 0.5 * th
    return ca.vertcat(a * px + b * py, -b * px + a * py, th)


def _integrate(m, q, v):
    """q (+) v = q * exp(v), joint by joint."""
    out = []
    for _, _, jtype, sq, sv, _ in _joint_blocks(m):
        qi, vi = q[sq], v[sv]
        if jtype == FREE_FLYER:
            w = vi[3:]
            a_coef, b_coef = _se3_v_coefficients(ca.sumsqr(w))
            out += [qi[:3] + _rotate(qi[3:], _apply_v(w, vi[:3], a_coef, b_coef)),
                    _quaternion_multiply(qi[3:], _exp3_quaternion(w))]
        elif jtype == SPHERICAL:
            out.append(_quaternion_multiply(qi, _exp3_quaternion(vi)))
        elif jtype == REVOLUTE_UNBOUNDED:
            c, s = ca.cos(vi[0]), ca.sin(vi[0])
            out.append(ca.vertcat(qi[0] * c - qi[1] * s, qi[1] * c + qi[0] * s))
        elif jtype == PLANAR:
            out.append(_planar_integrate(qi, vi))
        else:
            out.append(qi + vi)
    return ca.vertcat(*out)


def _difference(m, q0, q1):
    """q1 (-) q0 = log(q0^-1 q1), joint by joint."""
    out = []
    for _, _, jtype, sq, _, _ in _joint_blocks(m):
        a, b = q0[sq], q1[sq]
        if jtype in (FREE_FLYER, SPHERICAL):
            o = 3 if jtype == FREE_FLYER else 0
            conjugate = ca.vertcat(-a[o:o + 3], a[o + 3])
            w = _log3_quaternion(_quaternion_multiply(conjugate, b[o:o + 4]))
            if jtype == FREE_FLYER:
                p = _rotate(conjugate, b[:3] - a[:3])
                out.append(_apply_v(w, p, -0.5, _se3_vinv_coefficient(ca.sumsqr(w))))
            out.append(w)
        elif jtype == REVOLUTE_UNBOUNDED:
            out.append(ca.atan2(a[0] * b[1] - a[1] * b[0], a[0] * b[0] + a[1] * b[1]))
        elif jtype == PLANAR:
            out.append(_planar_difference(a, b))
        else:
            out.append(b - a)
    return ca.vertcat(*out)


def _tangent_jacobians(m, function, q, v, u, mode):
    """d function(q (+) dq, v, u) / d(dq, v, u) at dq = 0: three (n, nv) blocks.

    ``mode`` "forward" or "reverse": the AD mode of ``casadi.jacobian``.
    """
    return _tangent_jacobian_blocks(m, lambda q_next: function(m, q_next, v, u), q, (v, u),
                                    mode)


def _tangent_jacobian_blocks(m, function, q, inputs, mode):
    """d function(q (+) dq) / d(dq, *inputs) at dq = 0: one (n, nv) block for dq,
    then one per input (each of size nv)."""
    dq = ca.SX.sym("dq", m.nv)
    y = function(_integrate(m, q, dq))
    J = ca.jacobian(y, ca.vertcat(dq, *inputs), {"allow_forward": mode == "forward",
                                                  "allow_reverse": mode == "reverse"})
    J = ca.substitute(J, dq, ca.DM.zeros(m.nv))
    return [J[:, k * m.nv:(k + 1) * m.nv] for k in range(1 + len(inputs))]


# --- Functions -------------------------------------------------------------------

class SymbolicFunctions:
    """The casadi.Functions of one model, each built on first use and kept.

    Attributes (``casadi.Function``; vectors are column vectors, every input
    and output dense): ``integrate``, ``difference``, ``forward_kinematics``,
    ``rnea``, ``crba``, ``aba``, ``rnea_derivatives``, ``aba_derivatives``;
    method ``frame_placement(frame)``; ``compiled(name)`` for the code-generated
    twin of one of them (``compile_seconds[name, flags]``: the time its compiler
    took, 0.0 when the library was found built).  Use :func:`symbolic_functions` to get the cached
    instance of a model.
    """

    NAMES = ("integrate", "difference", "forward_kinematics", "rnea", "crba", "aba",
             "rnea_derivatives", "aba_derivatives")

    def __init__(self, model):
        self.model = model
        m = self._m = model.arrays
        self.q = ca.SX.sym("q", m.nq)
        self.v = ca.SX.sym("v", m.nv)
        self._frames = {}
        self._constrained = {}
        self._compiled = {}
        self.compile_seconds = {}

    def _function(self, name, inputs, input_names, outputs, output_names):
        outputs = [ca.densify(ca.SX(out)) for out in outputs]
        return ca.Function(name, inputs, outputs, input_names, output_names)

    @cached_property
    def integrate(self):
        m, q, v = self._m, self.q, self.v
        return self._function("integrate", [q, v], ["q", "v"], [_integrate(m, q, v)],
                              ["q_next"])

    @cached_property
    def difference(self):
        m = self._m
        q0, q1 = ca.SX.sym("q0", m.nq), ca.SX.sym("q1", m.nq)
        return self._function("difference", [q0, q1], ["q0", "q1"], [_difference(m, q0, q1)],
                              ["v"])

    @cached_property
    def forward_kinematics(self):
        _, oM = _placements(self._m, self.q)
        return self._function("forward_kinematics", [self.q], ["q"],
                              [ca.vertcat(*[R for R, _ in oM]),
                               ca.vertcat(*[p.T for _, p in oM])], ["oR", "op"])

    def frame_placement(self, frame):
        """Function q -> (R (3, 3), p (3,)): oMf of ``frame`` (id or name)."""
        frame = self.model.frame_id(frame) if isinstance(frame, str) else int(frame)
        if not 0 <= frame < self.model.nframes:
            raise ValueError(f"frame id {frame} out of range [0, {self.model.nframes})")
        if frame not in self._frames:
            m = self._m
            _, oM = _placements(m, self.q)
            oR, op = oM[int(m.frame_joint[frame])]
            R = oR @ _constant(m.frame_R[frame])
            p = op + oR @ _constant(m.frame_p[frame])
            self._frames[frame] = self._function(f"frame_placement_{frame}", [self.q], ["q"],
                                                 [R, p], ["R", "p"])
        return self._frames[frame]

    @cached_property
    def rnea(self):
        a = ca.SX.sym("a", self._m.nv)
        return self._function("rnea", [self.q, self.v, a], ["q", "v", "a"],
                              [_rnea(self._m, self.q, self.v, a)], ["tau"])

    @cached_property
    def crba(self):
        return self._function("crba", [self.q], ["q"], [_crba(self._m, self.q)], ["M"])

    @cached_property
    def aba(self):
        tau = ca.SX.sym("tau", self._m.nv)
        return self._function("aba", [self.q, self.v, tau], ["q", "v", "tau"],
                              [_aba(self._m, self.q, self.v, tau)], ["ddq"])

    @cached_property
    def rnea_derivatives(self):
        a = ca.SX.sym("a", self._m.nv)
        return self._function("rnea_derivatives", [self.q, self.v, a], ["q", "v", "a"],
                              _tangent_jacobians(self._m, _rnea, self.q, self.v, a,
                                                 AD_MODES["rnea"]),
                              ["dtau_dq", "dtau_dv", "dtau_da"])

    @cached_property
    def aba_derivatives(self):
        tau = ca.SX.sym("tau", self._m.nv)
        return self._function("aba_derivatives", [self.q, self.v, tau], ["q", "v", "tau"],
                              _tangent_jacobians(self._m, _aba, self.q, self.v, tau,
                                                 AD_MODES["aba"]),
                              ["dddq_dq", "dddq_dv", "dddq_dtau"])

    # --- Constrained dynamics (the mathematics: symbolic_constrained.py) -----------

    def constraint_dynamics(self, constraints, mu=0.0, max_iterations=1, accuracy=1e-12):
        """Function (q, v, tau) -> (ddq (nv,), lambda (nc,)) of
        :func:`~geppetto.dynamics.constrained_dynamics.constraint_dynamics`.

        ``constraints``: a ConstraintSet or a list of RigidConstraint; ``mu``,
        ``max_iterations``, ``accuracy``: the proximal settings, as there.  Built
        on first use and kept per constraint set (by content) and settings.
        """
        cs, settings = self._constrained_arguments(constraints, mu, max_iterations, accuracy)

        def build(name, sc):
            tau = ca.SX.sym("tau", self._m.nv)
            y = sc.constraint_dynamics(self._m, cs, settings, self.q, self.v, tau)
            return self._function(name, [self.q, self.v, tau], ["q", "v", "tau"],
                                  self._split(y), ["ddq", "lambda"])
        return self._keyed("constraint_dynamics", cs, settings, build)

    def constraint_dynamics_derivatives(self, constraints, mu=0.0, max_iterations=1,
                                        accuracy=1e-12):
        """Function (q, v, tau) -> (ddq_dq, ddq_dv, ddq_dtau, dlambda_dq, dlambda_dv,
        dlambda_dtau), (nv, nv) and (nc, nv): CasADi AD of :meth:`constraint_dynamics`
        (q derivatives in the tangent space, through ``integrate``)."""
        cs, settings = self._constrained_arguments(constraints, mu, max_iterations, accuracy)

        def build(name, sc):
            m, tau = self._m, ca.SX.sym("tau", self._m.nv)
            blocks = _tangent_jacobian_blocks(
                m, lambda q: sc.constraint_dynamics(m, cs, settings, q, self.v, tau), self.q,
                (self.v, tau), AD_MODES["constraint_dynamics"])
            tops, bottoms = zip(*(self._split(block) for block in blocks))
            return self._function(name, [self.q, self.v, tau], ["q", "v", "tau"],
                                  [*tops, *bottoms],
                                  ["ddq_dq", "ddq_dv", "ddq_dtau", "dlambda_dq", "dlambda_dv",
                                   "dlambda_dtau"])
        return self._keyed("constraint_dynamics_derivatives", cs, settings, build)

    def impulse_dynamics(self, constraints, restitution=0.0, mu=0.0, max_iterations=1,
                         accuracy=1e-12):
        """Function (q, v) -> (v_after (nv,), impulse (nc,)) of
        :func:`~geppetto.dynamics.constrained_dynamics.impulse_dynamics` (v the
        velocity before the impact, ``restitution`` e in [0, 1])."""
        cs, settings = self._constrained_arguments(constraints, mu, max_iterations, accuracy,
                                                   restitution)

        def build(name, sc):
            y = sc.impulse_dynamics(self._m, cs, settings[0], settings[1:], self.q, self.v)
            return self._function(name, [self.q, self.v], ["q", "v"], self._split(y),
                                  ["v_after", "impulse"])
        return self._keyed("impulse_dynamics", cs, settings, build)

    def impulse_dynamics_derivatives(self, constraints, restitution=0.0, mu=0.0,
                                     max_iterations=1, accuracy=1e-12):
        """Function (q, v) -> (dv_after_dq, dv_after_dv, dimpulse_dq, dimpulse_dv):
        CasADi AD of :meth:`impulse_dynamics`, q derivatives in the tangent space."""
        cs, settings = self._constrained_arguments(constraints, mu, max_iterations, accuracy,
                                                   restitution)

        def build(name, sc):
            m = self._m
            blocks = _tangent_jacobian_blocks(
                m, lambda q: sc.impulse_dynamics(m, cs, settings[0], settings[1:], q, self.v),
                self.q, (self.v,), AD_MODES["impulse_dynamics"])
            tops, bottoms = zip(*(self._split(block) for block in blocks))
            return self._function(name, [self.q, self.v], ["q", "v"], [*tops, *bottoms],
                                  ["dv_after_dq", "dv_after_dv", "dimpulse_dq", "dimpulse_dv"])
        return self._keyed("impulse_dynamics_derivatives", cs, settings, build)

    def _constrained_arguments(self, constraints, mu, max_iterations, accuracy,
                               restitution=None):
        """(ConstraintSet, settings) checked as the Numba functions check them;
        settings = (mu, max_iterations, accuracy), with restitution first if given."""
        from .constrained_dynamics import _impulse_arguments, _settings
        from .constraints import as_constraint_set
        cs = as_constraint_set(self.model, constraints)
        if cs.size == 0:
            raise ValueError("no constraints: the constrained dynamics of an empty set is aba")
        if restitution is None:
            return cs, _settings(mu, max_iterations, accuracy)
        return cs, _impulse_arguments(restitution, mu, max_iterations, accuracy)

    def _keyed(self, kind, cs, settings, build):
        """The Function ``kind`` of (cs, settings), built by ``build(name, module)``
        on first use; its name carries a digest of the key (unique C symbols)."""
        from . import symbolic_constrained
        key = (kind, symbolic_constrained.content_key(cs), settings)
        if key not in self._constrained:
            digest = hashlib.sha256(repr(key).encode()).hexdigest()[:12]
            self._constrained[key] = build(f"{kind}_{digest}", symbolic_constrained)
        return self._constrained[key]

    def _split(self, y):
        """(first nv rows, the other rows) of y."""
        return [y[:self._m.nv, :], y[self._m.nv:, :]]

    def compiled(self, name, directory=None, flags=None):
        """The Function ``name`` as compiled C, loaded with ``casadi.external``; see
        :func:`compile_function`.  ``name``: one of :attr:`NAMES`, or a Function of
        this object (e.g. ``compiled(twin.constraint_dynamics(constraints))``).  Kept
        per name and flags."""
        if isinstance(name, ca.Function):
            function, name = name, name.name()
        elif name not in self.NAMES:
            raise ValueError(f"name must be one of {self.NAMES} or a casadi.Function, "
                             f"got {name!r}")
        else:
            function = getattr(self, name)
        flags = default_flags(function) if flags is None else tuple(flags)
        if (name, flags) not in self._compiled:
            library, seconds = build_library(function, directory, flags)
            self._compiled[name, flags] = ca.external(name, library)
            self.compile_seconds[name, flags] = seconds
        return self._compiled[name, flags]


_CACHE = weakref.WeakKeyDictionary()


def symbolic_functions(model):
    """The :class:`SymbolicFunctions` of ``model``, one per model for the session.

    Functions are built when first read (building the derivative Functions of
    a 40-dof humanoid takes seconds) and kept as long as the model lives.
    """
    functions = _CACHE.get(model)
    if functions is None:
        functions = _CACHE[model] = SymbolicFunctions(model)
    return functions


# --- Code generation -----------------------------------------------------------------

class CodegenUnavailable(RuntimeError):
    """No C compiler to compile generated code with."""


def find_compiler():
    """The C compiler: ``$CC``, else cc, gcc or clang on the PATH; None when there is none."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def codegen_directory():
    """Where generated C and shared libraries go: ``$GEPPETTO_CACHE_DIR/casadi`` or
    ``<temp dir>/geppetto-<user>/casadi`` (never inside the repository)."""
    root = os.environ.get("GEPPETTO_CACHE_DIR")
    if not root:
        user = os.environ.get("USER") or str(os.getuid())
        root = os.path.join(tempfile.gettempdir(), f"geppetto-{user}")
    return os.path.join(root, "casadi")


def default_flags(function):
    """``-O3``, or ``-O1`` for a Function of more than :data:`LARGE_FUNCTION` instructions.

    The generated C is one straight-line function, on which gcc's -O2/-O3
    passes grow faster than linearly and gain nothing: measured on solo12's
    aba_derivatives (188k instructions, 4 MB of C), -O3 compiled in 924 s and
    -O1 in 80 s, and the -O1 library ran as fast.
    """
    return ("-O1",) if function.n_instructions() > LARGE_FUNCTION else ("-O3",)


def compile_function(function, directory=None, flags=None):
    """``function`` generated as C, compiled into a shared library, loaded back
    with ``casadi.external``; see :func:`build_library`."""
    return ca.external(function.name(), build_library(function, directory, flags)[0])


def build_library(function, directory=None, flags=None):
    """Generate the C of ``function`` and compile it into a shared library.

    ``flags``: the compiler's optimization flags, by default
    :func:`default_flags`.  The C source is written to ``directory`` (default
    :func:`codegen_directory`) and the library is named after the hash of the
    source and the flags, so a second call with the same Function finds the
    library already built.  Returns ``(path, seconds)``, seconds spent
    compiling (0.0 for a library found built).  Raises
    :class:`CodegenUnavailable` when there is no C compiler.
    """
    flags = default_flags(function) if flags is None else tuple(flags)
    compiler = find_compiler()
    if compiler is None:
        raise CodegenUnavailable("no C compiler found ($CC, cc, gcc, clang): "
                                 "CasADi code generation is skipped")
    directory = codegen_directory() if directory is None else directory
    os.makedirs(directory, exist_ok=True)
    name = function.name()
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        generator = ca.CodeGenerator(f"{name}.c", {"with_header": False})
        generator.add(function)
        source_path = os.path.join(scratch, f"{name}.c")
        generator.generate(scratch + os.sep)
        with open(source_path, "rb") as source:
            digest = hashlib.sha256(source.read() + " ".join(flags).encode()).hexdigest()[:16]
        library = os.path.join(directory, f"{name}_{digest}.so")
        if os.path.exists(library):
            return library, 0.0
        start = time.perf_counter()
        partial = os.path.join(scratch, "partial.so")
        command = [compiler, *flags, "-fPIC", "-shared", source_path, "-o", partial, "-lm"]
        finished = subprocess.run(command, capture_output=True, text=True, check=False)
        if finished.returncode != 0:
            raise RuntimeError(f"compiling {name} failed ({' '.join(command)}):\n"
                               f"{finished.stderr[-2000:]}")
        os.replace(partial, library)
    return library, time.perf_counter() - start


# --- Evaluation on stacks ---------------------------------------------------------

def evaluate(function, *stacks):
    """Evaluate ``function`` on stacks of K inputs in one call (``Function.map``).

    Each stack is (K, n) for a column-vector input (n,); returns one (K, rows,
    cols) array per output, or (K, rows) for a column-vector output.
    """
    K = stacks[0].shape[0]
    mapped = function if K == 1 else _mapped(function, K)
    outputs = mapped.call([np.ascontiguousarray(np.asarray(x, dtype=float).T) for x in stacks])
    results = []
    for k, out in enumerate(outputs):
        rows, cols = function.size_out(k)
        array = np.asarray(out).reshape(rows, K, cols).transpose(1, 0, 2)
        results.append(array[:, :, 0] if cols == 1 else array)
    return results


_MAPS = weakref.WeakKeyDictionary()


def _mapped(function, K):
    maps = _MAPS.setdefault(function, {})
    if K not in maps:
        maps[K] = function.map(K)
    return maps[K]
