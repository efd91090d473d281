"""RNEA, ABA and CRBA over a stack of states laid out across SIMD lanes.

The per-state algorithms are those of :mod:`.rnea` (Featherstone 2008, Table
5.1), the articulated-body algorithm in the joint frames (Featherstone 2008,
Table 7.1; Pinocchio's ``aba`` with local quantities) and the composite
rigid-body algorithm in the world frame (Featherstone 2008, Table 6.2, as
Pinocchio writes it), unchanged; only the memory layout differs: the stack is
evaluated in tiles of ``TILE`` states, one state per SIMD lane (the layout and
the lane helpers: :mod:`.lane_tiles`).  The public functions take the usual
stacks (``rnea_batch``: q (K, nq), the tiles transposed in the kernel as they
are loaded and stored) or the lanes layout directly (``rnea_lanes``: q (nq, K)).
"""
import numpy as np

from . import mimic
from .config import inline_kernel, kernel
from .lane_tiles import (TILE, T6, T9, T10, T36, UT, UT1, UT2, UT3, UT4, UT5, UT6, UT7, UT8, UT9,
                         act_force_lanes, add_lanes, dinv_times_lanes, fill_lanes,
                         force_cross_lanes, force_to_parent, inertia_times_lanes,
                         inv_act_motion_lanes, joint_motion_lanes, load_six_lanes, load_state_tiles,
                         load_tile, motion_cross_lanes, placement_lanes, store_six_lanes,
                         store_symmetric_tile, store_tile, tile_workspace, aligned_empty)
from .validation import (UNIT_NORM_TOLERANCE, as_configurations, as_stack, check_invertible,
                         unit_blocks)


@kernel
def _rnea_forward_pass_lanes(m, qt, vt, at, ws):
    """v_i, a_i (gravity as a_0 = -g) and the net force f_i of every body, every lane."""
    liR, lip, vel, acc, f, w = ws[0], ws[1], ws[2], ws[3], ws[4], ws[5]
    parents, idx_v, nvs, S, Y = m.parents, m.idx_v, m.nvs, m.S, m.inertia
    fill_lanes(vel, 0, 6, 0.0)
    for r in range(6):
        fill_lanes(acc, r * TILE, 1, -m.gravity[r])
    for i in range(1, m.njoints):
        bi, bp, iv, nvi = i * T6, parents[i] * T6, idx_v[i], nvs[i]
        placement_lanes(m, i, qt, ws)
        joint_motion_lanes(S, iv, nvi, vt, w, 0, False)
        inv_act_motion_lanes(liR, lip, i, vel, bp, vel, bi)
        add_lanes(vel, bi, w, 0, vel, bi)
        # a_i = liMi^-1 a_par + v_i x (S dq_i) + S ddq_i
        inv_act_motion_lanes(liR, lip, i, acc, bp, acc, bi)
        motion_cross_lanes(vel, bi, w, 0, w, T6)
        add_lanes(acc, bi, w, T6, acc, bi)
        joint_motion_lanes(S, iv, nvi, at, acc, bi, True)
        # f_i = Y_i a_i + v_i x* Y_i v_i
        inertia_times_lanes(Y, i, acc, bi, f, bi)
        inertia_times_lanes(Y, i, vel, bi, w, T6)
        force_cross_lanes(vel, bi, w, T6, f, bi)


@kernel
def _rnea_backward_pass_lanes(m, at, ws, taut):
    """tau_i = S_i^T f_i + armature ddq_i; f_parent += liMi f_i, every lane."""
    liR, lip, f, w = ws[0], ws[1], ws[4], ws[5]
    parents, idx_v, nvs, S, armature = m.parents, m.idx_v, m.nvs, m.S, m.armature
    for i in range(m.njoints - 1, 0, -1):
        F = np.uint64(i * T6)
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            arm, C = armature[c], np.uint64(c * TILE)
            s0, s1, s2, s3, s4, s5 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
            for s in range(UT):
                taut[C + s] = (arm * at[C + s] + s0 * f[F + s] + s1 * f[F + UT1 + s]
                               + s2 * f[F + UT2 + s] + s3 * f[F + UT3 + s]
                               + s4 * f[F + UT4 + s] + s5 * f[F + UT5 + s])
        if parents[i] > 0:
            act_force_lanes(liR, lip, i, f, i * T6, w, 0, False)
            add_lanes(f, parents[i] * T6, w, 0, f, parents[i] * T6)


@kernel
def _rnea_lanes(m, q, v, a, lanes_major, tau):
    """tau = RNEA(q, v, a) for K states, TILE at a time: (nq, K) inputs when
    lanes_major, else (K, nq); tau in the same layout."""
    ws = tile_workspace(m)
    K = q.shape[1] if lanes_major else q.shape[0]
    qt, vt, at = np.empty(m.nq * TILE), np.empty(m.nv * TILE), np.empty(m.nv * TILE)
    taut = np.empty(m.nv * TILE)
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        load_state_tiles(q, v, a, b, n, lanes_major, qt, vt, at)
        _rnea_forward_pass_lanes(m, qt, vt, at, ws)
        _rnea_backward_pass_lanes(m, at, ws, taut)
        store_tile(taut, b, n, lanes_major, tau)


@kernel
def _aba_workspace(m):
    """ABA's tile arrays beside :func:`tile_workspace`'s: c, pA, Ya, U, Dinv, u, and the
    scratch D, work, UD, Ia, B (36 x T), pa, e (6 x T), pf (2 x T)."""
    nj, nv = m.njoints, m.nv
    return (np.zeros(nj * T6), np.zeros(nj * T6), np.zeros(nj * T36),
            np.zeros(nv * T6), np.zeros(nv * T6), np.zeros(nv * TILE),
            np.zeros(T36), np.zeros(T36), np.zeros(T36), np.zeros(T36), np.zeros(T36),
            np.zeros(T6), np.zeros(T6), np.zeros(2 * TILE))


@kernel
def _aba_forward_pass_1_lanes(m, qt, vt, ws, wa):
    """liMi, v_i, c_i = v_i x (S dq_i), Ya_i = Y_i and pA_i = v_i x* Y_i v_i, every lane."""
    liR, lip, vel, w = ws[0], ws[1], ws[2], ws[5]
    c, pA, Ya = wa[0], wa[1], wa[2]
    parents, idx_v, nvs, S, Y = m.parents, m.idx_v, m.nvs, m.S, m.inertia
    fill_lanes(vel, 0, 6, 0.0)
    for i in range(1, m.njoints):
        bi, bp, iv, nvi = i * T6, parents[i] * T6, idx_v[i], nvs[i]
        placement_lanes(m, i, qt, ws)
        joint_motion_lanes(S, iv, nvi, vt, w, 0, False)
        inv_act_motion_lanes(liR, lip, i, vel, bp, vel, bi)
        add_lanes(vel, bi, w, 0, vel, bi)
        motion_cross_lanes(vel, bi, w, 0, c, bi)
        for rc in range(36):
            fill_lanes(Ya, i * T36 + rc * TILE, 1, Y[i, rc // 6, rc % 6])
        inertia_times_lanes(Y, i, vel, bi, w, T6)
        fill_lanes(pA, bi, 6, 0.0)
        force_cross_lanes(vel, bi, w, T6, pA, bi)


@kernel
def _invert_spd_lanes(D, n, Dinv, iv, work, pf):
    """Rows iv..iv+n of Dinv = D[:n, :n]^-1 in every lane (Gauss-Jordan; D is
    symmetric positive definite, so no pivoting).  D, work: entry (r, c) at (6 r + c) T."""
    for r in range(n):
        for col in range(n):
            W, I = np.uint64((6 * r + col) * TILE), np.uint64((iv + r) * T6 + col * TILE)
            for s in range(UT):
                work[W + s] = D[W + s]
            fill_lanes(Dinv, (iv + r) * T6 + col * TILE, 1, 1.0 if r == col else 0.0)
    for p in range(n):
        Wp = np.uint64((6 * p + p) * TILE)
        for s in range(UT):
            pf[s] = 1.0 / work[Wp + s]
        for col in range(n):
            W, I = np.uint64((6 * p + col) * TILE), np.uint64((iv + p) * T6 + col * TILE)
            for s in range(UT):
                work[W + s] *= pf[s]
                Dinv[I + s] *= pf[s]
        for r in range(n):
            if r != p:
                Wr = np.uint64((6 * r + p) * TILE)
                for s in range(UT):
                    pf[UT1 + s] = work[Wr + s]
                for col in range(n):
                    Wrc, Wpc = np.uint64((6 * r + col) * TILE), np.uint64((6 * p + col) * TILE)
                    Irc = np.uint64((iv + r) * T6 + col * TILE)
                    Ipc = np.uint64((iv + p) * T6 + col * TILE)
                    for s in range(UT):
                        work[Wrc + s] -= pf[UT1 + s] * work[Wpc + s]
                        Dinv[Irc + s] -= pf[UT1 + s] * Dinv[Ipc + s]


@kernel
def _articulated_projection_lanes(m, i, taut, wa):
    """U = Ya_i S_i, D = S_i^T U + armature, Dinv = D^-1, u = tau_i - S_i^T pA_i."""
    pA, Ya, U, Dinv, u, D, work, pf = wa[1], wa[2], wa[3], wa[4], wa[5], wa[6], wa[7], wa[13]
    S, armature, iv, nvi = m.S, m.armature, m.idx_v[i], m.nvs[i]
    P = np.uint64(i * T6)
    for c in range(iv, iv + nvi):
        s0, s1, s2, s3, s4, s5 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
        C = np.uint64(c * TILE)
        for s in range(UT):
            u[C + s] = taut[C + s] - (s0 * pA[P + s] + s1 * pA[P + UT1 + s]
                                      + s2 * pA[P + UT2 + s] + s3 * pA[P + UT3 + s]
                                      + s4 * pA[P + UT4 + s] + s5 * pA[P + UT5 + s])
        for r in range(6):
            Uo, Yo = np.uint64(c * T6 + r * TILE), np.uint64(i * T36 + 6 * r * TILE)
            for s in range(UT):
                U[Uo + s] = (Ya[Yo + s] * s0 + Ya[Yo + UT1 + s] * s1 + Ya[Yo + UT2 + s] * s2
                             + Ya[Yo + UT3 + s] * s3 + Ya[Yo + UT4 + s] * s4
                             + Ya[Yo + UT5 + s] * s5)
    for a in range(nvi):
        s0, s1, s2 = S[0, iv + a], S[1, iv + a], S[2, iv + a]
        s3, s4, s5 = S[3, iv + a], S[4, iv + a], S[5, iv + a]
        for b in range(nvi):
            arm = armature[iv + a] if a == b else 0.0
            Do, Uo, I = np.uint64((6 * a + b) * TILE), np.uint64((iv + b) * T6), np.uint64(iv * T6)
            for s in range(UT):
                d = (arm + s0 * U[Uo + s] + s1 * U[Uo + UT1 + s] + s2 * U[Uo + UT2 + s]
                     + s3 * U[Uo + UT3 + s] + s4 * U[Uo + UT4 + s] + s5 * U[Uo + UT5 + s])
                D[Do + s] = d
                if nvi == 1:
                    Dinv[I + s] = 1.0 / d
    if nvi > 1:
        _invert_spd_lanes(D, nvi, Dinv, iv, work, pf)


@kernel
def _articulated_inertia_lanes(m, i, wa):
    """UD = U Dinv; Ia = Ya_i - UD U^T; pa = pA_i + Ia c_i + UD u_i (Featherstone
    2008, Table 7.1), every lane.  UD, Ia: entry (r, c) at (6 r + c) T."""
    c, pA, Ya, U, Dinv, u, UD, Ia, pa = (wa[0], wa[1], wa[2], wa[3], wa[4], wa[5], wa[8],
                                         wa[9], wa[11])
    iv, nvi = m.idx_v[i], m.nvs[i]
    for a in range(nvi):  # column a of UD, six rows per lane loop
        for b in range(nvi):
            Uo, Do = np.uint64((iv + b) * T6), np.uint64((iv + b) * T6 + a * TILE)
            O, first = np.uint64(a * TILE), b == 0
            for s in range(UT):
                d = Dinv[Do + s]
                for r in range(6):
                    x = U[Uo + np.uint64(r * TILE) + s] * d
                    if not first:
                        x += UD[O + np.uint64(6 * r * TILE) + s]
                    UD[O + np.uint64(6 * r * TILE) + s] = x
    for r in range(6):  # row r of Ia
        for a in range(nvi):
            Io, Yo = np.uint64(6 * r * TILE), np.uint64(i * T36 + 6 * r * TILE)
            UDo, Uo, first = np.uint64((6 * r + a) * TILE), np.uint64((iv + a) * T6), a == 0
            for s in range(UT):
                ud = UD[UDo + s]
                for col in range(6):
                    Ct = np.uint64(col * TILE)
                    x = Ya[Yo + Ct + s] if first else Ia[Io + Ct + s]
                    Ia[Io + Ct + s] = x - ud * U[Uo + Ct + s]
    _inertia_bias_lanes(Ia, c, i * T6, pA, pa)
    for a in range(nvi):
        UDo, uo = np.uint64(a * TILE), np.uint64((iv + a) * TILE)
        for s in range(UT):
            ua = u[uo + s]
            for r in range(6):
                pa[np.uint64(r * TILE) + s] += UD[UDo + np.uint64(6 * r * TILE) + s] * ua


@inline_kernel
def _inertia_bias_lanes(Ia, c, bc, pA, pa):
    """pa = pA[bc] + Ia c[bc] in every lane."""
    C = np.uint64(bc)
    for r in range(6):
        o, P, A = np.uint64(6 * r * TILE), np.uint64(r * TILE), np.uint64(bc + r * TILE)
        for s in range(UT):
            pa[P + s] = (pA[A + s] + Ia[o + s] * c[C + s] + Ia[o + UT1 + s] * c[C + UT1 + s]
                         + Ia[o + UT2 + s] * c[C + UT2 + s] + Ia[o + UT3 + s] * c[C + UT3 + s]
                         + Ia[o + UT4 + s] * c[C + UT4 + s] + Ia[o + UT5 + s] * c[C + UT5 + s])


@kernel
def _add_congruence_lanes(liR, lip, i, A, bA, B, out, bo):
    """out[bo] += liMi A[bA] liMi^T in every lane, for a 6x6 force-from-motion map A
    (an inertia) in the frame of joint i, carried to its parent's frame; B (36 x T)
    scratch.  Entry (r, c) of A, B, out at (6 r + c) T from their bases."""
    R, P = np.uint64(i * T9), np.uint64(3 * i * TILE)
    for col in range(6):  # B = X A, column by column (rows 6 T apart)
        a0, a1, a2 = np.uint64(bA + col * TILE), np.uint64(bA + (6 + col) * TILE), \
            np.uint64(bA + (12 + col) * TILE)
        a3, a4, a5 = np.uint64(bA + (18 + col) * TILE), np.uint64(bA + (24 + col) * TILE), \
            np.uint64(bA + (30 + col) * TILE)
        o0, o1, o2 = np.uint64(col * TILE), np.uint64((6 + col) * TILE), np.uint64((12 + col) * TILE)
        o3, o4, o5 = (np.uint64((18 + col) * TILE), np.uint64((24 + col) * TILE),
                      np.uint64((30 + col) * TILE))
        for s in range(UT):
            b0, b1, b2, b3, b4, b5 = force_to_parent(liR, lip, R, P, s, (A[a0 + s], A[a1 + s],
                                                     A[a2 + s], A[a3 + s], A[a4 + s], A[a5 + s]))
            B[o0 + s] = b0
            B[o1 + s] = b1
            B[o2 + s] = b2
            B[o3 + s] = b3
            B[o4 + s] = b4
            B[o5 + s] = b5
    for r in range(6):  # out += B X^T, row by row
        o, Yo = np.uint64(6 * r * TILE), np.uint64(bo + 6 * r * TILE)
        for s in range(UT):
            store_six_lanes(out, Yo, s, force_to_parent(liR, lip, R, P, s, load_six_lanes(B, o, s)),
                            True)


@kernel
def _hand_to_parent_lanes(i, par, liR, lip, wa):
    """Ya_par += liMi Ia liMi^T, pA_par += liMi pa."""
    pA, Ya, Ia, B, pa = wa[1], wa[2], wa[9], wa[10], wa[11]
    _add_congruence_lanes(liR, lip, i, Ia, 0, B, Ya, par * T36)
    act_force_lanes(liR, lip, i, pa, 0, pA, par * T6, True)


@kernel
def _aba_backward_pass_lanes(m, taut, ws, wa):
    liR, lip = ws[0], ws[1]
    for i in range(m.njoints - 1, 0, -1):
        _articulated_projection_lanes(m, i, taut, wa)
        par = m.parents[i]
        if par > 0:
            _articulated_inertia_lanes(m, i, wa)
            _hand_to_parent_lanes(i, par, liR, lip, wa)


@kernel
def _aba_forward_pass_2_lanes(m, ws, wa, ddqt):
    """a_i = liMi^-1 a_par + c_i, ddq_i = Dinv (u_i - U^T a_i), a_i += S ddq_i."""
    liR, lip, acc = ws[0], ws[1], ws[3]
    c, U, Dinv, u, e = wa[0], wa[3], wa[4], wa[5], wa[12]
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for r in range(6):
        fill_lanes(acc, r * TILE, 1, -m.gravity[r])
    for i in range(1, m.njoints):
        bi, bp, iv, nvi = i * T6, parents[i] * T6, idx_v[i], nvs[i]
        inv_act_motion_lanes(liR, lip, i, acc, bp, acc, bi)
        add_lanes(acc, bi, c, bi, acc, bi)
        A, I = np.uint64(bi), np.uint64(iv * T6)
        for a in range(nvi):
            o, E, uo = np.uint64((iv + a) * T6), np.uint64(a * TILE), np.uint64((iv + a) * TILE)
            for s in range(UT):
                x = (u[uo + s] - U[o + s] * acc[A + s] - U[o + UT1 + s] * acc[A + UT1 + s]
                     - U[o + UT2 + s] * acc[A + UT2 + s] - U[o + UT3 + s] * acc[A + UT3 + s]
                     - U[o + UT4 + s] * acc[A + UT4 + s] - U[o + UT5 + s] * acc[A + UT5 + s])
                e[E + s] = x
                if nvi == 1:
                    ddqt[uo + s] = Dinv[I + s] * x
        if nvi > 1:
            dinv_times_lanes(Dinv, iv, nvi, e, ddqt)
        joint_motion_lanes(m.S, iv, nvi, ddqt, acc, bi, True)


@kernel
def _aba_lanes(m, q, v, tau, lanes_major, ddq):
    """ddq = ABA(q, v, tau) for K states, TILE at a time; layouts as :func:`_rnea_lanes`."""
    ws = tile_workspace(m)
    wa = _aba_workspace(m)
    K = q.shape[1] if lanes_major else q.shape[0]
    qt, vt, taut = np.empty(m.nq * TILE), np.empty(m.nv * TILE), np.empty(m.nv * TILE)
    ddqt = np.empty(m.nv * TILE)
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        load_state_tiles(q, v, tau, b, n, lanes_major, qt, vt, taut)
        _aba_forward_pass_1_lanes(m, qt, vt, ws, wa)
        _aba_backward_pass_lanes(m, taut, ws, wa)
        _aba_forward_pass_2_lanes(m, ws, wa, ddqt)
        store_tile(ddqt, b, n, lanes_major, ddq)


@kernel
def _compact_inertias(m):
    """(njoints, 10) compact inertias of the bodies: mass m, h = m c (c the centre of
    mass) and the upper triangle I00 I01 I02 I11 I12 I22 of the rotational inertia
    about the joint frame's origin, read from the spatial inertias
    [[m E, -[h]], [[h], I]]."""
    Y = m.inertia
    out = np.zeros((m.njoints, 10))
    for i in range(1, m.njoints):
        out[i, 0] = Y[i, 0, 0]
        out[i, 1], out[i, 2], out[i, 3] = Y[i, 5, 1], Y[i, 3, 2], Y[i, 4, 0]
        out[i, 4], out[i, 5], out[i, 6] = Y[i, 3, 3], Y[i, 3, 4], Y[i, 3, 5]
        out[i, 7], out[i, 8], out[i, 9] = Y[i, 4, 4], Y[i, 4, 5], Y[i, 5, 5]
    return out


@inline_kernel
def _compose_world_lanes(liR, lip, i, par, oR, op):
    """oMi = oM_par liMi in every lane (oR, op hold the identity at joint 0)."""
    A, P, B, Q = np.uint64(par * T9), np.uint64(3 * par * TILE), np.uint64(i * T9), np.uint64(3 * i * TILE)
    C, D = np.uint64(i * T9), np.uint64(3 * i * TILE)
    for s in range(UT):
        a00, a01, a02 = oR[A + s], oR[A + UT1 + s], oR[A + UT2 + s]
        a10, a11, a12 = oR[A + UT3 + s], oR[A + UT4 + s], oR[A + UT5 + s]
        a20, a21, a22 = oR[A + UT6 + s], oR[A + UT7 + s], oR[A + UT8 + s]
        b00, b01, b02 = liR[B + s], liR[B + UT1 + s], liR[B + UT2 + s]
        b10, b11, b12 = liR[B + UT3 + s], liR[B + UT4 + s], liR[B + UT5 + s]
        b20, b21, b22 = liR[B + UT6 + s], liR[B + UT7 + s], liR[B + UT8 + s]
        q0, q1, q2 = lip[Q + s], lip[Q + UT1 + s], lip[Q + UT2 + s]
        op[D + s] = op[P + s] + a00 * q0 + a01 * q1 + a02 * q2
        op[D + UT1 + s] = op[P + UT1 + s] + a10 * q0 + a11 * q1 + a12 * q2
        op[D + UT2 + s] = op[P + UT2 + s] + a20 * q0 + a21 * q1 + a22 * q2
        oR[C + s] = a00 * b00 + a01 * b10 + a02 * b20
        oR[C + UT1 + s] = a00 * b01 + a01 * b11 + a02 * b21
        oR[C + UT2 + s] = a00 * b02 + a01 * b12 + a02 * b22
        oR[C + UT3 + s] = a10 * b00 + a11 * b10 + a12 * b20
        oR[C + UT4 + s] = a10 * b01 + a11 * b11 + a12 * b21
        oR[C + UT5 + s] = a10 * b02 + a11 * b12 + a12 * b22
        oR[C + UT6 + s] = a20 * b00 + a21 * b10 + a22 * b20
        oR[C + UT7 + s] = a20 * b01 + a21 * b11 + a22 * b21
        oR[C + UT8 + s] = a20 * b02 + a21 * b12 + a22 * b22


@inline_kernel
def _world_motion_lanes(oR, op, i, S, c, J):
    """J column c = oMi S_c = [R v + p x R w; R w] for S_c = (v, w), every lane."""
    v0, v1, v2, w0, w1, w2 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
    R, P, O = np.uint64(i * T9), np.uint64(3 * i * TILE), np.uint64(c * T6)
    for s in range(UT):
        r00, r01, r02 = oR[R + s], oR[R + UT1 + s], oR[R + UT2 + s]
        r10, r11, r12 = oR[R + UT3 + s], oR[R + UT4 + s], oR[R + UT5 + s]
        r20, r21, r22 = oR[R + UT6 + s], oR[R + UT7 + s], oR[R + UT8 + s]
        p0, p1, p2 = op[P + s], op[P + UT1 + s], op[P + UT2 + s]
        x0 = r00 * w0 + r01 * w1 + r02 * w2
        x1 = r10 * w0 + r11 * w1 + r12 * w2
        x2 = r20 * w0 + r21 * w1 + r22 * w2
        J[O + s] = r00 * v0 + r01 * v1 + r02 * v2 + p1 * x2 - p2 * x1
        J[O + UT1 + s] = r10 * v0 + r11 * v1 + r12 * v2 + p2 * x0 - p0 * x2
        J[O + UT2 + s] = r20 * v0 + r21 * v1 + r22 * v2 + p0 * x1 - p1 * x0
        J[O + UT3 + s] = x0
        J[O + UT4 + s] = x1
        J[O + UT5 + s] = x2


@inline_kernel
def _inertia_to_world_lanes(oR, op, i, Yc, Ic):
    """Ic_i = oMi.act(Y_i) for the compact body inertia Yc[i] = (m, h = m c, I about the
    joint origin): with (R, p) = oMi and a = R h, h' = a + m p and
    I' = R I R^T - ([a][p] + [p][a] + m [p]^2) (the parallel-axis theorem moved from
    c to c' = R c + p), in every lane."""
    mass, h0, h1, h2 = Yc[i, 0], Yc[i, 1], Yc[i, 2], Yc[i, 3]
    i00, i01, i02, i11, i12, i22 = Yc[i, 4], Yc[i, 5], Yc[i, 6], Yc[i, 7], Yc[i, 8], Yc[i, 9]
    R, P, C = np.uint64(i * T9), np.uint64(3 * i * TILE), np.uint64(i * T10)
    for s in range(UT):
        r00, r01, r02 = oR[R + s], oR[R + UT1 + s], oR[R + UT2 + s]
        r10, r11, r12 = oR[R + UT3 + s], oR[R + UT4 + s], oR[R + UT5 + s]
        r20, r21, r22 = oR[R + UT6 + s], oR[R + UT7 + s], oR[R + UT8 + s]
        p0, p1, p2 = op[P + s], op[P + UT1 + s], op[P + UT2 + s]
        a0 = r00 * h0 + r01 * h1 + r02 * h2
        a1 = r10 * h0 + r11 * h1 + r12 * h2
        a2 = r20 * h0 + r21 * h1 + r22 * h2
        t00 = r00 * i00 + r01 * i01 + r02 * i02  # T = R I
        t01 = r00 * i01 + r01 * i11 + r02 * i12
        t02 = r00 * i02 + r01 * i12 + r02 * i22
        t10 = r10 * i00 + r11 * i01 + r12 * i02
        t11 = r10 * i01 + r11 * i11 + r12 * i12
        t12 = r10 * i02 + r11 * i12 + r12 * i22
        t20 = r20 * i00 + r21 * i01 + r22 * i02
        t21 = r20 * i01 + r21 * i11 + r22 * i12
        t22 = r20 * i02 + r21 * i12 + r22 * i22
        diagonal = 2.0 * (a0 * p0 + a1 * p1 + a2 * p2) + mass * (p0 * p0 + p1 * p1 + p2 * p2)
        mp0, mp1, mp2 = mass * p0, mass * p1, mass * p2
        Ic[C + s] = mass
        Ic[C + UT1 + s] = a0 + mp0
        Ic[C + UT2 + s] = a1 + mp1
        Ic[C + UT3 + s] = a2 + mp2
        Ic[C + UT4 + s] = t00 * r00 + t01 * r01 + t02 * r02 - (2.0 * a0 * p0 + mp0 * p0) + diagonal
        Ic[C + UT5 + s] = t00 * r10 + t01 * r11 + t02 * r12 - (a0 * p1 + p0 * a1 + mp0 * p1)
        Ic[C + UT6 + s] = t00 * r20 + t01 * r21 + t02 * r22 - (a0 * p2 + p0 * a2 + mp0 * p2)
        Ic[C + UT7 + s] = t10 * r10 + t11 * r11 + t12 * r12 - (2.0 * a1 * p1 + mp1 * p1) + diagonal
        Ic[C + UT8 + s] = t10 * r20 + t11 * r21 + t12 * r22 - (a1 * p2 + p1 * a2 + mp1 * p2)
        Ic[C + UT9 + s] = t20 * r20 + t21 * r21 + t22 * r22 - (2.0 * a2 * p2 + mp2 * p2) + diagonal


@inline_kernel
def _inertia_times_motion_lanes(Ic, i, J, c, F):
    """F_c = Ic_i J_c = [m v + w x h; h x v + I w] for the motion J_c = (v, w), every
    lane (F_c at c 6 T, as J_c)."""
    C, O = np.uint64(i * T10), np.uint64(c * T6)
    for s in range(UT):
        mass, h0, h1, h2 = Ic[C + s], Ic[C + UT1 + s], Ic[C + UT2 + s], Ic[C + UT3 + s]
        i00, i01, i02 = Ic[C + UT4 + s], Ic[C + UT5 + s], Ic[C + UT6 + s]
        i11, i12, i22 = Ic[C + UT7 + s], Ic[C + UT8 + s], Ic[C + UT9 + s]
        v0, v1, v2 = J[O + s], J[O + UT1 + s], J[O + UT2 + s]
        w0, w1, w2 = J[O + UT3 + s], J[O + UT4 + s], J[O + UT5 + s]
        F[O + s] = mass * v0 + w1 * h2 - w2 * h1
        F[O + UT1 + s] = mass * v1 + w2 * h0 - w0 * h2
        F[O + UT2 + s] = mass * v2 + w0 * h1 - w1 * h0
        F[O + UT3 + s] = h1 * v2 - h2 * v1 + i00 * w0 + i01 * w1 + i02 * w2
        F[O + UT4 + s] = h2 * v0 - h0 * v2 + i01 * w0 + i11 * w1 + i12 * w2
        F[O + UT5 + s] = h0 * v1 - h1 * v0 + i02 * w0 + i12 * w1 + i22 * w2


@inline_kernel
def _dot_force_lanes(arm, X, O, f, s):
    """arm + X[O] . f in lane s, for the six rows of X at O (T apart) and the six values
    f, summed in this order (the entries of M keep their bits however they are grouped)."""
    f0, f1, f2, f3, f4, f5 = f
    return (arm + X[O + s] * f0 + X[O + UT1 + s] * f1 + X[O + UT2 + s] * f2
            + X[O + UT3 + s] * f3 + X[O + UT4 + s] * f4 + X[O + UT5 + s] * f5)


@inline_kernel
def _mass_entry_lanes(J, d, F, c, arm, Mt, bo):
    """Mt[bo] = arm + J_d^T F_c in every lane."""
    D, C, X = np.uint64(d * T6), np.uint64(c * T6), np.uint64(bo)
    for s in range(UT):
        Mt[X + s] = _dot_force_lanes(arm, F, C, load_six_lanes(J, D, s), s)


@inline_kernel
def _mass_entries_four_columns_lanes(J, d, F, c, armature, Mt, slot):
    """Mt[slot[d, c + k]] = J_d^T F_{c+k} (+ armature[c] when d = c) for k = 0 .. 3 in
    every lane, J_d loaded once for the four columns."""
    D = np.uint64(d * T6)
    C0, C1 = np.uint64(c * T6), np.uint64((c + 1) * T6)
    C2, C3 = np.uint64((c + 2) * T6), np.uint64((c + 3) * T6)
    X0, X1 = np.uint64(slot[d, c] * TILE), np.uint64(slot[d, c + 1] * TILE)
    X2, X3 = np.uint64(slot[d, c + 2] * TILE), np.uint64(slot[d, c + 3] * TILE)
    arm = armature[c] if d == c else 0.0
    for s in range(UT):
        j = load_six_lanes(J, D, s)
        y0 = _dot_force_lanes(arm, F, C0, j, s)
        y1 = _dot_force_lanes(0.0, F, C1, j, s)
        y2 = _dot_force_lanes(0.0, F, C2, j, s)
        y3 = _dot_force_lanes(0.0, F, C3, j, s)
        Mt[X0 + s] = y0
        Mt[X1 + s] = y1
        Mt[X2 + s] = y2
        Mt[X3 + s] = y3


@inline_kernel
def _column_entries_lanes(m, J, F, col, stop, slot, Mt):
    """Mt[slot[d, col]] = J_d^T F_col (+ armature on the diagonal) for the dofs d that
    support col (col, its parent dof, ...) down to stop (excluded), every lane."""
    d = col
    while d > stop:
        arm = m.armature[col] if d == col else 0.0
        _mass_entry_lanes(J, d, F, col, arm, Mt, slot[d, col] * TILE)
        d = m.dof_parent[d]


@kernel
def _mass_matrix_slots(m):
    """slot (nv, nv) int64: the row of the compact (nv, nv) tile that holds entry (d, c)
    of M, the same for (c, d), and -1 where the joints of d and c are on different
    branches of the tree (neither an ancestor of the other: the entry is zero); and the
    number of rows.  The rows follow CRBA's backward pass (their order of first write)."""
    slot = np.full((m.nv, m.nv), -1, dtype=np.int64)
    count = 0
    for i in range(m.njoints - 1, 0, -1):
        for c in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            j = i
            while j > 0:
                for d in range(m.idx_v[j], m.idx_v[j] + m.nvs[j]):
                    if slot[d, c] < 0:
                        slot[d, c] = count
                        slot[c, d] = count
                        count += 1
                j = m.parents[j]
    return slot, count


@kernel
def _crba_forward_pass_lanes(m, qt, ws, oR, op, J, Ic, Yc):
    """liMi, oMi, the world motion subspaces J and the bodies' world inertias Ic."""
    for i in range(1, m.njoints):
        placement_lanes(m, i, qt, ws)
        _compose_world_lanes(ws[0], ws[1], i, m.parents[i], oR, op)
        for c in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            _world_motion_lanes(oR, op, i, m.S, c, J)
        _inertia_to_world_lanes(oR, op, i, Yc, Ic)


@kernel
def _crba_backward_pass_lanes(m, J, Ic, F, slot, Mt):
    """M[d, c] = J_d^T F_c with F_c = Ic_i J_c for every dof c of joint i and every dof
    d of i (d <= c) and of its ancestors, into the compact tile Mt (row slot[d, c]: one
    per entry of the upper triangle that can be nonzero, :func:`_mass_matrix_slots`);
    Ic_parent += Ic_i (Featherstone 2008, Table 6.2, in the world frame as Pinocchio:
    composite inertias add without a transform).  F (nv x 6 x T) keeps every F_c, so
    that the entries are computed after the pass, four columns of a chain at a time
    (c .. c + 3, each dof's parent the one before): J_d, read from L2 (talos: J is
    117 kB per tile), then serves four entries (measured on talos, interleaved with
    the previous pass, one entry per lane loop: crba_batch 0.92x, solo12 0.93x)."""
    for i in range(m.njoints - 1, 0, -1):
        for c in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            _inertia_times_motion_lanes(Ic, i, J, c, F)
        par = m.parents[i]
        if par > 0:
            A, B = np.uint64(par * T10), np.uint64(i * T10)
            for s in range(UT):
                for r in range(10):
                    Ic[A + np.uint64(r * TILE) + s] += Ic[B + np.uint64(r * TILE) + s]
    parent, c = m.dof_parent, 0
    while c < m.nv:
        chain = (c + 3 < m.nv and parent[c + 1] == c and parent[c + 2] == c + 1
                 and parent[c + 3] == c + 2)
        if chain:
            d = c  # the dofs supporting c support the four columns
            while d >= 0:
                _mass_entries_four_columns_lanes(J, d, F, c, m.armature, Mt, slot)
                d = parent[d]
        # then, one by one, each chain column's entries after c, or column c's own
        first, stop, c = (c + 1, c, c + 4) if chain else (c, -1, c + 1)
        for col in range(first, c):
            _column_entries_lanes(m, J, F, col, stop, slot, Mt)


@kernel
def _ltl_factor_lanes(m, slot, L):
    """M = L^T L in place in CRBA's compact tile (entry (k, i) at slot[k, i] T: L's
    pattern is M's, a dof and its ancestors), every lane
    (:func:`.constrained_dynamics.ltl_factor`, Featherstone 2008, Table 6.3)."""
    lam = m.dof_parent
    for k in range(m.nv - 1, -1, -1):
        K = np.uint64(slot[k, k] * TILE)
        for s in range(UT):
            L[K + s] = np.sqrt(L[K + s])
        i = lam[k]
        while i >= 0:
            I = np.uint64(slot[k, i] * TILE)
            for s in range(UT):
                L[I + s] /= L[K + s]
            i = lam[i]
        i = lam[k]
        while i >= 0:
            I = np.uint64(slot[k, i] * TILE)
            j = i
            while j >= 0:
                A, B = np.uint64(slot[i, j] * TILE), np.uint64(slot[k, j] * TILE)
                for s in range(UT):
                    L[A + s] -= L[I + s] * L[B + s]
                j = lam[j]
            i = lam[i]


@inline_kernel
def crba_tile_workspace(m):
    """(Inlined, as :func:`crba_tile`: as separately compiled functions they added 1.3-1.8
    CPU s to crba_batch's first call.)  The tile arrays of CRBA (:func:`crba_tile`): ws (:func:`.lane_tiles.tile_workspace`),
    oR, op (njoints x 9 x T, njoints x 3 x T): oMi, the identity at joint 0; J (nv x 6
    x T); Ic (njoints x 10 x T) compact inertias; F (nv x 6 x T); the compact inertias of
    the bodies; slot and Mt (slots x T): M's entries that can be nonzero, each once
    (:func:`_mass_matrix_slots`; talos: 741 of 1444, 0.38 MB per tile instead of 0.74
    MB; the zeros are written with the output)."""
    oR, op = np.zeros(m.njoints * T9), np.zeros(m.njoints * 3 * TILE)
    fill_lanes(oR, 0, 1, 1.0)
    fill_lanes(oR, 4 * TILE, 1, 1.0)
    fill_lanes(oR, 8 * TILE, 1, 1.0)
    slot, slots = _mass_matrix_slots(m)
    return (tile_workspace(m), oR, op, np.zeros(m.nv * T6), np.zeros(m.njoints * T10),
            np.zeros(m.nv * T6), _compact_inertias(m), slot, np.zeros(slots * TILE))


@inline_kernel
def crba_tile(m, qt, work):
    """M of the tile's configurations qt into the compact tile work[8] (rows slot[d, c])."""
    ws, oR, op, J, Ic, F, Yc, slot, Mt = work
    _crba_forward_pass_lanes(m, qt, ws, oR, op, J, Ic, Yc)
    _crba_backward_pass_lanes(m, J, Ic, F, slot, Mt)


@kernel
def _crba_lanes(m, q, lanes_major, M):
    """M(q) for K states, TILE at a time: q (nq, K) and M (nv * nv, K) when lanes_major,
    else q (K, nq) and M (K, nv * nv) (the tile arrays: :func:`crba_tile_workspace`)."""
    work = crba_tile_workspace(m)
    K = q.shape[1] if lanes_major else q.shape[0]
    qt = np.empty(m.nq * TILE)
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        load_tile(q, b, n, lanes_major, qt)
        crba_tile(m, qt, work)
        store_symmetric_tile(work[8], work[7], b, n, lanes_major, M)


def _as_lanes(model, x, size, name, K=None):
    """``x`` as a C-contiguous (size, K) float64 array of finite states, lanes layout."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu" or arr.ndim != 2 or arr.shape[0] != size:
        raise ValueError(f"{name}: expected a float array of shape ({size}, K) "
                         f"(states in columns), got shape {arr.shape} and dtype {arr.dtype}")
    if K is not None and arr.shape[1] != K:
        raise ValueError(f"{name}: expected {K} columns like q, got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf")
    return arr if arr.flags.writeable else arr.copy()


def _check_plain_model(model):
    if isinstance(model, mimic.MimicModel):
        raise TypeError("model: the lanes kernels take a plain Model, not a MimicModel "
                        "(use rnea/aba, which resolve the mimicked joints)")


def _as_lanes_configurations(model, q):
    """Configurations (nq, K), finite, with unit quaternions and (cos, sin) pairs."""
    _check_plain_model(model)
    arr = _as_lanes(model, q, model.nq, "q")
    for start, length, joint in unit_blocks(model):
        norms = np.sqrt(np.sum(arr[start:start + length] ** 2, axis=0))
        bad = np.abs(norms - 1.0) > UNIT_NORM_TOLERANCE
        if np.any(bad):
            raise ValueError(f"q: the unit block q[{start}:{start + length}] of joint "
                             f"{joint!r} has norm {norms[int(np.argmax(bad))]:.9g} in column "
                             f"{int(np.argmax(bad))}, expected 1")
    return arr


def _as_configuration_stack(model, q, one_state):
    """q as a (K, nq) stack of valid configurations of a plain Model, validated as the
    one-state functions' q; a single configuration is refused, naming the function
    ``one_state`` to call for it (the argument checks of every ``*_batch`` function)."""
    _check_plain_model(model)
    qs, single = as_configurations(model, q)
    if single:
        raise ValueError(f"q: expected a stack (K, nq); for one state call {one_state}")
    return qs


def _as_stacks(model, q, v, u, name_u, one_state="rnea/aba"):
    """(K, nq), (K, nv), (K, nv) stacks, validated as rnea's arguments."""
    qs = _as_configuration_stack(model, q, one_state)
    vs, _ = as_stack(v, model.nv, "v", (qs.shape[0], False))
    us, _ = as_stack(u, model.nv, name_u, (qs.shape[0], False))
    return qs, vs, us


def rnea_lanes(model, q, v, a):
    """Inverse dynamics of K states laid out across SIMD lanes.

    Parameters
    ----------
    q : (nq, K) configurations, one state per column; v, a : (nv, K).

    Returns tau (nv, K), equal to :func:`~geppetto.dynamics.rnea` of each column.
    No Data is filled; no external forces.
    """
    q = _as_lanes_configurations(model, q)
    v = _as_lanes(model, v, model.nv, "v", q.shape[1])
    a = _as_lanes(model, a, model.nv, "a", q.shape[1])
    tau = np.empty((model.nv, q.shape[1]))
    _rnea_lanes(model.arrays, q, v, a, True, tau)
    return tau


def rnea_batch(model, q, v, a):
    """:func:`rnea_lanes` on the usual stacks: q (K, nq), v and a (K, nv) -> tau (K, nv);
    the tiles are transposed in the kernel as they are loaded and stored."""
    qs, vs, as_ = _as_stacks(model, q, v, a, "a")
    tau = np.empty((qs.shape[0], model.nv))
    _rnea_lanes(model.arrays, qs, vs, as_, False, tau)
    return tau


def aba_lanes(model, q, v, tau):
    """Forward dynamics of K states laid out across SIMD lanes (local-frame ABA).

    q : (nq, K); v, tau : (nv, K).  Returns ddq (nv, K), equal to
    :func:`~geppetto.dynamics.aba` of each column.  No Data is filled.
    """
    q = _as_lanes_configurations(model, q)
    v = _as_lanes(model, v, model.nv, "v", q.shape[1])
    tau = _as_lanes(model, tau, model.nv, "tau", q.shape[1])
    ddq = np.empty((model.nv, q.shape[1]))
    _aba_lanes(model.arrays, q, v, tau, True, ddq)
    check_invertible(model, ddq, ddq.shape[0], "aba_lanes")
    return ddq


def crba_lanes(model, q):
    """The joint-space inertia matrix of K states laid out across SIMD lanes.

    q : (nq, K).  Returns M (nv, nv, K), full and symmetric (armature on the diagonal),
    equal to :func:`~geppetto.dynamics.crba` of each column.  No Data is filled.
    """
    q = _as_lanes_configurations(model, q)
    M = aligned_empty((model.nv, model.nv, q.shape[1]))
    _crba_lanes(model.arrays, q, True, M.reshape(model.nv * model.nv, q.shape[1]))
    return M


def crba_batch(model, q):
    """:func:`crba_lanes` on the usual stack: q (K, nq) -> M (K, nv, nv)."""
    qs = _as_configuration_stack(model, q, "crba")
    M = aligned_empty((qs.shape[0], model.nv, model.nv))  # whole lines streamed
    _crba_lanes(model.arrays, qs, False, M.reshape(qs.shape[0], model.nv * model.nv))
    return M


def aba_batch(model, q, v, tau):
    """:func:`aba_lanes` on the usual stacks: q (K, nq), v and tau (K, nv) -> ddq (K, nv)."""
    qs, vs, taus = _as_stacks(model, q, v, tau, "tau")
    ddq = np.empty((qs.shape[0], model.nv))
    _aba_lanes(model.arrays, qs, vs, taus, False, ddq)
    check_invertible(model, ddq, ddq.shape[0], "aba_batch")
    return ddq
