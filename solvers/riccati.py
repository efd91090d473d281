"""The backward pass of DDP / FDDP / BoxFDDP: one Riccati recursion kernel.

Notation (Crocoddyl's, Mastalli et al. ICRA 2020): at knot t, with the value
function V(x) ~ Vx^T dx + 1/2 dx^T Vxx dx of knot t+1,

    Qx  = Lx + Fx^T Vx',      Qu  = Lu + Fu^T Vx',
    Qxx = Lxx + Fx^T Vxx' Fx,  Quu = Luu + Fu^T Vxx' Fu + mu I,  Qxu = Lxu + Fx^T Vxx' Fu,
    k = Quu^-1 Qu,  K = Quu^-1 Qxu^T,               (u = u - alpha k - K dx)
    Vx = Qx - K^T Qu,  Vxx = Qxx - Qxu K + mu I,

and FDDP's gap term: Vx <- Vx + Vxx f_t when the trajectory is infeasible.
With control bounds (BoxFDDP, Mastalli et al. 2022), k comes from the box QP
min 1/2 du^T Quu du + Qu^T du, lb - u <= -du <= ub - u, solved by projected
Newton (Tassa, Mansard & Todorov, ICRA 2014), and K keeps only the rows of
the free controls: K_f = (Quu_ff)^-1 Qxu_f^T.

The kernel returns -1 on success, or the knot whose Quu is not positive
definite (the solver then raises the regularization): no exception leaves it.
"""
import numpy as np

from ..dynamics.config import kernel
from ..dynamics.linalg import cholesky_factor, cholesky_solve


@kernel
def box_qp(H, g, lower, upper, x, free, L, work, max_iter=100, tol=1e-10):
    """Projected Newton for min 1/2 x^T H x + g^T x, lower <= x <= upper (warm start x).

    On return ``free`` marks the inactive controls and L is the Cholesky factor
    of H restricted to them (packed in their order).  Returns the number of
    free controls, or -1 when that sub-Hessian is not positive definite.
    """
    n = g.shape[0]
    grad, step, trial, Hf, rhs = work[0], work[1], work[2], work[3:3 + n, :], work[3 + n]
    rhs_column = rhs.reshape((rhs.shape[0], 1))
    for i in range(n):
        x[i] = min(max(x[i], lower[i]), upper[i])
    n_free = 0
    for iteration in range(max_iter):
        for i in range(n):
            s = g[i]
            for j in range(n):
                s += H[i, j] * x[j]
            grad[i] = s
        n_free = 0
        for i in range(n):
            clamped = (x[i] <= lower[i] and grad[i] > 0.0) or (x[i] >= upper[i] and grad[i] < 0.0)
            free[i] = not clamped
            if free[i]:
                n_free += 1
        # Hessian of the free block, in order
        a = 0
        for i in range(n):
            if free[i]:
                b = 0
                for j in range(n):
                    if free[j]:
                        Hf[a, b] = H[i, j]
                        b += 1
                a += 1
        if n_free > 0 and not cholesky_factor(Hf, n_free, L, 0.0):
            return -1
        gnorm = 0.0
        for i in range(n):
            if free[i]:
                gnorm += grad[i] * grad[i]
        if n_free == 0 or gnorm < tol * tol:
            break
        # Newton step on the free block: step_f = -Hff^-1 grad_f, zero elsewhere
        a = 0
        for i in range(n):
            if free[i]:
                rhs[a] = -grad[i]
                a += 1
        cholesky_solve(L, n_free, rhs_column)
        a = 0
        for i in range(n):
            if free[i]:
                step[i] = rhs[a]
                a += 1
            else:
                step[i] = 0.0
        # projected Armijo line search
        value = 0.0
        for i in range(n):
            value += g[i] * x[i] + 0.5 * x[i] * (grad[i] - g[i])
        alpha = 1.0
        accepted = False
        for _ in range(30):
            for i in range(n):
                trial[i] = min(max(x[i] + alpha * step[i], lower[i]), upper[i])
            new_value = 0.0
            decrease = 0.0
            for i in range(n):
                s = 0.0
                for j in range(n):
                    s += H[i, j] * trial[j]
                new_value += g[i] * trial[i] + 0.5 * trial[i] * s
                decrease += grad[i] * (x[i] - trial[i])
            if value - new_value >= 0.1 * decrease:
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            break
        change = 0.0
        for i in range(n):
            change += abs(trial[i] - x[i])
            x[i] = trial[i]
        if change < tol:
            break
    return n_free


@kernel
def backward_pass(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, feasible, mu, boxed, us, u_lower,
                  u_upper, Vx, Vxx, Qu, Quu, k, K, Quuk):
    """Riccati recursion over all knots (see the module docstring).

    Shapes: Fx (N, ndx, ndx), Fu (N, ndx, nu), Lx (N+1, ndx), Lu (N, nu),
    Lxx (N+1, ndx, ndx), Luu (N, nu, nu), Lxu (N, ndx, nu), gaps (N+1, ndx);
    us, u_lower, u_upper (N, nu) used when ``boxed``.  Writes Vx, Vxx (N+1, ...),
    Qu, k, Quuk (N, nu), Quu (N, nu, nu), K (N, nu, ndx).  Returns -1, or the
    knot where Quu (or its free block) is not positive definite.  The dense
    products are BLAS calls (``np.dot`` into the buffers of :func:`_workspace`,
    allocated once per call): all arrays must be C-contiguous.
    """
    N, ndx, nu = Fu.shape
    ws = _workspace(ndx, nu)
    for i in range(ndx):
        Vx[N, i] = Lx[N, i]
        for j in range(ndx):
            Vxx[N, i, j] = Lxx[N, i, j]
        Vxx[N, i, i] += mu
    if not feasible:
        _add_gap_term(Vx, Vxx, gaps, N)
    for t in range(N - 1, -1, -1):
        _q_function(t, (Fx, Fu), (Lx, Lu, Lxx, Luu, Lxu), Vx, Vxx, mu, Qu, Quu, ws)
        if not _gains(t, ws, Qu, Quu, boxed, us, u_lower, u_upper, k, K):
            return t
        _value_function(t, ws, Qu, Quu, k, K, Quuk, Vx, Vxx, mu)
        if not feasible:
            _add_gap_term(Vx, Vxx, gaps, t)
        for i in range(ndx):
            if not np.isfinite(Vx[t, i]):
                return t
    return -1


@kernel
def _workspace(ndx, nu):
    """Buffers of one backward pass: (FxV, FuV, Qx, Qxx, Qxu) of the current knot,
    then the box QP's (L, free, work, lo, hi, rhs)."""
    products = (np.empty((ndx, ndx)), np.empty((nu, ndx)), np.empty(ndx),
                np.empty((ndx, ndx)), np.empty((ndx, nu)))
    box = (np.zeros((nu, nu)), np.zeros(nu, dtype=np.bool_), np.zeros((4 + nu, max(nu, 1))),
           np.empty(nu), np.empty(nu), np.empty(nu))
    return products, box


@kernel
def _q_function(t, F, L, Vx, Vxx, mu, Qu, Quu, ws):
    """Qx, Qxx, Qxu (into ws) and Qu[t], Quu[t] (+ mu I) from Vx[t+1], Vxx[t+1]."""
    Fx, Fu = F
    Lx, Lu, Lxx, Luu, Lxu = L
    FxV, FuV, Qx, Qxx, Qxu = ws[0]
    ndx, nu = Qxu.shape
    np.dot(Fx[t].T, Vxx[t + 1], FxV)           # Fx^T Vxx'
    np.dot(Fu[t].T, Vxx[t + 1], FuV)           # Fu^T Vxx'
    np.dot(FxV, Fx[t], Qxx)
    np.dot(FxV, Fu[t], Qxu)
    np.dot(FuV, Fu[t], Quu[t])
    for i in range(ndx):
        s = Lx[t, i]
        for p in range(ndx):
            s += Fx[t, p, i] * Vx[t + 1, p]
        Qx[i] = s
        for j in range(ndx):
            Qxx[i, j] += Lxx[t, i, j]
        for j in range(nu):
            Qxu[i, j] += Lxu[t, i, j]
    for i in range(nu):
        s = Lu[t, i]
        for p in range(ndx):
            s += Fu[t, p, i] * Vx[t + 1, p]
        Qu[t, i] = s
        for j in range(nu):
            Quu[t, i, j] += Luu[t, i, j]
        Quu[t, i, i] += mu


@kernel
def _gains(t, ws, Qu, Quu, boxed, us, u_lower, u_upper, k, K):
    """k[t], K[t] from the Cholesky factor of Quu[t] (or the box QP's free block);
    False when that is not positive definite."""
    Qxu = ws[0][4]
    L, free, work, lo, hi, rhs = ws[1]
    ndx, nu = Qxu.shape
    if boxed:
        for i in range(nu):
            lo[i] = us[t, i] - u_upper[t, i]   # bounds on k (u_new = u - k)
            hi[i] = us[t, i] - u_lower[t, i]
        # k minimizes 1/2 k^T Quu k - Qu^T k within [lo, hi] (warm start: the
        # previous iteration's k, clamped): pass -Qu
        for i in range(nu):
            rhs[i] = -Qu[t, i]
        n_free = box_qp(Quu[t], rhs, lo, hi, k[t], free, L, work)
        if n_free < 0:
            return False
        _box_gains(Qxu, free, n_free, L, K, t, rhs)
        return True
    if not cholesky_factor(Quu[t], nu, L, 0.0):
        return False
    for i in range(nu):
        k[t, i] = Qu[t, i]
        for j in range(ndx):
            K[t, i, j] = Qxu[j, i]
    cholesky_solve(L, nu, k[t].reshape((nu, 1)))
    cholesky_solve(L, nu, K[t])
    return True


@kernel
def _value_function(t, ws, Qu, Quu, k, K, Quuk, Vx, Vxx, mu):
    """Quuk[t] = Quu k; Vx[t] = Qx - K^T Qu, Vxx[t] = sym(Qxx - Qxu K) + mu I."""
    _, _, Qx, Qxx, Qxu = ws[0]
    ndx, nu = Qxu.shape
    for i in range(nu):
        s = 0.0
        for j in range(nu):
            s += Quu[t, i, j] * k[t, j]
        Quuk[t, i] = s
    np.dot(Qxu, K[t], Vxx[t])                  # Qxu K, then Qxx - Qxu K
    for i in range(ndx):
        s = Qx[i]
        for p in range(nu):
            s -= K[t, p, i] * Qu[t, p]
        Vx[t, i] = s
    for i in range(ndx):
        Vxx[t, i, i] = Qxx[i, i] - Vxx[t, i, i] + mu
        for j in range(i):
            s = 0.5 * ((Qxx[i, j] - Vxx[t, i, j]) + (Qxx[j, i] - Vxx[t, j, i]))
            Vxx[t, i, j] = s
            Vxx[t, j, i] = s


@kernel
def _add_gap_term(Vx, Vxx, gaps, t):
    """Vx[t] += Vxx[t] gaps[t] (FDDP: the gradient at the end of the defect)."""
    ndx = Vx.shape[1]
    for i in range(ndx):
        s = 0.0
        for j in range(ndx):
            s += Vxx[t, i, j] * gaps[t, j]
        Vx[t, i] += s


@kernel
def _box_gains(Qxu, free, n_free, L, K, t, rhs):
    """K rows of the free controls: (Quu_ff)^-1 Qxu_f^T; clamped rows zero."""
    ndx, nu = Qxu.shape
    rhs_column = rhs.reshape((nu, 1))
    for j in range(ndx):
        a = 0
        for i in range(nu):
            if free[i]:
                rhs[a] = Qxu[j, i]
                a += 1
        if n_free > 0:
            cholesky_solve(L, n_free, rhs_column)
        a = 0
        for i in range(nu):
            if free[i]:
                K[t, i, j] = rhs[a]
                a += 1
            else:
                K[t, i, j] = 0.0
