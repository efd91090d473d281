"""M^-1 from the articulated-body quantities of ABA (Carpentier & Mansard, RSS 2018,
Sec. IV-B): ABA applied to the identity matrix of torques, at zero velocity and
gravity, never forming M.  The articulated inertias, U = IA J_i and D^-1 of ABA's
backward pass do not depend on v or tau, so the two sweeps below take them from
any ABA pass of the same configuration (``aba_derivatives`` runs them right after
ABA, as Pinocchio's ``computeABADerivatives`` does).

The sweeps keep their 6-vectors contiguous: F (nv, 6), row c the force column c
of the backward sweep, and A (njoints, nv, 6) the motion columns of the forward
one; a 1-dof joint (revolute, prismatic) has a scalar D^-1 and is written out;
the children of the universe do not add to F, and leaves do not store A
(nothing reads them).
"""
from .config import inline_kernel, kernel


@inline_kernel
def _minverse_backward_pass(m, J, U, Dinv, Minv, F, w):
    """Rows of M^-1 restricted to each subtree (Carpentier & Mansard 2018, Sec. IV-B,
    backward step): Minv[dofs of i, subtree of i] = [Dinv, -Dinv J_i^T F[descendants]],
    then F[subtree of i] += U_i Minv[dofs of i, subtree of i] (for its ancestors: not at
    the children of the universe).  F (nv, 6), zero on entry:
    row c is the force column c (contiguous); w (6,) scratch.  A 1-dof joint has a
    scalar Dinv."""
    parents, idx_v, nvs, subtree_end = m.parents, m.idx_v, m.nvs, m.subtree_end
    for i in range(m.njoints - 1, 0, -1):
        iv = idx_v[i]
        nvi = nvs[i]
        end = idx_v[subtree_end[i]] if subtree_end[i] < m.njoints else m.nv
        if nvi == 1:
            d = Dinv[iv, 0]
            j0, j1, j2, j3, j4, j5 = J[0, iv], J[1, iv], J[2, iv], J[3, iv], J[4, iv], J[5, iv]
            u0, u1, u2, u3, u4, u5 = U[0, iv], U[1, iv], U[2, iv], U[3, iv], U[4, iv], U[5, iv]
            Minv[iv, iv] = d
            for col in range(iv + 1, end):
                Minv[iv, col] = -d * (j0 * F[col, 0] + j1 * F[col, 1] + j2 * F[col, 2]
                                      + j3 * F[col, 3] + j4 * F[col, 4] + j5 * F[col, 5])
            if parents[i] == 0:
                continue
            F[iv, 0], F[iv, 1], F[iv, 2] = u0 * d, u1 * d, u2 * d
            F[iv, 3], F[iv, 4], F[iv, 5] = u3 * d, u4 * d, u5 * d
            for col in range(iv + 1, end):
                x = Minv[iv, col]
                F[col, 0] += u0 * x
                F[col, 1] += u1 * x
                F[col, 2] += u2 * x
                F[col, 3] += u3 * x
                F[col, 4] += u4 * x
                F[col, 5] += u5 * x
            continue
        for a in range(nvi):
            for b in range(nvi):
                Minv[iv + a, iv + b] = Dinv[iv + a, b]
        for col in range(iv + nvi, end):
            for b in range(nvi):
                jf = 0.0
                for r in range(6):
                    jf += J[r, iv + b] * F[col, r]
                w[b] = jf
            for a in range(nvi):
                s = 0.0
                for b in range(nvi):
                    s -= Dinv[iv + a, b] * w[b]
                Minv[iv + a, col] = s
        if parents[i] == 0:
            continue
        for col in range(iv, end):
            for r in range(6):
                s = 0.0
                for a in range(nvi):
                    s += U[r, iv + a] * Minv[iv + a, col]
                F[col, r] += s


@inline_kernel
def _minverse_forward_pass(m, J, U, Dinv, Minv, A, w):
    """The ancestors' part of M^-1 (forward step): rows of i -= Dinv U_i^T A_parent on
    the columns from i on, A_i = A_parent + J_i Minv[dofs of i]; then the lower
    triangle.  A (njoints, nv, 6): A[i, c] the motion column c (contiguous; not
    stored for leaves); w (6,) scratch."""
    parents, idx_v, nvs, subtree_end = m.parents, m.idx_v, m.nvs, m.subtree_end
    nv = m.nv
    for i in range(1, m.njoints):
        iv = idx_v[i]
        nvi = nvs[i]
        par = parents[i]
        leaf = subtree_end[i] == i + 1
        if nvi == 1:
            d = Dinv[iv, 0]
            j0, j1, j2, j3, j4, j5 = J[0, iv], J[1, iv], J[2, iv], J[3, iv], J[4, iv], J[5, iv]
            u0, u1, u2, u3, u4, u5 = U[0, iv], U[1, iv], U[2, iv], U[3, iv], U[4, iv], U[5, iv]
            if par == 0:
                for col in range(iv, nv):
                    x = Minv[iv, col]
                    A[i, col, 0], A[i, col, 1], A[i, col, 2] = j0 * x, j1 * x, j2 * x
                    A[i, col, 3], A[i, col, 4], A[i, col, 5] = j3 * x, j4 * x, j5 * x
                continue
            for col in range(iv, nv):
                a0, a1, a2 = A[par, col, 0], A[par, col, 1], A[par, col, 2]
                a3, a4, a5 = A[par, col, 3], A[par, col, 4], A[par, col, 5]
                x = Minv[iv, col] - d * (u0 * a0 + u1 * a1 + u2 * a2 + u3 * a3 + u4 * a4
                                         + u5 * a5)
                Minv[iv, col] = x
                if leaf:
                    continue
                A[i, col, 0], A[i, col, 1], A[i, col, 2] = a0 + j0 * x, a1 + j1 * x, a2 + j2 * x
                A[i, col, 3], A[i, col, 4], A[i, col, 5] = a3 + j3 * x, a4 + j4 * x, a5 + j5 * x
            continue
        for col in range(iv, nv):
            if par > 0:
                for b in range(nvi):
                    ua = 0.0
                    for r in range(6):
                        ua += U[r, iv + b] * A[par, col, r]
                    w[b] = ua
                for a in range(nvi):
                    s = 0.0
                    for b in range(nvi):
                        s += Dinv[iv + a, b] * w[b]
                    Minv[iv + a, col] -= s
            for r in range(6):
                s = A[par, col, r] if par > 0 else 0.0
                for a in range(nvi):
                    s += J[r, iv + a] * Minv[iv + a, col]
                A[i, col, r] = s
    for r in range(nv):
        for c in range(r):
            Minv[r, c] = Minv[c, r]


@kernel
def minverse_from_articulated(m, J, U, Dinv, Minv, F, A, w):
    """M^-1 (nv, nv), full, from ABA's U (6, nv) and D^-1 (nv, 6) of the same state:
    the two sweeps above, on the scratch F (nv, 6), A (njoints, nv, 6) and w (6,)."""
    F[:, :] = 0.0
    Minv[:, :] = 0.0
    _minverse_backward_pass(m, J, U, Dinv, Minv, F, w)
    _minverse_forward_pass(m, J, U, Dinv, Minv, A, w)
