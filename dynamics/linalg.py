"""Dense Cholesky kernels shared by the constrained dynamics, the solvers and the
articulated-body inertia of multi-dof joints.

A symmetric positive-definite A (n, n) is factorized as A = C C^T with C
lower triangular (column by column, Golub & Van Loan, Alg. 4.2.1), and
A X = B is solved by the two triangular sweeps C Y = B, C^T X = Y.  Only
the lower triangle of C is written or read.

The factorization stops at the first pivot s_j = A_jj - sum_p C_jp^2 that
is not positive or that is at most ``tolerance * A_jj``: with
``tolerance = 0`` it tests positive definiteness only (the Riccati
recursion then raises its regularization); with a small relative
tolerance it also reports a numerically singular A (the Delassus matrix of
redundant constraints).
"""
import numpy as np

from .config import inline_kernel, kernel


@kernel
def cholesky_factor(A, n, C, tolerance):
    """C (lower triangle of its leading (n, n) block) with C C^T = A[:n, :n].

    C may be A itself (in place: A's lower triangle is overwritten, its strict
    upper triangle kept); the strict upper triangle of C is never written.
    Returns False, C incomplete, at the first pivot that is not > 0 or that is
    <= tolerance * A_jj (see the module docstring).
    """
    for j in range(n):
        d = A[j, j]
        s = d
        for p in range(j):
            s -= C[j, p] * C[j, p]
        if not s > 0.0 or s <= tolerance * d:
            return False
        cjj = np.sqrt(s)
        C[j, j] = cjj
        # the column below the pivot four rows per pass over p: four independent sums
        # sharing each load of C[j, p] (one chain of dependent subtractions per row
        # otherwise bounds the loop), each sum's subtractions in the order p = 0, 1, ...
        # as in one row at a time, so the same bits (n = 32: 1.64 -> 1.24 us, thr34)
        i = j + 1
        while i + 4 <= n:
            s0 = A[i, j]
            s1 = A[i + 1, j]
            s2 = A[i + 2, j]
            s3 = A[i + 3, j]
            for p in range(j):
                cjp = C[j, p]
                s0 -= C[i, p] * cjp
                s1 -= C[i + 1, p] * cjp
                s2 -= C[i + 2, p] * cjp
                s3 -= C[i + 3, p] * cjp
            C[i, j] = s0 / cjj
            C[i + 1, j] = s1 / cjj
            C[i + 2, j] = s2 / cjj
            C[i + 3, j] = s3 / cjj
            i += 4
        while i < n:
            s = A[i, j]
            for p in range(j):
                s -= C[i, p] * C[j, p]
            C[i, j] = s / cjj
            i += 1
    return True


@kernel
def cholesky_solve(C, n, X):
    """X[:n] <- (C C^T)^-1 X[:n], column by column, with C from :func:`cholesky_factor`.

    X is (>= n, ncols); a vector x solves as ``x.reshape((x.shape[0], 1))``.
    """
    ncols = X.shape[1]
    if ncols == 1:
        # one column: a dot product per entry, its sum in a register (the row form
        # below stores X[i] at every p: 2.7x slower for n = 32, measured; the
        # box QP and the feed-forward k solve vectors); the same operations in the
        # same order as the row form, so the same bits
        for i in range(n):
            s = X[i, 0]
            for p in range(i):
                s -= C[i, p] * X[p, 0]
            X[i, 0] = s / C[i, i]
        for i in range(n - 1, -1, -1):
            s = X[i, 0]
            for p in range(i + 1, n):
                s -= C[p, i] * X[p, 0]
            X[i, 0] = s / C[i, i]
        return
    # row operations with the column index innermost (contiguous, vectorizable: 5.5x
    # faster than a dot product per entry for n = 32, 74 columns), four terms per pass
    # over a row: X[i] -= C[i, p] X[p] for p .. p + 3 in that order in one expression,
    # so each entry subtracts its terms in increasing p, as a dot product per entry
    # would (the same bits), with one load and store of X[i] per four terms instead of
    # one per term, which bound the row form (the Riccati gains' [K | k] of a talos
    # knot, 32 x 77: 8.9 -> 5.6 us; solo12's 12 x 37: 0.80 -> 0.67 us; one process, CPU
    # time; unrolled by eight: 6.0 and 0.75 us)
    for i in range(n):
        _subtract_rows(X, i, C, False, 0, i)
        d = C[i, i]
        for c in range(ncols):
            X[i, c] = X[i, c] / d
    for i in range(n - 1, -1, -1):
        _subtract_rows(X, i, C, True, i + 1, n)
        d = C[i, i]
        for c in range(ncols):
            X[i, c] = X[i, c] / d


@inline_kernel
def _subtract_rows(X, i, C, transposed, begin, end):
    """X[i] -= a_p X[p] for p = begin .. end - 1 in increasing p, a_p = C[i, p] (C[p, i]
    when ``transposed``), four terms per pass over the row (:func:`cholesky_solve`; C
    indexed in place: a view of its row or column would take a reference count per
    row)."""
    ncols = X.shape[1]
    p = begin
    while p + 4 <= end:
        if transposed:
            a0, a1, a2, a3 = C[p, i], C[p + 1, i], C[p + 2, i], C[p + 3, i]
        else:
            a0, a1, a2, a3 = C[i, p], C[i, p + 1], C[i, p + 2], C[i, p + 3]
        for c in range(ncols):
            X[i, c] = (((X[i, c] - a0 * X[p, c]) - a1 * X[p + 1, c])
                       - a2 * X[p + 2, c]) - a3 * X[p + 3, c]
        p += 4
    while p < end:
        a0 = C[p, i] if transposed else C[i, p]
        for c in range(ncols):
            X[i, c] -= a0 * X[p, c]
        p += 1


@inline_kernel
def lower_inverse(L, n, W):
    """W's lower triangle = L[:n, :n]^-1 for a lower-triangular L, column by column
    (W[i, j] = -(sum_{j<=p<i} L[i, p] W[p, j]) / L[i, i]).  W may be L itself: each
    L[i, p] is read before column p is overwritten."""
    for j in range(n):
        W[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, n):
            s = 0.0
            for p in range(j, i):
                s -= L[i, p] * W[p, j]
            W[i, j] = s / L[i, i]


@inline_kernel
def spd_inverse(A, n, out, o, W):
    """out[o:o+n, :n] = A[:n, :n]^-1 for a small symmetric positive-definite A (a
    multi-dof joint's D = J_i^T IA J_i: n = 6 for the free flyer).

    A = C C^T in place in A's lower triangle (:func:`cholesky_factor`'s loop), W = C^-1
    (lower triangle of W), then A^-1 = W^T W, its upper triangle mirrored: n^3 / 2
    multiplications (Gauss-Jordan on [A | 1]: 2 n^3).  Inlined: a caller that passes
    a constant n gets loops of constant trip counts, which LLVM unrolls.  A that is
    not positive definite gives NaN (the public functions check D^-1 for it)."""
    for j in range(n):
        s = A[j, j]
        for p in range(j):
            s -= A[j, p] * A[j, p]
        d = np.sqrt(s)
        A[j, j] = d
        for i in range(j + 1, n):
            s = A[i, j]
            for p in range(j):
                s -= A[i, p] * A[j, p]
            A[i, j] = s / d
    lower_inverse(A, n, W)
    for r in range(n):
        for c in range(r, n):
            s = 0.0
            for p in range(c, n):
                s += W[p, r] * W[p, c]
            out[o + r, c] = s
            out[o + c, r] = s


@inline_kernel
def copy_matrix(src, dst):
    """dst[:, :] = src, row by row (contiguous loops that LLVM vectorizes): a matrix
    computed in a scratch that stays in cache, stored once into a stack."""
    for r in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[r, c] = src[r, c]
