"""The backward pass of DDP / FDDP / BoxFDDP: one Riccati recursion kernel.

Notation (Crocoddyl's, Mastalli et al. ICRA 2020): at knot t, with the value
function V(x) ~ Vx^T dx + 1/2 dx^T Vxx dx of knot t+1,

    Qx  = Lx + Fx^T Vx',      Qu  = Lu + Fu^T Vx',
    Qxx = Lxx + Fx^T Vxx' Fx,  Quu = Luu + Fu^T Vxx' Fu + mu I,  Qxu = Lxu + Fx^T Vxx' Fu,
    k = Quu^-1 Qu,  K = Quu^-1 Qxu^T,               (u = u - alpha k - K dx)
    Vx = Qx - K^T Qu,  Vxx = Qxx - Qxu K + mu I,

and FDDP's gap term: Vx <- Vx + Vxx f_t when the trajectory is infeasible.
At the knots marked ``limited`` (BoxFDDP once feasible, Mastalli et al. 2022),
k = -du with du from the box QP min 1/2 du^T Quu du + Qu^T du, u_lower - u <=
du <= u_upper - u, solved by projected Newton (Tassa, Mansard & Todorov, ICRA
2014), K keeps only the rows of the free controls (K_f = (Quu_ff)^-1 Qxu_f^T),
and Qu loses its clamped entries.

The kernel returns -1 on success, or the knot whose Quu is not positive
definite (the solver then raises the regularization): no exception leaves it.

The symplectic Euler knots of a multibody (Crocoddyl's IntegratedActionModelEuler:
v' = v + dt a, q' = q (+) dt v') have a block structure the products use.  With
x = (q, v), nv = n, B = d v'/dx = [0, I] + dt da/dx (the bottom n rows of Fx) and
Bu = dt da/du (those of Fu), and Jq, Jv the Jacobians of q (+) w in q and w,

    Fx = [[Jq, 0], [0, 0]] + [dt Jv; I] B,        Fu = [dt Jv; I] Bu.

Jq and Jv are the identity on the rows of 1-dof joints (revolute, prismatic) and a
dense block on the rows of a free flyer, spherical or planar joint (the Lie rows L).
Written with R = Fx[L] - [I, 0][L] - dt B[L] and Ru = Fu[L] - dt Bu[L] (the Lie rows'
difference from the 1-dof form, read from Fx and Fu themselves),

    Fx = E + C [B; R],   Fu = C [Bu; Ru],   E = [[I, 0], [0, 0]],   C = [[dt I; I] | S_L]

(S_L the columns e_l, l in L): n + |L| columns of C against 2n.  Then
Fx^T V = E^T V + [B; R]^T (C^T V) and (Fx^T V) Fx = (Fx^T V) E + ((Fx^T V) C) [B; R],
and alike for Fu: each dense product 2n x (n + |L|) x 2n instead of 2n x 2n x 2n,
C^T V and (Fx^T V) C being sums of rows or columns (:func:`_q_function_euler`).  The
products and the value function differ from the dense products' by rounding only (the
rows of Fx outside L are taken as exactly e + dt B), the gains by rounding times
cond(Quu) (up to 1e-10 of the largest gain on the solo12 trot, cond 1.6e9).
"""
import numpy as np

from ..dynamics.borrowed import borrowed_all, keep_alive
from ..dynamics.config import inline_kernel, kernel
from ..dynamics.linalg import cholesky_factor, cholesky_solve

# Row blocks of the symmetric products (Fx^T V') Fx and Qxu K (:func:`_lower_product`):
# 24 rows per BLAS call (a multiple of the Haswell dgemm kernel's 4 x 8 tile), blocks while
# more than 12 rows would remain after them.  Row blocks of 8, 16, 24, 32 against the full
# product, CPU per call, one process (thr34b): 76 x 44 x 76 1.06, 0.93, 0.82, 0.88 of
# the full product's time; 60 x 36 x 60 1.06, 0.95, 0.88, 0.86; 48 x 30 x 48 1.23,
# 1.03, 0.92, 1.01; 36 x 24 x 36 1.20, 1.04 (24 and 32: one call); Qxu K with its
# transposed copy 76 x 32 x 76 0.86 (24), 48 x 18 x 48 1.01, 36 x 12 x 36 1.14 (16).
# Up to 36 rows: one call, the full product.
SYMMETRIC_BLOCK_ROWS = 24


@kernel
def box_qp(H, q, lower, upper, x, free, L, work, max_iter=100, th_acceptstep=0.1, th_grad=1e-5):
    """min 1/2 x^T H x + q^T x, lower <= x <= upper, by projected Newton from the warm start x
    (Tassa, Mansard & Todorov, ICRA 2014), as Crocoddyl's BoxQP (its defaults: 100
    iterations, step acceptance 0.1, stop when the free gradient's max-norm <= 1e-5).

    Each iteration: the active set at x (x on a bound with the gradient pushing out
    of the box), the Newton step on the free block, a projected backtracking line
    search over 2^-i, i < 10, whose acceptance test is Crocoddyl's (the decrease
    must exceed th_acceptstep g^T (x - x_new), g the gradient with its free entries
    negated), then the stop test on the free gradient before the step.  On return
    ``free`` marks the free controls of the last iteration and L is the Cholesky
    factor of H restricted to them (packed in their order).  Returns their number,
    or -1 when that block is not positive definite.
    """
    n = q.shape[0]
    grad, step, trial, Hf, rhs = work[0], work[1], work[2], work[3:3 + n, :], work[3 + n]
    rhs_column = rhs.reshape((rhs.shape[0], 1))
    for i in range(n):
        x[i] = max(min(x[i], upper[i]), lower[i])
    n_free = 0
    for _ in range(max_iter):
        for i in range(n):
            s = q[i]
            for j in range(n):
                s += H[i, j] * x[j]
            grad[i] = s
        n_free = 0
        for i in range(n):
            clamped = (x[i] == lower[i] and grad[i] > 0.0) or (x[i] == upper[i] and grad[i] < 0.0)
            free[i] = not clamped
            if free[i]:
                n_free += 1
        a = 0                                   # Hessian of the free block, in order
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
        # Newton step on the free block: step_f = -Hff^-1 grad_f, zero elsewhere
        free_gradient = 0.0
        a = 0
        for i in range(n):
            if free[i]:
                rhs[a] = -grad[i]
                free_gradient = max(free_gradient, abs(grad[i]))
                a += 1
        if n_free > 0:
            cholesky_solve(L, n_free, rhs_column)
        a = 0
        for i in range(n):
            if free[i]:
                step[i] = rhs[a]
                a += 1
            else:
                step[i] = 0.0
        value = 0.0
        for i in range(n):
            value += q[i] * x[i] + 0.5 * x[i] * (grad[i] - q[i])
        alpha = 1.0
        for _ in range(10):
            for i in range(n):
                trial[i] = max(min(x[i] + alpha * step[i], upper[i]), lower[i])
            new_value = 0.0
            model = 0.0
            for i in range(n):
                s = 0.0
                for j in range(n):
                    s += H[i, j] * trial[j]
                new_value += q[i] * trial[i] + 0.5 * trial[i] * s
                change = grad[i] * (x[i] - trial[i])
                model += -change if free[i] else change
            if value - new_value > th_acceptstep * model:
                for i in range(n):
                    x[i] = trial[i]
                break
            alpha *= 0.5
        if free_gradient <= th_grad:
            break
    return n_free


@kernel
def backward_pass(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, feasible, mu, nus, limited, us,
                  u_lower, u_upper, Vx, Vxx, Qu, Quu, k, K, Quuk, euler=None):
    """Riccati recursion over all knots (see the module docstring).

    Shapes: Fx (N, ndx, ndx), Fu (N, ndx, nu), Lx (N+1, ndx), Lu (N, nu),
    Lxx (N+1, ndx, ndx), Luu (N, nu, nu), Lxu (N, ndx, nu), gaps (N+1, ndx);
    ``nus`` (N,) int: the controls of each knot, the leading nus[t] of the padded
    nu (entries beyond are zero in Fu, Lu, Luu, Lxu and stay zero in k, K);
    ``limited`` (N,) bool: the knots whose gains come from the box QP, with
    us, u_lower, u_upper (N, nu).  Writes Vx, Vxx (N+1, ...),
    Qu, k, Quuk (N, nu), Quu (N, nu, nu), K (N, nu, ndx).  Returns -1, or the
    knot where Quu (or its free block) is not positive definite.  The dense
    products are BLAS calls (``np.dot`` into the buffers of :func:`_workspace`,
    allocated once per call): all arrays must be C-contiguous.  ``euler``: None (every
    knot's products dense), or (dts, lie_rows) of
    :attr:`~geppetto.ocp.ShootingProblem.euler_structure`: the knots with dts[t] > 0
    are symplectic Euler knots of step dts[t] whose products use the block structure
    of the module docstring, lie_rows (int) the rows L; dts empty: all dense (the
    tuple and None are two compiled specializations: callers pass the tuple).
    """
    return backward_range(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, feasible, mu, nus, limited,
                          us, u_lower, u_upper, Vx, Vxx, Qu, Quu, k, K, Quuk, Fu.shape[0], 0,
                          euler)


@kernel
def backward_range(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, feasible, mu, nus, limited, us,
                   u_lower, u_upper, Vx, Vxx, Qu, Quu, k, K, Quuk, t_end, t_begin,
                   euler=None):
    """The recursion of :func:`backward_pass` over the knots t_end - 1 down to t_begin,
    from Vx[t_end], Vxx[t_end] (t_end = N: from the terminal knot, its gap term
    included): reads gaps[t_begin:t_end] (gaps[N] too when t_end = N).  Two calls, (N, b)
    then (b, 0), are one pass, to the bit: the first can run while knots below b are
    still being evaluated (:meth:`~geppetto.ocp.ShootingProblem.calc_diff`'s ``then``)."""
    if euler is None:
        dts, lie_rows = np.zeros(0), np.zeros(0, dtype=np.int64)
    else:
        dts, lie_rows = euler
    return _sweep(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, feasible, mu, nus, limited, us,
                  u_lower, u_upper, Vx, Vxx, Qu, Quu, k, K, Quuk, t_end, t_begin, dts,
                  lie_rows, np.zeros((0, 0, 0)), np.zeros((0, 0)))


@kernel
def _sweep(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, feasible, mu, nus, limited, us, u_lower,
           u_upper, Vx, Vxx, Qu, Quu, k, K, Quuk, t_end, t_begin, dts, lie_rows, Lq, Vf):
    """The knots t_end - 1 .. t_begin of the recursion: the one loop of
    :func:`backward_range` and :func:`backward_range_kept`.  ``limited`` empty: no knot
    takes the box QP; Lq, Vf empty: nothing kept, else Lq[t] gets the Cholesky factor
    of Quu[t] that :func:`_gains` computed (its leading nus[t] block, lower triangle)
    and Vf[t] the gap term Vxx[t] gaps[t] (when not feasible).  The knot's helpers are
    inlined (:func:`~geppetto.dynamics.config.inline_kernel`: the ur5 backward pass 0.84x
    of its time), and every array is borrowed (:func:`~geppetto.dynamics.borrowed.borrowed_all`,
    the workspaces' owners kept alive to the one exit): a view such as Vxx[t + 1] or
    Quu[t], and each array passed to np.dot or the Cholesky kernels, otherwise takes an
    atomic reference count and gives it back, 31 % of the samples of a ur5 backward pass
    (50 knots, perf); borrowed, 0.78x of its time (CPU time, interleaved)."""
    N, ndx, nu = Fu.shape
    workspace = _workspace(ndx, nu)
    euler_workspace = _euler_workspace(ndx, nu, lie_rows.shape[0], dts.shape[0] > 0)
    (Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, nus, limited, us, u_lower, u_upper, Vx, Vxx, Qu,
     Quu, k, K, Quuk, dts, lie_rows, Lq, Vf, ws, blocks) = borrowed_all((
        Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, nus, limited, us, u_lower, u_upper, Vx, Vxx, Qu,
        Quu, k, K, Quuk, dts, lie_rows, Lq, Vf, workspace, euler_workspace))
    keep = Lq.shape[0] > 0
    failed = -1
    L = ws[1][0]
    if t_end == N:
        for i in range(ndx):
            Vx[N, i] = Lx[N, i]
            for j in range(ndx):
                Vxx[N, i, j] = Lxx[N, i, j]
            Vxx[N, i, i] += mu
        if not feasible:
            _add_gap_term(Vx, Vxx, gaps, N, Vf)
    for t in range(t_end - 1, t_begin - 1, -1):
        if dts.shape[0] > 0 and dts[t] > 0.0:
            _q_function_euler(t, dts[t], lie_rows, (Fx, Fu), Vxx, Quu, ws, blocks)
        else:
            _q_function(t, (Fx, Fu), Vxx, Quu, ws)
        _q_terms(t, (Fx, Fu), (Lx, Lu, Lxx, Luu, Lxu), Vx, mu, Qu, Quu, ws)
        boxed = limited.shape[0] > 0 and limited[t]
        if not _gains(t, nus[t], ws, Qu, Quu, boxed, us, u_lower, u_upper, k, K):
            failed = t
            break
        if keep:
            for i in range(nus[t]):
                for j in range(i + 1):
                    Lq[t, i, j] = L[i, j]
        _value_function(t, ws, Qu, Quu, k, K, Quuk, Vx, Vxx, mu)
        if not feasible:
            _add_gap_term(Vx, Vxx, gaps, t, Vf)
        if not _finite_row(Vx, t):
            failed = t
            break
    keep_alive((workspace, euler_workspace))    # the owners of ws and blocks, released here
    return failed


@inline_kernel
def _finite_row(X, t):
    """Whether every entry of X[t] is finite."""
    for i in range(X.shape[1]):
        if not np.isfinite(X[t, i]):
            return False
    return True


@kernel
def _workspace(ndx, nu):
    """Buffers of one backward pass: (FxV, FuV, Qx, Qxx, Qxu, XV, QuF) of the current
    knot, then the gains' (L, free, work, lo, hi, du, Kk): the box QP's and [K | k],
    then :func:`_lower_product`'s (its blocks, flat, and K^T's leading rows).
    FxV and FuV are the row blocks of XV = [Fx^T V; Fu^T V], Qxu the leading rows of
    QuF = [Qxu; Fu^T V Fu]: (Fx^T V) Fu and (Fu^T V) Fu are one product."""
    XV = np.empty((ndx + nu, ndx))
    QuF = np.empty((ndx + nu, nu))
    products = (XV[:ndx], XV[ndx:], np.empty(ndx), np.empty((ndx, ndx)), QuF[:ndx], XV, QuF)
    box = (np.zeros((nu, nu)), np.zeros(nu, dtype=np.bool_), np.zeros((4 + nu, max(nu, 1))),
           np.empty(nu), np.empty(nu), np.empty(nu), np.empty((nu, ndx + 1)))
    lower = (np.empty(ndx * ndx), np.empty((ndx, nu)))
    return products, box, lower


@inline_kernel
def _q_function(t, F, Vxx, Quu, ws):
    """The products Fx^T Vxx' Fx (into ws's Qxx), Fx^T Vxx' Fu (Qxu), Fu^T Vxx' Fu
    (Quu[t]), dense, with Fx^T Vxx' and Fu^T Vxx' into ws; the last two as one product
    [Fx^T Vxx'; Fu^T Vxx'] Fu (each entry the same sum over the ndx rows of Fu: the
    same bits; one BLAS call less, ur5's backward pass 0.92-0.94x of its time)."""
    Fx, Fu = F
    FxV, FuV, Qx, Qxx, Qxu, XV, QuF = ws[0]
    np.dot(Fx[t].T, Vxx[t + 1], FxV)           # Fx^T Vxx'
    np.dot(Fu[t].T, Vxx[t + 1], FuV)           # Fu^T Vxx'
    np.dot(FxV, Fx[t], Qxx)
    if Fu.shape[2] == 1:
        # One control: OpenBLAS sends a product with one column to gemv, whose sum over
        # the rows differs in the last bit between the (ndx + 1) x ndx stack and the
        # 1 x ndx row alone; two calls keep the one-row product's bits (rev30).
        np.dot(FxV, Fu[t], Qxu)
        np.dot(FuV, Fu[t], Quu[t])
    else:
        np.dot(XV, Fu[t], QuF)                 # [Fx^T Vxx' Fu; Fu^T Vxx' Fu] in one call
        _copy_quu(QuF, Quu, t)


@kernel
def _euler_workspace(ndx, nu, n_lie, used):
    """Buffers of :func:`_q_function_euler` (empty when ``used`` is False): [B; R]^T
    and [Bu; Ru]^T stacked ((ndx + nu) x (n + |L|)), C^T Vxx', and [Fx^T Vxx'; Fu^T
    Vxx'] C stacked."""
    m = ndx // 2 + n_lie if used else 0
    return np.empty((ndx + nu, m)), np.empty((m, ndx)), np.empty((ndx + nu, m))


@inline_kernel
def _q_function_euler(t, dt, lie_rows, F, Vxx, Quu, ws, blocks):
    """The products of :func:`_q_function` at a symplectic Euler knot of step dt, by
    the block structure of the module docstring: Fx = E + C [B; R], Fu = C [Bu; Ru].
    Three BLAS calls instead of five: Fx^T V and Fu^T V are one product
    ([B; R | Bu; Ru]^T C^T V, their rows stacked in ws), (Fx^T V) Fu and (Fu^T V) Fu
    another ([Fx^T V C; Fu^T V C] [Bu; Ru]), each entry the same sum (every product's
    inner dimension is n + |L|); a call costs about as much as its arithmetic at these
    sizes (ur5: 12 x 6 x 12 0.15 us, 18 x 6 x 12 0.18 us)."""
    Fx, Fu = F
    FxV, FuV, Qx, Qxx, Qxu, XV, QuF = ws[0]     # XV = [Fx^T V; Fu^T V], QuF = [Qxu; Fu^T V Fu]
    BRT, CV, XVC = blocks
    ndx, nu = Qxu.shape
    n = ndx // 2
    t_next = t + 1
    # [B; R]^T over [Bu; Ru]^T: B, Bu the bottom rows of Fx, Fu; R, Ru their Lie rows' rest
    for r in range(n):
        for c in range(ndx):
            BRT[c, r] = Fx[t, n + r, c]
        for c in range(nu):
            BRT[ndx + c, r] = Fu[t, n + r, c]
    for a in range(lie_rows.shape[0]):
        l = lie_rows[a]
        for c in range(ndx):
            BRT[c, n + a] = Fx[t, l, c] - dt * Fx[t, n + l, c]
        BRT[l, n + a] -= 1.0
        for c in range(nu):
            BRT[ndx + c, n + a] = Fu[t, l, c] - dt * Fu[t, n + l, c]
    # C^T V: rows dt V[q] + V[v], then the Lie rows of V
    for r in range(n):
        for c in range(ndx):
            CV[r, c] = dt * Vxx[t_next, r, c] + Vxx[t_next, n + r, c]
    for a in range(lie_rows.shape[0]):
        for c in range(ndx):
            CV[n + a, c] = Vxx[t_next, lie_rows[a], c]
    if nu == 1:                                # gemv's bits: see _q_function
        BRu = BRT[ndx:].reshape((BRT.shape[1], 1))
        np.dot(BRT[:ndx], CV, FxV)
        np.dot(BRu.T, CV, FuV)
    else:
        np.dot(BRT, CV, XV)                    # Fx^T V = E^T V + [B; R]^T C^T V, Fu^T V
    for r in range(n):
        for c in range(ndx):
            FxV[r, c] += Vxx[t_next, r, c]
    # (Fx^T V) C and (Fu^T V) C: columns dt X[:, q] + X[:, v], then X's Lie columns
    _times_c(XV, dt, lie_rows, XVC)
    # (Fx^T V) Fx = (Fx^T V) E + (Fx^T V) C [B; R], symmetric: its lower triangle only
    last = _last_block_row(ndx)
    _lower_product(XVC[:ndx], BRT, BRT[:ndx].T, last, Qxx, ws[2][0])
    whole = last == 0                          # one call: both triangles, used
    for r in range(ndx):
        for c in range(n if whole else min(n, r + 1)):
            Qxx[r, c] += FxV[r, c]
    if nu == 1:                                # gemv's bits, as in _q_function
        np.dot(XVC[:ndx], BRu, Qxu)
        np.dot(XVC[ndx:], BRu, Quu[t])
    else:
        np.dot(XVC, BRT[ndx:].T, QuF)          # (Fx^T V) Fu, (Fu^T V) Fu: X C [Bu; Ru]
        _copy_quu(QuF, Quu, t)


@inline_kernel
def _copy_quu(QuF, Quu, t):
    """Quu[t] = the rows of Fu^T Vxx' Fu below Qxu in QuF."""
    ndx = QuF.shape[0] - QuF.shape[1]
    for r in range(QuF.shape[1]):
        for c in range(QuF.shape[1]):
            Quu[t, r, c] = QuF[ndx + r, c]


@inline_kernel
def _times_c(X, dt, lie_rows, out):
    """out = X C (see the module docstring): out[:, j] = dt X[:, j] + X[:, n + j] for
    j < n, then the columns X[:, l], l in L."""
    n = X.shape[1] // 2
    for r in range(X.shape[0]):
        for c in range(n):
            out[r, c] = dt * X[r, c] + X[r, n + c]
        for a in range(lie_rows.shape[0]):
            out[r, n + a] = X[r, lie_rows[a]]


@inline_kernel
def _q_terms(t, F, L, Vx, mu, Qu, Quu, ws):
    """Qx, Qxx, Qxu (into ws) and Qu[t], Quu[t] (+ mu I): the cost derivatives and the
    gradient terms added to the products of :func:`_q_function` (Vx[t+1])."""
    Fx, Fu = F
    Lx, Lu, Lxx, Luu, Lxu = L
    FxV, FuV, Qx, Qxx, Qxu = ws[0][:5]
    ndx, nu = Qxu.shape
    # Qx = Lx + Fx^T Vx', Qu = Lu + Fu^T Vx' along the rows of Fx, Fu (contiguous, they
    # vectorize) instead of down their columns: each entry's additions in the same order
    # p = 0, 1, ..., the same bits (with Vx below: the backward pass 0.93-0.94x of its
    # time on the talos squat, 0.96x on the solo12 trot; CPU time, interleaved, load 8)
    for i in range(ndx):
        Qx[i] = Lx[t, i]
    for i in range(nu):
        Qu[t, i] = Lu[t, i]
    for p in range(ndx):
        vp = Vx[t + 1, p]
        for i in range(ndx):
            Qx[i] += Fx[t, p, i] * vp
        for i in range(nu):
            Qu[t, i] += Fu[t, p, i] * vp
    whole = _last_block_row(ndx) == 0          # else only Qxx's lower triangle is read
    for i in range(ndx):
        for j in range(ndx if whole else i + 1):
            Qxx[i, j] += Lxx[t, i, j]
        for j in range(nu):
            Qxu[i, j] += Lxu[t, i, j]
    for i in range(nu):
        for j in range(nu):
            Quu[t, i, j] += Luu[t, i, j]
        Quu[t, i, i] += mu


@inline_kernel
def _gains(t, n, ws, Qu, Quu, boxed, us, u_lower, u_upper, k, K):
    """k[t], K[t] (their first n rows; the padding zero) from the Cholesky factor of
    Quu[t], or with ``boxed`` from the box QP (Crocoddyl's
    SolverBoxFDDP::computeGains): du minimizes 1/2 du^T Quu du + Qu^T du within
    [u_lower - u, u_upper - u], k = -du, K the rows of the free controls, and the
    clamped controls' entries of Qu set to zero (they do not count in the expected
    improvement, hence in the stopping value).  False when Quu (or its free block)
    is not positive definite."""
    Qxu = ws[0][4]
    L, free, work, lo, hi, du, Kk = ws[1]
    ndx, nu = Qxu.shape
    for i in range(n, nu):
        k[t, i] = 0.0
        for j in range(ndx):
            K[t, i, j] = 0.0
    if boxed:
        for i in range(n):
            lo[i] = u_lower[t, i] - us[t, i]
            hi[i] = u_upper[t, i] - us[t, i]
            du[i] = k[t, i]       # Crocoddyl's warm start: the previous k_t as it stands
        n_free = box_qp(Quu[t, :n, :n], Qu[t, :n], lo[:n], hi[:n], du[:n], free[:n], L, work)
        if n_free < 0:
            return False
        for i in range(n):
            k[t, i] = -du[i]
            if not free[i]:
                Qu[t, i] = 0.0
        _box_gains(Qxu, free, n, n_free, L, K, t)
        return True
    if not cholesky_factor(Quu[t], n, L, 0.0):
        return False
    # [K | k] solved at once, k as the last column: its entries get the same operations
    # in the same order as in a solve of its own (cholesky_solve's one-column form is
    # its row form), and one sweep replaces two chains of dependent divisions
    for i in range(n):
        for j in range(ndx):
            Kk[i, j] = Qxu[j, i]
        Kk[i, ndx] = Qu[t, i]
    cholesky_solve(L, n, Kk)
    for i in range(n):
        for j in range(ndx):
            K[t, i, j] = Kk[i, j]
        k[t, i] = Kk[i, ndx]
    return True


@inline_kernel
def _value_function(t, ws, Qu, Quu, k, K, Quuk, Vx, Vxx, mu):
    """Quuk[t] = Quu k; Vx[t] = Qx - K^T Qu, Vxx[t] = sym(Qxx - Qxu K) + mu I.  Up to
    36 rows (:func:`_last_block_row` 0: one BLAS call) the whole products and the mean
    of the two triangles, as before; above, the lower triangles of Qxx and Qxu K (both
    symmetric in exact arithmetic; Qxu K = Qxu Quu^-1 Qxu^T) mirrored, Qxu K by the
    lower triangle's blocks (:func:`_lower_product`): the last bits differ from the
    mean's.  Lxx is taken as symmetric (every cost builds it so): above 36 rows its
    strict upper triangle is not read (rev34: an asymmetric Lxx would give sym(Lxx)
    below 36 rows and its lower triangle mirrored above)."""
    Qx, Qxx, Qxu = ws[0][2:5]
    scratch, KT = ws[2]
    ndx, nu = Qxu.shape
    for i in range(nu):
        s = 0.0
        for j in range(nu):
            s += Quu[t, i, j] * k[t, j]
        Quuk[t, i] = s
    last = _last_block_row(ndx)
    for j in range(last):                      # K^T's rows of the blocks above the last
        for i in range(nu):
            KT[j, i] = K[t, i, j]
    _lower_product(Qxu, KT, K[t], last, Vxx[t], scratch)    # Qxu K, then Qxx - Qxu K
    for i in range(ndx):                       # along K's rows, each entry in order p
        Vx[t, i] = Qx[i]
    for p in range(nu):
        qp = Qu[t, p]
        for i in range(ndx):
            Vx[t, i] -= K[t, p, i] * qp
    for i in range(ndx):
        Vxx[t, i, i] = Qxx[i, i] - Vxx[t, i, i] + mu
        for j in range(i):
            if last == 0:                      # both triangles: their mean, as before
                s = 0.5 * ((Qxx[i, j] - Vxx[t, i, j]) + (Qxx[j, i] - Vxx[t, j, i]))
            else:
                s = Qxx[i, j] - Vxx[t, i, j]
            Vxx[t, i, j] = s
            Vxx[t, j, i] = s


@inline_kernel
def _last_block_row(ndx):
    """The first row of :func:`_lower_product`'s last block (0: one call) for ndx rows."""
    r = 0
    while r + SYMMETRIC_BLOCK_ROWS < ndx - SYMMETRIC_BLOCK_ROWS // 2:
        r += SYMMETRIC_BLOCK_ROWS
    return r


@inline_kernel
def _lower_product(A, B, BT, last, Q, scratch):
    """The lower triangle (with the diagonal) of Q = A B^T, a product symmetric in exact
    arithmetic, BT = B^T: row blocks [r0, r0 + b) of b = SYMMETRIC_BLOCK_ROWS rows
    against B[:r0 + b] only (the columns up to the block's diagonal end) into scratch,
    copied, then the rows from ``last`` against the whole of B straight into Q.  The
    blocks above the diagonal are skipped: the squat's 76 rows as 24 + 24 + 28, 0.67 of
    the flops.  Q's upper triangle left as it was, except in the last block's rows."""
    r0 = 0
    while r0 < last:
        r1 = r0 + SYMMETRIC_BLOCK_ROWS
        X = scratch[:SYMMETRIC_BLOCK_ROWS * r1].reshape((SYMMETRIC_BLOCK_ROWS, r1))
        np.dot(A[r0:r1], B[:r1].T, X)
        for i in range(SYMMETRIC_BLOCK_ROWS):
            for j in range(r0 + i + 1):
                Q[r0 + i, j] = X[i, j]
        r0 = r1
    np.dot(A[last:], BT, Q[last:])


@inline_kernel
def _add_gap_term(Vx, Vxx, gaps, t, Vf):
    """Vx[t] += Vxx[t] gaps[t] (FDDP: the gradient at the end of the defect), the
    product kept in Vf[t] unless Vf is empty."""
    ndx = Vx.shape[1]
    keep = Vf.shape[0] > 0
    for i in range(ndx):
        s = 0.0
        for j in range(ndx):
            s += Vxx[t, i, j] * gaps[t, j]
        if keep:
            Vf[t, i] = s
        Vx[t, i] += s


@kernel
def _box_gains(Qxu, free, nu, n_free, L, K, t):
    """K rows of the free controls among the first nu: (Quu_ff)^-1 Qxu_f^T; clamped
    rows zero.  Qxu_f^T is gathered into the leading n_free rows of K[t] and solved there
    for all ndx columns at once (the row form of :func:`cholesky_solve`, contiguous;
    each entry the same operations in the same order as a solve per column, so the
    same bits; the talos squat's BoxFDDP backward pass at the solution, feasible, every
    knot boxed: 4.99 -> 3.15 ms of CPU, load 10.5), then each row moves down to its
    control's index (the last first: a free control's row index is at least its rank
    among the free ones)."""
    ndx = Qxu.shape[0]
    Kt = K[t]
    a = 0
    for i in range(nu):
        if free[i]:
            for j in range(ndx):
                Kt[a, j] = Qxu[j, i]
            a += 1
    if n_free > 0:
        cholesky_solve(L, n_free, Kt)
    a = n_free
    for i in range(nu - 1, -1, -1):
        if free[i]:
            a -= 1
            if a != i:
                for j in range(ndx):
                    Kt[i, j] = Kt[a, j]
        else:
            for j in range(ndx):
                Kt[i, j] = 0.0


@kernel
def backward_pass_expected(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, feasible, mu, nus, limited,
                           us, u_lower, u_upper, Vx, Vxx, Qu, Quu, k, K, Quuk, euler, Vf,
                           with_gaps):
    """:func:`backward_pass` (``euler`` the tuple (dts, lie_rows)) and then, when it
    succeeds, :func:`expected_terms` in one call: returns (failed, dg, dq), dg = dq = 0
    when failed >= 0.  ``Vf`` (N+1, ndx): a workspace that gets the gap products
    Vxx_t f_t the recursion computes anyway (when not feasible, :func:`_add_gap_term`),
    which the gap term dq += f_t . Vxx_t f_t then reads instead of computing them
    again: the same sums in the same order, the same bits as the two calls (one
    compiled call and one product over the knots less per FDDP iteration)."""
    dts, lie_rows = euler
    failed = _sweep(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, feasible, mu, nus, limited, us,
                    u_lower, u_upper, Vx, Vxx, Qu, Quu, k, K, Quuk, Fu.shape[0], 0, dts,
                    lie_rows, np.zeros((0, 0, 0)), Vf)
    if failed >= 0:
        return failed, 0.0, 0.0
    if feasible:        # the recursion wrote no Vf: expected_terms' own products
        dg, dq = expected_terms(Qu, k, Quuk, Vx, Vxx, gaps, with_gaps)
    else:
        dg, dq = _expected_sums(Qu, k, Quuk, Vx, Vf, gaps, with_gaps)
    return failed, dg, dq


@inline_kernel
def _control_terms(Qu, k, Quuk):
    """(sum_t Qu_t . k_t, -sum_t k_t . Quu_t k_t): the gap-free part of (dg, dq)."""
    dg, dq = 0.0, 0.0
    N, nu = k.shape
    for t in range(N):
        for i in range(nu):
            dg += Qu[t, i] * k[t, i]
            dq -= k[t, i] * Quuk[t, i]
    return dg, dq


@inline_kernel
def _expected_sums(Qu, k, Quuk, Vx, Vf, gaps, with_gaps):
    """:func:`expected_terms` with the products Vxx_t f_t read from Vf."""
    dg, dq = _control_terms(Qu, k, Quuk)
    N = k.shape[0]
    if with_gaps:
        for t in range(N + 1):
            for i in range(Vx.shape[1]):
                dg -= Vx[t, i] * gaps[t, i]
                dq += gaps[t, i] * Vf[t, i]
    return dg, dq


@kernel
def expected_terms(Qu, k, Quuk, Vx, Vxx, gaps, with_gaps):
    """(dg, dq) of a backward pass: dg = sum_t Qu_t . k_t, dq = -sum_t k_t . Quu_t k_t,
    and with the gaps f (FDDP while infeasible, Crocoddyl's
    updateExpectedImprovement) dg -= sum_t Vx_t . f_t, dq += sum_t f_t . Vxx_t f_t."""
    dg, dq = _control_terms(Qu, k, Quuk)
    N = k.shape[0]
    if with_gaps:
        ndx = Vx.shape[1]
        for t in range(N + 1):
            for i in range(ndx):
                dg -= Vx[t, i] * gaps[t, i]
                s = 0.0
                for j in range(ndx):
                    s += Vxx[t, i, j] * gaps[t, j]
                dq += gaps[t, i] * s
    return dg, dq


@kernel
def gap_decrease(gaps, Vxx, dxs):
    """-sum_t f_t . Vxx_t dx_t over the N+1 knots: FDDP's change of the expected
    improvement of a trial whose states moved by dx (Crocoddyl's dv)."""
    dv = 0.0
    T, ndx = gaps.shape
    for t in range(T):
        for i in range(ndx):
            s = 0.0
            for j in range(ndx):
                s += Vxx[t, i, j] * dxs[t, j]
            dv -= gaps[t, i] * s
    return dv


@kernel
def max_abs(gaps):
    """max |gaps| over a (T, ndx) array (the gaps' norm of the solvers' records)."""
    norm = 0.0
    for t in range(gaps.shape[0]):
        for i in range(gaps.shape[1]):
            norm = max(norm, abs(gaps[t, i]))
    return norm


# -- a factorization kept for later sweeps of new linear terms (CSQP) ----------------------
@kernel
def backward_range_kept(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, mu, nus, Vx, Vxx, Qu, Quu, k, K,
                        Quuk, Lq, Vf, t_end, euler):
    """:func:`backward_range` over the knots t_end - 1 .. 0 with the gap term (feasible
    False) and no box, which also keeps what a sweep of other linear terms on the same
    factorization reads (CSQP's ``_linear_sweep``): Lq[t], the Cholesky factor of
    Quu[t] (its leading nus[t] block, lower triangle) that :func:`_gains` computed, and
    Vf[t] = Vxx[t] f[t], the gap term :func:`_add_gap_term` added (t < t_end, and the
    terminal knot when t_end = N).  The loop is :func:`backward_range`'s (:func:`_sweep`,
    the same bits), where refactorizing Quu and recomputing Vxx f afterwards cost 25 us
    per factorization on panda (100 knots).  Returns -1 or
    the knot where Quu is not positive definite (its value function not finite)."""
    dts, lie_rows = euler
    return _sweep(Fx, Fu, Lx, Lu, Lxx, Luu, Lxu, gaps, False, mu, nus,
                  np.zeros(0, dtype=np.bool_), Qu, Qu, Qu, Vx, Vxx, Qu, Quu, k, K, Quuk, t_end,
                  0, dts, lie_rows, Lq, Vf)
