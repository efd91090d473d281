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
forming M: ABA's backward pass gives the articulated inertias (U, D^-1), then the
two sweeps of :mod:`.minverse` (shared with ``aba_derivatives``) fill the rows of
each joint restricted to its subtree and add the ancestors' contributions.
"""
import numpy as np

from numba import prange

from . import mimic
from .borrowed import borrowed, borrowed_all, borrowed_model, keep_alive
from .config import inline_kernel, kernel, model_kernel, parallel_kernel
from .crba import SINCOS_BLOCK, world_frame_quantities, world_jacobian_and_inertias
from .joints import placements_from_table, placements_inline, sincos_table
from .linalg import copy_matrix, spd_inverse
from .model_ref import model_arrays
from .minverse import minverse_sweeps
from .spatial import act_force, cross, rigid_inertia_times
from .one_state import _aba_one, _compute_minverse_one, one_state
from .validation import (as_configurations, as_dynamics_arguments, call_kernel, check_data,
                         check_invertible, result)


@inline_kernel
def articulated_projection(i, iv, nvi, armature, J, IA, U, Dinv, D, work):
    """U = IA_i J_i, D = J_i^T U + armature, Dinv = D^-1 (rows iv..iv+nvi of Dinv, by
    :func:`.linalg.spd_inverse`), for a joint of several dofs (1-dof joints:
    :func:`_articulated_step_1dof`; the free flyer: :func:`free_flyer_projection`)."""
    for c in range(iv, iv + nvi):
        for r in range(6):
            U[r, c] = (IA[i, r, 0] * J[0, c] + IA[i, r, 1] * J[1, c] + IA[i, r, 2] * J[2, c]
                       + IA[i, r, 3] * J[3, c] + IA[i, r, 4] * J[4, c] + IA[i, r, 5] * J[5, c])
    for r in range(nvi):
        for c in range(r, nvi):
            s = armature[iv + r] if r == c else 0.0
            for t in range(6):
                s += J[t, iv + r] * U[t, iv + c]
            D[r, c] = s
            D[c, r] = s
    spd_inverse(D, nvi, Dinv, iv, work)


@kernel
def free_flyer_projection(i, iv, armature, J, IA, U, Dinv, D, work):
    """:func:`articulated_projection` of a 6-dof joint, its trip counts constant (LLVM
    unrolls the loops and the Cholesky of D): a compiled call, once per state, so that
    the unrolled code is compiled once and not in every inlined copy of the pass."""
    articulated_projection(i, iv, 6, armature, J, IA, U, Dinv, D, work)


@inline_kernel
def subtract_articulated(i, iv, nvi, U, Dinv, IA, Ia):
    """Ia = IA_i - U Dinv U^T (the inertia the subtree hands to its parent)."""
    for r in range(6):
        for c in range(6):
            s = IA[i, r, c]
            for a in range(nvi):
                ud = 0.0
                for b in range(nvi):
                    ud += U[r, iv + b] * Dinv[iv + b, a]
                s -= ud * U[c, iv + a]
            Ia[r, c] = s


@kernel
def _aba_forward_pass_1(m, v, f_ext, oR, op, J, oY, ov, cJ, pA, w6):
    """World velocities ov, velocity-product accelerations cJ, bias forces pA; oY (njoints,
    6, 6) the bodies' rigid inertias in the world (world_frame_quantities), read only.
    Each body's step runs on locals, stored once (see :func:`.rnea._rnea_forward_pass`)."""
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    ov[0, :] = 0.0
    for i in range(1, m.njoints):
        iv = idx_v[i]
        par = parents[i]
        # J_i v_i
        if nvs[i] == 1:
            x = v[iv]
            s0, s1, s2 = J[0, iv] * x, J[1, iv] * x, J[2, iv] * x
            s3, s4, s5 = J[3, iv] * x, J[4, iv] * x, J[5, iv] * x
        else:
            for r in range(6):
                t = 0.0
                for c in range(iv, iv + nvs[i]):
                    t += J[r, c] * v[c]
                w6[0, r] = t
            s0, s1, s2, s3, s4, s5 = w6[0, 0], w6[0, 1], w6[0, 2], w6[0, 3], w6[0, 4], w6[0, 5]
        v0, v1, v2 = ov[par, 0] + s0, ov[par, 1] + s1, ov[par, 2] + s2
        v3, v4, v5 = ov[par, 3] + s3, ov[par, 4] + s4, ov[par, 5] + s5
        ov[i, 0], ov[i, 1], ov[i, 2], ov[i, 3], ov[i, 4], ov[i, 5] = v0, v1, v2, v3, v4, v5
        # c_i = v_i x (J_i v_i)
        x0, x1, x2 = cross(v3, v4, v5, s0, s1, s2)
        y0, y1, y2 = cross(v0, v1, v2, s3, s4, s5)
        z0, z1, z2 = cross(v3, v4, v5, s3, s4, s5)
        cJ[i, 0], cJ[i, 1], cJ[i, 2] = x0 + y0, x1 + y1, x2 + y2
        cJ[i, 3], cJ[i, 4], cJ[i, 5] = z0, z1, z2
        # pA_i = v_i x* (oY_i v_i) - oMi f_ext_i; oY_i is the body's rigid inertia here
        h0, h1, h2, h3, h4, h5 = rigid_inertia_times(oY, i, v0, v1, v2, v3, v4, v5)
        x0, x1, x2 = cross(v3, v4, v5, h0, h1, h2)
        y0, y1, y2 = cross(v3, v4, v5, h3, h4, h5)
        z0, z1, z2 = cross(v0, v1, v2, h0, h1, h2)
        pA[i, 0], pA[i, 1], pA[i, 2] = x0, x1, x2
        pA[i, 3], pA[i, 4], pA[i, 5] = y0 + z0, y1 + z1, y2 + z2
        if (f_ext[i, 0] != 0.0 or f_ext[i, 1] != 0.0 or f_ext[i, 2] != 0.0
                or f_ext[i, 3] != 0.0 or f_ext[i, 4] != 0.0 or f_ext[i, 5] != 0.0):
            act_force(oR, op, i, f_ext, i, w6, 1)
            for r in range(6):
                pA[i, r] -= w6[1, r]


@inline_kernel
def _joint_bias(iv, nvi, tau, J, pA, i, u):
    """u_i = tau_i - J_i^T pA_i."""
    for c in range(iv, iv + nvi):
        s = tau[c]
        for r in range(6):
            s -= J[r, c] * pA[i, r]
        u[c] = s


@inline_kernel
def _hand_to_parent(i, par, iv, nvi, U, Dinv, u, oY, cJ, pA, Ia, w6, with_bias):
    """oY_parent += Ia = oY_i - U Dinv U^T and, with_bias, pA_parent += pA_i + Ia c_i
    + U Dinv u_i (Featherstone's articulated-body step, in the world frame), for a joint
    of several dofs (1-dof joints: :func:`_articulated_step_1dof`)."""
    subtract_articulated(i, iv, nvi, U, Dinv, oY, Ia)
    for r in range(6):
        for c in range(6):
            oY[par, r, c] += Ia[r, c]
    if not with_bias:
        return
    for a in range(nvi):
        du = 0.0
        for b in range(nvi):
            du += Dinv[iv + a, b] * u[iv + b]
        w6[0, a] = du
    for r in range(6):
        s = pA[i, r]
        for c in range(6):
            s += Ia[r, c] * cJ[i, c]
        for a in range(nvi):
            s += U[r, iv + a] * w6[0, a]
        pA[par, r] += s


@inline_kernel
def _articulated_step_1dof(i, par, iv, armature, J, IA, U, Dinv, tau, pA, cJ, u, with_bias):
    """The articulated-body step of a 1-dof joint i on locals (its IA read once,
    upper triangle: IA is symmetric): U = IA J_i, D = J_i^T U + armature, with_bias
    u_i = tau_i - J_i^T pA_i; then, when i has a parent, IA_parent += IA - U D^-1 U^T
    (upper triangle, mirrored) and with_bias pA_parent += pA_i + IA c_i
    + U D^-1 (u_i - U^T c_i) (= pA_i + Ia c_i + U D^-1 u_i)."""
    y00, y01, y02 = IA[i, 0, 0], IA[i, 0, 1], IA[i, 0, 2]
    y03, y04, y05 = IA[i, 0, 3], IA[i, 0, 4], IA[i, 0, 5]
    y11, y12, y13, y14, y15 = IA[i, 1, 1], IA[i, 1, 2], IA[i, 1, 3], IA[i, 1, 4], IA[i, 1, 5]
    y22, y23, y24, y25 = IA[i, 2, 2], IA[i, 2, 3], IA[i, 2, 4], IA[i, 2, 5]
    y33, y34, y35 = IA[i, 3, 3], IA[i, 3, 4], IA[i, 3, 5]
    y44, y45, y55 = IA[i, 4, 4], IA[i, 4, 5], IA[i, 5, 5]
    j0, j1, j2, j3, j4, j5 = J[0, iv], J[1, iv], J[2, iv], J[3, iv], J[4, iv], J[5, iv]
    u0 = y00 * j0 + y01 * j1 + y02 * j2 + y03 * j3 + y04 * j4 + y05 * j5
    u1 = y01 * j0 + y11 * j1 + y12 * j2 + y13 * j3 + y14 * j4 + y15 * j5
    u2 = y02 * j0 + y12 * j1 + y22 * j2 + y23 * j3 + y24 * j4 + y25 * j5
    u3 = y03 * j0 + y13 * j1 + y23 * j2 + y33 * j3 + y34 * j4 + y35 * j5
    u4 = y04 * j0 + y14 * j1 + y24 * j2 + y34 * j3 + y44 * j4 + y45 * j5
    u5 = y05 * j0 + y15 * j1 + y25 * j2 + y35 * j3 + y45 * j4 + y55 * j5
    d = 1.0 / (armature[iv] + j0 * u0 + j1 * u1 + j2 * u2 + j3 * u3 + j4 * u4 + j5 * u5)
    U[0, iv], U[1, iv], U[2, iv], U[3, iv], U[4, iv], U[5, iv] = u0, u1, u2, u3, u4, u5
    Dinv[iv, 0] = d
    if with_bias:
        u[iv] = tau[iv] - (j0 * pA[i, 0] + j1 * pA[i, 1] + j2 * pA[i, 2] + j3 * pA[i, 3]
                           + j4 * pA[i, 4] + j5 * pA[i, 5])
    if par <= 0:
        return
    if with_bias:
        c0, c1, c2, c3, c4, c5 = cJ[i, 0], cJ[i, 1], cJ[i, 2], cJ[i, 3], cJ[i, 4], cJ[i, 5]
        k = d * (u[iv] - (u0 * c0 + u1 * c1 + u2 * c2 + u3 * c3 + u4 * c4 + u5 * c5))
        p0 = pA[i, 0] + y00 * c0 + y01 * c1 + y02 * c2 + y03 * c3 + y04 * c4 + y05 * c5 + u0 * k
        p1 = pA[i, 1] + y01 * c0 + y11 * c1 + y12 * c2 + y13 * c3 + y14 * c4 + y15 * c5 + u1 * k
        p2 = pA[i, 2] + y02 * c0 + y12 * c1 + y22 * c2 + y23 * c3 + y24 * c4 + y25 * c5 + u2 * k
        p3 = pA[i, 3] + y03 * c0 + y13 * c1 + y23 * c2 + y33 * c3 + y34 * c4 + y35 * c5 + u3 * k
        p4 = pA[i, 4] + y04 * c0 + y14 * c1 + y24 * c2 + y34 * c3 + y44 * c4 + y45 * c5 + u4 * k
        p5 = pA[i, 5] + y05 * c0 + y15 * c1 + y25 * c2 + y35 * c3 + y45 * c4 + y55 * c5 + u5 * k
        pA[par, 0] += p0
        pA[par, 1] += p1
        pA[par, 2] += p2
        pA[par, 3] += p3
        pA[par, 4] += p4
        pA[par, 5] += p5
    e0, e1, e2, e3, e4, e5 = u0 * d, u1 * d, u2 * d, u3 * d, u4 * d, u5 * d
    _add_symmetric(IA, par, 0, 0, y00 - e0 * u0)
    _add_symmetric(IA, par, 0, 1, y01 - e0 * u1)
    _add_symmetric(IA, par, 0, 2, y02 - e0 * u2)
    _add_symmetric(IA, par, 0, 3, y03 - e0 * u3)
    _add_symmetric(IA, par, 0, 4, y04 - e0 * u4)
    _add_symmetric(IA, par, 0, 5, y05 - e0 * u5)
    _add_symmetric(IA, par, 1, 1, y11 - e1 * u1)
    _add_symmetric(IA, par, 1, 2, y12 - e1 * u2)
    _add_symmetric(IA, par, 1, 3, y13 - e1 * u3)
    _add_symmetric(IA, par, 1, 4, y14 - e1 * u4)
    _add_symmetric(IA, par, 1, 5, y15 - e1 * u5)
    _add_symmetric(IA, par, 2, 2, y22 - e2 * u2)
    _add_symmetric(IA, par, 2, 3, y23 - e2 * u3)
    _add_symmetric(IA, par, 2, 4, y24 - e2 * u4)
    _add_symmetric(IA, par, 2, 5, y25 - e2 * u5)
    _add_symmetric(IA, par, 3, 3, y33 - e3 * u3)
    _add_symmetric(IA, par, 3, 4, y34 - e3 * u4)
    _add_symmetric(IA, par, 3, 5, y35 - e3 * u5)
    _add_symmetric(IA, par, 4, 4, y44 - e4 * u4)
    _add_symmetric(IA, par, 4, 5, y45 - e4 * u5)
    _add_symmetric(IA, par, 5, 5, y55 - e5 * u5)


@inline_kernel
def _add_symmetric(IA, j, r, c, x):
    """IA[j, r, c] += x, and the mirrored entry set equal (r <= c)."""
    s = IA[j, r, c] + x
    IA[j, r, c] = s
    IA[j, c, r] = s


@inline_kernel
def _articulated_pass(m, tau, J, IA, cJ, pA, U, Dinv, u, Ia, D, work, w6, with_bias):
    """ABA's backward pass (Featherstone, Table 7.1, in the world frame): the
    articulated inertias IA, U = IA J_i and D^-1, and with ``with_bias`` the bias forces
    pA and u; without it (M^-1 needs only what depends on q) ``tau, pA, cJ, u`` are
    neither read nor written.  Callers pass ``with_bias`` as a constant, so each
    inlined copy keeps only its branch."""
    parents, idx_v, nvs, armature = m.parents, m.idx_v, m.nvs, m.armature
    for i in range(m.njoints - 1, 0, -1):
        iv = idx_v[i]
        nvi = nvs[i]
        par = parents[i]
        if nvi == 1:
            _articulated_step_1dof(i, par, iv, armature, J, IA, U, Dinv, tau, pA, cJ, u,
                                   with_bias)
            continue
        if nvi == 6:  # the free flyer
            free_flyer_projection(i, iv, armature, J, IA, U, Dinv, D, work)
        else:
            articulated_projection(i, iv, nvi, armature, J, IA, U, Dinv, D, work)
        if with_bias:
            _joint_bias(iv, nvi, tau, J, pA, i, u)
        if par > 0:
            _hand_to_parent(i, par, iv, nvi, U, Dinv, u, IA, cJ, pA, Ia, w6, with_bias)


@kernel
def _aba_backward_pass(m, tau, J, oY, cJ, pA, U, Dinv, u, Ia, D, work, w6):
    """ABA's backward pass: articulated inertias IA (in ``oY``), U = IA J_i, D^-1 and the
    bias forces pA and u (:func:`_articulated_pass`)."""
    _articulated_pass(m, tau, J, oY, cJ, pA, U, Dinv, u, Ia, D, work, w6, True)


@kernel
def _aba_forward_pass_2(m, J, cJ, U, Dinv, u, oa, ddq, w6):
    """Accelerations: ddq_i = Dinv (u_i - U^T (a_parent + c_i)), a_i += J_i ddq_i."""
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for r in range(6):
        oa[0, r] = -m.gravity[r]
    for i in range(1, m.njoints):
        iv = idx_v[i]
        nvi = nvs[i]
        par = parents[i]
        if nvi == 1:  # on locals, stored once
            a0, a1, a2 = oa[par, 0] + cJ[i, 0], oa[par, 1] + cJ[i, 1], oa[par, 2] + cJ[i, 2]
            a3, a4, a5 = oa[par, 3] + cJ[i, 3], oa[par, 4] + cJ[i, 4], oa[par, 5] + cJ[i, 5]
            x = Dinv[iv, 0] * (u[iv] - (U[0, iv] * a0 + U[1, iv] * a1 + U[2, iv] * a2
                                        + U[3, iv] * a3 + U[4, iv] * a4 + U[5, iv] * a5))
            ddq[iv] = x
            oa[i, 0], oa[i, 1], oa[i, 2] = a0 + J[0, iv] * x, a1 + J[1, iv] * x, a2 + J[2, iv] * x
            oa[i, 3], oa[i, 4], oa[i, 5] = a3 + J[3, iv] * x, a4 + J[4, iv] * x, a5 + J[5, iv] * x
            continue
        for r in range(6):
            oa[i, r] = oa[par, r] + cJ[i, r]
        for a in range(nvi):
            s = u[iv + a]
            for r in range(6):
                s -= U[r, iv + a] * oa[i, r]
            w6[0, a] = s
        for a in range(nvi):
            s = 0.0
            for b in range(nvi):
                s += Dinv[iv + a, b] * w6[0, b]
            ddq[iv + a] = s
        for r in range(6):
            for c in range(iv, iv + nvi):
                oa[i, r] += J[r, c] * ddq[c]


# The forward passes inlined into the stack kernel's loop over states (its borrowed
# arrays: ur5 1000 states, about 1.07 -> 0.65 us per state, the same bits).  The
# backward pass stays a compiled call: inlined too it gave 0.47 us but took ur5's first
# aba call (empty cache, CPU) from 17 s to 25.6 s, against 20.8 s for the forward passes
# alone.  _aba_state (the DIFF step, finite differences) keeps the three compiled calls;
# the trial rollout takes _aba_state_borrowed.
_aba_forward_pass_1_inlined = inline_kernel(_aba_forward_pass_1.py_func)
_aba_forward_pass_2_inlined = inline_kernel(_aba_forward_pass_2.py_func)


@kernel
def aba_workspace(m):
    """Scratch arrays of :func:`_aba_state`: XR, Xp, w6, cJ, Ia, D, work, and cs (2,
    SINCOS_BLOCK nq), the cos/sin table of :func:`_aba_states`."""
    return (np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((2, 6)),
            np.empty((m.njoints, 6)), np.empty((6, 6)), np.empty((6, 6)), np.empty((6, 6)),
            np.empty((2, SINCOS_BLOCK * m.nq)))


@inline_kernel
def _aba_state(m, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq,
               workspace):
    """The three passes of ABA for one state (workspace from :func:`aba_workspace`).

    Inlined into its callers: called as a separate function, passing the model
    tuple and 18 arrays cost more than the passes themselves on small robots
    (measured on ur5, 1000 states: 3.6 us per state through the call, 2.6 us
    with the passes called from the loop)."""
    XR, Xp = workspace[0], workspace[1]
    world_frame_quantities(m, q, XR, Xp, liR, lip, oR, op, J, oY)
    _aba_passes(m, v, tau, f_ext, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq, workspace)


@inline_kernel
def _aba_state_borrowed(m, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u,
                        ddq, workspace):
    """:func:`_aba_state` (the same operations in the same order, libm's cos and sin)
    with the placements and the two forward passes inlined and the backward pass a
    compiled call, as in :func:`_aba_states`: for a caller whose arrays, the model's
    included, are all :func:`.borrowed.borrowed` (:func:`.ocp.trial.rollout_free`).
    Given arrays with owners, each inlined helper would take and release a reference
    to each array it reads, per state.

    Inside the borrowed rollout (100 knots of ur5, panda, kinova, z1 reaching) the
    rollout took 0.65-0.77x of the time it took with :func:`_aba_state`'s compiled calls (see the round aba30 of
    ``benchmarks/threads_notes.md``).  Only placements inlined, the forward passes
    called, or the reverse, the rollout was slower than with all four calls (measured,
    cause not found).  Each compiled call takes the model tuple flattened: the LLVM IR
    of the rollout passes 225 scalar arguments to ``placements``, 250 and 226 to the
    forward passes, 264 to the backward pass, most through the stack."""
    XR, Xp = workspace[0], workspace[1]
    placements_inline(m, q, XR, Xp, liR, lip, oR, op)
    world_jacobian_and_inertias(m, oR, op, J, oY)
    w6, cJ, Ia, D, work = workspace[2], workspace[3], workspace[4], workspace[5], workspace[6]
    _aba_forward_pass_1_inlined(m, v, f_ext, oR, op, J, oY, ov, cJ, pA, w6)
    _aba_backward_pass(m, tau, J, oY, cJ, pA, U, Dinv, u, Ia, D, work, w6)
    _aba_forward_pass_2_inlined(m, J, cJ, U, Dinv, u, oa, ddq, w6)


@inline_kernel
def _aba_state_from_table(m, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv,
                          u, ddq, workspace, b):
    """:func:`_aba_state` with the revolute joints' (cos, sin) read from the table
    ``workspace[7][:, b:]`` (:func:`_aba_states`), the placements inlined."""
    XR, Xp, cs = workspace[0], workspace[1], workspace[7]
    placements_from_table(m, q, cs, b, XR, Xp, liR, lip, oR, op)
    world_jacobian_and_inertias(m, oR, op, J, oY)
    w6, cJ, Ia, D, work = workspace[2], workspace[3], workspace[4], workspace[5], workspace[6]
    _aba_forward_pass_1_inlined(m, v, f_ext, oR, op, J, oY, ov, cJ, pA, w6)
    _aba_backward_pass(m, tau, J, oY, cJ, pA, U, Dinv, u, Ia, D, work, w6)
    _aba_forward_pass_2_inlined(m, J, cJ, U, Dinv, u, oa, ddq, w6)


@inline_kernel
def _aba_passes(m, v, tau, f_ext, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq, workspace):
    """ABA's three passes after the world-frame quantities (oMi, J, oY) of a state."""
    w6, cJ, Ia, D, work = workspace[2], workspace[3], workspace[4], workspace[5], workspace[6]
    _aba_forward_pass_1(m, v, f_ext, oR, op, J, oY, ov, cJ, pA, w6)
    _aba_backward_pass(m, tau, J, oY, cJ, pA, U, Dinv, u, Ia, D, work, w6)
    _aba_forward_pass_2(m, J, cJ, U, Dinv, u, oa, ddq, w6)


@inline_kernel
def _aba_states(m, k0, k1, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u,
                ddq, workspace):
    """ABA of the states k0 .. k1 of the stack, SINCOS_BLOCK at a time: the revolute
    joints' (cos, sin) of a block from one loop that LLVM vectorizes
    (:func:`.joints.sincos_table`, within about 1 ulp of libm; libm's sin and cos cost
    about 20 ns per joint and state, as in :func:`.crba._crba`), then
    :func:`_aba_state_from_table` per state.  A table entry depends on its angle
    alone, so the results do not depend on how the stack is split in blocks or
    chunks."""
    nq = m.nq
    q_flat = q.reshape(q.shape[0] * nq)
    cs = workspace[7]
    for b0 in range(k0, k1, SINCOS_BLOCK):
        b1 = min(b0 + SINCOS_BLOCK, k1)
        sincos_table(q_flat, b0 * nq, b1 * nq, cs)
        for k in range(b0, b1):
            _aba_state_from_table(m, q[k], v[k], tau[k], f_ext[k], liR[k], lip[k], oR[k],
                                  op[k], J[k], oY[k], ov[k], oa[k], pA[k], U[k], Dinv[k], u[k],
                                  ddq[k], workspace, (k - b0) * nq)


@model_kernel
def _aba(model, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq):
    """ABA of the stack (:func:`_aba_states`).  Every array is
    :func:`.borrowed.borrowed_all` (the arguments live for the whole call, the workspace
    until :func:`.borrowed.keep_alive`): the three passes are compiled calls, each of
    which took and released a reference to every array of the model tuple and to each
    per-state view it was passed, an atomic increment and decrement each, per state;
    borrowed they are null tests (the same operations, the same bits)."""
    m = borrowed_model(model_arrays(model))
    workspace = aba_workspace(m)
    q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq, borrowed_work = (
        borrowed_all((q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq,
                      workspace)))
    _aba_states(m, 0, q.shape[0], q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U,
                Dinv, u, ddq, borrowed_work)
    keep_alive(workspace)


@parallel_kernel("q")
def _aba_parallel(m, q, v, tau, f_ext, liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq,
                  n_chunks):
    """:func:`_aba` with the stack split in chunks run by Numba's threads."""
    K = q.shape[0]
    for chunk in prange(n_chunks):
        _aba_states(m, chunk * K // n_chunks, (chunk + 1) * K // n_chunks, q, v, tau, f_ext,
                    liR, lip, oR, op, J, oY, ov, oa, pA, U, Dinv, u, ddq, aba_workspace(m))


@model_kernel
def _compute_minverse(model, q, oR, op, U, Dinv, Minv):
    """M^-1 by ABA's articulated inertias (U, D^-1) and the two sweeps of
    :func:`.minverse.minverse_sweeps` (Carpentier & Mansard 2018, Sec. IV-B), the
    passes inlined into the loop over states (the placements too: their compiled call
    cost 2-6% of this kernel on ur5, panda and talos).

    liMi, the world Jacobian and the articulated inertias IA are scratch reused across
    the stack (stored per state, they cost more than their arithmetic: stores to memory
    not in cache; IA per state, 36 numbers per joint, took 1.0 of 11 us per state on
    talos and 0.4 of 4.5 on solo12, 1000 states, load 9).  M^-1 is
    computed in a scratch (nv, nv) that stays in cache and copied to the stack once, in
    order: the sweeps write each row twice, the last rows first (in place in the
    stack, talos 1000 states, 10% slower).  Every array is :func:`.borrowed.borrowed`
    (no reference counting per state, as in :func:`.crba._crba`).  The revolute joints'
    (cos, sin) of SINCOS_BLOCK states come from one vectorized loop
    (:func:`.joints.sincos_table`), as in :func:`_aba_states`."""
    m = borrowed_model(model_arrays(model))
    q, oR, op = borrowed(q), borrowed(oR), borrowed(op)
    U, Dinv, Minv = borrowed(U), borrowed(Dinv), borrowed(Minv)
    scratch = (np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((m.njoints, 3, 3)),
               np.empty((m.njoints, 3)), np.empty((6, m.nv)), np.empty((m.njoints, 6, 6)),
               np.empty((6, m.nv)), np.empty((m.njoints, 6, m.nv)), np.empty((6, 6)),
               np.empty((6, 6)), np.empty((6, 6)), np.empty((2, 6)),
               np.zeros((m.njoints, 6)), np.zeros((m.njoints, 6)), np.zeros(m.nv),
               np.zeros(m.nv), np.empty((m.nv, m.nv)), np.empty((2, SINCOS_BLOCK * m.nq)))
    XR, Xp, liR = borrowed(scratch[0]), borrowed(scratch[1]), borrowed(scratch[2])
    lip, J, IA = borrowed(scratch[3]), borrowed(scratch[4]), borrowed(scratch[5])
    F, A, Ia = borrowed(scratch[6]), borrowed(scratch[7]), borrowed(scratch[8])
    D, work, w6 = borrowed(scratch[9]), borrowed(scratch[10]), borrowed(scratch[11])
    cJ, pA, tau0 = borrowed(scratch[12]), borrowed(scratch[13]), borrowed(scratch[14])
    u, Ms, cs = borrowed(scratch[15]), borrowed(scratch[16]), borrowed(scratch[17])
    K, nq = q.shape[0], m.nq
    q_flat = q.reshape(K * nq)
    for k0 in range(0, K, SINCOS_BLOCK):
        k1 = min(k0 + SINCOS_BLOCK, K)
        sincos_table(q_flat, k0 * nq, k1 * nq, cs)
        for k in range(k0, k1):
            placements_from_table(m, q[k], cs, (k - k0) * nq, XR, Xp, liR, lip, oR[k], op[k])
            world_jacobian_and_inertias(m, oR[k], op[k], J, IA)
            _articulated_pass(m, tau0, J, IA, cJ, pA, U[k], Dinv[k], u, Ia, D, work, w6,
                              False)
            minverse_sweeps(m, J, U[k], Dinv[k], Ms, F, A, w6[0])
            copy_matrix(Ms, Minv[k])
    keep_alive(scratch)


def aba(model, data, q, v, tau, f_ext=None):
    """Forward dynamics ddq = M^-1 (tau - b(q, v) + sum J^T f_ext) by the ABA.

    ``q`` (nq,) or (K, nq); ``v``, ``tau`` (nv,) or (K, nv); ``f_ext`` as in
    :func:`~geppetto.dynamics.rnea`.  Returns ddq with the batch shape of v.
    Fills ``data.J``, ``data.IA`` (articulated inertias, world), ``data.pA``,
    ``data.U``, ``data.Dinv``, ``data.u``, ``data.ddq`` and the world-frame
    velocities ``data.ov`` and accelerations ``data.oa_gf`` (gravity included);
    the joint-frame ``data.v``, ``data.a`` are left as they were.
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.aba(model, data, q, v, tau, f_ext)
    if f_ext is None and one_state(_aba_one, _aba, model, data, q, v, tau):
        return data.ddq[0].copy()
    qs, vs, taus, fs, K, single = as_dynamics_arguments(model, data, q, v, tau, f_ext, "tau")
    call_kernel(_aba, model, qs, vs, taus, fs, data.liR, data.lip, data.oR, data.op, data.J,
                data.IA, data.ov, data.oa_gf, data.pA, data.U, data.Dinv, data.u, data.ddq)
    check_invertible(model, data.ddq, K, "aba")
    return result(data.ddq, K, single).copy()


def compute_minverse(model, data, q):
    """M(q)^-1 (nv, nv), full and symmetric, by the dedicated ABA-like algorithm.

    Carpentier & Mansard, RSS 2018, Sec. IV-B: never forms M.  ``q`` (nq,) or
    (K, nq); returns (nv, nv) or (K, nv, nv); fills ``data.Minv``, ``data.U`` and
    ``data.Dinv`` as :func:`aba` does (they do not depend on v or tau) and
    ``data.oR, op`` (oMi); liMi, ``data.J`` and the articulated inertias ``data.IA``
    are scratch, not filled (as crba's composite inertias).
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.compute_minverse(model, data, q)
    if one_state(_compute_minverse_one, _compute_minverse, model, data, q):
        return data.Minv[0].copy()
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    call_kernel(_compute_minverse, model, qs, data.oR, data.op, data.U, data.Dinv, data.Minv)
    # D^-1 is finite exactly when M^-1 is (q was checked finite): 6 entries per dof
    # instead of nv (reading the whole M^-1 again cost 0.5 us per state on talos)
    check_invertible(model, data.Dinv, K, "compute_minverse")
    return result(data.Minv, K, single).copy()
