"""Derivatives of the forward dynamics under contacts over a stack of states laid out
across SIMD lanes.

The per-state algorithm is that of the stack kernel
:func:`.constrained_dynamics.constraint_dynamics_derivatives` (Pinocchio's
``computeConstraintDynamicsDerivatives``; Kudruss, Manns & Kirches 2019, Prop. 3),
unchanged: at the solution (ddq, lambda) of :func:`.constraint_lanes._constraint_tile`,
with the residuals R1 = ID(q, v, ddq) - Jc^T lambda - tau and R2 = c(q, v, ddq),

    dlambda = G^-1 (Y^T Z - dR2),     dddq = -L^-1 (Z - Y dlambda),     Z = L^-T dR1,

for the three blocks d/dq, d/dv (dR1 = dID, dR2 = dc) and d/dtau (dR1 = -I,
dR2 = 0), reusing the forward pass' L (M = L^T L), Y = L^-T Jc^T and the Cholesky
factor of G = Y^T Y.  The pieces:

- dR1/dq, dR1/dv: the world-frame RNEA derivatives of :mod:`.derivative_lanes`
  (Carpentier & Mansard 2018, Alg. 2-3) at (q, v, ddq) with the contact wrenches
  as external forces attached to their bodies (f_i = Yw_i a_i + v_i x* h_i - F_k,
  Pinocchio's ``computeRNEADerivatives`` with fext), plus, for a
  LOCAL_WORLD_ALIGNED contact, the part of its force that does not turn with the
  body (:func:`.constraint_derivatives._world_aligned_force_derivatives`);
- dR2/dq, dR2/dv: the derivatives of the contact acceleration against the ground
  (:func:`.constraint_derivatives._ground_point_columns` for 3D points,
  :func:`.constraint_derivatives._column_6d` with body 2 the world for 6D frames),
  from the world motions ov, oa (gravity removed) at (v, ddq), on each contact's
  chain (its other columns are zero);
- the three blocks together, column c of each in one pass (:func:`_kkt_blocks_lanes`):
  each solve row by row, four terms of a row per lane loop summed in registers,
  the stack kernel's operations in its order (the same bits as one column and one
  term at a time, 0.75x their time on talos, engineer's measurement).

Scope: contacts with the world, 3D (Baumgarte gains Kp, Kd) and 6D (Kd; Kp = 0:
the log6 term's Jacobian is not laid out across lanes), LOCAL and
LOCAL_WORLD_ALIGNED, mu = 0 (the exact KKT solve); the rest is refused.

Tile arrays beside those of :mod:`.constraint_lanes` and :mod:`.derivative_lanes`:
``dcq, dcv, X*`` (nc x nv x T, entry (a, c) at (a nv + c) T, the layout of Y);
``Z`` blocks (nv x nv x T, entry (r, c) at (r nv + c) T: dtau_dq and dtau_dv of
:mod:`.derivative_lanes`, and Minv's array for the tau block); ``z, x`` (nv x 3 x T,
nc x 3 x T): the columns c of the q, v and tau blocks in a pass, entry (r, j) at
(3 r + j) T.
"""
import numpy as np

from .config import inline_kernel, kernel
from .constrained_dynamics import _check_regular, _settings
from .constraint_lanes import (_all_regular, _constraint_tile, _constraint_workspace_lanes,
                               _contacts_only,
                               _rotate_lanes, contact_chains)
from .constraint_derivatives import point_column_values
from .constraints import CONTACT_3D
from .batch_lanes import _as_lanes, _as_lanes_configurations, _as_stacks
from .derivative_lanes import (_accelerations_lanes, _derivative_columns_lanes,
                               _derivative_workspace, _related_dofs,
                               _rnea_derivatives_backward_lanes)
from .kinematics import LOCAL
from .lane_tiles import (TILE, T6, T9, T10, UT, UT1, UT2, UT3, UT4, UT5, aligned_block, fill_lanes,
                         load_state_tiles, store_tile)
from .spatial import cross


# --- dR1: the contact wrenches as external forces -----------------------------------------

@kernel
def _contact_wrenches_lanes(ca, cR, cp, lam, f):
    """f_i -= F_k for each contact k of body i: F = (f, n + pc_1 x f) its world wrench at
    the origin, f = R1 lambda_lin (LOCAL) or lambda_lin, n likewise (6D; 0 for 3D)
    (:func:`.constraints.world_constraint_forces` against the ground), every lane."""
    for k in range(ca.n):
        r0, six, local = ca.row[k], ca.kind[k] != CONTACT_3D, ca.reference[k] == LOCAL
        F, C, P = np.uint64(ca.joint1[k] * T6), np.uint64(k * T9), np.uint64(3 * k * TILE)
        O = np.uint64(r0 * TILE)
        for s in range(UT):
            f0, f1, f2 = lam[O + s], lam[O + UT1 + s], lam[O + UT2 + s]
            n0, n1, n2 = 0.0, 0.0, 0.0
            if six:
                n0, n1, n2 = lam[O + UT3 + s], lam[O + UT4 + s], lam[O + UT5 + s]
            if local:
                f0, f1, f2 = _rotate_lanes(cR, C, UT3, UT1, s, f0, f1, f2)
                if six:
                    n0, n1, n2 = _rotate_lanes(cR, C, UT3, UT1, s, n0, n1, n2)
            t0, t1, t2 = cross(cp[P + s], cp[P + UT1 + s], cp[P + UT2 + s], f0, f1, f2)
            f[F + s] -= f0
            f[F + UT1 + s] -= f1
            f[F + UT2 + s] -= f2
            f[F + UT3 + s] -= n0 + t0
            f[F + UT4 + s] -= n1 + t1
            f[F + UT5 + s] -= n2 + t2


@kernel
def _world_aligned_force_lanes(nv, ca, chain, depth, J, cp, lam, dq):
    """dtau_dq[c, d] += (J_c.lin + J_c.ang x pc_1) . (w_d x f) + J_c.ang . (w_d x n) for
    the dofs c, d of a LOCAL_WORLD_ALIGNED contact's chain: the derivative of its
    force that the attached external force leaves out
    (:func:`.constraint_derivatives._world_aligned_force_derivatives`), every lane."""
    for k in range(ca.n):
        if ca.reference[k] == LOCAL:
            continue
        six = ca.kind[k] != CONTACT_3D
        O, P = np.uint64(ca.row[k] * TILE), np.uint64(3 * k * TILE)
        for di in range(depth[k]):
            d = chain[k, di]
            B = np.uint64(d * T6)
            for ci in range(depth[k]):
                c = chain[k, ci]
                A, E = np.uint64(c * T6), np.uint64((c * nv + d) * TILE)
                for s in range(UT):
                    f0, f1, f2 = lam[O + s], lam[O + UT1 + s], lam[O + UT2 + s]
                    n0, n1, n2 = 0.0, 0.0, 0.0
                    if six:
                        n0, n1, n2 = lam[O + UT3 + s], lam[O + UT4 + s], lam[O + UT5 + s]
                    w0, w1, w2 = J[B + UT3 + s], J[B + UT4 + s], J[B + UT5 + s]
                    g0, g1, g2 = cross(w0, w1, w2, f0, f1, f2)
                    h0, h1, h2 = cross(w0, w1, w2, n0, n1, n2)
                    p0, p1, p2 = cp[P + s], cp[P + UT1 + s], cp[P + UT2 + s]
                    a0, a1, a2 = J[A + UT3 + s], J[A + UT4 + s], J[A + UT5 + s]
                    l0 = J[A + s] + a1 * p2 - a2 * p1
                    l1 = J[A + UT1 + s] + a2 * p0 - a0 * p2
                    l2 = J[A + UT2 + s] + a0 * p1 - a1 * p0
                    dq[E + s] += l0 * g0 + l1 * g1 + l2 * g2 + a0 * h0 + a1 * h1 + a2 * h2


# --- dR2: the contact acceleration's derivatives --------------------------------------------

@inline_kernel
def _six(x, X, s):
    return (x[X + s], x[X + UT1 + s], x[X + UT2 + s], x[X + UT3 + s], x[X + UT4 + s],
            x[X + UT5 + s])


@inline_kernel
def _motion_cross(a, b):
    """a x b of two spatial motions given as 6-tuples (lin, ang)."""
    c0, c1, c2 = cross(a[3], a[4], a[5], b[0], b[1], b[2])
    d0, d1, d2 = cross(a[0], a[1], a[2], b[3], b[4], b[5])
    e0, e1, e2 = cross(a[3], a[4], a[5], b[3], b[4], b[5])
    return c0 + d0, c1 + d1, c2 + d2, e0, e1, e2


@inline_kernel
def _body_motion_derivatives(vi, ai, vl, al, vj, Jd):
    """(dov_i, doa_i) along q_d and along v_d for the body i that dof d (joint j, parent
    lambda) supports (Carpentier & Mansard 2018, identity (13), u = ov_lambda x J_d;
    :func:`.constraint_derivatives._body_derivatives`)."""
    u = _motion_cross(vl, Jd)
    x = _motion_cross(vi, Jd)
    a = _motion_cross(al, Jd)
    b = _motion_cross(vl, u)
    c = _motion_cross(ai, Jd)
    g = _motion_cross(vi, u)
    y = _motion_cross(vj, Jd)
    dvq = (u[0] - x[0], u[1] - x[1], u[2] - x[2], u[3] - x[3], u[4] - x[4], u[5] - x[5])
    daq = ((a[0] + b[0]) - (c[0] + g[0]), (a[1] + b[1]) - (c[1] + g[1]),
           (a[2] + b[2]) - (c[2] + g[2]), (a[3] + b[3]) - (c[3] + g[3]),
           (a[4] + b[4]) - (c[4] + g[4]), (a[5] + b[5]) - (c[5] + g[5]))
    dav = (y[0] + u[0] - x[0], y[1] + u[1] - x[1], y[2] + u[2] - x[2], y[3] + u[3] - x[3],
           y[4] + u[4] - x[4], y[5] + u[5] - x[5])
    return dvq, daq, dav


@inline_kernel
def _dof_motions(J, ov, oa, cp, D, V, Vl, Vj, P, s):
    """J_d, ov_i, oa_i, their derivatives along dof d (q: dov, doa; v: doa), the contact
    point p and its motion along d, dp = J_d.lin + J_d.ang x p, in lane s."""
    Jd = _six(J, D, s)
    vi, ai = _six(ov, V, s), _six(oa, V, s)
    dvq, daq, dav = _body_motion_derivatives(vi, ai, _six(ov, Vl, s), _six(oa, Vl, s),
                                             _six(ov, Vj, s), Jd)
    p = (cp[P + s], cp[P + UT1 + s], cp[P + UT2 + s])
    e0, e1, e2 = cross(Jd[3], Jd[4], Jd[5], p[0], p[1], p[2])
    return Jd, vi, ai, dvq, daq, dav, p, (Jd[0] + e0, Jd[1] + e1, Jd[2] + e2)


@inline_kernel
def _copy_rows(w, out, O, nv, rows):
    """Rows 0 .. rows-1 of w (T apart) into out from O on, nv T apart."""
    for r in range(rows):
        R, B = O + np.uint64(r * nv * TILE), np.uint64(r * TILE)
        for s in range(UT):
            out[R + s] = w[B + s]


@kernel
def _contact_acceleration_derivatives_lanes(m, ca, chain, depth, J, ov, oa, cR, cp, wrt_q, w,
                                            out):
    """dc/dq (wrt_q) or dc/dv of every contact against the ground, into out (nc x nv x
    T) on its chain's columns, from the world motions ov, oa (gravity removed) at (v, a),
    every lane (:func:`.constraint_derivatives.constraint_acceleration_derivatives_state`).
    A column goes through the scratch w (6 x T, rows a constant T apart), then into out:
    stored into out's rows (a run-time nv T apart) and into two arrays, it took LLVM
    more run-time overlap checks against the loaded arrays than it allows, and the lane
    loops stayed scalar."""
    nv = m.nv
    for k in range(ca.n):
        i, r0, Kp, Kd = ca.joint1[k], ca.row[k], ca.Kp[k], ca.Kd[k]
        point, local = ca.kind[k] == CONTACT_3D, ca.reference[k] == LOCAL
        V, C, P = np.uint64(i * T6), np.uint64(k * T9), np.uint64(3 * k * TILE)
        t0, t1, t2 = ca.p2[k, 0], ca.p2[k, 1], ca.p2[k, 2]
        for idx in range(depth[k]):
            d = chain[k, idx]
            j = m.dof_joint[d]
            D, Vl, Vj = np.uint64(d * T6), np.uint64(m.parents[j] * T6), np.uint64(j * T6)
            O = np.uint64((r0 * nv + d) * TILE)
            if point:
                for s in range(UT):
                    Jd, vi, ai, dvq, daq, dav, p, dp = _dof_motions(J, ov, oa, cp, D, V, Vl, Vj,
                                                                    P, s)
                    # the point's velocity vp, classical acceleration ap and W = c's value
                    a0, a1, a2 = cross(vi[3], vi[4], vi[5], p[0], p[1], p[2])
                    vp = (vi[0] + a0, vi[1] + a1, vi[2] + a2)
                    b0, b1, b2 = cross(ai[3], ai[4], ai[5], p[0], p[1], p[2])
                    c0, c1, c2 = cross(vi[3], vi[4], vi[5], vp[0], vp[1], vp[2])
                    W = (ai[0] + b0 + c0 - Kp * (t0 - p[0]) + Kd * vp[0],
                         ai[1] + b1 + c1 - Kp * (t1 - p[1]) + Kd * vp[1],
                         ai[2] + b2 + c2 - Kp * (t2 - p[2]) + Kd * vp[2])
                    # n = 0 unless LOCAL: the subtraction of n x W always runs (local True
                    # below), as it did when the lanes wrote the formula themselves
                    n = (Jd[3], Jd[4], Jd[5]) if local else (0.0, 0.0, 0.0)
                    omega, alpha = (vi[3], vi[4], vi[5]), (ai[3], ai[4], ai[5])
                    if wrt_q:
                        x0, x1, x2 = point_column_values(dvq, daq, dp, True, True, Kp, Kd, p,
                                                         omega, alpha, vp, W, n)
                    else:
                        x0, x1, x2 = point_column_values(Jd, dav, dp, False, True, Kp, Kd, p,
                                                         omega, alpha, vp, W, n)
                    if local:
                        x0, x1, x2 = _rotate_lanes(cR, C, UT1, UT3, s, x0, x1, x2)
                    w[s], w[UT1 + s], w[UT2 + s] = x0, x1, x2
                _copy_rows(w, out, O, nv, 3)
                continue
            for s in range(UT):
                Jd, vi, ai, dvq, daq, dav, p, dp = _dof_motions(J, ov, oa, cp, D, V, Vl, Vj, P, s)
                # 6D, Kp = 0: da + Kd dv, then LOCAL X1^-1 (. - J_d x W for q),
                # LOCAL_WORLD_ALIGNED at pc_1 (+ W.ang x dp for q), W = oa_i + Kd ov_i
                dv, da = (dvq, daq) if wrt_q else (Jd, dav)
                x = (da[0] + Kd * dv[0], da[1] + Kd * dv[1], da[2] + Kd * dv[2],
                     da[3] + Kd * dv[3], da[4] + Kd * dv[4], da[5] + Kd * dv[5])
                W = (ai[0] + Kd * vi[0], ai[1] + Kd * vi[1], ai[2] + Kd * vi[2],
                     ai[3] + Kd * vi[3], ai[4] + Kd * vi[4], ai[5] + Kd * vi[5])
                if local:
                    if wrt_q:
                        g = _motion_cross(Jd, W)
                        x = (x[0] - g[0], x[1] - g[1], x[2] - g[2], x[3] - g[3], x[4] - g[4],
                             x[5] - g[5])
                    e0, e1, e2 = cross(p[0], p[1], p[2], x[3], x[4], x[5])
                    y0, y1, y2 = _rotate_lanes(cR, C, UT1, UT3, s, x[0] - e0, x[1] - e1,
                                               x[2] - e2)
                    y3, y4, y5 = _rotate_lanes(cR, C, UT1, UT3, s, x[3], x[4], x[5])
                else:
                    e0, e1, e2 = cross(x[3], x[4], x[5], p[0], p[1], p[2])
                    y0, y1, y2 = x[0] + e0, x[1] + e1, x[2] + e2
                    if wrt_q:
                        f0, f1, f2 = cross(W[3], W[4], W[5], dp[0], dp[1], dp[2])
                        y0, y1, y2 = y0 + f0, y1 + f1, y2 + f2
                    y3, y4, y5 = x[3], x[4], x[5]
                w[s], w[UT1 + s], w[UT2 + s] = y0, y1, y2
                w[UT3 + s], w[UT4 + s], w[UT5 + s] = y3, y4, y5
            _copy_rows(w, out, O, nv, 6)


@kernel
def _remove_gravity_lanes(m, oa):
    """oa_i + g: the world accelerations of the motion alone (RNEA's carry -g), every
    lane (:func:`.constrained_dynamics._remove_gravity_term`)."""
    for i in range(m.njoints):
        for r in range(6):
            O, g = np.uint64((6 * i + r) * TILE), m.gravity[r]
            for s in range(UT):
                oa[O + s] += g


# --- The KKT derivatives --------------------------------------------------------------------

@kernel
def _kkt_term_lists(m, slot, chain, depth, row_constraint):
    """The terms of each row of the KKT blocks' solves (:func:`_subtract_terms3_lanes`),
    the same in every lane and column: (offset of the coefficient, offset of the source
    row in the three-column layout) and their count, in the order the column-wise
    solves subtract them.

    - ``ancestors`` (nv): L^-1's row k, L[k, i] z_i for the ancestors i of k, the
      nearest first (:func:`.constraint_lanes._ltl_solve_lanes`);
    - ``descendants`` (nv): L^-T's row i, L[k, i] z_k for the dofs k that i supports,
      k decreasing (:func:`.constraint_lanes._ltl_transpose_step_lanes` from k = nv - 1
      down subtracts them from row i in that order);
    - ``chain_terms`` (nc): Y^T z's row a, Y[a, t] z_t on its contact's chain, t
      increasing;
    - ``row_terms`` (nv): Y x's row t, Y[a, t] x_a for the rows a whose chain holds t,
      a increasing;
    - ``lower``, ``upper`` (nc): the Cholesky factor C's solves C^-1 and C^-T
      (:func:`.constraint_lanes._cholesky_solve_lanes`): row i's C[i, p] x_p, p < i increasing, and
      C[p, i] x_p, p > i increasing."""
    nv, nc = m.nv, row_constraint.shape[0]
    width = max(nv, nc, 1)
    ancestors = np.zeros((nv, width, 2), dtype=np.uint64)
    descendants = np.zeros((nv, width, 2), dtype=np.uint64)
    chain_terms = np.zeros((nc, width, 2), dtype=np.uint64)
    row_terms = np.zeros((nv, width, 2), dtype=np.uint64)
    lower = np.zeros((nc, width, 2), dtype=np.uint64)
    upper = np.zeros((nc, width, 2), dtype=np.uint64)
    counts = np.zeros((6, width), dtype=np.int64)
    for i in range(nc):
        for p in range(i):
            lower[i, p, 0], lower[i, p, 1] = (i * nc + p) * TILE, 3 * p * TILE
        for p in range(i + 1, nc):
            upper[i, p - i - 1, 0], upper[i, p - i - 1, 1] = (p * nc + i) * TILE, 3 * p * TILE
        counts[4, i], counts[5, i] = i, nc - 1 - i
    # one walk up from each dof k gives k's ancestors (in walk order) and, k taken from
    # the last down, each ancestor's descendants in decreasing order
    for k in range(nv - 1, -1, -1):
        i = m.dof_parent[k]
        while i >= 0:
            n = counts[0, k]
            ancestors[k, n, 0], ancestors[k, n, 1] = slot[k, i] * TILE, 3 * i * TILE
            counts[0, k] = n + 1
            n = counts[1, i]
            descendants[i, n, 0], descendants[i, n, 1] = slot[k, i] * TILE, 3 * k * TILE
            counts[1, i] = n + 1
            i = m.dof_parent[i]
    for a in range(nc):
        ka = row_constraint[a]
        for idx in range(depth[ka]):
            t = chain[ka, idx]
            n = counts[2, a]
            chain_terms[a, n, 0], chain_terms[a, n, 1] = (a * nv + t) * TILE, 3 * t * TILE
            counts[2, a] = n + 1
            n = counts[3, t]
            row_terms[t, n, 0], row_terms[t, n, 1] = (a * nv + t) * TILE, 3 * a * TILE
            counts[3, t] = n + 1
    return ancestors, descendants, chain_terms, row_terms, lower, upper, counts


@kernel
def _subtract_terms3_lanes(u, U, A, x, terms, n):
    """Rows U, U + T, U + 2 T of u (one row of three columns) -= A[a] x[b] for the terms
    (a, b) of ``terms[:n]`` in order (x's three columns at b, b + T, b + 2 T), every
    lane: four terms per lane loop, summed in registers (one load and one store of u's
    row per four terms, where a term at a time stored it for each), the same
    operations in the same order as term by term."""
    j = 0
    while j + 4 <= n:
        A0, X0, A1, X1 = terms[j, 0], terms[j, 1], terms[j + 1, 0], terms[j + 1, 1]
        A2, X2, A3, X3 = terms[j + 2, 0], terms[j + 2, 1], terms[j + 3, 0], terms[j + 3, 1]
        for s in range(UT):
            a0, a1, a2, a3 = A[A0 + s], A[A1 + s], A[A2 + s], A[A3 + s]
            u0, u1, u2 = u[U + s], u[U + UT1 + s], u[U + UT2 + s]
            u0 = (((u0 - a0 * x[X0 + s]) - a1 * x[X1 + s]) - a2 * x[X2 + s]) - a3 * x[X3 + s]
            u1 = ((((u1 - a0 * x[X0 + UT1 + s]) - a1 * x[X1 + UT1 + s])
                   - a2 * x[X2 + UT1 + s]) - a3 * x[X3 + UT1 + s])
            u2 = ((((u2 - a0 * x[X0 + UT2 + s]) - a1 * x[X1 + UT2 + s])
                   - a2 * x[X2 + UT2 + s]) - a3 * x[X3 + UT2 + s])
            u[U + s] = u0
            u[U + UT1 + s] = u1
            u[U + UT2 + s] = u2
        j += 4
    while j < n:
        A0, X0 = terms[j, 0], terms[j, 1]
        for s in range(UT):
            a0 = A[A0 + s]
            u0 = u[U + s] - a0 * x[X0 + s]
            u1 = u[U + UT1 + s] - a0 * x[X0 + UT1 + s]
            u2 = u[U + UT2 + s] - a0 * x[X0 + UT2 + s]
            u[U + s] = u0
            u[U + UT1 + s] = u1
            u[U + UT2 + s] = u2
        j += 1


@inline_kernel
def _scale3_lanes(d, D, z, Z):
    """Row Z of z's three columns *= d[D], every lane."""
    for s in range(UT):
        z[Z + s] *= d[D + s]
        z[Z + UT1 + s] *= d[D + s]
        z[Z + UT2 + s] *= d[D + s]


@inline_kernel
def _divide3_lanes(G, D, x, X):
    """Row X of x's three columns /= G[D], every lane."""
    for s in range(UT):
        g = G[D + s]
        x[X + s] = x[X + s] / g
        x[X + UT1 + s] = x[X + UT1 + s] / g
        x[X + UT2 + s] = x[X + UT2 + s] / g


@inline_kernel
def _split3_lanes(y, Y, first, second, third, O):
    """first[O], second[O], third[O] = the three rows of y at Y (rows T apart), every
    lane: one entry of the q, v and tau derivatives from the three right-hand sides
    solved together."""
    for s in range(UT):
        first[O + s] = y[Y + s]
        second[O + s] = y[Y + UT1 + s]
        third[O + s] = y[Y + UT2 + s]


@kernel
def _kkt_blocks_lanes(m, slot, related, L, Y, G, Zq, Zv, Zt, Cq, Cv, Xq, Xv, Xt, z, x,
                      lists, terms, inverse_diagonal):
    """The three blocks of derivatives, every lane (:func:`.constrained_dynamics.
    _kkt_derivatives_of` with mu = 0), column c of all three at a time: Zq, Zv (nv x nv
    x T) = dR1 of q and v on entry, dddq on exit, Zt = dddq/dtau on exit (dR1 = -I);
    Cq, Cv (nc x nv x T) = dR2 (0 for tau); Xq, Xv, Xt (nc x nv x T) = dlambda on exit.
    The three columns go through z (nv x 3 x T, entry (r, j) at (3 r + j) T: j = 0, 1,
    2 for q, v, tau) and x (nc x 3 x T) through the five steps, each entry of L and Y
    loaded once for the three.  Each solve runs row by row (the row's terms summed in
    registers, :func:`_subtract_terms3_lanes`, lists of :func:`_kkt_term_lists`; terms
    (nv x 2) the L^-T row's list of the column), the operations and their order those
    of the column-wise solves of the stack kernel: the same bits.  1 / L[k, k] once per
    tile (inverse_diagonal, nv x T), not once per column and solve (76 packed
    divisions per column on talos).

    Column c of dR1 is zero but on the dofs related to c
    (:func:`.derivative_lanes._related_dofs`), and L^-T keeps it so (the ancestors of a
    dof related to c are related to c); -e_c is zero but on c's ancestors, a subset:
    L^-T skips the rows and terms that are zero in all three (the stack kernel
    subtracts zeros there; zeros stay +0, so the tau column's results are those of its
    own solve)."""
    ancestors, descendants, chain_terms, row_terms, lower, upper, counts = lists
    nv, nc = m.nv, Xq.size // (m.nv * TILE)
    for k in range(nv):
        K, D = np.uint64(slot[k, k] * TILE), np.uint64(k * TILE)
        for s in range(UT):
            inverse_diagonal[D + s] = 1.0 / L[K + s]
    for c in range(nv):
        for r in range(nv):
            O, R = np.uint64(3 * r * TILE), np.uint64((r * nv + c) * TILE)
            for s in range(UT):
                z[O + s] = Zq[R + s]
                z[O + UT1 + s] = Zv[R + s]
            fill_lanes(z, (3 * r + 2) * TILE, 1, -1.0 if r == c else 0.0)
        # z <- L^-T z on the rows that can be nonzero, from the last
        for i in range(nv - 1, -1, -1):
            if not related[i, c]:
                continue
            n = 0
            for j in range(counts[1, i]):
                k = descendants[i, j, 1] // np.uint64(3 * TILE)
                if related[k, c]:
                    terms[n, 0], terms[n, 1] = descendants[i, j, 0], descendants[i, j, 1]
                    n += 1
            _subtract_terms3_lanes(z, np.uint64(3 * i * TILE), L, z, terms, n)
            _scale3_lanes(inverse_diagonal, np.uint64(i * TILE), z, np.uint64(3 * i * TILE))
        # x = Y^T z - dR2 (Y's column a is zero off its contact's chain), as
        # -(dR2 - sum_t Y z): the same bits
        for a in range(nc):
            O, A3 = np.uint64((a * nv + c) * TILE), np.uint64(3 * a * TILE)
            for s in range(UT):
                x[A3 + s] = Cq[O + s]
                x[A3 + UT1 + s] = Cv[O + s]
                x[A3 + UT2 + s] = 0.0
            _subtract_terms3_lanes(x, A3, Y, z, chain_terms[a], counts[2, a])
        for e in range(3 * nc * TILE):
            x[e] = -x[e]
        # dlambda = (C C^T)^-1 x
        for i in range(nc):
            _subtract_terms3_lanes(x, np.uint64(3 * i * TILE), G, x, lower[i], counts[4, i])
            _divide3_lanes(G, np.uint64((i * nc + i) * TILE), x, np.uint64(3 * i * TILE))
        for i in range(nc - 1, -1, -1):
            _subtract_terms3_lanes(x, np.uint64(3 * i * TILE), G, x, upper[i], counts[5, i])
            _divide3_lanes(G, np.uint64((i * nc + i) * TILE), x, np.uint64(3 * i * TILE))
        # dddq = -L^-1 (z - Y dlambda)
        for t in range(nv):
            _subtract_terms3_lanes(z, np.uint64(3 * t * TILE), Y, x, row_terms[t], counts[3, t])
        for e in range(3 * nv * TILE):
            z[e] = -z[e]
        for k in range(nv):
            _subtract_terms3_lanes(z, np.uint64(3 * k * TILE), L, z, ancestors[k], counts[0, k])
            _scale3_lanes(inverse_diagonal, np.uint64(k * TILE), z, np.uint64(3 * k * TILE))
        for r in range(nv):
            _split3_lanes(z, np.uint64(3 * r * TILE), Zq, Zv, Zt, np.uint64((r * nv + c) * TILE))
        for a in range(nc):
            _split3_lanes(x, np.uint64(3 * a * TILE), Xq, Xv, Xt, np.uint64((a * nv + c) * TILE))


# --- Tiles and the public functions --------------------------------------------------------

@kernel
def _constraint_dynamics_derivatives_lanes(m, ca, chain, depth, common, row_constraint, q, v,
                                           tau, max_iter, accuracy, lanes_major, ddq, lam,
                                           ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv,
                                           dlam_dtau):
    """ddq, lambda and their six derivatives of K states, TILE at a time (mu = 0):
    (n, K) layouts when lanes_major, else (K, n), the matrices flat (nv * nv or
    nc * nv per state).  Returns False when some state's G is singular."""
    forward = _constraint_workspace_lanes(m, ca)
    wd = _derivative_workspace(m)
    work = (forward[0], wd, forward[2], forward[3], forward[4], forward[5], forward[6])
    tiles, (qt, vt, taut), slot = work[2], work[4], work[5]
    Mt, Y, cR, cp, G = tiles[3], tiles[5], tiles[6], tiles[7], tiles[9]
    lamt, ddqt, regular = tiles[10], tiles[12], tiles[15]
    nj, nv, nc = m.njoints, m.nv, ca.nrows
    Yw, Ycrb, ov, oa, pA, f, J = wd[3], wd[4], wd[6], wd[9], wd[8], wd[11], wd[2]
    Zq, Zv, Zt = wd[20], wd[21], wd[19]
    dcq, dcv = np.zeros(nc * nv * TILE), np.zeros(nc * nv * TILE)
    Xq, Xv, Xt = np.zeros(nc * nv * TILE), np.zeros(nc * nv * TILE), np.zeros(nc * nv * TILE)
    tau_id, inverse_diagonal = np.zeros(nv * TILE), np.zeros(nv * TILE)
    z, x = np.zeros(3 * nv * TILE), np.zeros(3 * nc * TILE)
    related = _related_dofs(m)
    lists = _kkt_term_lists(m, slot, chain, depth, row_constraint)
    terms = np.zeros((max(nv, 1), 2), dtype=np.uint64)
    its = np.zeros(TILE, dtype=np.int64)
    K = q.shape[1] if lanes_major else q.shape[0]
    fill_lanes(regular, 0, 1, 1.0)
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        load_state_tiles(q, v, tau, b, n, lanes_major, qt, vt, taut)
        _constraint_tile(m, ca, chain, depth, common, row_constraint, 0.0, max_iter, accuracy,
                         work, True, its)
        # dR1: the RNEA derivatives at (q, v, ddq) with the wrenches as external forces
        _accelerations_lanes(m, ddqt, wd, UT)
        for e in range(nj * T10):
            Ycrb[e] = Yw[e]
        for e in range(nj * T6):
            f[e] = pA[e]
        _contact_wrenches_lanes(ca, cR, cp, lamt, f)
        _derivative_columns_lanes(m, True, wd, UT)
        _rnea_derivatives_backward_lanes(m, ddqt, False, wd, tau_id, UT)
        _world_aligned_force_lanes(nv, ca, chain, depth, J, cp, lamt, Zq)
        # dR2 from the motions at (v, ddq)
        _remove_gravity_lanes(m, oa)
        _contact_acceleration_derivatives_lanes(m, ca, chain, depth, J, ov, oa, cR, cp, True,
                                                wd[28], dcq)
        _contact_acceleration_derivatives_lanes(m, ca, chain, depth, J, ov, oa, cR, cp, False,
                                                wd[28], dcv)
        # the three blocks: q, v, and tau (dR1 = -I, dR2 = 0)
        _kkt_blocks_lanes(m, slot, related, Mt, Y, G, Zq, Zv, Zt, dcq, dcv, Xq, Xv, Xt, z, x,
                          lists, terms, inverse_diagonal)
        store_tile(ddqt, b, n, lanes_major, ddq)
        store_tile(lamt, b, n, lanes_major, lam)
        store_tile(Zq, b, n, lanes_major, ddq_dq)
        store_tile(Zv, b, n, lanes_major, ddq_dv)
        store_tile(Zt, b, n, lanes_major, ddq_dtau)
        store_tile(Xq, b, n, lanes_major, dlam_dq)
        store_tile(Xv, b, n, lanes_major, dlam_dv)
        store_tile(Xt, b, n, lanes_major, dlam_dtau)
    return _all_regular(regular)


def _derivative_contacts(model, constraints, mu):
    cs = _contacts_only(model, constraints)
    if mu != 0.0:
        raise NotImplementedError(
            f"mu = {mu!r}: the lanes constraint dynamics derivatives take mu = 0 (the exact "
            "KKT solve); use constraint_dynamics_derivatives for the proximal iterations")
    for c in cs:
        if c.kind != CONTACT_3D and c.Kp != 0.0:
            raise NotImplementedError(
                f"constraint {c.name!r}: a 6D contact with Kp = {c.Kp!r}; the lanes "
                "derivatives take 6D contacts without the position gain (Kp = 0); use "
                "constraint_dynamics_derivatives")
    return cs


def _outputs(rows, K, lanes_major):
    """Arrays (rows[i], K) when lanes_major, else (K, rows[i]), views of one allocation,
    each starting on a 64-byte boundary.  One block of 45 kB per talos state, where
    eight arrays were allocated: a block that large is mapped afresh with huge pages
    (NumPy advises them above 4 MB), and the first stores into separate arrays, some of
    them below that size or reused from the heap after it was trimmed, page-faulted
    4 kB at a time: 1000 talos states' six derivatives stored 11.9 us per state into new
    arrays, 7.2 into one new block, 3.5 into arrays written before (engineer's
    measurement, load 9)."""
    return aligned_block([(n, K) if lanes_major else (K, n) for n in rows])


def _solve_derivatives(model, cs, q, v, tau, mu, max_iterations, accuracy, lanes_major):
    chain, depth, common, row_constraint = contact_chains(model, cs)
    nv, nc = model.nv, cs.size
    K = q.shape[1] if lanes_major else q.shape[0]
    ddq, lam, *matrices = _outputs((nv, nc) + (nv * nv,) * 3 + (nc * nv,) * 3, K, lanes_major)
    regular = _constraint_dynamics_derivatives_lanes(
        model.arrays, cs.arrays, chain, depth, common, row_constraint, q, v, tau,
        max_iterations, accuracy, lanes_major, ddq, lam, *matrices)
    _check_regular(regular, mu)
    shapes = [(nv, nv)] * 3 + [(nc, nv)] * 3
    if lanes_major:
        matrices = [x.reshape(shape + (K,)) for x, shape in zip(matrices, shapes)]
    else:
        matrices = [x.reshape((K,) + shape) for x, shape in zip(matrices, shapes)]
    return ddq, lam, tuple(matrices)


def constraint_dynamics_derivatives_lanes(model, q, v, tau, constraints, mu=0.0,
                                          max_iterations=1, accuracy=1e-12):
    """Partial derivatives of the forward dynamics under contacts of K states laid out
    across SIMD lanes.

    Parameters as :func:`~geppetto.dynamics.constraint_dynamics_lanes`: q (nq, K),
    v and tau (nv, K); contacts with the world, 3D (gains Kp, Kd) or 6D (Kd only),
    LOCAL or LOCAL_WORLD_ALIGNED; mu = 0 (the exact KKT solve).

    Returns ddq (nv, K), lambda (nc, K) and the six derivatives ``(ddq_dq, ddq_dv,
    ddq_dtau, dlambda_dq, dlambda_dv, dlambda_dtau)``, (nv, nv, K) and (nc, nv, K),
    those of :func:`~geppetto.dynamics.constraint_dynamics_derivatives` for each
    column (q in the tangent space), views of one new allocation (none overlaps
    another; the allocation lives while any of them does).  No Data is filled.
    """
    mu, max_iterations, accuracy = _settings(mu, max_iterations, accuracy)
    cs = _derivative_contacts(model, constraints, mu)
    q = _as_lanes_configurations(model, q)
    v = _as_lanes(model, v, model.nv, "v", q.shape[1])
    tau = _as_lanes(model, tau, model.nv, "tau", q.shape[1])
    return _solve_derivatives(model, cs, q, v, tau, mu, max_iterations, accuracy, True)


def constraint_dynamics_derivatives_batch(model, q, v, tau, constraints, mu=0.0,
                                          max_iterations=1, accuracy=1e-12):
    """:func:`constraint_dynamics_derivatives_lanes` on the usual stacks: q (K, nq), v
    and tau (K, nv) -> ddq (K, nv), lambda (K, nc) and the six derivatives (K, nv, nv)
    and (K, nc, nv); the tiles are transposed in the kernel as they are stored."""
    qs, vs, taus = _as_stacks(model, q, v, tau, "tau", "constraint_dynamics_derivatives")
    mu, max_iterations, accuracy = _settings(mu, max_iterations, accuracy)
    cs = _derivative_contacts(model, constraints, mu)
    return _solve_derivatives(model, cs, qs, vs, taus, mu, max_iterations, accuracy, False)
