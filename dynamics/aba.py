"""Articulated-body algorithm (forward dynamics) and the inverse mass matrix.

Both are written in the world frame (Featherstone 2008, Table 7.1, with the
spatial transforms of the recursion turned into identities: oYaba of a subtree
is accumulated by plain sums).  Notation: ``J_i`` (6, nv_i) the world motion
subspace of joint i, ``U = oYaba J_i``, ``D = J_i^T U + armature``,
``u = tau_i - J_i^T pA_i``, ``c_i = v_i x (J_i dq_i)`` the velocity-product
acceleration.

``compute_minverse`` is the dedicated algorithm of Carpentier & Mansard (RSS
2018, Sec. IV-B): ABA applied to the identity matrix of torques with zero
velocity and gravity, so that M^-1 is obtained in three passes without ever
forming M.  Its backward pass fills the rows of each joint restricted to its
subtree; its forward pass adds the ancestors' contributions.
"""
import numpy as np

from .config import kernel
from .crba import world_inertias
from .kinematics import joint_jacobians_state, placements
from .spatial import act_force, force_cross, mat6_vec, motion_cross
from .validation import (as_configurations, as_external_forces, as_stack, check_data,
                         result)


@kernel
def invert_spd(A, n, out, work):
    """out[:n, :n] = A^-1 for a small symmetric positive-definite A (Gauss-Jordan)."""
    if n == 1:
        out[0, 0] = 1.0 / A[0, 0]
        return
    for r in range(n):
        for c in range(n):
            work[r, c] = A[r, c]
            out[r, c] = 1.0 if r == c else 0.0
    for p in range(n):
        inv_pivot = 1.0 / work[p, p]
        for c in range(n):
            work[p, c] *= inv_pivot
            out[p, c] *= inv_pivot
        for r in range(n):
            if r != p:
                factor = work[r, p]
                if factor != 0.0:
                    for c in range(n):
                        work[r, c] -= factor * work[p, c]
                        out[r, c] -= factor * out[p, c]


@kernel
def articulated_projection(m, i, J, IA, U, Dinv, D, work):
    """U = IA_i J_i, D = J_i^T U + armature, Dinv = D^-1 (rows idx_v.. of Dinv)."""
    iv = m.idx_v[i]
    nvi = m.nvs[i]
    for c in range(iv, iv + nvi):
        mat6_vec(IA[i], J[:, c], U[:, c])
    for r in range(nvi):
        for c in range(nvi):
            s = m.armature[iv + r] if r == c else 0.0
            for t in range(6):
                s += J[t, iv + r] * U[t, iv + c]
            D[r, c] = s
    invert_spd(D, nvi, Dinv[iv:iv + nvi, :], work)


@kernel
def subtract_articulated(m, i, U, Dinv, IA, out):
    """out = IA_i - U Dinv U^T (the inertia the subtree hands to its parent)."""
    iv = m.idx_v[i]
    nvi = m.nvs[i]
    for r in range(6):
        for c in range(6):
            s = IA[i, r, c]
            for a in range(nvi):
                ud = 0.0
                for b in range(nvi):
                    ud += U[r, iv + b] * Dinv[iv + b, a]
                s -= ud * U[c, iv + a]
            out[r, c] = s


@kernel
def _aba_state(m, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq,
               XR, Xp, s6, t6, cJ, Ia, D, work):
    placements(m, q, XR, Xp, liR, lip, oR, op)
    joint_jacobians_state(m, oR, op, J, s6, t6)
    world_inertias(m, oR, op, oY)
    # Pass 1 (forward): velocities, velocity-product accelerations, bias forces.
    ov[0, :] = 0.0
    for i in range(1, m.njoints):
        iv = m.idx_v[i]
        for r in range(6):
            s = 0.0
            for c in range(iv, iv + m.nvs[i]):
                s += J[r, c] * v[c]
            s6[r] = s
            ov[i, r] = ov[m.parents[i], r] + s
        motion_cross(ov[i], s6, cJ[i])
        mat6_vec(oY[i], ov[i], t6)
        force_cross(ov[i], t6, pA[i])
        act_force(oR[i], op[i], f_ext[i], t6)
        for r in range(6):
            pA[i, r] -= t6[r]
    # Pass 2 (backward): articulated inertias and bias forces.
    for i in range(m.njoints - 1, 0, -1):
        iv = m.idx_v[i]
        nvi = m.nvs[i]
        articulated_projection(m, i, J, oY, U, Dinv, D, work)
        for c in range(iv, iv + nvi):
            s = tau[c]
            for r in range(6):
                s -= J[r, c] * pA[i, r]
            u[c] = s
        par = m.parents[i]
        if par == 0:
            continue
        subtract_articulated(m, i, U, Dinv, oY, Ia)
        # pa = pA + Ia c + U Dinv u
        mat6_vec(Ia, cJ[i], t6)
        for r in range(6):
            s = pA[i, r] + t6[r]
            for a in range(nvi):
                du = 0.0
                for b in range(nvi):
                    du += Dinv[iv + a, b] * u[iv + b]
                s += U[r, iv + a] * du
            pA[par, r] += s
            for c in range(6):
                oY[par, r, c] += Ia[r, c]
    # Pass 3 (forward): accelerations.
    for r in range(6):
        oa[0, r] = -m.gravity[r]
    for i in range(1, m.njoints):
        iv = m.idx_v[i]
        nvi = m.nvs[i]
        for r in range(6):
            oa[i, r] = oa[m.parents[i], r] + cJ[i, r]
        for a in range(nvi):
            s = u[iv + a]
            for r in range(6):
                s -= U[r, iv + a] * oa[i, r]
            s6[a] = s
        for a in range(nvi):
            s = 0.0
            for b in range(nvi):
                s += Dinv[iv + a, b] * s6[b]
            ddq[iv + a] = s
        for r in range(6):
            for c in range(iv, iv + nvi):
                oa[i, r] += J[r, c] * ddq[c]


@kernel
def _aba(m, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq):
    XR = np.empty((3, 3))
    Xp = np.empty(3)
    s6 = np.empty(6)
    t6 = np.empty(6)
    cJ = np.empty((m.njoints, 6))
    Ia = np.empty((6, 6))
    D = np.empty((6, 6))
    work = np.empty((6, 6))
    for k in range(q.shape[0]):
        _aba_state(m, q[k], v[k], tau[k], f_ext[k], liR[k], lip[k], oR[k], op[k], J[k],
                   oY[k], ov[k], oa[k], pA[k], U[k], Dinv[k], u[k], ddq[k],
                   XR, Xp, s6, t6, cJ, Ia, D, work)


@kernel
def _minverse_backward_pass(m, J, oY, U, Dinv, Minv, F, Ia, D, work):
    for i in range(m.njoints - 1, 0, -1):
        iv = m.idx_v[i]
        nvi = m.nvs[i]
        end = m.idx_v[m.subtree_end[i]] if m.subtree_end[i] < m.njoints else m.nv
        articulated_projection(m, i, J, oY, U, Dinv, D, work)
        for a in range(nvi):
            for b in range(nvi):
                Minv[iv + a, iv + b] = Dinv[iv + a, b]
        # rows of joint i, columns of its descendants: -Dinv J_i^T F
        for col in range(iv + nvi, end):
            for a in range(nvi):
                s = 0.0
                for b in range(nvi):
                    jf = 0.0
                    for r in range(6):
                        jf += J[r, iv + b] * F[r, col]
                    s -= Dinv[iv + a, b] * jf
                Minv[iv + a, col] = s
        # F (6, subtree columns) += U Minv[rows of i, subtree columns]
        for col in range(iv, end):
            for r in range(6):
                s = 0.0
                for a in range(nvi):
                    s += U[r, iv + a] * Minv[iv + a, col]
                F[r, col] += s
        par = m.parents[i]
        if par > 0:
            subtract_articulated(m, i, U, Dinv, oY, Ia)
            for r in range(6):
                for c in range(6):
                    oY[par, r, c] += Ia[r, c]


@kernel
def _minverse_forward_pass(m, J, U, Dinv, Minv, A):
    for i in range(1, m.njoints):
        iv = m.idx_v[i]
        nvi = m.nvs[i]
        par = m.parents[i]
        if par > 0:
            # rows of i -= Dinv U^T A_parent, on the columns from iv on (upper triangle)
            for col in range(iv, m.nv):
                for a in range(nvi):
                    s = 0.0
                    for b in range(nvi):
                        ua = 0.0
                        for r in range(6):
                            ua += U[r, iv + b] * A[par, r, col]
                        s += Dinv[iv + a, b] * ua
                    Minv[iv + a, col] -= s
        for col in range(iv, m.nv):
            for r in range(6):
                s = A[par, r, col] if par > 0 else 0.0
                for a in range(nvi):
                    s += J[r, iv + a] * Minv[iv + a, col]
                A[i, r, col] = s
    for r in range(m.nv):
        for c in range(r):
            Minv[r, c] = Minv[c, r]


@kernel
def _compute_minverse(m, q, liR, lip, oR, op, J, oY, U, Dinv, Minv):
    XR = np.empty((3, 3))
    Xp = np.empty(3)
    s6 = np.empty(6)
    t6 = np.empty(6)
    F = np.empty((6, m.nv))
    A = np.empty((m.njoints, 6, m.nv))
    Ia = np.empty((6, 6))
    D = np.empty((6, 6))
    work = np.empty((6, 6))
    for k in range(q.shape[0]):
        placements(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k])
        joint_jacobians_state(m, oR[k], op[k], J[k], s6, t6)
        world_inertias(m, oR[k], op[k], oY[k])
        F[:, :] = 0.0
        Minv[k, :, :] = 0.0
        _minverse_backward_pass(m, J[k], oY[k], U[k], Dinv[k], Minv[k], F, Ia, D, work)
        _minverse_forward_pass(m, J[k], U[k], Dinv[k], Minv[k], A)


def aba(model, data, q, v, tau, f_ext=None):
    """Forward dynamics ddq = M^-1 (tau - b(q, v) + sum J^T f_ext) by the ABA.

    ``q`` (nq,) or (K, nq); ``v``, ``tau`` (nv,) or (K, nv); ``f_ext`` as in
    :func:`~geppetto.dynamics.rnea`.  Returns ddq with the batch shape of v.
    Fills ``data.J``, ``data.IA`` (articulated inertias, world), ``data.pA``,
    ``data.U``, ``data.Dinv``, ``data.u``, ``data.ddq`` and the world-frame
    velocities/accelerations ``data.v`` / ``data.a`` (of ABA: world frame).
    """
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs, _ = as_stack(v, model.nv, "v", (K, single))
    taus, _ = as_stack(tau, model.nv, "tau", (K, single))
    fs = as_external_forces(model, f_ext, K, single)
    check_data(model, data, K, single)
    _aba(model.arrays, qs, vs, taus, fs, data.liR, data.lip, data.oR, data.op, data.J,
         data.IA, data.v, data.a, data.pA, data.U, data.Dinv, data.u, data.ddq)
    return result(data.ddq, K, single).copy()


def compute_minverse(model, data, q):
    """M(q)^-1 (nv, nv), full and symmetric, by the dedicated ABA-like algorithm.

    Carpentier & Mansard, RSS 2018, Sec. IV-B: never forms M.  ``q`` (nq,) or
    (K, nq); returns (nv, nv) or (K, nv, nv); fills ``data.Minv``.
    """
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    _compute_minverse(model.arrays, qs, data.liR, data.lip, data.oR, data.op, data.J,
                      data.IA, data.U, data.Dinv, data.Minv)
    return result(data.Minv, K, single).copy()
