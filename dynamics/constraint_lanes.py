"""Forward dynamics under contacts over a stack of states laid out across SIMD lanes.

The per-state algorithm is that of :func:`.constrained_dynamics.constraint_dynamics`
(Pinocchio's ``constraintDynamics``), unchanged: the world-frame CRBA
(Featherstone 2008, Table 6.2), the bias forces b = C(q, v) v + g(q) of RNEA at
a = 0 in the world frame, Featherstone's L^T L factorization of M with M's
branch-induced sparsity (2008, Sec. 6.5, Table 6.3), Y = L^-T Jc^T, the Delassus
matrix G = Y^T Y (+ mu I) factorized by Cholesky, the proximal iterations

    (G + mu I) lambda_k = -gamma - Y^T L^-T (tau - b) + mu lambda_(k-1),

and ddq = L^-1 (L^-T (tau - b) + Y lambda).  Only the memory layout differs: tiles
of ``TILE`` states, one state per SIMD lane, every array flat with the lane axis
last (:mod:`.lane_tiles`); the placements, the world Jacobian columns, the world
inertias, the velocities and M come from the lanes passes of :mod:`.batch_lanes`
and :mod:`.derivative_lanes`.

Scope: contacts with the world (3D points and 6D frames, LOCAL and
LOCAL_WORLD_ALIGNED, Baumgarte gains Kp, Kd), mu = 0 (the exact KKT solve) and
the proximal variant mu > 0 with its iterations (each lane stops at its own
iteration, as one state would).  Loop closures (a constraint between two
bodies) and MimicModels are refused.

Sparsity known from the model, the same in every lane: row a of Jc (constraint
k) is zero but on the dofs that support the contact's joint (its *chain*, root to
joint, increasing dof indices), and so is column a of Y = L^-T Jc^T (the solve
L^-T only moves entries to ancestor dofs); two constraints' chains share their
common ancestors, a prefix of both, which is all that G's entry sums over.  The
L^T L factor overwrites CRBA's compact tile of M in place (one row per entry that
can be nonzero, :func:`.batch_lanes._mass_matrix_slots`: exactly L's pattern).

Tile arrays (entry r of a vector at r T from its base): ``oR, op, J, Yw, ov, cJ,
pA, h`` as in :mod:`.derivative_lanes`; ``oa, f`` (njoints x 6 x T): world
accelerations at a = 0 without gravity, bias forces; ``Mt`` (slots x T): M, then
L; ``z, ddq`` (nv x T); ``Y`` (nc x nv x T, column a of Y at a nv T); ``cR, cp``
(n x 9 / 3 x T): oMc1 of each contact; ``gamma, lam, lam_new`` (nc x T); ``G``
(nc x nc x T, lower triangle, entry (a, b) at (a nc + b) T).
"""
import numpy as np

from .batch_lanes import (_as_lanes, _as_lanes_configurations, _as_stacks, _check_plain_model,
                          _compact_inertias, _crba_backward_pass_lanes, _crba_forward_pass_lanes,
                          _ltl_factor_lanes, _mass_matrix_slots)
from .config import inline_kernel, kernel
from .constrained_dynamics import SINGULAR_PIVOT, _check_regular, _settings
from .constraints import CONTACT_3D, as_constraint_set, relative_log6, supporting_dofs
from .derivative_lanes import _compact_times_lanes, _derivative_workspace, _velocities_lanes
from .kinematics import LOCAL
from .lane_tiles import (TILE, T6, T9, T10, UT, UT1, UT2, UT3, UT4, UT5, UT6, UT7, UT8, fill_lanes,
                         load_state_tiles, store_tile, tile_workspace)


# --- Contact chains (model structure, the same in every lane) ---------------------------

def contact_chains(model, cs):
    """(chain (n, nv), depth (n,), common (n, n), row_constraint (nc,)) of a set of
    contacts: chain[k, :depth[k]] the dofs that support contact k's joint, in
    increasing order; common[k, l] the length of the prefix two chains share (their
    common ancestor dofs); row_constraint[a] the contact of row a.  Kept on the set
    (a ConstraintSet belongs to one model)."""
    cached = getattr(cs, "_lanes_chains", None)
    if cached is not None:
        return cached
    ca = cs.arrays
    n, nv = ca.n, model.nv
    chain = np.zeros((n, max(nv, 1)), dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    for k in range(n):
        dofs = supporting_dofs(model, int(ca.joint1[k]))
        depth[k] = len(dofs)
        chain[k, :len(dofs)] = dofs
    common = np.zeros((n, n), dtype=np.int64)
    for k in range(n):
        for other in range(n):
            length = 0
            while (length < min(depth[k], depth[other])
                   and chain[k, length] == chain[other, length]):
                length += 1
            common[k, other] = length
    row_constraint = np.repeat(np.arange(n, dtype=np.int64), ca.kind)
    out = (chain, depth, common, row_constraint)
    for value in out:
        value.setflags(write=False)
    cs._lanes_chains = out
    return out


# --- Bias forces and the contact quantities ---------------------------------------------

@kernel
def _bias_lanes(m, wd, oa, f, taut, zt):
    """oa_i = oa_par + ov_i x (J_i dq_i) (a = 0, gravity excluded, oa_0 = 0), the bias
    forces f_i = Yw_i (oa_i - g) + ov_i x* Yw_i ov_i summed over subtrees, and
    z = tau - b with b_c = J_c . f_i for the dofs c of joint i, every lane (the
    one-state :func:`.constrained_dynamics.bias_forces`)."""
    J, Yw, cJ, pA, w = wd[2], wd[3], wd[7], wd[8], wd[28]
    g0, g1, g2 = m.gravity[0], m.gravity[1], m.gravity[2]
    g3, g4, g5 = m.gravity[3], m.gravity[4], m.gravity[5]
    fill_lanes(oa, 0, 6, 0.0)
    for i in range(1, m.njoints):
        A, P = np.uint64(i * T6), np.uint64(m.parents[i] * T6)
        for s in range(UT):
            a0, a1, a2 = oa[P + s] + cJ[A + s], oa[P + UT1 + s] + cJ[A + UT1 + s], \
                oa[P + UT2 + s] + cJ[A + UT2 + s]
            a3, a4, a5 = oa[P + UT3 + s] + cJ[A + UT3 + s], oa[P + UT4 + s] + cJ[A + UT4 + s], \
                oa[P + UT5 + s] + cJ[A + UT5 + s]
            oa[A + s] = a0
            oa[A + UT1 + s] = a1
            oa[A + UT2 + s] = a2
            oa[A + UT3 + s] = a3
            oa[A + UT4 + s] = a4
            oa[A + UT5 + s] = a5
            w[s] = a0 - g0
            w[UT1 + s] = a1 - g1
            w[UT2 + s] = a2 - g2
            w[UT3 + s] = a3 - g3
            w[UT4 + s] = a4 - g4
            w[UT5 + s] = a5 - g5
        _compact_times_lanes(Yw, i * T10, w, 0, f, i * T6, False, UT)
        for s in range(UT):
            for r in range(6):
                f[A + np.uint64(r * TILE) + s] += pA[A + np.uint64(r * TILE) + s]
    for i in range(m.njoints - 1, 0, -1):
        F = np.uint64(i * T6)
        for c in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            C, Z = np.uint64(c * T6), np.uint64(c * TILE)
            for s in range(UT):
                zt[Z + s] = taut[Z + s] - (J[C + s] * f[F + s] + J[C + UT1 + s] * f[F + UT1 + s]
                                           + J[C + UT2 + s] * f[F + UT2 + s]
                                           + J[C + UT3 + s] * f[F + UT3 + s]
                                           + J[C + UT4 + s] * f[F + UT4 + s]
                                           + J[C + UT5 + s] * f[F + UT5 + s])
        par = m.parents[i]
        if par > 0:
            Q = np.uint64(par * T6)
            for s in range(UT):
                for r in range(6):
                    f[Q + np.uint64(r * TILE) + s] += f[F + np.uint64(r * TILE) + s]


@kernel
def _contact_frames_lanes(ca, oR, op, cR, cp):
    """oMc1 = oMi (R1, p1) of every contact, every lane (cR row-major, 9 x T per contact;
    cp 3 x T)."""
    for k in range(ca.n):
        i = ca.joint1[k]
        R, P = np.uint64(i * T9), np.uint64(3 * i * TILE)
        C, D = np.uint64(k * T9), np.uint64(3 * k * TILE)
        b00, b01, b02 = ca.R1[k, 0, 0], ca.R1[k, 0, 1], ca.R1[k, 0, 2]
        b10, b11, b12 = ca.R1[k, 1, 0], ca.R1[k, 1, 1], ca.R1[k, 1, 2]
        b20, b21, b22 = ca.R1[k, 2, 0], ca.R1[k, 2, 1], ca.R1[k, 2, 2]
        q0, q1, q2 = ca.p1[k, 0], ca.p1[k, 1], ca.p1[k, 2]
        for s in range(UT):
            a00, a01, a02 = oR[R + s], oR[R + UT1 + s], oR[R + UT2 + s]
            a10, a11, a12 = oR[R + UT3 + s], oR[R + UT4 + s], oR[R + UT5 + s]
            a20, a21, a22 = oR[R + UT6 + s], oR[R + UT7 + s], oR[R + UT8 + s]
            cp[D + s] = op[P + s] + a00 * q0 + a01 * q1 + a02 * q2
            cp[D + UT1 + s] = op[P + UT1 + s] + a10 * q0 + a11 * q1 + a12 * q2
            cp[D + UT2 + s] = op[P + UT2 + s] + a20 * q0 + a21 * q1 + a22 * q2
            cR[C + s] = a00 * b00 + a01 * b10 + a02 * b20
            cR[C + UT1 + s] = a00 * b01 + a01 * b11 + a02 * b21
            cR[C + UT2 + s] = a00 * b02 + a01 * b12 + a02 * b22
            cR[C + UT3 + s] = a10 * b00 + a11 * b10 + a12 * b20
            cR[C + UT4 + s] = a10 * b01 + a11 * b11 + a12 * b21
            cR[C + UT5 + s] = a10 * b02 + a11 * b12 + a12 * b22
            cR[C + UT6 + s] = a20 * b00 + a21 * b10 + a22 * b20
            cR[C + UT7 + s] = a20 * b01 + a21 * b11 + a22 * b21
            cR[C + UT8 + s] = a20 * b02 + a21 * b12 + a22 * b22


@inline_kernel
def _rotate_lanes(cR, C, row, column, s, x0, x1, x2):
    """A x in lane s for the 3 x 3 matrix A whose entry (i, j) is at C + i row + j column:
    R x for the rotation R at C (row-major, rows 3 T apart) with (row, column) =
    (UT3, UT1), R^T x with (UT1, UT3) (constants: the offsets fold)."""
    return (cR[C + s] * x0 + cR[C + column + s] * x1 + cR[C + column + column + s] * x2,
            cR[C + row + s] * x0 + cR[C + row + column + s] * x1
            + cR[C + row + column + column + s] * x2,
            cR[C + row + row + s] * x0 + cR[C + row + row + column + s] * x1
            + cR[C + row + row + column + column + s] * x2)


@kernel
def _contact_jacobian_lanes(m, ca, chain, depth, J, cR, cp, Y):
    """Y = Jc^T on each contact's chain (column a of Y at a nv T, row t at t T): for
    the world column J_t = (l, w) and the contact point pc_1, the point's velocity
    u = l + w x pc_1; 3D rows A^T u, 6D rows (A^T u, A^T w), A = R1 (LOCAL) or I
    (LOCAL_WORLD_ALIGNED), every lane (:func:`.constraints.constraint_jacobian_state`
    for contacts with the world)."""
    nv = m.nv
    for k in range(ca.n):
        r0, point, local = ca.row[k], ca.kind[k] == CONTACT_3D, ca.reference[k] == LOCAL
        C, P = np.uint64(k * T9), np.uint64(3 * k * TILE)
        for idx in range(depth[k]):
            t = chain[k, idx]
            B = np.uint64(t * T6)
            Y0 = np.uint64((r0 * nv + t) * TILE)
            Y1 = np.uint64(((r0 + 1) * nv + t) * TILE)
            Y2 = np.uint64(((r0 + 2) * nv + t) * TILE)
            if point:
                for s in range(UT):
                    w0, w1, w2 = J[B + UT3 + s], J[B + UT4 + s], J[B + UT5 + s]
                    p0, p1, p2 = cp[P + s], cp[P + UT1 + s], cp[P + UT2 + s]
                    l0 = J[B + s] + w1 * p2 - w2 * p1
                    l1 = J[B + UT1 + s] + w2 * p0 - w0 * p2
                    l2 = J[B + UT2 + s] + w0 * p1 - w1 * p0
                    if local:
                        l0, l1, l2 = _rotate_lanes(cR, C, UT1, UT3, s, l0, l1, l2)
                    Y[Y0 + s] = l0
                    Y[Y1 + s] = l1
                    Y[Y2 + s] = l2
                continue
            Y3 = np.uint64(((r0 + 3) * nv + t) * TILE)
            Y4 = np.uint64(((r0 + 4) * nv + t) * TILE)
            Y5 = np.uint64(((r0 + 5) * nv + t) * TILE)
            for s in range(UT):
                w0, w1, w2 = J[B + UT3 + s], J[B + UT4 + s], J[B + UT5 + s]
                p0, p1, p2 = cp[P + s], cp[P + UT1 + s], cp[P + UT2 + s]
                l0 = J[B + s] + w1 * p2 - w2 * p1
                l1 = J[B + UT1 + s] + w2 * p0 - w0 * p2
                l2 = J[B + UT2 + s] + w0 * p1 - w1 * p0
                if local:
                    l0, l1, l2 = _rotate_lanes(cR, C, UT1, UT3, s, l0, l1, l2)
                    w0, w1, w2 = _rotate_lanes(cR, C, UT1, UT3, s, w0, w1, w2)
                Y[Y0 + s] = l0
                Y[Y1 + s] = l1
                Y[Y2 + s] = l2
                Y[Y3 + s] = w0
                Y[Y4 + s] = w1
                Y[Y5 + s] = w2


@kernel
def _contact_drift_lanes(ca, ov, oa, cR, cp, gamma, logs, scratch):
    """gamma = c(q, v, 0) of every contact (the drift and the Baumgarte corrector,
    :func:`.constraints.constraint_acceleration_state` with body 2 the world: its
    motions and their cross products are zero), every lane.  The 6D Kp term's
    log6(c1Mc2) is lane by lane (log3's branches), into logs (6 x T)."""
    cR1, cp1, cR2, cp2, xi, RM, pM, t3 = scratch
    for k in range(ca.n):
        i, r0, Kp, Kd = ca.joint1[k], ca.row[k], ca.Kp[k], ca.Kd[k]
        local = ca.reference[k] == LOCAL
        V, C, P = np.uint64(i * T6), np.uint64(k * T9), np.uint64(3 * k * TILE)
        O = np.uint64(r0 * TILE)
        t0, t1, t2 = ca.p2[k, 0], ca.p2[k, 1], ca.p2[k, 2]
        if ca.kind[k] == CONTACT_3D:
            for s in range(UT):
                v0, v1, v2 = ov[V + s], ov[V + UT1 + s], ov[V + UT2 + s]
                w0, w1, w2 = ov[V + UT3 + s], ov[V + UT4 + s], ov[V + UT5 + s]
                p0, p1, p2 = cp[P + s], cp[P + UT1 + s], cp[P + UT2 + s]
                e0, e1, e2 = oa[V + UT3 + s], oa[V + UT4 + s], oa[V + UT5 + s]
                # the point's velocity vp and classical acceleration ap (point_motion)
                u0 = v0 + w1 * p2 - w2 * p1
                u1 = v1 + w2 * p0 - w0 * p2
                u2 = v2 + w0 * p1 - w1 * p0
                a0 = oa[V + s] + e1 * p2 - e2 * p1
                a1 = oa[V + UT1 + s] + e2 * p0 - e0 * p2
                a2 = oa[V + UT2 + s] + e0 * p1 - e1 * p0
                a0 += w1 * u2 - w2 * u1
                a1 += w2 * u0 - w0 * u2
                a2 += w0 * u1 - w1 * u0
                x0 = a0 - Kp * (t0 - p0) + Kd * u0
                x1 = a1 - Kp * (t1 - p1) + Kd * u1
                x2 = a2 - Kp * (t2 - p2) + Kd * u2
                if local:
                    x0, x1, x2 = _rotate_lanes(cR, C, UT1, UT3, s, x0, x1, x2)
                gamma[O + s] = x0
                gamma[O + UT1 + s] = x1
                gamma[O + UT2 + s] = x2
            continue
        fill_lanes(logs, 0, 6, 0.0)
        if Kp != 0.0:
            for r in range(3):
                for c in range(3):
                    cR2[0, r, c] = ca.R2[k, r, c]
                cp2[0, r] = ca.p2[k, r]
            for s in range(TILE):
                for r in range(3):
                    cp1[0, r] = cp[(3 * k + r) * TILE + s]
                    for c in range(3):
                        cR1[0, r, c] = cR[(9 * k + 3 * r + c) * TILE + s]
                relative_log6(cR1, cp1, cR2, cp2, 0, xi, RM, pM, t3)
                for r in range(6):
                    logs[r * TILE + s] = xi[r]
        for s in range(UT):
            v0, v1, v2 = ov[V + s], ov[V + UT1 + s], ov[V + UT2 + s]
            w0, w1, w2 = ov[V + UT3 + s], ov[V + UT4 + s], ov[V + UT5 + s]
            x0, x1, x2 = oa[V + s] + Kd * v0, oa[V + UT1 + s] + Kd * v1, oa[V + UT2 + s] + Kd * v2
            y0, y1 = oa[V + UT3 + s] + Kd * w0, oa[V + UT4 + s] + Kd * w1
            y2 = oa[V + UT5 + s] + Kd * w2
            p0, p1, p2 = cp[P + s], cp[P + UT1 + s], cp[P + UT2 + s]
            m0, m1, m2 = logs[s], logs[UT1 + s], logs[UT2 + s]
            m3, m4, m5 = logs[UT3 + s], logs[UT4 + s], logs[UT5 + s]
            if local:
                # X1^-1 [x; y] = [R^T (x - p x y); R^T y], then - Kp log6(M)
                c0, c1, c2 = _rotate_lanes(cR, C, UT1, UT3, s, x0 - (p1 * y2 - p2 * y1),
                                           x1 - (p2 * y0 - p0 * y2), x2 - (p0 * y1 - p1 * y0))
                d0, d1, d2 = _rotate_lanes(cR, C, UT1, UT3, s, y0, y1, y2)
            else:
                # [x + y x pc_1; y] - Kp R1 log6(M) (both halves rotated)
                c0, c1, c2 = x0 + y1 * p2 - y2 * p1, x1 + y2 * p0 - y0 * p2, x2 + y0 * p1 - y1 * p0
                d0, d1, d2 = y0, y1, y2
                m0, m1, m2 = _rotate_lanes(cR, C, UT3, UT1, s, m0, m1, m2)
                m3, m4, m5 = _rotate_lanes(cR, C, UT3, UT1, s, m3, m4, m5)
            gamma[O + s] = c0 - Kp * m0
            gamma[O + UT1 + s] = c1 - Kp * m1
            gamma[O + UT2 + s] = c2 - Kp * m2
            gamma[O + UT3 + s] = d0 - Kp * m3
            gamma[O + UT4 + s] = d1 - Kp * m4
            gamma[O + UT5 + s] = d2 - Kp * m5


# --- The KKT solve on the L^T L factor (batch_lanes._ltl_factor_lanes) ----------------

@inline_kernel
def _ltl_transpose_step_lanes(m, slot, L, k, X, bx):
    """X[k] *= 1 / L[k, k]; X[i] -= L[k, i] X[k] for the ancestor dofs i of k, every
    lane; row r of X at bx + r T."""
    K, Xk = np.uint64(slot[k, k] * TILE), np.uint64(bx + k * TILE)
    for s in range(UT):
        X[Xk + s] *= 1.0 / L[K + s]
    i = m.dof_parent[k]
    while i >= 0:
        I, Xi = np.uint64(slot[k, i] * TILE), np.uint64(bx + i * TILE)
        for s in range(UT):
            X[Xi + s] -= L[I + s] * X[Xk + s]
        i = m.dof_parent[i]


@kernel
def _ltl_solves_lanes(m, slot, chain, depth, row_constraint, L, Y, z):
    """Y <- L^-T Y on each column's chain (its other rows are zero and stay so) and
    z <- L^-T z, every lane (:func:`.constrained_dynamics.ltl_solve_transpose`)."""
    nv = m.nv
    for a in range(row_constraint.shape[0]):
        k = row_constraint[a]
        for idx in range(depth[k] - 1, -1, -1):
            _ltl_transpose_step_lanes(m, slot, L, chain[k, idx], Y, a * nv * TILE)
    for k in range(nv - 1, -1, -1):
        _ltl_transpose_step_lanes(m, slot, L, k, z, 0)


@kernel
def _ltl_solve_lanes(m, slot, L, x):
    """x <- L^-1 x, every lane (:func:`.constrained_dynamics.ltl_solve`)."""
    for k in range(m.nv):
        X = np.uint64(k * TILE)
        i = m.dof_parent[k]
        while i >= 0:
            I, Xi = np.uint64(slot[k, i] * TILE), np.uint64(i * TILE)
            for s in range(UT):
                x[X + s] -= L[I + s] * x[Xi + s]
            i = m.dof_parent[i]
        K = np.uint64(slot[k, k] * TILE)
        for s in range(UT):
            x[X + s] *= 1.0 / L[K + s]


@kernel
def _delassus_lanes(nv, chain, common, row_constraint, mu, Y, G, work, regular):
    """G = Y^T Y + mu I (lower triangle; entry (a, b) sums over the dofs the two
    chains share, in increasing order) and its Cholesky factor in place, every lane
    (:func:`.linalg.cholesky_factor`); regular[s] = 0 where a pivot is not > 0 or not
    > SINGULAR_PIVOT times G's diagonal entry.  work (2 x T)."""
    nc = row_constraint.shape[0]
    for a in range(nc):
        ka = row_constraint[a]
        for b in range(a + 1):
            kb = row_constraint[b]
            O = np.uint64((a * nc + b) * TILE)
            fill_lanes(G, a * nc * TILE + b * TILE, 1, 0.0)
            for idx in range(common[ka, kb]):
                t = chain[ka, idx]
                A, B = np.uint64((a * nv + t) * TILE), np.uint64((b * nv + t) * TILE)
                for s in range(UT):
                    G[O + s] += Y[A + s] * Y[B + s]
        D = np.uint64((a * nc + a) * TILE)
        for s in range(UT):
            G[D + s] += mu
    for j in range(nc):
        D = np.uint64((j * nc + j) * TILE)
        for s in range(UT):
            work[s] = G[D + s]
            work[UT1 + s] = G[D + s]
        for p in range(j):
            P = np.uint64((j * nc + p) * TILE)
            for s in range(UT):
                work[UT1 + s] -= G[P + s] * G[P + s]
        for s in range(UT):
            pivot, diagonal = work[UT1 + s], work[s]
            ok = pivot > 0.0 and pivot > SINGULAR_PIVOT * diagonal
            regular[s] = regular[s] if ok else 0.0
            G[D + s] = np.sqrt(pivot) if ok else 1.0
        for i in range(j + 1, nc):
            O = np.uint64((i * nc + j) * TILE)
            for p in range(j):
                A, B = np.uint64((i * nc + p) * TILE), np.uint64((j * nc + p) * TILE)
                for s in range(UT):
                    G[O + s] -= G[A + s] * G[B + s]
            for s in range(UT):
                G[O + s] = G[O + s] / G[D + s]


@kernel
def _cholesky_solve_lanes(nc, G, x):
    """x <- (C C^T)^-1 x with C the factor of :func:`_delassus_lanes`, every lane
    (:func:`.linalg.cholesky_solve` of one column: each entry subtracts its terms in
    increasing p)."""
    for i in range(nc):
        X = np.uint64(i * TILE)
        for p in range(i):
            C, P = np.uint64((i * nc + p) * TILE), np.uint64(p * TILE)
            for s in range(UT):
                x[X + s] -= G[C + s] * x[P + s]
        D = np.uint64((i * nc + i) * TILE)
        for s in range(UT):
            x[X + s] = x[X + s] / G[D + s]
    for i in range(nc - 1, -1, -1):
        X = np.uint64(i * TILE)
        for p in range(i + 1, nc):
            C, P = np.uint64((p * nc + i) * TILE), np.uint64(p * TILE)
            for s in range(UT):
                x[X + s] -= G[C + s] * x[P + s]
        D = np.uint64((i * nc + i) * TILE)
        for s in range(UT):
            x[X + s] = x[X + s] / G[D + s]


@kernel
def _proximal_iterations_lanes(nv, chain, depth, row_constraint, mu, max_iter, accuracy, Y, G,
                               z, gamma, lam, lam_new, work, iterations):
    """lambda_k = (G + mu I)^-1 (-gamma + mu lambda_(k-1) - Y^T z) from lambda_0 = 0,
    each lane until max|lambda_k - lambda_(k-1)| <= accuracy (or mu times it) or
    max_iter (the one-state :func:`.constrained_dynamics._kkt_solve`): a lane that has
    converged keeps its lambda and its count while the others go on.  work (2 x T):
    the lanes still iterating (1.0) and the step's size."""
    nc = row_constraint.shape[0]
    fill_lanes(lam, 0, nc, 0.0)
    fill_lanes(work, 0, 1, 1.0)
    for it in range(max_iter):
        for a in range(nc):
            k, O = row_constraint[a], np.uint64(a * TILE)
            for s in range(UT):
                lam_new[O + s] = -gamma[O + s] + mu * lam[O + s]
            for idx in range(depth[k]):
                t = chain[k, idx]
                A, Z = np.uint64((a * nv + t) * TILE), np.uint64(t * TILE)
                for s in range(UT):
                    lam_new[O + s] -= Y[A + s] * z[Z + s]
        _cholesky_solve_lanes(nc, G, lam_new)
        fill_lanes(work, TILE, 1, 0.0)
        for a in range(nc):
            O = np.uint64(a * TILE)
            for s in range(UT):
                work[UT1 + s] = max(work[UT1 + s], abs(lam_new[O + s] - lam[O + s]))
                lam[O + s] = lam_new[O + s] if work[s] > 0.0 else lam[O + s]
        going = 0
        for s in range(TILE):
            if work[s] > 0.0:
                iterations[s] = it + 1
                delta = work[TILE + s]
                if mu * delta <= accuracy or delta <= accuracy:
                    work[s] = 0.0
                else:
                    going += 1
        if going == 0:
            break


@kernel
def _constrained_acceleration_lanes(nv, chain, depth, row_constraint, Y, z, lam, ddq):
    """ddq = z + Y lambda (before L^-1): each entry adds its terms in increasing a."""
    for k in range(nv * TILE):
        ddq[k] = z[k]
    for a in range(row_constraint.shape[0]):
        k, O = row_constraint[a], np.uint64(a * TILE)
        for idx in range(depth[k]):
            t = chain[k, idx]
            A, D = np.uint64((a * nv + t) * TILE), np.uint64(t * TILE)
            for s in range(UT):
                ddq[D + s] += Y[A + s] * lam[O + s]


# --- Tiles and the public functions --------------------------------------------------------

@kernel
def _constraint_workspace_lanes(m, ca):
    """The tile arrays (module docstring): tile_workspace's, those of
    :func:`.derivative_lanes._derivative_workspace` that its velocity pass reads (the
    others empty), and this module's."""
    nj, nv, nc, n = m.njoints, m.nv, ca.nrows, ca.n
    wd = _derivative_workspace(m, True)
    slot, slots = _mass_matrix_slots(m)
    tiles = (np.zeros(nj * T6), np.zeros(nj * T6), np.zeros(nv * T6), np.zeros(slots * TILE),
             np.zeros(nv * TILE), np.zeros(nc * nv * TILE), np.zeros(n * T9),
             np.zeros(n * 3 * TILE), np.zeros(nc * TILE), np.zeros(nc * nc * TILE),
             np.zeros(nc * TILE), np.zeros(nc * TILE), np.zeros(nv * TILE), np.zeros(T6),
             np.zeros(2 * TILE), np.zeros(TILE))
    scratch = (np.zeros((1, 3, 3)), np.zeros((1, 3)), np.zeros((1, 3, 3)), np.zeros((1, 3)),
               np.zeros(6), np.zeros((1, 3, 3)), np.zeros((1, 3)), np.zeros((2, 3)))
    inputs = (np.zeros(m.nq * TILE), np.zeros(nv * TILE), np.zeros(nv * TILE))
    return tile_workspace(m), wd, tiles, scratch, inputs, slot, _compact_inertias(m)


@kernel
def _constraint_tile(m, ca, chain, depth, common, row_constraint, mu, max_iter, accuracy, work,
                     keep_inertias, its):
    """ddq and lambda of the tile loaded in ``work`` (:func:`_constraint_workspace_lanes`)
    into its ddqt and lamt, the iterations into its (T,).  CRBA's backward pass turns
    the world inertias wd[3] into the composites, or, keep_inertias, a copy of them in
    wd[4] (the derivatives read both)."""
    ws, wd, tiles, scratch, inputs, slot, Yc = work
    oa, f, F, Mt, z, Y, cR, cp, gamma, G, lamt, lam_new, ddqt, logs, wk, regular = tiles
    qt, vt, taut = inputs
    nv = m.nv
    # M, b and the world motions (CRBA's forward pass, the velocities, the bias
    # forces before CRBA's backward pass turns the world inertias into composites)
    _crba_forward_pass_lanes(m, qt, ws, wd[0], wd[1], wd[2], wd[3], Yc)
    _velocities_lanes(m, vt, wd, UT)
    _bias_lanes(m, wd, oa, f, taut, z)
    if keep_inertias:
        Yw, Ycrb = wd[3], wd[4]
        for k in range(m.njoints * T10):
            Ycrb[k] = Yw[k]
        _crba_backward_pass_lanes(m, wd[2], Ycrb, F, slot, Mt)
    else:
        _crba_backward_pass_lanes(m, wd[2], wd[3], F, slot, Mt)
    # the contacts: frames, Jc^T (into Y), gamma
    _contact_frames_lanes(ca, wd[0], wd[1], cR, cp)
    _contact_jacobian_lanes(m, ca, chain, depth, wd[2], cR, cp, Y)
    _contact_drift_lanes(ca, wd[6], oa, cR, cp, gamma, logs, scratch)
    # the KKT solve
    _ltl_factor_lanes(m, slot, Mt)
    _ltl_solves_lanes(m, slot, chain, depth, row_constraint, Mt, Y, z)
    _delassus_lanes(nv, chain, common, row_constraint, mu, Y, G, wk, regular)
    _proximal_iterations_lanes(nv, chain, depth, row_constraint, mu, max_iter, accuracy, Y,
                               G, z, gamma, lamt, lam_new, wk, its)
    _constrained_acceleration_lanes(nv, chain, depth, row_constraint, Y, z, lamt, ddqt)
    _ltl_solve_lanes(m, slot, Mt, ddqt)


@kernel
def _all_regular(regular):
    for s in range(TILE):
        if regular[s] == 0.0:
            return False
    return True


@kernel
def _constraint_dynamics_lanes(m, ca, chain, depth, common, row_constraint, q, v, tau, mu,
                               max_iter, accuracy, lanes_major, ddq, lam, iterations):
    """ddq, lambda and the iterations of K states, TILE at a time: (n, K) layouts when
    lanes_major, else (K, n).  Returns False when some state's G + mu I is singular."""
    work = _constraint_workspace_lanes(m, ca)
    tiles, (qt, vt, taut) = work[2], work[4]
    lamt, ddqt, regular = tiles[10], tiles[12], tiles[15]
    its = np.zeros(TILE, dtype=np.int64)
    K = q.shape[1] if lanes_major else q.shape[0]
    fill_lanes(regular, 0, 1, 1.0)
    for b in range(0, K, TILE):
        n = min(TILE, K - b)
        load_state_tiles(q, v, tau, b, n, lanes_major, qt, vt, taut)
        _constraint_tile(m, ca, chain, depth, common, row_constraint, mu, max_iter, accuracy,
                         work, False, its)
        store_tile(ddqt, b, n, lanes_major, ddq)
        store_tile(lamt, b, n, lanes_major, lam)
        for s in range(n):
            iterations[b + s] = its[s]
    return _all_regular(regular)


def _contacts_only(model, constraints):
    cs = as_constraint_set(model, constraints)
    for c in cs:
        if c.joint2 != 0:
            raise NotImplementedError(
                f"constraint {c.name!r} is a loop closure (between two bodies): the lanes "
                "kernels take contacts with the world only; use constraint_dynamics")
    return cs


def _solve(model, cs, q, v, tau, mu, max_iterations, accuracy, lanes_major):
    mu, max_iterations, accuracy = _settings(mu, max_iterations, accuracy)
    chain, depth, common, row_constraint = contact_chains(model, cs)
    K = q.shape[1] if lanes_major else q.shape[0]
    ddq = np.empty((model.nv, K) if lanes_major else (K, model.nv))
    lam = np.empty((cs.size, K) if lanes_major else (K, cs.size))
    iterations = np.zeros(K, dtype=np.int64)
    regular = _constraint_dynamics_lanes(model.arrays, cs.arrays, chain, depth, common,
                                         row_constraint, q, v, tau, mu, max_iterations, accuracy,
                                         lanes_major, ddq, lam, iterations)
    _check_regular(regular, mu)
    return ddq, lam, iterations


def constraint_dynamics_lanes(model, q, v, tau, constraints, mu=0.0, max_iterations=1,
                              accuracy=1e-12, return_iterations=False):
    """Forward dynamics under contacts of K states laid out across SIMD lanes.

    Parameters
    ----------
    q : (nq, K) configurations, one state per column; v, tau : (nv, K).
    constraints : contacts with the world (3D or 6D, LOCAL or LOCAL_WORLD_ALIGNED,
        Baumgarte gains): a ConstraintSet or a list; loop closures are refused.
    mu, max_iterations, accuracy : the proximal settings of
        :func:`~geppetto.dynamics.constraint_dynamics`.

    Returns ddq (nv, K) and lambda (nc, K), those of
    :func:`~geppetto.dynamics.constraint_dynamics` of each column to round-off (and the
    iterations (K,) of each state when ``return_iterations``).  No Data is filled.
    """
    _check_plain_model(model)
    cs = _contacts_only(model, constraints)
    q = _as_lanes_configurations(model, q)
    v = _as_lanes(model, v, model.nv, "v", q.shape[1])
    tau = _as_lanes(model, tau, model.nv, "tau", q.shape[1])
    ddq, lam, iterations = _solve(model, cs, q, v, tau, mu, max_iterations, accuracy, True)
    return (ddq, lam, iterations) if return_iterations else (ddq, lam)


def constraint_dynamics_batch(model, q, v, tau, constraints, mu=0.0, max_iterations=1,
                              accuracy=1e-12, return_iterations=False):
    """:func:`constraint_dynamics_lanes` on the usual stacks: q (K, nq), v and tau
    (K, nv) -> ddq (K, nv), lambda (K, nc); the tiles are transposed in the kernel
    as they are loaded and stored."""
    qs, vs, taus = _as_stacks(model, q, v, tau, "tau", "constraint_dynamics")
    cs = _contacts_only(model, constraints)
    ddq, lam, iterations = _solve(model, cs, qs, vs, taus, mu, max_iterations, accuracy, False)
    return (ddq, lam, iterations) if return_iterations else (ddq, lam)
