"""M^-1, the RNEA derivatives and the ABA derivatives over a stack of states laid
out across SIMD lanes.

The per-state algorithms are those of the stack kernels, in the world frame:
ABA as :mod:`.aba` (Featherstone 2008, Table 7.1, the transforms of the
recursion turned into identities), the two M^-1 sweeps of :mod:`.minverse`
(Carpentier & Mansard, RSS 2018, Sec. IV-B) in the ABA derivatives, M^-1 alone
from CRBA's factor (M^-1 = L^-1 L^-T, Featherstone 2008, Sec. 6.5: fewer
operations, see :func:`_minverse_lanes`), the RNEA derivatives of
:mod:`.rnea_derivatives` (their Alg. 2 and 3, with the composite inertia
variation Bcrb in its 12 numbers) and dFD = -M^-1 dID at ddq (their eq. 24), as
:mod:`.aba_derivatives`.  Only the memory layout differs: tiles of ``TILE``
states, one state per lane, every array flat with the lane axis last (the layout
and the shared lane helpers: :mod:`.lane_tiles`; the world placements, Jacobian
columns and compact world inertias: :func:`.batch_lanes._crba_forward_pass_lanes`).

Tile arrays beside those of :func:`.lane_tiles.tile_workspace` (entry (r, c) of a
small matrix at ``(6 r + c) T`` from its base):

- ``oR, op`` (njoints x 9 / 3 x T): oMi; ``J`` (nv x 6 x T): column c at c 6 T;
- ``Yw`` (njoints x 10 x T): the bodies' compact world inertias (m, h = m c,
  I about the origin), ``Ycrb`` their composites;
- ``IA`` (njoints x 36 x T): articulated inertias, upper triangle only
  (entry (r, c), r <= c, at (6 r + c) T);
- ``ov, cJ, pA, oa, h, f`` (njoints x 6 x T); ``Bcrb`` (njoints x 12 x T): B_ang
  in rows 0-8, b = 2 h_lin in rows 9-11;
- ``U, Dinv`` (nv x 6 x T), ``u`` (nv x T); ``uc, ac, gc`` (nv x 6 x T): the
  per-dof motions u_d, alpha_d, gamma_d;
- ``Minv, dq, dv`` (nv x nv x T): entry (r, c) at (r nv + c) T;
- ``F`` (nv x 6 x T), ``A`` (depth x nv x 6 x T): the M^-1 sweeps' columns.

The lane loops of a tile run over its first ``width`` lanes
(:func:`.lane_tiles.active_width`: its states rounded up to 8, at most TILE), passed down
from the tile loop: a phase of 5 knots computes 8 lanes, not 64 (ur5 aba_tiles 44 -> 27 us,
panda 78 -> 39).  "every lane" below means every lane of that width.  The world pass
(:func:`.batch_lanes._crba_forward_pass_lanes`) still computes all TILE lanes.

No external forces (as the other lanes kernels).
"""
import numpy as np

from .batch_lanes import (_as_configuration_stack, _as_lanes, _as_lanes_configurations,
                          _as_stacks, _compact_inertias, _crba_forward_pass_lanes,
                          _invert_spd_lanes, _ltl_factor_lanes, _mass_matrix_slots, crba_tile,
                          crba_tile_workspace)
from .borrowed import borrowed_all
from .config import inline_kernel, kernel
from .lane_tiles import (TILE, T6, T9, T10, T36, UT, UT1, UT2, UT3, UT4, UT5, UT6, UT7, UT8, UT9,
                         active_width, add_first_lanes, dinv_times_first_lanes, fill_first_lanes,
                         fill_lanes, force_cross_first_lanes, load_six_lanes, load_state_tiles,
                         load_tile, motion_cross_first_lanes, store_six_lanes,
                         store_six_sum_lanes, store_symmetric_tile, store_tile, tile_workspace,
                         aligned_empty)
from .validation import check_invertible

T12 = 12 * TILE
UT10, UT11 = np.uint64(10 * TILE), np.uint64(11 * TILE)


@kernel
def _derivative_workspace(m, velocities_only=False):
    """The tile arrays of the module docstring, in a fixed order (see the unpacking
    in the passes): oR, op, J, Yw, Ycrb, IA, ov, cJ, pA, oa, h, f, Bcrb, U, Dinv, u,
    uc, ac, gc, Minv, dq, dv, F, A, and the scratch D, work, UD, Ia (36 x T),
    w (6 x T), pf (2 x T), y (12 x T).  With ``velocities_only`` the arrays that
    :func:`_velocities_lanes` does not read (all but oR, op, J, Yw, ov, cJ, pA, h, w)
    are empty: the same tuple type, for callers that run only that pass."""
    nj, nv = m.njoints, m.nv
    k = 0 if velocities_only else 1
    oR = np.zeros(nj * T9)
    fill_lanes(oR, 0, 1, 1.0)
    fill_lanes(oR, 4 * TILE, 1, 1.0)
    fill_lanes(oR, 8 * TILE, 1, 1.0)
    return (oR, np.zeros(nj * 3 * TILE), np.zeros(nv * T6), np.zeros(nj * T10),
            np.zeros(k * nj * T10), np.zeros(k * nj * T36), np.zeros(nj * T6),
            np.zeros(nj * T6), np.zeros(nj * T6), np.zeros(k * nj * T6), np.zeros(nj * T6),
            np.zeros(k * nj * T6), np.zeros(k * nj * T12), np.zeros(k * nv * T6),
            np.zeros(k * nv * T6), np.zeros(k * nv * TILE), np.zeros(k * nv * T6),
            np.zeros(k * nv * T6), np.zeros(k * nv * T6), np.zeros(k * nv * nv * TILE),
            np.zeros(k * nv * nv * TILE), np.zeros(k * nv * nv * TILE),
            np.zeros(k * nv * T6), np.zeros(k * nj * nv * T6),
            np.zeros(k * T36), np.zeros(k * T36), np.zeros(k * T36), np.zeros(k * T36),
            np.zeros(T6), np.zeros(k * 2 * TILE), np.zeros(k * T12))


# --- Spatial algebra on lanes ---------------------------------------------------------

@inline_kernel
def _compact_times_lanes(Y, bY, x, bx, out, bo, add, width):
    """out[bo] (+)= Y[bY] x[bx] = [m v + w x h; h x v + I w] for the compact inertia
    (m, h, I00 I01 I02 I11 I12 I22) at bY and the motion x = (v, w), every lane."""
    C, X, O = np.uint64(bY), np.uint64(bx), np.uint64(bo)
    for s in range(width):
        mass, h0, h1, h2 = Y[C + s], Y[C + UT1 + s], Y[C + UT2 + s], Y[C + UT3 + s]
        i00, i01, i02 = Y[C + UT4 + s], Y[C + UT5 + s], Y[C + UT6 + s]
        i11, i12, i22 = Y[C + UT7 + s], Y[C + UT8 + s], Y[C + UT9 + s]
        v0, v1, v2 = x[X + s], x[X + UT1 + s], x[X + UT2 + s]
        w0, w1, w2 = x[X + UT3 + s], x[X + UT4 + s], x[X + UT5 + s]
        y0 = mass * v0 + w1 * h2 - w2 * h1
        y1 = mass * v1 + w2 * h0 - w0 * h2
        y2 = mass * v2 + w0 * h1 - w1 * h0
        y3 = h1 * v2 - h2 * v1 + i00 * w0 + i01 * w1 + i02 * w2
        y4 = h2 * v0 - h0 * v2 + i01 * w0 + i11 * w1 + i12 * w2
        y5 = h0 * v1 - h1 * v0 + i02 * w0 + i12 * w1 + i22 * w2
        store_six_lanes(out, O, s, (y0, y1, y2, y3, y4, y5), add)


@inline_kernel
def _columns_times_lanes(J, iv, nvi, x, out, bo, add, width):
    """out[bo] (+)= sum_c J_c x_c over the dofs c of a joint (world columns), every lane."""
    O = np.uint64(bo)
    for c in range(iv, iv + nvi):
        B, X = np.uint64(c * T6), np.uint64(c * TILE)
        keep = add or c > iv
        for s in range(width):
            xc = x[X + s]
            store_six_lanes(out, O, s, (J[B + s] * xc, J[B + UT1 + s] * xc, J[B + UT2 + s] * xc,
                                        J[B + UT3 + s] * xc, J[B + UT4 + s] * xc,
                                        J[B + UT5 + s] * xc), keep)


@inline_kernel
def _dot6_lanes(x, bx, y, by, s):
    """x[bx] . y[by] in lane s."""
    return (x[bx + s] * y[by + s] + x[bx + UT1 + s] * y[by + UT1 + s]
            + x[bx + UT2 + s] * y[by + UT2 + s] + x[bx + UT3 + s] * y[by + UT3 + s]
            + x[bx + UT4 + s] * y[by + UT4 + s] + x[bx + UT5 + s] * y[by + UT5 + s])


# --- World motions, bias forces ---------------------------------------------------------

@kernel
def _velocities_lanes(m, vt, wd, width):
    """ov_i = ov_par + J_i dq_i, cJ_i = ov_i x (J_i dq_i), h_i = Yw_i ov_i and the bias
    force pA_i = ov_i x* h_i of every body (the world frame), every lane."""
    J, Yw, ov, cJ, pA, h, w = wd[2], wd[3], wd[6], wd[7], wd[8], wd[10], wd[28]
    fill_first_lanes(ov, 0, 6, 0.0, width)
    for i in range(1, m.njoints):
        bi, bp = i * T6, m.parents[i] * T6
        _columns_times_lanes(J, m.idx_v[i], m.nvs[i], vt, w, 0, False, width)
        add_first_lanes(ov, bp, w, 0, ov, bi, width)
        motion_cross_first_lanes(ov, bi, w, 0, cJ, bi, width)
        _compact_times_lanes(Yw, i * T10, ov, bi, h, bi, False, width)
        fill_first_lanes(pA, bi, 6, 0.0, width)
        force_cross_first_lanes(ov, bi, h, bi, pA, bi, width)


@kernel
def _accelerations_lanes(m, at, wd, width):
    """oa_i = oa_par + cJ_i + J_i ddq_i (gravity included, oa_0 = -g), every lane."""
    J, cJ, oa = wd[2], wd[7], wd[9]
    for r in range(6):
        fill_first_lanes(oa, r * TILE, 1, -m.gravity[r], width)
    for i in range(1, m.njoints):
        bi = i * T6
        add_first_lanes(oa, m.parents[i] * T6, cJ, bi, oa, bi, width)
        _columns_times_lanes(J, m.idx_v[i], m.nvs[i], at, oa, bi, True, width)


# --- ABA in the world frame -------------------------------------------------------------

@kernel
def _articulated_init_lanes(m, wd, width):
    """IA_i = Yw_i as a 6x6 matrix [m 1, -[h]x; [h]x, I] (upper triangle), every lane."""
    Yw, IA = wd[3], wd[5]
    for i in range(1, m.njoints):
        C, A = np.uint64(i * T10), np.uint64(i * T36)
        for s in range(width):
            mass, h0, h1, h2 = Yw[C + s], Yw[C + UT1 + s], Yw[C + UT2 + s], Yw[C + UT3 + s]
            IA[A + s] = mass
            IA[A + UT1 + s] = 0.0
            IA[A + UT2 + s] = 0.0
            IA[A + UT3 + s] = 0.0
            IA[A + UT4 + s] = h2
            IA[A + UT5 + s] = -h1
            IA[A + UT7 + s] = mass
            IA[A + UT8 + s] = 0.0
            IA[A + UT9 + s] = -h2
            IA[A + UT10 + s] = 0.0
            IA[A + UT11 + s] = h0
            IA[A + np.uint64(14 * TILE) + s] = mass
            IA[A + np.uint64(15 * TILE) + s] = h1
            IA[A + np.uint64(16 * TILE) + s] = -h0
            IA[A + np.uint64(17 * TILE) + s] = 0.0
            IA[A + np.uint64(21 * TILE) + s] = Yw[C + UT4 + s]
            IA[A + np.uint64(22 * TILE) + s] = Yw[C + UT5 + s]
            IA[A + np.uint64(23 * TILE) + s] = Yw[C + UT6 + s]
            IA[A + np.uint64(28 * TILE) + s] = Yw[C + UT7 + s]
            IA[A + np.uint64(29 * TILE) + s] = Yw[C + UT8 + s]
            IA[A + np.uint64(35 * TILE) + s] = Yw[C + UT9 + s]


@inline_kernel
def _symmetric_entries(IA, A, s):
    """The 21 entries of the upper triangle of the 6x6 at IA[A] in lane s."""
    return (IA[A + s], IA[A + UT1 + s], IA[A + UT2 + s], IA[A + UT3 + s], IA[A + UT4 + s],
            IA[A + UT5 + s], IA[A + UT7 + s], IA[A + UT8 + s], IA[A + UT9 + s],
            IA[A + UT10 + s], IA[A + UT11 + s], IA[A + np.uint64(14 * TILE) + s],
            IA[A + np.uint64(15 * TILE) + s], IA[A + np.uint64(16 * TILE) + s],
            IA[A + np.uint64(17 * TILE) + s], IA[A + np.uint64(21 * TILE) + s],
            IA[A + np.uint64(22 * TILE) + s], IA[A + np.uint64(23 * TILE) + s],
            IA[A + np.uint64(28 * TILE) + s], IA[A + np.uint64(29 * TILE) + s],
            IA[A + np.uint64(35 * TILE) + s])


@inline_kernel
def _store_symmetric(X, A, s, y00, y01, y02, y03, y04, y05, y11, y12, y13, y14, y15, y22,
                     y23, y24, y25, y33, y34, y35, y44, y45, y55):
    """The upper triangle of the 6x6 at X[A] in lane s = the 21 values given."""
    X[A + s] = y00
    X[A + UT1 + s] = y01
    X[A + UT2 + s] = y02
    X[A + UT3 + s] = y03
    X[A + UT4 + s] = y04
    X[A + UT5 + s] = y05
    X[A + UT7 + s] = y11
    X[A + UT8 + s] = y12
    X[A + UT9 + s] = y13
    X[A + UT10 + s] = y14
    X[A + UT11 + s] = y15
    X[A + np.uint64(14 * TILE) + s] = y22
    X[A + np.uint64(15 * TILE) + s] = y23
    X[A + np.uint64(16 * TILE) + s] = y24
    X[A + np.uint64(17 * TILE) + s] = y25
    X[A + np.uint64(21 * TILE) + s] = y33
    X[A + np.uint64(22 * TILE) + s] = y34
    X[A + np.uint64(23 * TILE) + s] = y35
    X[A + np.uint64(28 * TILE) + s] = y44
    X[A + np.uint64(29 * TILE) + s] = y45
    X[A + np.uint64(35 * TILE) + s] = y55


@kernel
def _projection_lanes(m, i, taut, with_bias, wd, width):
    """U_c = IA_i J_c for the dofs c of joint i, D = J^T U + armature, Dinv = D^-1 and
    (with_bias) u = tau_i - J_i^T pA_i, every lane."""
    J, IA, pA, U, Dinv, u, D, work, pf = (wd[2], wd[5], wd[8], wd[13], wd[14], wd[15],
                                          wd[24], wd[25], wd[29])
    iv, nvi = m.idx_v[i], m.nvs[i]
    A, P = np.uint64(i * T36), np.uint64(i * T6)
    for c in range(iv, iv + nvi):
        B, C = np.uint64(c * T6), np.uint64(c * TILE)
        for s in range(width):
            (y00, y01, y02, y03, y04, y05, y11, y12, y13, y14, y15, y22, y23, y24, y25,
             y33, y34, y35, y44, y45, y55) = _symmetric_entries(IA, A, s)
            j0, j1, j2 = J[B + s], J[B + UT1 + s], J[B + UT2 + s]
            j3, j4, j5 = J[B + UT3 + s], J[B + UT4 + s], J[B + UT5 + s]
            U[B + s] = y00 * j0 + y01 * j1 + y02 * j2 + y03 * j3 + y04 * j4 + y05 * j5
            U[B + UT1 + s] = y01 * j0 + y11 * j1 + y12 * j2 + y13 * j3 + y14 * j4 + y15 * j5
            U[B + UT2 + s] = y02 * j0 + y12 * j1 + y22 * j2 + y23 * j3 + y24 * j4 + y25 * j5
            U[B + UT3 + s] = y03 * j0 + y13 * j1 + y23 * j2 + y33 * j3 + y34 * j4 + y35 * j5
            U[B + UT4 + s] = y04 * j0 + y14 * j1 + y24 * j2 + y34 * j3 + y44 * j4 + y45 * j5
            U[B + UT5 + s] = y05 * j0 + y15 * j1 + y25 * j2 + y35 * j3 + y45 * j4 + y55 * j5
            if with_bias:
                u[C + s] = taut[C + s] - _dot6_lanes(J, B, pA, P, s)
    for a in range(nvi):
        for b in range(nvi):
            arm = m.armature[iv + a] if a == b else 0.0
            Ja, Ub = np.uint64((iv + a) * T6), np.uint64((iv + b) * T6)
            Do, I = np.uint64((6 * a + b) * TILE), np.uint64(iv * T6)
            for s in range(width):
                d = arm + _dot6_lanes(J, Ja, U, Ub, s)
                D[Do + s] = d
                if nvi == 1:
                    Dinv[I + s] = 1.0 / d
    if nvi > 1:
        _invert_spd_lanes(D, nvi, Dinv, iv, work, pf)


@kernel
def _hand_to_parent_world_lanes(m, i, with_bias, wd, width):
    """Ia = IA_i - U Dinv U^T; IA_par += Ia and (with_bias) pA_par += pA_i + Ia c_i
    + U Dinv u_i, every lane (world frame: no transform)."""
    IA, cJ, pA, U, Dinv, u, UD, Ia = wd[5], wd[7], wd[8], wd[13], wd[14], wd[15], wd[26], wd[27]
    iv, nvi, par = m.idx_v[i], m.nvs[i], m.parents[i]
    A, Ap = np.uint64(i * T36), np.uint64(par * T36)
    for a in range(nvi):  # UD column a = sum_b U_b Dinv[b, a]
        O = np.uint64(a * T6)
        for b in range(nvi):
            Ub, Db = np.uint64((iv + b) * T6), np.uint64((iv + b) * T6 + a * TILE)
            first = b == 0
            for s in range(width):
                d = Dinv[Db + s]
                store_six_lanes(UD, O, s, (U[Ub + s] * d, U[Ub + UT1 + s] * d,
                                           U[Ub + UT2 + s] * d, U[Ub + UT3 + s] * d,
                                           U[Ub + UT4 + s] * d, U[Ub + UT5 + s] * d), not first)
    for a in range(nvi):  # Ia = IA_i - sum_a UD_a U_a^T, upper triangle
        O, Ua = np.uint64(a * T6), np.uint64((iv + a) * T6)
        src, Bs = (IA, A) if a == 0 else (Ia, np.uint64(0))
        for s in range(width):
            (y00, y01, y02, y03, y04, y05, y11, y12, y13, y14, y15, y22, y23, y24, y25,
             y33, y34, y35, y44, y45, y55) = _symmetric_entries(src, Bs, s)
            e0, e1, e2 = UD[O + s], UD[O + UT1 + s], UD[O + UT2 + s]
            e3, e4, e5 = UD[O + UT3 + s], UD[O + UT4 + s], UD[O + UT5 + s]
            u0, u1, u2 = U[Ua + s], U[Ua + UT1 + s], U[Ua + UT2 + s]
            u3, u4, u5 = U[Ua + UT3 + s], U[Ua + UT4 + s], U[Ua + UT5 + s]
            _store_symmetric(Ia, np.uint64(0), s, y00 - e0 * u0, y01 - e0 * u1, y02 - e0 * u2,
                             y03 - e0 * u3, y04 - e0 * u4, y05 - e0 * u5, y11 - e1 * u1,
                             y12 - e1 * u2, y13 - e1 * u3, y14 - e1 * u4, y15 - e1 * u5,
                             y22 - e2 * u2, y23 - e2 * u3, y24 - e2 * u4, y25 - e2 * u5,
                             y33 - e3 * u3, y34 - e3 * u4, y35 - e3 * u5, y44 - e4 * u4,
                             y45 - e4 * u5, y55 - e5 * u5)
    for s in range(width):  # IA_par += Ia
        (y00, y01, y02, y03, y04, y05, y11, y12, y13, y14, y15, y22, y23, y24, y25,
         y33, y34, y35, y44, y45, y55) = _symmetric_entries(Ia, np.uint64(0), s)
        (x00, x01, x02, x03, x04, x05, x11, x12, x13, x14, x15, x22, x23, x24, x25,
         x33, x34, x35, x44, x45, x55) = _symmetric_entries(IA, Ap, s)
        _store_symmetric(IA, Ap, s, x00 + y00, x01 + y01, x02 + y02, x03 + y03, x04 + y04,
                         x05 + y05, x11 + y11, x12 + y12, x13 + y13, x14 + y14, x15 + y15,
                         x22 + y22, x23 + y23, x24 + y24, x25 + y25, x33 + y33, x34 + y34,
                         x35 + y35, x44 + y44, x45 + y45, x55 + y55)
    if not with_bias:
        return
    C, P, Pp = np.uint64(i * T6), np.uint64(i * T6), np.uint64(par * T6)
    for s in range(width):
        (y00, y01, y02, y03, y04, y05, y11, y12, y13, y14, y15, y22, y23, y24, y25,
         y33, y34, y35, y44, y45, y55) = _symmetric_entries(Ia, np.uint64(0), s)
        c0, c1, c2 = cJ[C + s], cJ[C + UT1 + s], cJ[C + UT2 + s]
        c3, c4, c5 = cJ[C + UT3 + s], cJ[C + UT4 + s], cJ[C + UT5 + s]
        p0, p1, p2, p3, p4, p5 = load_six_lanes(pA, P, s)
        store_six_lanes(pA, Pp, s, (
            p0 + y00 * c0 + y01 * c1 + y02 * c2 + y03 * c3 + y04 * c4 + y05 * c5,
            p1 + y01 * c0 + y11 * c1 + y12 * c2 + y13 * c3 + y14 * c4 + y15 * c5,
            p2 + y02 * c0 + y12 * c1 + y22 * c2 + y23 * c3 + y24 * c4 + y25 * c5,
            p3 + y03 * c0 + y13 * c1 + y23 * c2 + y33 * c3 + y34 * c4 + y35 * c5,
            p4 + y04 * c0 + y14 * c1 + y24 * c2 + y34 * c3 + y44 * c4 + y45 * c5,
            p5 + y05 * c0 + y15 * c1 + y25 * c2 + y35 * c3 + y45 * c4 + y55 * c5), True)
    for a in range(nvi):
        O, Q = np.uint64(a * T6), np.uint64((iv + a) * TILE)
        for s in range(width):
            x = u[Q + s]
            store_six_lanes(pA, Pp, s, (UD[O + s] * x, UD[O + UT1 + s] * x, UD[O + UT2 + s] * x,
                                        UD[O + UT3 + s] * x, UD[O + UT4 + s] * x,
                                        UD[O + UT5 + s] * x), True)


@kernel
def _aba_backward_world_lanes(m, taut, with_bias, wd, width):
    """ABA's backward pass: articulated inertias, U, D^-1 and (with_bias) u, pA."""
    for i in range(m.njoints - 1, 0, -1):
        _projection_lanes(m, i, taut, with_bias, wd, width)
        if m.parents[i] > 0:
            _hand_to_parent_world_lanes(m, i, with_bias, wd, width)


@kernel
def _aba_forward_world_lanes(m, ddqt, wd, width):
    """oa_i = oa_par + c_i, ddq_i = Dinv (u_i - U^T oa_i), oa_i += J_i ddq_i, every lane."""
    J, cJ, oa, U, Dinv, u, e = wd[2], wd[7], wd[9], wd[13], wd[14], wd[15], wd[28]
    for r in range(6):
        fill_first_lanes(oa, r * TILE, 1, -m.gravity[r], width)
    for i in range(1, m.njoints):
        bi, iv, nvi = i * T6, m.idx_v[i], m.nvs[i]
        add_first_lanes(oa, m.parents[i] * T6, cJ, bi, oa, bi, width)
        A, I = np.uint64(bi), np.uint64(iv * T6)
        for a in range(nvi):
            Ua, E, Q = np.uint64((iv + a) * T6), np.uint64(a * TILE), np.uint64((iv + a) * TILE)
            for s in range(width):
                x = u[Q + s] - _dot6_lanes(U, Ua, oa, A, s)
                e[E + s] = x
                if nvi == 1:
                    ddqt[Q + s] = Dinv[I + s] * x
        if nvi > 1:
            dinv_times_first_lanes(Dinv, iv, nvi, e, ddqt, width)
        _columns_times_lanes(J, iv, nvi, ddqt, oa, bi, True, width)


# --- M^-1 from ABA's U and D^-1 ---------------------------------------------------------

@kernel
def _minverse_backward_lanes(m, wd, Minv, rows, width):
    """Rows of M^-1 restricted to each subtree: Minv[i, subtree] = [Dinv, -Dinv J_i^T
    F[descendants]], zero on the columns after the subtree (which the forward sweep
    updates), then F[subtree] += U_i Minv[i, subtree] (not at the children of the
    universe); :func:`.minverse._minverse_backward_pass` in every lane.  Every entry
    of the upper triangle is written here, so M^-1 needs no zeroing beforehand."""
    J, U, Dinv, F, w = wd[2], wd[13], wd[14], wd[22], wd[28]
    nv = m.nv
    for i in range(m.njoints - 1, 0, -1):
        iv, nvi = m.idx_v[i], m.nvs[i]
        end = m.idx_v[m.subtree_end[i]] if m.subtree_end[i] < m.njoints else nv
        for a in range(nvi):
            fill_first_lanes(Minv, (rows[iv + a] + end) * TILE, nv - end, 0.0, width)
        for a in range(nvi):
            for b in range(nvi):
                D = np.uint64((iv + a) * T6 + b * TILE)
                O = np.uint64((rows[iv + a] + iv + b) * TILE)
                for s in range(width):
                    Minv[O + s] = Dinv[D + s]
        for col in range(iv + nvi, end):
            Fc = np.uint64(col * T6)
            for b in range(nvi):
                Jb, W = np.uint64((iv + b) * T6), np.uint64(b * TILE)
                for s in range(width):
                    w[W + s] = _dot6_lanes(J, Jb, F, Fc, s)
            for a in range(nvi):
                O = np.uint64((rows[iv + a] + col) * TILE)
                for b in range(nvi):
                    D, W = np.uint64((iv + a) * T6 + b * TILE), np.uint64(b * TILE)
                    for s in range(width):
                        x = -Dinv[D + s] * w[W + s]
                        Minv[O + s] = x if b == 0 else Minv[O + s] + x
        if m.parents[i] == 0:
            continue
        for col in range(iv, end):
            Fc = np.uint64(col * T6)
            for a in range(nvi):
                Ua, O = np.uint64((iv + a) * T6), np.uint64((rows[iv + a] + col) * TILE)
                for s in range(width):
                    x = Minv[O + s]
                    store_six_lanes(F, Fc, s, (U[Ua + s] * x, U[Ua + UT1 + s] * x,
                                               U[Ua + UT2 + s] * x, U[Ua + UT3 + s] * x,
                                               U[Ua + UT4 + s] * x, U[Ua + UT5 + s] * x), True)


@kernel
def _minverse_forward_lanes(m, wd, Minv, rows, width):
    """The ancestors' part: rows of i -= Dinv U_i^T A_par on the columns from i on,
    A_i = A_par + J_i Minv[dofs of i] (not stored for leaves), the upper triangle
    (:func:`.minverse._minverse_forward_pass` in every lane).  A is kept per depth in
    the tree, not per joint: the joints visited between a joint and its descendant lie
    deeper in its subtree (depth-first order), so a level is overwritten only once no
    descendant reads it; this keeps the columns in the caches (talos: 4.6 MB per tile
    per joint, a few hundred kB per depth)."""
    J, U, Dinv, A, w = wd[2], wd[13], wd[14], wd[23], wd[28]
    nv = m.nv
    depth = np.zeros(m.njoints, dtype=np.int64)
    for i in range(1, m.njoints):
        iv, nvi, par = m.idx_v[i], m.nvs[i], m.parents[i]
        leaf = m.subtree_end[i] == i + 1
        depth[i] = depth[par] + 1
        for col in range(iv, nv):
            Ap = np.uint64((depth[par] * nv + col) * T6)
            Ai = np.uint64((depth[i] * nv + col) * T6)
            if par > 0:
                for b in range(nvi):
                    Ub, W = np.uint64((iv + b) * T6), np.uint64(b * TILE)
                    for s in range(width):
                        w[W + s] = _dot6_lanes(U, Ub, A, Ap, s)
                for a in range(nvi):
                    O = np.uint64((rows[iv + a] + col) * TILE)
                    for b in range(nvi):
                        D, W = np.uint64((iv + a) * T6 + b * TILE), np.uint64(b * TILE)
                        for s in range(width):
                            Minv[O + s] -= Dinv[D + s] * w[W + s]
            if leaf:
                continue
            for a in range(nvi):
                Ja, O = np.uint64((iv + a) * T6), np.uint64((rows[iv + a] + col) * TILE)
                keep = par > 0 or a > 0
                Src = Ap if a == 0 else Ai
                for s in range(width):
                    x = Minv[O + s]
                    store_six_sum_lanes(A, Ai, s, (J[Ja + s] * x, J[Ja + UT1 + s] * x,
                                                   J[Ja + UT2 + s] * x, J[Ja + UT3 + s] * x,
                                                   J[Ja + UT4 + s] * x, J[Ja + UT5 + s] * x),
                                        A, Src, keep)


@kernel
def _minverse_lower_lanes(nv, Minv, width):
    """The lower triangle of the tile's M^-1 = its upper triangle, every lane (for the
    products dFD = -M^-1 dID, which read whole rows; M^-1 alone is stored from the
    upper triangle, :func:`_minverse_lanes`)."""
    for r in range(nv):
        for c in range(r):
            O, P = np.uint64((r * nv + c) * TILE), np.uint64((c * nv + r) * TILE)
            for s in range(width):
                Minv[O + s] = Minv[P + s]


@kernel
def _minverse_sweeps_lanes(m, wd, Minv, rows, width):
    """The upper triangle of M^-1 from ABA's U and D^-1 of the tile (F zeroed first)
    into Minv, entry (r, c) at (rows[r] + c) T (:func:`_minverse_rows`)."""
    fill_first_lanes(wd[22], 0, 6 * m.nv, 0.0, width)
    _minverse_backward_lanes(m, wd, Minv, rows, width)
    _minverse_forward_lanes(m, wd, Minv, rows, width)


# --- M^-1 from CRBA's factor: M^-1 = L^-1 L^-T -------------------------------------------

@inline_kernel
def _sum_of_products_lanes(x, xo, y, yo, first, n, out, O):
    """out[O] (first: =, else +=) sum_{t < n} x[xo[t]] y[yo[t]], every lane (rows T
    apart, xo and yo the rows' offsets); four products per lane loop, so that the
    accumulated row is loaded and stored once per four."""
    t = 0
    while t < n:
        add = t > 0 or not first
        if n - t >= 4:
            A0, A1, A2, A3 = xo[t], xo[t + 1], xo[t + 2], xo[t + 3]
            B0, B1, B2, B3 = yo[t], yo[t + 1], yo[t + 2], yo[t + 3]
            for s in range(UT):
                v = (x[A0 + s] * y[B0 + s] + x[A1 + s] * y[B1 + s] + x[A2 + s] * y[B2 + s]
                     + x[A3 + s] * y[B3 + s])
                out[O + s] = out[O + s] + v if add else v
            t += 4
        elif n - t >= 2:
            A0, A1, B0, B1 = xo[t], xo[t + 1], yo[t], yo[t + 1]
            for s in range(UT):
                v = x[A0 + s] * y[B0 + s] + x[A1 + s] * y[B1 + s]
                out[O + s] = out[O + s] + v if add else v
            t += 2
        else:
            A0, B0 = xo[t], yo[t]
            for s in range(UT):
                v = x[A0 + s] * y[B0 + s]
                out[O + s] = out[O + s] + v if add else v
            t += 1


@kernel
def _ltl_inverse_lanes(m, slot, L):
    """L <- X = L^-1 in place (L from :func:`.batch_lanes._ltl_factor_lanes`; X has L's
    pattern, branch-induced sparsity: row k on k and its ancestor dofs), every lane.
    Row k of L X = I: X[k, k] = 1 / L[k, k] and, for each ancestor j of k,
    X[k, j] = -X[k, k] sum_i L[k, i] X[i, j] over the dofs i from j to k's parent
    (Featherstone 2008, Sec. 6.5: the inverse keeps the pattern).  Rows in increasing
    order (the X[i, j] of the ancestors i are final) and, within a row, the ancestors
    j from the root down: X[k, j] overwrites L[k, j], read last by that entry, while
    the deeper L[k, i] it needs are not overwritten yet."""
    lam = m.dof_parent
    chain = np.empty(m.nv, dtype=np.int64)  # k's ancestors, parent first
    xo, yo = np.empty(m.nv, dtype=np.uint64), np.empty(m.nv, dtype=np.uint64)
    for k in range(m.nv):
        K = np.uint64(slot[k, k] * TILE)
        for s in range(UT):
            L[K + s] = 1.0 / L[K + s]
        depth, i = 0, lam[k]
        while i >= 0:
            chain[depth] = i
            depth += 1
            i = lam[i]
        for top in range(depth - 1, -1, -1):
            j = chain[top]
            # the term of L[k, j] itself first: the entry's row then holds the sum
            for t in range(top + 1):
                i = chain[top - t]
                xo[t], yo[t] = np.uint64(slot[k, i] * TILE), np.uint64(slot[i, j] * TILE)
            O = xo[0]
            _sum_of_products_lanes(L, xo, L, yo, True, top + 1, L, O)
            for s in range(UT):
                L[O + s] *= -L[K + s]


@kernel
def _ltl_products_lanes(m, slot, X, rows, Minv):
    """The upper triangle of M^-1 = X X^T (X = L^-1, :func:`_ltl_inverse_lanes`) into
    Minv, entry (r, c) at (rows[r] + c) T: the sum over the dofs k that support both r
    and c of X[r, k] X[c, k].  For r < c in depth-first order, the first ancestor of c
    at or before r also supports r (r lies in its subtree, between it and c), and so do
    all above it."""
    lam = m.dof_parent
    xo, yo = np.empty(m.nv, dtype=np.uint64), np.empty(m.nv, dtype=np.uint64)
    for r in range(m.nv):
        for c in range(r, m.nv):
            k = c
            while k > r:
                k = lam[k]
            n = 0
            while k >= 0:
                xo[n], yo[n] = np.uint64(slot[r, k] * TILE), np.uint64(slot[c, k] * TILE)
                n += 1
                k = lam[k]
            O = np.uint64((rows[r] + c) * TILE)
            if n == 0:  # r and c under different children of the universe
                for s in range(UT):
                    Minv[O + s] = 0.0
            else:
                _sum_of_products_lanes(X, xo, X, yo, True, n, Minv, O)


@kernel
def _minverse_rows(m, packed):
    """rows (nv,) int64 and the tile's row count: entry (r, c) of M^-1's tile at
    (rows[r] + c) T.  Not packed: the full (nv, nv) tile, rows[r] = r nv.  Packed: row
    r holds only the columns from the first dof of r's joint on (the sweeps write no
    other: the upper triangle and the joint's diagonal block), talos 757 rows instead
    of 1444, so that the tile (0.39 MB instead of 0.74) stays in L2 beside the
    sweeps' columns."""
    rows = np.empty(m.nv, dtype=np.int64)
    count = 0
    for i in range(1, m.njoints):
        first = m.idx_v[i] if packed else 0
        for r in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            rows[r] = count - first
            count += m.nv - first
    return rows, count


# --- RNEA derivatives in the world frame -------------------------------------------------

@kernel
def _derivative_columns_lanes(m, bias_in_f, wd, width):
    """Per dof d: u_d = v_par x J_d, alpha_d = a_par x J_d + v_par x u_d, gamma_d =
    (v_i + v_par) x J_d (2 u_d for a 1-dof joint); per body B_i (Bcrb, 12 numbers) and
    f_i = Yw_i a_i + (bias_in_f: f_i on entry, else v_i x* h_i), every lane."""
    J, Yw, ov, oa, h, f, Bcrb, uc, ac, gc, w = (wd[2], wd[3], wd[6], wd[9], wd[10], wd[11],
                                                wd[12], wd[16], wd[17], wd[18], wd[28])
    for i in range(1, m.njoints):
        par, iv, nvi = m.parents[i], m.idx_v[i], m.nvs[i]
        bi, bp = i * T6, par * T6
        for d in range(iv, iv + nvi):
            bd = d * T6
            motion_cross_first_lanes(ov, bp, J, bd, uc, bd, width)
            motion_cross_first_lanes(oa, bp, J, bd, ac, bd, width)
            motion_cross_first_lanes(ov, bp, uc, bd, w, 0, width)
            add_first_lanes(ac, bd, w, 0, ac, bd, width)
            if nvi == 1:
                add_first_lanes(uc, bd, uc, bd, gc, bd, width)
            else:
                add_first_lanes(ov, bi, ov, bp, w, 0, width)
                motion_cross_first_lanes(w, 0, J, bd, gc, bd, width)
        _inertia_variation_lanes(Yw, ov, h, i, Bcrb, width)
        if bias_in_f:
            _compact_times_lanes(Yw, i * T10, oa, bi, f, bi, True, width)
        else:
            _compact_times_lanes(Yw, i * T10, oa, bi, f, bi, False, width)
            force_cross_first_lanes(ov, bi, h, bi, f, bi, width)


@inline_kernel
def _inertia_variation_lanes(Yw, ov, h, i, Bcrb, width):
    """Bcrb_i = (B_ang row-major, b = 2 h_lin) for the inertia Yw_i moving at ov_i with
    momentum h_i (:func:`.rnea_derivatives.inertia_variation`), every lane."""
    C, V, B = np.uint64(i * T10), np.uint64(i * T6), np.uint64(i * T12)
    for s in range(width):
        H0, H1, H2 = Yw[C + UT1 + s], Yw[C + UT2 + s], Yw[C + UT3 + s]
        i00, i01, i02 = Yw[C + UT4 + s], Yw[C + UT5 + s], Yw[C + UT6 + s]
        i11, i12, i22 = Yw[C + UT7 + s], Yw[C + UT8 + s], Yw[C + UT9 + s]
        l0, l1, l2 = ov[V + s], ov[V + UT1 + s], ov[V + UT2 + s]
        w0, w1, w2 = ov[V + UT3 + s], ov[V + UT4 + s], ov[V + UT5 + s]
        p00 = w1 * i02 - w2 * i01
        p10 = w2 * i00 - w0 * i02
        p20 = w0 * i01 - w1 * i00
        p01 = w1 * i12 - w2 * i11
        p11 = w2 * i01 - w0 * i12
        p21 = w0 * i11 - w1 * i01
        p02 = w1 * i22 - w2 * i12
        p12 = w2 * i02 - w0 * i22
        p22 = w0 * i12 - w1 * i02
        sh = H0 * l0 + H1 * l1 + H2 * l2
        g0, g1, g2 = h[V + UT3 + s], h[V + UT4 + s], h[V + UT5 + s]
        s01 = p01 + p10 - l0 * H1 - H0 * l1
        s02 = p02 + p20 - l0 * H2 - H0 * l2
        s12 = p12 + p21 - l1 * H2 - H1 * l2
        Bcrb[B + s] = 2.0 * (p00 + sh - l0 * H0)
        Bcrb[B + UT1 + s] = s01 + g2
        Bcrb[B + UT2 + s] = s02 - g1
        Bcrb[B + UT3 + s] = s01 - g2
        Bcrb[B + UT4 + s] = 2.0 * (p11 + sh - l1 * H1)
        Bcrb[B + UT5 + s] = s12 + g0
        Bcrb[B + UT6 + s] = s02 + g1
        Bcrb[B + UT7 + s] = s12 - g0
        Bcrb[B + UT8 + s] = 2.0 * (p22 + sh - l2 * H2)
        Bcrb[B + UT9 + s] = 2.0 * h[V + s]
        Bcrb[B + UT10 + s] = 2.0 * h[V + UT1 + s]
        Bcrb[B + UT11 + s] = 2.0 * h[V + UT2 + s]


@kernel
def _supported_rows_lanes(m, i, c, at, with_mass_matrix, wd, taut, width):
    """Row c (a dof of joint i) against every dof d of i and its ancestors, and tau_c:
    dq[c, d] = (Ycrb J_c) . alpha_d + (Bcrb^T J_c) . u_d, dv[c, d] = (Ycrb J_c) . gamma_d
    + (Bcrb^T J_c) . J_d, M[c, d] = (Ycrb J_c) . J_d, every lane."""
    J, Ycrb, f, Bcrb, uc, ac, gc, Mt, dq, dv, y = (wd[2], wd[4], wd[11], wd[12], wd[16],
                                                   wd[17], wd[18], wd[19], wd[20], wd[21],
                                                   wd[30])
    nv = m.nv
    Jc, F, B, C = np.uint64(c * T6), np.uint64(i * T6), np.uint64(i * T12), np.uint64(c * TILE)
    arm = m.armature[c]
    _compact_times_lanes(Ycrb, i * T10, J, c * T6, y, 0, False, width)
    for s in range(width):  # t = Bcrb^T J_c (rows 6-8 of y) and tau_c
        j0, j1, j2 = J[Jc + s], J[Jc + UT1 + s], J[Jc + UT2 + s]
        j3, j4, j5 = J[Jc + UT3 + s], J[Jc + UT4 + s], J[Jc + UT5 + s]
        b0, b1, b2 = Bcrb[B + UT9 + s], Bcrb[B + UT10 + s], Bcrb[B + UT11 + s]
        y[UT6 + s] = (b1 * j2 - b2 * j1 + Bcrb[B + s] * j3 + Bcrb[B + UT3 + s] * j4
                      + Bcrb[B + UT6 + s] * j5)
        y[UT7 + s] = (b2 * j0 - b0 * j2 + Bcrb[B + UT1 + s] * j3 + Bcrb[B + UT4 + s] * j4
                      + Bcrb[B + UT7 + s] * j5)
        y[UT8 + s] = (b0 * j1 - b1 * j0 + Bcrb[B + UT2 + s] * j3 + Bcrb[B + UT5 + s] * j4
                      + Bcrb[B + UT8 + s] * j5)
        taut[C + s] = _dot6_lanes(J, Jc, f, F, s) + arm * at[C + s]
    j = i
    while j > 0:
        for d in range(m.idx_v[j], m.idx_v[j] + m.nvs[j]):
            D = np.uint64(d * T6)
            O, Om = np.uint64((c * nv + d) * TILE), np.uint64((d * nv + c) * TILE)
            add = arm if d == c else 0.0
            for s in range(width):
                y0, y1, y2, y3, y4, y5 = y[s], y[UT1 + s], y[UT2 + s], y[UT3 + s], y[UT4 + s], \
                    y[UT5 + s]
                t0, t1, t2 = y[UT6 + s], y[UT7 + s], y[UT8 + s]
                dq[O + s] = (y0 * ac[D + s] + y1 * ac[D + UT1 + s] + y2 * ac[D + UT2 + s]
                             + y3 * ac[D + UT3 + s] + y4 * ac[D + UT4 + s]
                             + y5 * ac[D + UT5 + s] + t0 * uc[D + UT3 + s]
                             + t1 * uc[D + UT4 + s] + t2 * uc[D + UT5 + s])
                dv[O + s] = (y0 * gc[D + s] + y1 * gc[D + UT1 + s] + y2 * gc[D + UT2 + s]
                             + y3 * gc[D + UT3 + s] + y4 * gc[D + UT4 + s]
                             + y5 * gc[D + UT5 + s] + t0 * J[D + UT3 + s]
                             + t1 * J[D + UT4 + s] + t2 * J[D + UT5 + s])
                if with_mass_matrix:
                    mm = (y0 * J[D + s] + y1 * J[D + UT1 + s] + y2 * J[D + UT2 + s]
                          + y3 * J[D + UT3 + s] + y4 * J[D + UT4 + s] + y5 * J[D + UT5 + s])
                    Mt[Om + s] = mm
                    Mt[O + s] = mm + add
        j = m.parents[j]


@kernel
def _supporting_columns_lanes(m, i, d, wd, width):
    """Column d (a dof of joint i) against every dof c of the strict ancestors of i:
    dq[c, d] = J_c . (J_d x* f_i + Ycrb alpha_d + Bcrb u_d), dv[c, d] = J_c . (Ycrb
    gamma_d + Bcrb J_d), every lane."""
    J, Ycrb, f, Bcrb, uc, ac, gc, dq, dv, y = (wd[2], wd[4], wd[11], wd[12], wd[16], wd[17],
                                               wd[18], wd[20], wd[21], wd[30])
    nv = m.nv
    D, F, B = np.uint64(d * T6), np.uint64(i * T6), np.uint64(i * T12)
    _compact_times_lanes(Ycrb, i * T10, ac, d * T6, y, 0, False, width)
    _compact_times_lanes(Ycrb, i * T10, gc, d * T6, y, T6, False, width)
    for s in range(width):
        j0, j1, j2 = J[D + s], J[D + UT1 + s], J[D + UT2 + s]
        j3, j4, j5 = J[D + UT3 + s], J[D + UT4 + s], J[D + UT5 + s]
        F0, F1, F2 = f[F + s], f[F + UT1 + s], f[F + UT2 + s]
        F3, F4, F5 = f[F + UT3 + s], f[F + UT4 + s], f[F + UT5 + s]
        n0, n1, n2 = uc[D + UT3 + s], uc[D + UT4 + s], uc[D + UT5 + s]
        b0, b1, b2 = Bcrb[B + UT9 + s], Bcrb[B + UT10 + s], Bcrb[B + UT11 + s]
        B00, B01, B02 = Bcrb[B + s], Bcrb[B + UT1 + s], Bcrb[B + UT2 + s]
        B10, B11, B12 = Bcrb[B + UT3 + s], Bcrb[B + UT4 + s], Bcrb[B + UT5 + s]
        B20, B21, B22 = Bcrb[B + UT6 + s], Bcrb[B + UT7 + s], Bcrb[B + UT8 + s]
        store_six_lanes(y, np.uint64(0), s, (
            j4 * F2 - j5 * F1 + n1 * b2 - n2 * b1,
            j5 * F0 - j3 * F2 + n2 * b0 - n0 * b2,
            j3 * F1 - j4 * F0 + n0 * b1 - n1 * b0,
            j4 * F5 - j5 * F4 + j1 * F2 - j2 * F1 + B00 * n0 + B01 * n1 + B02 * n2,
            j5 * F3 - j3 * F5 + j2 * F0 - j0 * F2 + B10 * n0 + B11 * n1 + B12 * n2,
            j3 * F4 - j4 * F3 + j0 * F1 - j1 * F0 + B20 * n0 + B21 * n1 + B22 * n2), True)
        store_six_lanes(y, UT6, s, (
            j4 * b2 - j5 * b1, j5 * b0 - j3 * b2, j3 * b1 - j4 * b0,
            B00 * j3 + B01 * j4 + B02 * j5, B10 * j3 + B11 * j4 + B12 * j5,
            B20 * j3 + B21 * j4 + B22 * j5), True)
    j = m.parents[i]
    while j > 0:
        for c in range(m.idx_v[j], m.idx_v[j] + m.nvs[j]):
            Jc, O = np.uint64(c * T6), np.uint64((c * nv + d) * TILE)
            for s in range(width):
                dq[O + s] = _dot6_lanes(J, Jc, y, np.uint64(0), s)
                dv[O + s] = _dot6_lanes(J, Jc, y, UT6, s)
        j = m.parents[j]


@kernel
def _rnea_derivatives_backward_lanes(m, at, with_mass_matrix, wd, taut, width):
    """tau (at a), dq, dv and (with_mass_matrix) M; Ycrb, Bcrb and f become the
    composites of the subtrees (dq, dv zeroed first: the entries of dofs on different
    branches are not written)."""
    Ycrb, f, Bcrb = wd[4], wd[11], wd[12]
    fill_first_lanes(wd[20], 0, m.nv * m.nv, 0.0, width)
    fill_first_lanes(wd[21], 0, m.nv * m.nv, 0.0, width)
    for i in range(m.njoints - 1, 0, -1):
        iv, nvi, par = m.idx_v[i], m.nvs[i], m.parents[i]
        for c in range(iv, iv + nvi):
            _supported_rows_lanes(m, i, c, at, with_mass_matrix, wd, taut, width)
        if par == 0:
            continue
        for d in range(iv, iv + nvi):
            _supporting_columns_lanes(m, i, d, wd, width)
        add_first_lanes(f, par * T6, f, i * T6, f, par * T6, width)
        C, P = np.uint64(i * T10), np.uint64(par * T10)
        B, Q = np.uint64(i * T12), np.uint64(par * T12)
        for s in range(width):
            for r in range(10):
                Ycrb[P + np.uint64(r * TILE) + s] += Ycrb[C + np.uint64(r * TILE) + s]
            for r in range(12):
                Bcrb[Q + np.uint64(r * TILE) + s] += Bcrb[B + np.uint64(r * TILE) + s]


@kernel
def _related_dofs(m):
    """related[k, c]: the joints of dofs k and c lie on one path from the root (the
    same joint, or one an ancestor of the other), the only entries where dtau_dq and
    dtau_dv can be nonzero (the backward pass zeroes the others): those of M
    (:func:`.batch_lanes._mass_matrix_slots`)."""
    return _mass_matrix_slots(m)[0] >= 0


@kernel
def _negative_products_lanes(nv, related, Minv, X, Y, out_X, out_Y, width):
    """out_X = -Minv X, out_Y = -Minv Y for (nv, nv) matrices X, Y of the tile that are
    zero outside ``related`` (:func:`_related_dofs`), every lane: three columns of both
    products and four terms of the sum per lane loop (each pass over out loads and
    stores it: fewer passes, less traffic), the remainders one term at a time.  A block
    of four terms whose rows of X and Y are zero in the three columns is skipped (the
    other terms are summed in the same order).  The rows of out are the inner loop: a
    block of X and Y (12 kB) stays in L1 while they pass, where a loop over the terms
    inside the rows streams all of X and Y once per row (talos, nv = 38: 1.5 MB,
    from L3, 38 times per tile)."""
    for c0 in range(0, nv, 3):
        n = min(3, nv - c0)
        first = True
        for k0 in range(0, nv, 4):
            k1 = min(k0 + 4, nv)
            if not related[k0:k1, c0:c0 + n].any():
                continue
            for r in range(nv):
                O = np.uint64((r * nv + c0) * TILE)
                if n == 3 and k1 == k0 + 4:
                    _four_terms_lanes(nv, Minv, X, Y, out_X, out_Y, O, r, c0, k0, first, width)
                    continue
                for k in range(k0, k1):
                    Mk, Xk = np.uint64((r * nv + k) * TILE), np.uint64((k * nv + c0) * TILE)
                    keep = not first or k > k0
                    for e in range(n):
                        E = np.uint64(e * TILE)
                        for s in range(width):
                            mk = -Minv[Mk + s]
                            x, y = mk * X[Xk + E + s], mk * Y[Xk + E + s]
                            if keep:
                                x += out_X[O + E + s]
                                y += out_Y[O + E + s]
                            out_X[O + E + s] = x
                            out_Y[O + E + s] = y
            first = False


@inline_kernel
def _four_terms_lanes(nv, Minv, X, Y, out_X, out_Y, O, r, c0, k0, first, width):
    """out[r, c0:c0+3] (not first: +)= -sum_{k0 <= k < k0+4} Minv[r, k] (X, Y)[k, c0:c0+3]
    in every lane."""
    M0 = np.uint64((r * nv + k0) * TILE)
    X0 = np.uint64((k0 * nv + c0) * TILE)
    X1 = X0 + np.uint64(nv * TILE)
    X2 = X1 + np.uint64(nv * TILE)
    X3 = X2 + np.uint64(nv * TILE)
    for s in range(width):
        m0, m1, m2, m3 = (-Minv[M0 + s], -Minv[M0 + UT1 + s], -Minv[M0 + UT2 + s],
                          -Minv[M0 + UT3 + s])
        x0 = m0 * X[X0 + s] + m1 * X[X1 + s] + m2 * X[X2 + s] + m3 * X[X3 + s]
        x1 = (m0 * X[X0 + UT1 + s] + m1 * X[X1 + UT1 + s] + m2 * X[X2 + UT1 + s]
              + m3 * X[X3 + UT1 + s])
        x2 = (m0 * X[X0 + UT2 + s] + m1 * X[X1 + UT2 + s] + m2 * X[X2 + UT2 + s]
              + m3 * X[X3 + UT2 + s])
        y0 = m0 * Y[X0 + s] + m1 * Y[X1 + s] + m2 * Y[X2 + s] + m3 * Y[X3 + s]
        y1 = (m0 * Y[X0 + UT1 + s] + m1 * Y[X1 + UT1 + s] + m2 * Y[X2 + UT1 + s]
              + m3 * Y[X3 + UT1 + s])
        y2 = (m0 * Y[X0 + UT2 + s] + m1 * Y[X1 + UT2 + s] + m2 * Y[X2 + UT2 + s]
              + m3 * Y[X3 + UT2 + s])
        if not first:
            x0 += out_X[O + s]
            x1 += out_X[O + UT1 + s]
            x2 += out_X[O + UT2 + s]
            y0 += out_Y[O + s]
            y1 += out_Y[O + UT1 + s]
            y2 += out_Y[O + UT2 + s]
        out_X[O + s] = x0
        out_X[O + UT1 + s] = x1
        out_X[O + UT2 + s] = x2
        out_Y[O + s] = y0
        out_Y[O + UT1 + s] = y1
        out_Y[O + UT2 + s] = y2


# --- Tile drivers and public functions ---------------------------------------------------

@kernel
def _world_tile(m, qt, vt, ws, wd, Yc, width):
    """Placements, J, the world inertias (Yw and a copy as Ycrb), velocities, c, h, pA."""
    _crba_forward_pass_lanes(m, qt, ws, wd[0], wd[1], wd[2], wd[3], Yc)
    _copy_first_lanes(wd[3], wd[4], m.njoints * 10, width)  # Ycrb = Yw
    _velocities_lanes(m, vt, wd, width)


@inline_kernel
def _copy_first_lanes(source, out, rows, width):
    """The first ``width`` lanes of ``rows`` tile rows of source into out: the lanes past
    the width are read by no lane loop of that width (:func:`.lane_tiles.active_width`),
    so a short tile copies only its own (ur5, a 1-state tile: 7 x 10 rows of 8 lanes
    instead of 64)."""
    for r in range(rows):
        R = np.uint64(r * TILE)
        for s in range(width):
            out[R + s] = source[R + s]


@kernel
def aba_tiles_workspace(m):
    """Everything :func:`aba_tiles` works on, allocated once (a phase keeps it): the
    tile arrays of :func:`.lane_tiles.tile_workspace` and of this module, the compact
    body inertias, the tile's q, v, tau, ddq, tau_id (n x T), ddq_dq and ddq_dv
    (nv x nv x T), the pattern of dID (:func:`_related_dofs`) and the rows of the
    full M^-1 tile (:func:`_minverse_rows`)."""
    nv = m.nv
    return (tile_workspace(m), _derivative_workspace(m), _compact_inertias(m),
            np.zeros(m.nq * TILE), np.zeros(nv * TILE), np.zeros(nv * TILE),
            np.zeros(nv * TILE), np.zeros(nv * TILE), np.zeros(nv * nv * TILE),
            np.zeros(nv * nv * TILE), _related_dofs(m), _minverse_rows(m, False)[0])


@kernel
def _aba_tile(m, with_derivatives, work, width):
    """ABA of the tile loaded in ``work`` (world frame: oMi, J, ov, oa are filled)
    and, with_derivatives, M^-1 and dFD = -M^-1 dID at ddq (eq. 24)."""
    ws, wd, Yc, qt, vt, taut, ddqt, tau_id, out_q, out_v, related, rows = work
    _world_tile(m, qt, vt, ws, wd, Yc, width)
    if with_derivatives:
        _copy_first_lanes(wd[8], wd[11], m.njoints * 6, width)  # f = pA: the bias forces,
        # before the backward pass
    _articulated_init_lanes(m, wd, width)
    _aba_backward_world_lanes(m, taut, True, wd, width)
    _aba_forward_world_lanes(m, ddqt, wd, width)
    if not with_derivatives:
        return
    _minverse_sweeps_lanes(m, wd, wd[19], rows, width)
    _minverse_lower_lanes(m.nv, wd[19], width)
    _derivative_columns_lanes(m, True, wd, width)
    _rnea_derivatives_backward_lanes(m, ddqt, False, wd, tau_id, width)
    _negative_products_lanes(m.nv, related, wd[19], wd[20], wd[21], out_q, out_v, width)


@kernel
def _aba_derivatives_lanes(m, q, v, tau, lanes_major, ddq, ddq_dq, ddq_dv, Minv):
    """ddq = ABA(q, v, tau), its derivatives and M^-1 for K states, TILE at a time:
    (n, K) layouts when lanes_major, else (K, n); the matrices as (nv * nv, K) or
    (K, nv * nv)."""
    work = aba_tiles_workspace(m)
    qt, vt, taut, ddqt, out_q, out_v = work[3], work[4], work[5], work[6], work[8], work[9]
    K = q.shape[1] if lanes_major else q.shape[0]
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        width = active_width(n)
        load_state_tiles(q, v, tau, b, n, lanes_major, qt, vt, taut)
        _aba_tile(m, True, work, width)
        store_tile(ddqt, b, n, lanes_major, ddq)
        store_tile(out_q, b, n, lanes_major, ddq_dq)
        store_tile(out_v, b, n, lanes_major, ddq_dv)
        store_tile(work[1][19], b, n, lanes_major, Minv)


@kernel
def aba_tiles(m, q, v, tau, with_derivatives, work, ddq, ddq_dq, ddq_dv, Minv, oR, op, J):
    """ABA (and, with_derivatives, its derivatives and M^-1) of the stacks q (K, nq),
    v, tau (K, nv) across lanes, for a caller that keeps ``work``
    (:func:`aba_tiles_workspace`) and reads the knots' kinematics: ddq (K, nv),
    ddq_dq, ddq_dv, Minv (K, nv * nv), and the world placements and Jacobians oR
    (K, njoints * 9), op (K, njoints * 3), J (K, 6 * nv), as Data's arrays flattened
    (the OCP's free-dynamics phase, :func:`geppetto.ocp.fused._free_field`).

    Every array is :func:`.borrowed.borrowed_all` (the caller owns them for the whole
    call): each call of the tile's passes took and released a reference to every array
    of the model and of the workspace it was passed, an atomic increment and decrement
    per array per tile; borrowed, these are null tests (the same operations, the same
    bits)."""
    m, q, v, tau, work, ddq, ddq_dq, ddq_dv, Minv, oR, op, J = borrowed_all(
        (m, q, v, tau, work, ddq, ddq_dq, ddq_dv, Minv, oR, op, J))
    qt, vt, taut, ddqt, out_q, out_v = work[3], work[4], work[5], work[6], work[8], work[9]
    wd = work[1]
    K = q.shape[0]
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        width = active_width(n)
        load_state_tiles(q, v, tau, b, n, False, qt, vt, taut)
        _aba_tile(m, with_derivatives, work, width)
        store_tile(ddqt, b, n, False, ddq)
        store_tile(wd[0], b, n, False, oR)
        store_tile(wd[1], b, n, False, op)
        _store_jacobian(wd[2], b, n, m.nv, J)
        if with_derivatives:
            store_tile(out_q, b, n, False, ddq_dq)
            store_tile(out_v, b, n, False, ddq_dv)
            store_tile(wd[19], b, n, False, Minv)


@kernel
def _store_jacobian(Jt, b, n, nv, J):
    """J[b + s] (6 * nv, row-major (6, nv)) = the tile's columns (c 6 T + r T) in lane s."""
    for s in range(n):
        for r in range(6):
            for c in range(nv):
                J[b + s, r * nv + c] = Jt[(c * 6 + r) * TILE + s]


@kernel
def _rnea_derivatives_lanes(m, q, v, a, lanes_major, dtau_dq, dtau_dv, M):
    """dtau/dq, dtau/dv and M for K states, TILE at a time (layouts as
    :func:`_aba_derivatives_lanes`)."""
    ws, wd, Yc = tile_workspace(m), _derivative_workspace(m), _compact_inertias(m)
    K = q.shape[1] if lanes_major else q.shape[0]
    nv = m.nv
    qt, vt, at, taut = (np.empty(m.nq * TILE), np.empty(nv * TILE), np.empty(nv * TILE),
                        np.empty(nv * TILE))
    Mt = wd[19]  # Minv's tile array holds M here
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        width = active_width(n)
        load_state_tiles(q, v, a, b, n, lanes_major, qt, vt, at)
        _world_tile(m, qt, vt, ws, wd, Yc, width)
        _accelerations_lanes(m, at, wd, width)
        _derivative_columns_lanes(m, False, wd, width)
        _rnea_derivatives_backward_lanes(m, at, True, wd, taut, width)
        store_tile(wd[20], b, n, lanes_major, dtau_dq)
        store_tile(wd[21], b, n, lanes_major, dtau_dv)
        store_tile(Mt, b, n, lanes_major, M)


@kernel
def _minverse_lanes(m, q, lanes_major, Minv):
    """M^-1 for K states, TILE at a time (layouts as :func:`_aba_derivatives_lanes`):
    CRBA's compact tile of M, its factor M = L^T L in place, L^-1 in place, then M^-1 =
    L^-1 L^-T (:func:`_ltl_products_lanes`; Featherstone 2008, Sec. 6.5, with the
    branch-induced sparsity of L).  Per talos state 8,370 multiply-adds after CRBA
    (factor 1,859, L^-1 1,859, products 4,652) against 11,962 for the two sweeps of
    Carpentier & Mansard after ABA's backward pass (Pinocchio's computeMinverse, which
    the ABA derivatives keep: they need ABA's U and D^-1 anyway); measured 0.80-0.82x
    the time of that route on talos and solo12, 0.72-0.81x on ur5 and panda.  The
    tile's upper triangle is written to both triangles of the output (no copy within
    the tile), the tile packed (:func:`_minverse_rows`)."""
    work = crba_tile_workspace(m)
    slot, L = work[7], work[8]  # M, its factor L, then L^-1
    K = q.shape[1] if lanes_major else q.shape[0]
    qt = np.empty(m.nq * TILE)
    rows, count = _minverse_rows(m, True)
    Mt = np.empty(count * TILE)
    upper = np.empty((m.nv, m.nv), dtype=np.int64)  # the tile's row of entry (r, c)
    for r in range(m.nv):
        for c in range(m.nv):
            upper[r, c] = rows[min(r, c)] + max(r, c)
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        load_tile(q, b, n, lanes_major, qt)
        crba_tile(m, qt, work)
        _ltl_factor_lanes(m, slot, L)
        _ltl_inverse_lanes(m, slot, L)
        _ltl_products_lanes(m, slot, L, rows, Mt)
        store_symmetric_tile(Mt, upper, b, n, lanes_major, Minv)


def _lanes_arguments(model, q, v, u, name_u):
    q = _as_lanes_configurations(model, q)
    v = _as_lanes(model, v, model.nv, "v", q.shape[1])
    u = _as_lanes(model, u, model.nv, name_u, q.shape[1])
    return q, v, u


def aba_derivatives_lanes(model, q, v, tau):
    """The forward-dynamics derivatives of K states laid out across SIMD lanes.

    q : (nq, K); v, tau : (nv, K).  Returns ddq (nv, K), ddq_dq, ddq_dv, Minv
    (nv, nv, K), equal to :func:`~geppetto.dynamics.aba` and
    :func:`~geppetto.dynamics.aba_derivatives` of each column.  No Data is filled.
    """
    q, v, tau = _lanes_arguments(model, q, v, tau, "tau")
    nv, K = model.nv, q.shape[1]
    ddq, dq, dv, Minv = (np.empty((nv, K)), aligned_empty((nv, nv, K)),
                         aligned_empty((nv, nv, K)), aligned_empty((nv, nv, K)))
    _aba_derivatives_lanes(model.arrays, q, v, tau, True, ddq, dq.reshape(nv * nv, K),
                           dv.reshape(nv * nv, K), Minv.reshape(nv * nv, K))
    check_invertible(model, ddq, ddq.shape[0], "aba_derivatives_lanes")
    return ddq, dq, dv, Minv


def aba_derivatives_batch(model, q, v, tau):
    """:func:`aba_derivatives_lanes` on the usual stacks: q (K, nq), v and tau (K, nv)
    -> ddq (K, nv), ddq_dq, ddq_dv, Minv (K, nv, nv)."""
    qs, vs, taus = _as_stacks(model, q, v, tau, "tau")
    nv, K = model.nv, qs.shape[0]
    ddq, dq, dv, Minv = (np.empty((K, nv)), aligned_empty((K, nv, nv)),
                         aligned_empty((K, nv, nv)), aligned_empty((K, nv, nv)))
    _aba_derivatives_lanes(model.arrays, qs, vs, taus, False, ddq, dq.reshape(K, nv * nv),
                           dv.reshape(K, nv * nv), Minv.reshape(K, nv * nv))
    check_invertible(model, ddq, K, "aba_derivatives_batch")
    return ddq, dq, dv, Minv


def rnea_derivatives_lanes(model, q, v, a):
    """The inverse-dynamics derivatives of K states laid out across SIMD lanes.

    q : (nq, K); v, a : (nv, K).  Returns dtau_dq, dtau_dv, M (nv, nv, K), equal to
    :func:`~geppetto.dynamics.rnea_derivatives` of each column.  No Data is filled.
    """
    q, v, a = _lanes_arguments(model, q, v, a, "a")
    nv, K = model.nv, q.shape[1]
    dq, dv, M = (aligned_empty((nv, nv, K)), aligned_empty((nv, nv, K)),
                 aligned_empty((nv, nv, K)))
    _rnea_derivatives_lanes(model.arrays, q, v, a, True, dq.reshape(nv * nv, K),
                            dv.reshape(nv * nv, K), M.reshape(nv * nv, K))
    return dq, dv, M


def rnea_derivatives_batch(model, q, v, a):
    """:func:`rnea_derivatives_lanes` on the usual stacks: q (K, nq), v and a (K, nv)
    -> dtau_dq, dtau_dv, M (K, nv, nv)."""
    qs, vs, as_ = _as_stacks(model, q, v, a, "a")
    nv, K = model.nv, qs.shape[0]
    dq, dv, M = aligned_empty((K, nv, nv)), aligned_empty((K, nv, nv)), aligned_empty((K, nv, nv))
    _rnea_derivatives_lanes(model.arrays, qs, vs, as_, False, dq.reshape(K, nv * nv),
                            dv.reshape(K, nv * nv), M.reshape(K, nv * nv))
    return dq, dv, M


def _check_minverse_diagonal(model, diagonal, function):
    """check_invertible on M^-1's diagonal alone (a strided view, copied): in M^-1 =
    L^-1 L^-T entry (r, r) is the sum of the squares of row r of L^-1 and entry (r, c) a
    sum of products of entries of rows r and c, bounded by sqrt(M^-1_rr M^-1_cc)
    (Cauchy-Schwarz), so a singular M (an inf or NaN in L^-1: sqrt(0) then 1 / 0)
    shows on the diagonal, and a finite diagonal makes every entry finite.  Checking
    all nv^2 entries read the whole output once more: talos 0.49 us per state of about
    4.4, the diagonal 0.05."""
    check_invertible(model, np.ascontiguousarray(diagonal), diagonal.shape[0], function)


def compute_minverse_lanes(model, q):
    """M^-1 of K configurations laid out across SIMD lanes: q (nq, K) -> (nv, nv, K)."""
    q = _as_lanes_configurations(model, q)
    nv, K = model.nv, q.shape[1]
    Minv = aligned_empty((nv, nv, K))
    _minverse_lanes(model.arrays, q, True, Minv.reshape(nv * nv, K))
    _check_minverse_diagonal(model, Minv.reshape(nv * nv, K)[::nv + 1], "compute_minverse_lanes")
    return Minv


def compute_minverse_batch(model, q):
    """:func:`compute_minverse_lanes` on the usual stack: q (K, nq) -> (K, nv, nv)."""
    qs = _as_configuration_stack(model, q, "compute_minverse")
    nv, K = model.nv, qs.shape[0]
    Minv = aligned_empty((K, nv, nv))  # whole lines streamed (store_symmetric_tile)
    _minverse_lanes(model.arrays, qs, False, Minv.reshape(K, nv * nv))
    _check_minverse_diagonal(model, Minv.reshape(K, nv * nv)[:, ::nv + 1],
                             "compute_minverse_batch")
    return Minv
