"""M^-1 from the articulated-body quantities of ABA (Carpentier & Mansard, RSS 2018,
Sec. IV-B): ABA applied to the identity matrix of torques, at zero velocity and
gravity, never forming M.  The articulated inertias, U = IA J_i and D^-1 of ABA's
backward pass do not depend on v or tau, so the two sweeps below take them from
any ABA pass of the same configuration (``aba_derivatives`` runs them right after
ABA, as Pinocchio's ``computeABADerivatives`` does).

The sweeps run along the columns of M^-1: F (6, nv) holds the force columns of
the backward sweep and A (njoints, 6, nv) the motion columns of the forward one,
so that a joint's step is a few loops over contiguous columns; a 1-dof joint
(revolute, prismatic) has a scalar D^-1 and is written out;
the children of the universe do not add to F, and leaves do not store A
(nothing reads them).  Nothing is zeroed in bulk: the backward sweep sets each
dof's row on its subtree and zeroes it past it, and a force column is set by its
own joint before its ancestors add to it (a bulk zeroing wrote the 11.5 kB M^-1
of talos twice per state).

The column loops index with unsigned integers (``np.uint64``): Numba
wraps a negative signed index around, a select on every access, which keeps LLVM
from vectorizing a loop that does not start at 0; unsigned, the loops vectorize
(``inspect_asm``: packed zmm arithmetic instead of scalar).
"""
import numpy as np

from .config import inline_kernel, kernel


@inline_kernel
def _minverse_backward_pass(m, J, U, Dinv, Minv, F, w):
    """Rows of M^-1 restricted to each subtree (Carpentier & Mansard 2018, Sec. IV-B,
    backward step): Minv[dofs of i, subtree of i] = [Dinv, -Dinv J_i^T F[descendants]],
    then F[subtree of i] += U_i Minv[dofs of i, subtree of i] (for its ancestors: not at
    the children of the universe), and zero past the subtree.  F (6, nv): column c the
    force column c, set by the joint of dof c; w (6,) scratch.  A 1-dof joint has a
    scalar Dinv."""
    parents, idx_v, nvs, subtree_end = m.parents, m.idx_v, m.nvs, m.subtree_end
    nv = m.nv
    for i in range(m.njoints - 1, 0, -1):
        iv = idx_v[i]
        nvi = nvs[i]
        end = idx_v[subtree_end[i]] if subtree_end[i] < m.njoints else nv
        if nvi == 1:
            d = Dinv[iv, 0]
            j0, j1, j2, j3, j4, j5 = J[0, iv], J[1, iv], J[2, iv], J[3, iv], J[4, iv], J[5, iv]
            u0, u1, u2, u3, u4, u5 = U[0, iv], U[1, iv], U[2, iv], U[3, iv], U[4, iv], U[5, iv]
            Minv[iv, iv] = d
            row, first, last = np.uint64(iv), np.uint64(iv + 1), np.uint64(end)
            for col in range(first, last):
                Minv[row, col] = -d * (j0 * F[0, col] + j1 * F[1, col] + j2 * F[2, col]
                                       + j3 * F[3, col] + j4 * F[4, col] + j5 * F[5, col])
            for col in range(end, nv):
                Minv[iv, col] = 0.0
            if parents[i] == 0:
                continue
            F[0, iv], F[1, iv], F[2, iv] = u0 * d, u1 * d, u2 * d
            F[3, iv], F[4, iv], F[5, iv] = u3 * d, u4 * d, u5 * d
            for col in range(first, last):
                x = Minv[row, col]
                F[0, col] += u0 * x
                F[1, col] += u1 * x
                F[2, col] += u2 * x
                F[3, col] += u3 * x
                F[4, col] += u4 * x
                F[5, col] += u5 * x
            continue
        for a in range(nvi):
            for b in range(nvi):
                Minv[iv + a, iv + b] = Dinv[iv + a, b]
        # Minv[iv + a, descendants] = sum_r G[a, r] F[r, descendants], G = -Dinv J_i^T:
        # 6 nvi products per entry of G, then loops along the columns
        first, last = np.uint64(iv + nvi), np.uint64(end)
        for a in range(nvi):
            row = np.uint64(iv + a)
            for col in range(iv + nvi, nv):
                Minv[iv + a, col] = 0.0
            for r in range(6):
                g = 0.0
                for b in range(nvi):
                    g -= Dinv[iv + a, b] * J[r, iv + b]
                for col in range(first, last):
                    Minv[row, col] += g * F[r, col]
        if parents[i] == 0:
            continue
        first = np.uint64(iv)
        for r in range(6):
            for col in range(iv, iv + nvi):
                F[r, col] = 0.0
            for a in range(nvi):
                x = U[r, iv + a]
                row = np.uint64(iv + a)
                for col in range(first, last):
                    F[r, col] += x * Minv[row, col]


@inline_kernel
def _minverse_forward_pass(m, J, U, Dinv, Minv, A, w):
    """The ancestors' part of M^-1 (forward step): rows of i -= Dinv U_i^T A_parent on
    the columns from i on, A_i = A_parent + J_i Minv[dofs of i]; then the lower
    triangle.  A (njoints, 6, nv): A[i, :, c] the motion column c (not stored for
    leaves); w (6,) scratch."""
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
            if par > 0:
                e0, e1, e2 = d * U[0, iv], d * U[1, iv], d * U[2, iv]
                e3, e4, e5 = d * U[3, iv], d * U[4, iv], d * U[5, iv]
                row, first, p = np.uint64(iv), np.uint64(iv), np.uint64(par)
                for col in range(first, np.uint64(nv)):
                    Minv[row, col] -= (e0 * A[p, 0, col] + e1 * A[p, 1, col]
                                       + e2 * A[p, 2, col] + e3 * A[p, 3, col]
                                       + e4 * A[p, 4, col] + e5 * A[p, 5, col])
            if leaf:
                continue
            _add_column_motion(A, i, par, iv, nv, j0, j1, j2, j3, j4, j5, Minv)
            continue
        if par > 0:
            for col in range(iv, nv):
                for b in range(nvi):
                    ua = 0.0
                    for r in range(6):
                        ua += U[r, iv + b] * A[par, r, col]
                    w[b] = ua
                for a in range(nvi):
                    s = 0.0
                    for b in range(nvi):
                        s += Dinv[iv + a, b] * w[b]
                    Minv[iv + a, col] -= s
        first, last, t = np.uint64(iv), np.uint64(nv), np.uint64(i)
        for r in range(6):
            for col in range(iv, nv):
                A[i, r, col] = A[par, r, col] if par > 0 else 0.0
            for a in range(nvi):
                x = J[r, iv + a]
                row = np.uint64(iv + a)
                for col in range(first, last):
                    A[t, r, col] += x * Minv[row, col]
    for r in range(nv):
        for c in range(r):
            Minv[r, c] = Minv[c, r]


@inline_kernel
def _add_column_motion(A, i, par, iv, nv, j0, j1, j2, j3, j4, j5, Minv):
    """A[i, :, c] = A[par, :, c] + J_i Minv[iv, c] for the columns c from iv on (a 1-dof
    joint; A[par] taken as zero for a child of the universe)."""
    row, first, last = np.uint64(iv), np.uint64(iv), np.uint64(nv)
    t = np.uint64(i)
    if par == 0:
        for col in range(first, last):
            x = Minv[row, col]
            A[t, 0, col], A[t, 1, col], A[t, 2, col] = j0 * x, j1 * x, j2 * x
            A[t, 3, col], A[t, 4, col], A[t, 5, col] = j3 * x, j4 * x, j5 * x
        return
    p = np.uint64(par)
    for col in range(first, last):
        x = Minv[row, col]
        A[t, 0, col] = A[p, 0, col] + j0 * x
        A[t, 1, col] = A[p, 1, col] + j1 * x
        A[t, 2, col] = A[p, 2, col] + j2 * x
        A[t, 3, col] = A[p, 3, col] + j3 * x
        A[t, 4, col] = A[p, 4, col] + j4 * x
        A[t, 5, col] = A[p, 5, col] + j5 * x


@inline_kernel
def minverse_sweeps(m, J, U, Dinv, Minv, F, A, w):
    """M^-1 (nv, nv), full, from ABA's U (6, nv) and D^-1 (nv, 6) of the same state:
    the two sweeps above, on the scratch F (6, nv), A (njoints, 6, nv) and w (6,);
    inlined into a loop over states (:func:`.aba._compute_minverse`)."""
    _minverse_backward_pass(m, J, U, Dinv, Minv, F, w)
    _minverse_forward_pass(m, J, U, Dinv, Minv, A, w)


@kernel
def minverse_from_articulated(m, J, U, Dinv, Minv, F, A, w):
    """:func:`minverse_sweeps` as a compiled call, for one state."""
    minverse_sweeps(m, J, U, Dinv, Minv, F, A, w)
