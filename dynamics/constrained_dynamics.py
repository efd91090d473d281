"""Forward dynamics under rigid constraints, impulses at contact, and their derivatives.

Constraints (contacts, loop closures) are those of :mod:`.constraints`, with
Pinocchio 4.1's conventions.  The forward dynamics solve the KKT system
(Pinocchio's ``constraintDynamics``)

    [[M, Jc^T], [Jc, 0]] [ddq; -lambda] = [tau - b; -gamma]

Factorization.  M = L^T L with L lower triangular and the branch-induced
sparsity of M: L[k, i] != 0 only for i = k or an ancestor dof of k
(Featherstone 2008, Sec. 6.5, the LTL factorization; ``m.dof_parent`` is his
lambda).  With Y = L^-T Jc^T (nv, nc), the Delassus matrix G = Jc M^-1 Jc^T =
Y^T Y is factorized densely (nc is small).  The proximal iterations of
Pinocchio (``ProximalSettings``: mu, max_iterations, accuracy) solve

    (G + mu I) lambda_k = -gamma - Jc a0 + mu lambda_(k-1),   a0 = M^-1 (tau - b),

from lambda_0 = 0, and ddq = a0 + M^-1 Jc^T lambda.  mu = 0 (the default, one
iteration) is the exact KKT solve; mu > 0 keeps the system regular for
redundant constraints (four feet and a loop, two 6D feet on one plank), the
iterations converging to the constrained solution.

Derivatives (Kudruss, Manns & Kirches 2019, Prop. 3: dx = solve(K, db - dK x),
reusing the factorization).  The solution zeroes the residuals

    R1 = ID(q, v, ddq) - Jc(q)^T lambda - tau,     R2 = c(q, v, ddq) = Jc ddq + gamma,

so K [dddq; dlambda] = -[dR1; dR2] with K = [[M, -Jc^T], [Jc, 0]], that is

    dlambda = G^-1 (Jc M^-1 dR1 - dR2),      dddq = -M^-1 (dR1 - Jc^T dlambda).

dR1/dq and dR1/dv are the RNEA derivatives at (q, v, ddq) with lambda applied
as external forces (:mod:`.rnea_derivatives`, plus the part of the forces that
is not attached to a body, :mod:`.constraint_derivatives`); dR2 are the
derivatives of the constraint acceleration (frame acceleration derivatives);
dR1/dtau = -I.  With mu > 0, lambda's derivatives go through the same number
of proximal iterations as the solve (as Pinocchio's
``computeConstraintDynamicsDerivatives``).  They differentiate the KKT
conditions at the returned (ddq, lambda), so they assume the constrained
system is consistent (gamma in the range of Jc).  Redundant constraints at a
state that violates them (a random configuration of a redundant loop with
Baumgarte gains) make it inconsistent: ddq still converges (least squares)
but lambda grows by a constant step per iteration, and these derivatives, as
Pinocchio's, differ from finite differences of the truncated iterations
(8% relative on a redundant 6D closure of ``random_tree(12, seed=3)``, frames
6 and 9, Kp = 3, Kd = 2, with 4 as with 1000 iterations); the CasADi twin,
which differentiates the iterations themselves, follows the finite
differences there (tests/test_symbolic_constrained.py, the four-bar 6D).

Impulses (Pinocchio's ``impulseDynamics``): at a touchdown the velocity jumps
from v- to v+ with M (v+ - v-) = Jc^T Lambda and Jc v+ = -e Jc v- (e the
restitution coefficient, 0 for a plastic impact): the same KKT system with
tau - b = 0 and gamma = (1 + e) Jc v-.  Its derivatives use R1 = M(q) (v+ - v-)
- Jc^T Lambda (RNEA derivatives without gravity and velocity, at a = v+ - v-)
and R2 = Jc(q) (v+ + e v-); dR1/dv- = -M, dR2/dv- = e Jc.  For a loop closure,
Jc v- is the relative velocity of the two frames (Pinocchio takes frame 1's
velocity only: both agree for contacts).  Baumgarte gains play no part in
impulses.
"""
import numpy as np
from numba import prange

from .borrowed import borrowed_all, keep_alive
from .config import inline_kernel, kernel, parallel_kernel
from .constraint_derivatives import (constraint_acceleration_derivatives_state,
                                     constraint_force_derivatives_state)
from .constraints import (as_constraint_set, constraint_acceleration_state,
                          constraint_forces_state, constraint_jacobian_state,
                          constraint_placements_state)
from .crba import _crba_composite_pass, _crba_forward_pass, world_inertias
from .kinematics import world_motions
from .linalg import cholesky_factor, cholesky_solve
from .rnea_derivatives import (_rnea_derivatives_backward_pass, _rnea_derivatives_forward_pass,
                               rnea_derivatives_workspace)
from .spatial import cross, rigid_inertia_values_times
from .validation import (as_configurations, as_stack, call_kernel, check_data, output_arrays,
                         result)

# Relative size of a Cholesky pivot of G below which G is reported singular
# (the tolerance of linalg.cholesky_factor).
SINGULAR_PIVOT = 1e-13


# --- Factorizations ----------------------------------------------------------

@inline_kernel
def ltl_factor(m, M, L):
    """L with M = L^T L, L lower triangular with M's sparsity (Featherstone 2008,
    Table 6.3).  M (nv, nv) symmetric positive definite.  Only L's nonzero pattern
    is written (L[k, k] and L[k, i] for the ancestor dofs i of k), the entries that
    the factorization and the ltl_* solves read; the others are left as they were."""
    lam = m.dof_parent
    nv = m.nv
    for k in range(nv):
        L[k, k] = M[k, k]
        i = lam[k]
        while i >= 0:
            L[k, i] = M[k, i]
            i = lam[i]
    for k in range(nv - 1, -1, -1):
        L[k, k] = np.sqrt(L[k, k])
        i = lam[k]
        while i >= 0:
            L[k, i] /= L[k, k]
            i = lam[i]
        i = lam[k]
        while i >= 0:
            j = i
            while j >= 0:
                L[i, j] -= L[k, i] * L[k, j]
                j = lam[j]
            i = lam[i]


@inline_kernel
def ltl_solve_transpose(m, L, X):
    """X <- L^-T X, column by column (X (nv, n)).  A row of X that is zero when its
    turn comes (the dofs that support no constraint, for X = Jc^T) changes no other."""
    lam = m.dof_parent
    n = X.shape[1]
    for k in range(m.nv - 1, -1, -1):
        nonzero = False
        for c in range(n):
            if X[k, c] != 0.0:
                nonzero = True
                break
        if not nonzero:
            continue
        inv = 1.0 / L[k, k]
        for c in range(n):
            X[k, c] *= inv
        i = lam[k]
        while i >= 0:
            lki = L[k, i]
            for c in range(n):
                X[i, c] -= lki * X[k, c]
            i = lam[i]


@inline_kernel
def ltl_solve(m, L, X):
    """X <- L^-1 X, column by column (X (nv, n))."""
    lam = m.dof_parent
    n = X.shape[1]
    for k in range(m.nv):
        i = lam[k]
        while i >= 0:
            lki = L[k, i]
            for c in range(n):
                X[k, c] -= lki * X[i, c]
            i = lam[i]
        inv = 1.0 / L[k, k]
        for c in range(n):
            X[k, c] *= inv


# --- The KKT solve and its derivatives ---------------------------------------

@inline_kernel
def _kkt_solve(m, L, Jc, gamma, z, mu, max_iter, accuracy, Y, G, lam, lam_prev, ddq):
    """lambda and ddq from L (M = L^T L), Jc, gamma and z = tau - b (overwritten
    by L^-T z); fills Y = L^-T Jc^T and the factor of G + mu I.  Returns
    (iterations, G regular)."""
    nv, nc = Jc.shape[1], Jc.shape[0]
    for a in range(nv):
        for b in range(nc):
            Y[a, b] = Jc[b, a]
    ltl_solve_transpose(m, L, Y)
    zc = z.reshape((nv, 1))
    ltl_solve_transpose(m, L, zc)
    # G = Y^T Y by rows of Y, skipping the zeros (dofs that support no constrained
    # body); each entry sums over t in increasing order.  Whole rows of G (the upper
    # triangle too, which the factorization does not read): a loop over contiguous
    # b that vectorizes, where the lower triangle's rows of varying length did not
    G[:, :] = 0.0
    for t in range(nv):
        for a in range(nc):
            y = Y[t, a]
            if y != 0.0:
                for b in range(nc):
                    G[a, b] += y * Y[t, b]
    for a in range(nc):
        G[a, a] += mu
    regular = cholesky_factor(G, nc, G, SINGULAR_PIVOT)
    lam_prev[:] = 0.0
    lc = lam.reshape((nc, 1))
    iterations = 0
    for it in range(max_iter):
        iterations = it + 1
        # lam = -gamma + mu lam_prev - Y^T z by rows of Y (contiguous, vectorized),
        # each entry summed over t in increasing order
        for a in range(nc):
            lam[a] = -gamma[a] + mu * lam_prev[a]
        for t in range(nv):
            zt = z[t]
            for a in range(nc):
                lam[a] -= Y[t, a] * zt
        cholesky_solve(G, nc, lc)
        delta = 0.0
        for a in range(nc):
            delta = max(delta, abs(lam[a] - lam_prev[a]))
            lam_prev[a] = lam[a]
        if mu * delta <= accuracy or delta <= accuracy:
            break
    for t in range(nv):
        s = z[t]
        for a in range(nc):
            s += Y[t, a] * lam[a]
        ddq[t] = s
    ltl_solve(m, L, ddq.reshape((nv, 1)))
    return iterations, regular


@kernel
def _kkt_derivatives_of(m, L, Y, G, mu, iterations, Z, dR2, dddq, dlam, X):
    """dlam = G^-1 (Jc M^-1 dR1 - dR2) through the proximal iterations, dddq =
    -M^-1 (dR1 - Jc^T dlam), from Z = L^-T dR1 (nv, n), which is overwritten; dR2
    (nc, n), X (nc, n) scratch.

    The products with Y run along rows (the column index c innermost, contiguous),
    so that they vectorize; each entry still sums over t (or a) in increasing order,
    as a dot product per entry would.  Y = L^-T Jc^T is zero on the rows of the dofs
    that support no constrained body (talos' arms and the other leg for a sole): the
    products skip them (only the sign of a zero can differ)."""
    nv, nc = Y.shape
    n = Z.shape[1]
    for a in range(nc):
        for c in range(n):
            X[a, c] = -dR2[a, c]
        for t in range(nv):
            y = Y[t, a]
            if y != 0.0:  # Y's row t is zero unless dof t supports a constrained body
                for c in range(n):
                    X[a, c] += y * Z[t, c]
        for c in range(n):
            dlam[a, c] = X[a, c]
    cholesky_solve(G, nc, dlam)
    for _ in range(1, iterations):
        for a in range(nc):
            for c in range(n):
                dlam[a, c] = X[a, c] + mu * dlam[a, c]
        cholesky_solve(G, nc, dlam)
    for t in range(nv):
        for c in range(n):
            dddq[t, c] = Z[t, c]
        for a in range(nc):
            y = Y[t, a]
            if y != 0.0:
                for c in range(n):
                    dddq[t, c] -= y * dlam[a, c]
        for c in range(n):
            dddq[t, c] = -dddq[t, c]
    ltl_solve(m, L, dddq)


@inline_kernel
def _side_by_side(left, right, rows, n, out):
    """out[r] = [left[r, :n], right[r, :n], 0, ...] for the first ``rows`` rows: the q and
    v blocks of a derivative side by side, the rest of each row (up to out's width) zero."""
    for r in range(rows):
        for c in range(n):
            out[r, c] = left[r, c]
            out[r, n + c] = right[r, c]
        for c in range(2 * n, out.shape[1]):
            out[r, c] = 0.0


@kernel
def _kkt_derivatives_joint(m, L, Y, G, mu, iterations, dtau_dq, dtau_dv, dc_dq, dc_dv, joint):
    """The three derivative pairs (q, v, tau) of one state in one pass of
    :func:`_kkt_derivatives_of` over the 2 nv + n columns [dR1/dq, dR1/dv, -E] and
    [dR2/dq, dR2/dv, 0], with E (nv, n) the columns ``columns`` of the identity: all
    of them for dtau (n = nv), or the actuated dofs' when the actuation B selects them
    (then the third block is d/du = d/dtau B itself, no product with B).  Rows this
    long run on full SIMD vectors (two 18-column passes and a triangular one on solo12
    were 12.0 of its 40 us).  ``joint`` = (Z (nv, W), C, X, dlam (nc, W), columns), W >=
    2 nv + n: the columns past it are zero (:func:`derivatives_workspace` rounds W up
    to whole vector iterations).  Leaves [ddq_dq, ddq_dv, ddq_dE] in Z and [dlam_dq,
    dlam_dv, dlam_dE] in dlam (:func:`_joint_outputs`).  Each entry is the arithmetic
    of a pass on its own columns, so the same bits whatever the other columns; the -E
    block's solve L^-T (-E) runs on its known zeros too (they stay zero)."""
    Z, C, X, dlam, columns = joint
    nv = m.nv
    _side_by_side(dtau_dq, dtau_dv, nv, nv, Z)
    for c in range(columns.shape[0]):
        Z[columns[c], 2 * nv + c] = -1.0
    _side_by_side(dc_dq, dc_dv, Y.shape[1], nv, C)
    ltl_solve_transpose(m, L, Z)
    _kkt_derivatives_of(m, L, Y, G, mu, iterations, Z, C, Z, dlam, X)


@inline_kernel
def _joint_outputs(nv, joint, ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv, dlam_dtau):
    """The six derivatives that :func:`_kkt_derivatives_joint` left in ``joint``."""
    Z, dlam, n = joint[0], joint[3], joint[4].shape[0]
    for t in range(nv):
        for c in range(nv):
            ddq_dq[t, c] = Z[t, c]
            ddq_dv[t, c] = Z[t, nv + c]
        for c in range(n):
            ddq_dtau[t, c] = Z[t, 2 * nv + c]
    for a in range(dlam.shape[0]):
        for c in range(nv):
            dlam_dq[a, c] = dlam[a, c]
            dlam_dv[a, c] = dlam[a, nv + c]
        for c in range(n):
            dlam_dtau[a, c] = dlam[a, 2 * nv + c]


# --- One state ----------------------------------------------------------------

@inline_kernel
def bias_forces(m, J, Yc, ov, oa, F, b, w6):
    """b = C(q, v) v + g(q) from the world motions at a = 0 (ov, oa without gravity):
    F_i = oY_i (oa_i - g) + ov_i x* (oY_i ov_i) summed over subtrees, b_c = J_c . F.
    The bodies' world inertias oY_i by their ten parameters Yc (njoints, 10) of
    :func:`.crba._crba_forward_pass` (spatial.rigid_inertia_values_times)."""
    parents, idx_v, nvs, gravity = m.parents, m.idx_v, m.nvs, m.gravity
    for i in range(1, m.njoints):
        v0, v1, v2, v3, v4, v5 = ov[i, 0], ov[i, 1], ov[i, 2], ov[i, 3], ov[i, 4], ov[i, 5]
        mass, c0, c1, c2, a00 = Yc[i, 0], Yc[i, 1], Yc[i, 2], Yc[i, 3], Yc[i, 4]
        a01, a02, a11, a12, a22 = Yc[i, 5], Yc[i, 6], Yc[i, 7], Yc[i, 8], Yc[i, 9]
        g0, g1, g2, g3, g4, g5 = rigid_inertia_values_times(
            mass, c0, c1, c2, a00, a01, a02, a11, a12, a22,
            oa[i, 0] - gravity[0], oa[i, 1] - gravity[1], oa[i, 2] - gravity[2],
            oa[i, 3] - gravity[3], oa[i, 4] - gravity[4], oa[i, 5] - gravity[5])
        h0, h1, h2, h3, h4, h5 = rigid_inertia_values_times(
            mass, c0, c1, c2, a00, a01, a02, a11, a12, a22, v0, v1, v2, v3, v4, v5)
        x0, x1, x2 = cross(v3, v4, v5, h0, h1, h2)
        y0, y1, y2 = cross(v3, v4, v5, h3, h4, h5)
        z0, z1, z2 = cross(v0, v1, v2, h0, h1, h2)
        F[i, 0], F[i, 1], F[i, 2] = g0 + x0, g1 + x1, g2 + x2
        F[i, 3], F[i, 4], F[i, 5] = g3 + (y0 + z0), g4 + (y1 + z1), g5 + (y2 + z2)
    for i in range(m.njoints - 1, 0, -1):
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            s = 0.0
            for r in range(6):
                s += J[r, c] * F[i, r]
            b[c] = s
        par = parents[i]
        if par > 0:
            for r in range(6):
                F[par, r] += F[i, r]


@kernel
def constrained_workspace(m, ca):
    """Scratch of one state: (kinematics, constraints, KKT) tuples; the kinematics' last
    entry holds the ten parameters of the world (then composite) inertias (njoints, 10)."""
    nv, nc, n = m.nv, ca.nrows, ca.n
    kin = (np.empty((1, 3, 3)), np.empty((1, 3)), np.zeros(nv), np.empty((m.njoints, 6)),
           np.empty((m.njoints, 6)), np.empty((m.njoints, 6)), np.empty((3, 6)), np.empty(nv),
           np.empty((m.njoints, 10)))
    con = (np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 3, 3)), np.empty((n, 3)),
           np.zeros((20, 6)), np.zeros(6), np.empty((1, 3, 3)), np.empty((1, 3)),
           np.empty((2, 3)), np.zeros((6, 6)), np.zeros((9, 3, 3)))
    kkt = (np.empty((nv, nv)), np.empty((nc, nv)), np.empty(nc), np.empty((nv, nc)),
           np.empty((nc, nc)), np.empty(nc))
    return kin, con, kkt


@kernel
def derivatives_workspace(m, ca, columns):
    """Scratch of the derivatives of one state: f_ext, dR1 (dtau_dq, dtau_dv), dR2
    (dc_dq, dc_dv), Z, X, a velocity, tau, the RNEA derivatives' scratch, and the joint
    KKT pass' Z (nv, W), C, X, dlam (nc, W) and ``columns`` (:func:`_kkt_derivatives_joint`:
    ``np.arange(nv)`` for the derivatives in tau), W = 2 nv + len(columns) rounded up."""
    nv, nc = m.nv, ca.nrows
    width = (2 * nv + columns.shape[0] + 15) // 16 * 16   # whole vector iterations
    return (np.empty((m.njoints, 6)), np.empty((nv, nv)), np.empty((nv, nv)), np.empty((nc, nv)),
            np.empty((nc, nv)), np.empty((nv, nv)), np.empty((nc, nv)), np.empty(nv),
            np.empty(nv), rnea_derivatives_workspace(m),
            (np.zeros((nv, width)), np.zeros((nc, width)), np.empty((nc, width)),
             np.empty((nc, width)), columns))


@kernel
def _constraint_dynamics_state(m, ca, q, v, tau, mu, max_iter, accuracy, liR, lip, oR, op, J,
                               oY, M, ddq, lam, ws):
    """ddq and lambda of one state; returns (iterations, G regular).  Fills liMi, oMi,
    J and M; oY (njoints, 6, 6) is not written (the CRBA keeps the inertias' ten
    parameters in the workspace; the derivatives fill oY with the bodies' world
    inertias)."""
    kin, con, kkt = ws
    XR, Xp, zeros, ov, oa, F, w6, z, Yc = kin
    cR1, cp1, cR2, cp2, w, xi, RM, pM, t3, Jlog, S = con
    L, Jc, gamma, Y, G, lam_prev = kkt
    _crba_forward_pass(m, q, XR, Xp, liR, lip, oR, op, J, Yc)
    world_motions(m, v, zeros, 2, False, J, ov, oa, w6)
    bias_forces(m, J, Yc, ov, oa, F, z, w6)
    _crba_composite_pass(m, oR, op, J, Yc, M)
    for c in range(m.nv):
        z[c] = tau[c] - z[c]
    constraint_placements_state(ca, oR, op, cR1, cp1, cR2, cp2)
    constraint_jacobian_state(m, ca, J, cR1, cp1, cp2, Jc)
    constraint_acceleration_state(ca, ov, oa, cR1, cp1, cR2, cp2, gamma, w, xi, RM, pM, t3)
    ltl_factor(m, M, L)
    return _kkt_solve(m, L, Jc, gamma, z, mu, max_iter, accuracy, Y, G, lam, lam_prev, ddq)


# The same function inlined into the loop over a stack: a compiled call per state took
# and released a reference to each of its ~70 arrays (atomic operations), on top of the
# call itself.
_constraint_dynamics_state_inline = inline_kernel(_constraint_dynamics_state.py_func)


@kernel
def _constraint_dynamics(m, ca, q, v, tau, mu, max_iter, accuracy, liR, lip, oR, op, J, oY, M,
                         ddq, lam, iterations):
    """The stack, state by state.  Every array is :func:`.borrowed.borrowed_all` (the
    arguments live for the whole call, the workspace until :func:`.borrowed.keep_alive`):
    the inlined solve's compiled calls took and released a reference to every array of
    the model and constraint tuples and to each per-state view, an atomic increment and
    decrement each, per state; borrowed they are null tests (the same bits)."""
    workspace = constrained_workspace(m, ca)
    (m, ca, q, v, tau, liR, lip, oR, op, J, oY, M, ddq, lam, iterations, ws) = borrowed_all(
        (m, ca, q, v, tau, liR, lip, oR, op, J, oY, M, ddq, lam, iterations, workspace))
    regular = True
    for k in range(q.shape[0]):
        iterations[k], ok = _constraint_dynamics_state_inline(
            m, ca, q[k], v[k], tau[k], mu, max_iter, accuracy, liR[k], lip[k], oR[k], op[k],
            J[k], oY[k], M[k], ddq[k], lam[k], ws)
        regular = regular and ok
    keep_alive(workspace)
    return regular


@inline_kernel
def _force_residual_derivatives(m, ca, v, a, lam, oR, op, J, oY, M, ws, dws):
    """dR1/dq, dR1/dv into dws' dtau_dq, dtau_dv: RNEA derivatives at (q, v, a) with
    lambda applied as external forces, plus the forces' non-attached part.  Needs the
    constraint frames of a solve of the same state in ws; overwrites the motions in ws.
    Inlined, as the next one: a compiled call that takes the workspace tuples (45
    arrays, each passed as its fields) costs about 0.5 us."""
    kin, con, _ = ws
    ov, oa, F = kin[3], kin[4], kin[5]
    cR1, cp1, cp2, w = con[0], con[1], con[3], con[4]
    f_ext, dtau_dq, dtau_dv, tau_id, rws = dws[0], dws[1], dws[2], dws[8], dws[9]
    _, _, h, Bcrb, u_cols, alpha_cols, gamma_cols, rw6 = rws
    constraint_forces_state(ca, oR, op, cR1, cp1, cp2, lam, f_ext, w)
    world_inertias(m, oR, op, oY)
    _rnea_derivatives_forward_pass(m, v, a, f_ext, oR, op, J, oY, ov, oa, h, F, Bcrb, u_cols,
                                   alpha_cols, gamma_cols, rw6)
    dtau_dq[:, :] = 0.0
    dtau_dv[:, :] = 0.0
    # M is the solve's (CRBA): the pass does not form it again
    _rnea_derivatives_backward_pass(m, a, J, oY, Bcrb, F, u_cols, alpha_cols, gamma_cols, tau_id,
                                    dtau_dq, dtau_dv, M, bool(False))
    constraint_force_derivatives_state(m, ca, J, cR1, cp1, cp2, lam, dtau_dq, w)


@inline_kernel
def _constraint_residual_derivatives(m, ca, J, ws, dws):
    """dR2/dq, dR2/dv into dws' dc_dq, dc_dv: the derivatives of c(q, v, a), from the
    world motions ov, oa (without gravity) at (v, a) in ws."""
    kin, con, _ = ws
    ov, oa = kin[3], kin[4]
    cR1, cp1, cR2, cp2, w, xi, RM, pM, t3, Jlog, S = con
    constraint_acceleration_derivatives_state(m, ca, J, ov, oa, cR1, cp1, cR2, cp2, dws[3],
                                              dws[4], w, xi, RM, pM, t3, Jlog, S)


@kernel
def _remove_gravity_term(m, oa):
    """oa_i + g: the world accelerations of RNEA (oa_0 = -g, carried by every oa_i)
    as those of the motion alone, without a second pass of world_motions."""
    gravity = m.gravity
    for i in range(m.njoints):
        for r in range(6):
            oa[i, r] += gravity[r]


@kernel
def _constraint_dynamics_derivatives_state(m, ca, q, v, tau, mu, max_iter, accuracy, liR, lip,
                                           oR, op, J, oY, M, ddq, lam, ddq_dq, ddq_dv, ddq_dtau,
                                           dlam_dq, dlam_dv, dlam_dtau, ws, dws):
    """The solve and the six derivatives of one state; returns (iterations, G regular)."""
    n_it, regular = _constraint_dynamics_state(m, ca, q, v, tau, mu, max_iter, accuracy, liR,
                                               lip, oR, op, J, oY, M, ddq, lam, ws)
    constraint_dynamics_derivatives_solved(m, ca, v, mu, n_it, oR, op, J, oY, M, ddq, lam,
                                           ws[2], ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv,
                                           dlam_dtau, ws, dws)
    return n_it, regular


@inline_kernel
def constraint_dynamics_derivatives_solved(m, ca, v, mu, n_it, oR, op, J, oY, M, ddq, lam, kkt,
                                           ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv,
                                           dlam_dtau, ws, dws):
    """The six derivatives of one state at its solution (ddq, lambda) of ``n_it``
    iterations (:func:`constraint_dynamics_derivatives_kkt`, then copied out of its
    joint pass); ddq_dtau, dlam_dtau in the columns of dws' ``columns`` (all of tau for
    :func:`derivatives_workspace` (m, ca, np.arange(nv))).  Inlined (see
    :func:`_force_residual_derivatives`)."""
    constraint_dynamics_derivatives_kkt(m, ca, v, mu, n_it, oR, op, J, oY, M, ddq, lam, kkt,
                                        ws, dws)
    _joint_outputs(m.nv, dws[10], ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv, dlam_dtau)


@inline_kernel
def constraint_dynamics_derivatives_kkt(m, ca, v, mu, n_it, oR, op, J, oY, M, ddq, lam, kkt, ws,
                                        dws):
    """The derivatives of one state at its solution (ddq, lambda) of ``n_it`` iterations,
    left in the joint KKT pass' arrays of ``dws`` (:func:`_kkt_derivatives_joint`), from
    the solve's placements oR, op, world Jacobians J and the factors in ``kkt`` (L, Jc,
    gamma, Y, G, ...: ws[2] after the solve, or a copy kept since); ws' constraint frames
    (cR1, cp1, cR2, cp2) must be this state's (the solve leaves them,
    :func:`~.constraints.constraint_placements_state` makes them again).  Inlined (see
    :func:`_force_residual_derivatives`)."""
    _, dtau_dq, dtau_dv, dc_dq, dc_dv, _, _, _, _, _, joint = dws
    _force_residual_derivatives(m, ca, v, ddq, lam, oR, op, J, oY, M, ws, dws)
    _remove_gravity_term(m, ws[0][4])  # the motions at (v, ddq) of the RNEA derivatives
    _constraint_residual_derivatives(m, ca, J, ws, dws)
    _kkt_derivatives_joint(m, kkt[0], kkt[3], kkt[4], mu, n_it, dtau_dq, dtau_dv, dc_dq, dc_dv,
                           joint)


@kernel
def _constraint_dynamics_derivatives(m, ca, q, v, tau, mu, max_iter, accuracy, liR, lip, oR, op,
                                     J, oY, M, ddq, lam, iterations, ddq_dq, ddq_dv, ddq_dtau,
                                     dlam_dq, dlam_dv, dlam_dtau):
    """The stack, a compiled call per state, every array borrowed as in
    :func:`_constraint_dynamics` (the call's references to the ~100 arrays it is passed,
    the workspaces' included, are then null tests)."""
    workspace = constrained_workspace(m, ca)
    derivatives_work = derivatives_workspace(m, ca, np.arange(m.nv))
    (m, ca, q, v, tau, liR, lip, oR, op, J, oY, M, ddq, lam, iterations, ddq_dq, ddq_dv,
     ddq_dtau, dlam_dq, dlam_dv, dlam_dtau, ws, dws) = borrowed_all(
        (m, ca, q, v, tau, liR, lip, oR, op, J, oY, M, ddq, lam, iterations, ddq_dq, ddq_dv,
         ddq_dtau, dlam_dq, dlam_dv, dlam_dtau, workspace, derivatives_work))
    regular = True
    for k in range(q.shape[0]):
        iterations[k], ok = _constraint_dynamics_derivatives_state(
            m, ca, q[k], v[k], tau[k], mu, max_iter, accuracy, liR[k], lip[k], oR[k], op[k],
            J[k], oY[k], M[k], ddq[k], lam[k], ddq_dq[k], ddq_dv[k], ddq_dtau[k], dlam_dq[k],
            dlam_dv[k], dlam_dtau[k], ws, dws)
        regular = regular and ok
    keep_alive((workspace, derivatives_work))
    return regular


@parallel_kernel("q")
def constraint_dynamics_parallel(m, ca, q, v, tau, mu, max_iter, accuracy, liR, lip, oR, op, J,
                                 oY, M, ddq, lam, iterations, regular, n_chunks):
    """:func:`constraint_dynamics` on the stack split in ``n_chunks`` chunks run by
    Numba's threads (each with its own workspace); regular (K,) bool per state."""
    K = q.shape[0]
    for chunk in prange(n_chunks):
        ws = constrained_workspace(m, ca)
        for k in range(chunk * K // n_chunks, (chunk + 1) * K // n_chunks):
            iterations[k], regular[k] = _constraint_dynamics_state(
                m, ca, q[k], v[k], tau[k], mu, max_iter, accuracy, liR[k], lip[k], oR[k],
                op[k], J[k], oY[k], M[k], ddq[k], lam[k], ws)


@parallel_kernel("q")
def constraint_dynamics_derivatives_parallel(m, ca, q, v, tau, mu, max_iter, accuracy, liR, lip,
                                             oR, op, J, oY, M, ddq, lam, iterations, regular,
                                             ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv,
                                             dlam_dtau, n_chunks):
    """:func:`constraint_dynamics_derivatives` split in chunks run by Numba's threads."""
    K = q.shape[0]
    for chunk in prange(n_chunks):
        ws = constrained_workspace(m, ca)
        dws = derivatives_workspace(m, ca, np.arange(m.nv))
        for k in range(chunk * K // n_chunks, (chunk + 1) * K // n_chunks):
            iterations[k], regular[k] = _constraint_dynamics_derivatives_state(
                m, ca, q[k], v[k], tau[k], mu, max_iter, accuracy, liR[k], lip[k], oR[k],
                op[k], J[k], oY[k], M[k], ddq[k], lam[k], ddq_dq[k], ddq_dv[k], ddq_dtau[k],
                dlam_dq[k], dlam_dv[k], dlam_dtau[k], ws, dws)


# --- Impulses -----------------------------------------------------------------

@kernel
def _impulse_state(m, ca, q, v, restitution, mu, max_iter, accuracy, liR, lip, oR, op, J, oY, M,
                   v_after, impulse, ws):
    """v+ and the impulse Lambda of one state (module docstring); leaves dv = v+ - v-
    in the kinematics scratch z.  Returns (iterations, G regular).  oY is not written
    (as in :func:`_constraint_dynamics_state`)."""
    kin, con, kkt = ws
    XR, Xp, zeros, ov, oa, F, w6, z, Yc = kin
    cR1, cp1, cR2, cp2, w, xi, RM, pM, t3, Jlog, S = con
    L, Jc, gamma, Y, G, lam_prev = kkt
    _crba_forward_pass(m, q, XR, Xp, liR, lip, oR, op, J, Yc)
    _crba_composite_pass(m, oR, op, J, Yc, M)
    constraint_placements_state(ca, oR, op, cR1, cp1, cR2, cp2)
    constraint_jacobian_state(m, ca, J, cR1, cp1, cp2, Jc)
    for a in range(ca.nrows):
        s = 0.0
        for c in range(m.nv):
            s += Jc[a, c] * v[c]
        gamma[a] = (1.0 + restitution) * s
    z[:] = 0.0
    ltl_factor(m, M, L)
    result = _kkt_solve(m, L, Jc, gamma, z, mu, max_iter, accuracy, Y, G, impulse, lam_prev,
                        v_after)
    for c in range(m.nv):
        z[c] = v_after[c]
        v_after[c] += v[c]
    return result


@kernel
def _impulse_dynamics(m, ca, q, v, restitution, mu, max_iter, accuracy, liR, lip, oR, op, J, oY,
                      M, v_after, impulse, iterations):
    ws = constrained_workspace(m, ca)
    regular = True
    for k in range(q.shape[0]):
        iterations[k], ok = _impulse_state(m, ca, q[k], v[k], restitution, mu, max_iter, accuracy,
                                           liR[k], lip[k], oR[k], op[k], J[k], oY[k], M[k],
                                           v_after[k], impulse[k], ws)
        regular = regular and ok
    return regular


@kernel
def impulse_derivatives_workspace(m, ca):
    """Scratch of :func:`impulse_dynamics_derivatives_stack`: the solve's
    (:func:`constrained_workspace`) and the derivatives' (:func:`derivatives_workspace`
    with no tau columns: its joint KKT pass carries only the q and v blocks)."""
    return constrained_workspace(m, ca), derivatives_workspace(m, ca, np.empty(0, np.int64))


@kernel
def impulse_dynamics_derivatives_stack(m, m0, ca, ca0, q, v, restitution, mu, max_iter, accuracy,
                                       liR, lip, oR, op, J, oY, M, v_after, impulse, iterations,
                                       dv_dq, dv_dv, dimpulse_dq, dimpulse_dv, ws, dws):
    """The impulse solve and its derivatives at every knot, in the workspaces ``ws``,
    ``dws`` of :func:`impulse_derivatives_workspace` (made once by their owner).  m0, ca0:
    the model without gravity and the constraints without Baumgarte gains.  The q and v
    derivatives run as one joint KKT pass over [dR/dq, dR/dv] (:func:`_kkt_derivatives_joint`
    with no tau columns): each column's arithmetic is that of a pass on its own, so the
    bits of two passes."""
    dtau_dq, dtau_dv, dc_dq, dc_dv, w_vel, joint = dws[1], dws[2], dws[3], dws[4], dws[7], \
        dws[10]
    zeros, dv = ws[0][2], ws[0][7]
    L, Jc, _, Y, G, _ = ws[2]
    regular = True
    for k in range(q.shape[0]):
        iterations[k], ok = _impulse_state(m, ca, q[k], v[k], restitution, mu, max_iter, accuracy,
                                           liR[k], lip[k], oR[k], op[k], J[k], oY[k], M[k],
                                           v_after[k], impulse[k], ws)
        regular = regular and ok
        # dR1/dq = d(M(q) dv - Jc^T Lambda)/dq: RNEA derivatives at v = 0, a = dv without
        # gravity; dR2/dq = d(Jc(q) w)/dq, w = v+ + e v-: c(q, 0, w) without gains
        _force_residual_derivatives(m0, ca0, zeros, dv, impulse[k], oR[k], op[k], J[k], oY[k],
                                    M[k], ws, dws)
        for c in range(m.nv):
            w_vel[c] = v_after[k, c] + restitution * v[k, c]
        world_motions(m, zeros, w_vel, 2, False, J[k], ws[0][3], ws[0][4], ws[0][6])
        _constraint_residual_derivatives(m, ca0, J[k], ws, dws)
        # v-: dR1 = -M, dR2 = e Jc
        for r in range(m.nv):
            for c in range(m.nv):
                dtau_dv[r, c] = -M[k, r, c]
        for a in range(ca.nrows):
            for c in range(m.nv):
                dc_dv[a, c] = restitution * Jc[a, c]
        _kkt_derivatives_joint(m, L, Y, G, mu, iterations[k], dtau_dq, dtau_dv, dc_dq, dc_dv,
                               joint)
        # no tau columns: the third pair of outputs is not written
        _joint_outputs(m.nv, joint, dv_dq[k], dv_dv[k], dv_dq[k], dimpulse_dq[k],
                       dimpulse_dv[k], dimpulse_dq[k])
    return regular


@kernel
def _impulse_dynamics_derivatives(m, m0, ca, ca0, q, v, restitution, mu, max_iter, accuracy, liR,
                                  lip, oR, op, J, oY, M, v_after, impulse, iterations, dv_dq,
                                  dv_dv, dimpulse_dq, dimpulse_dv):
    """:func:`impulse_dynamics_derivatives_stack` in workspaces of its own."""
    ws, dws = impulse_derivatives_workspace(m, ca)
    return impulse_dynamics_derivatives_stack(m, m0, ca, ca0, q, v, restitution, mu, max_iter,
                                              accuracy, liR, lip, oR, op, J, oY, M, v_after,
                                              impulse, iterations, dv_dq, dv_dv, dimpulse_dq,
                                              dimpulse_dv, ws, dws)


# --- Public API -----------------------------------------------------------------

def _settings(mu, max_iterations, accuracy):
    mu, accuracy = float(mu), float(accuracy)
    if not (np.isfinite(mu) and mu >= 0.0):
        raise ValueError(f"mu = {mu!r}: expected a finite number >= 0")
    if not (np.isfinite(accuracy) and accuracy >= 0.0):
        raise ValueError(f"accuracy = {accuracy!r}: expected a finite number >= 0")
    if int(max_iterations) != max_iterations or max_iterations < 1:
        raise ValueError(f"max_iterations = {max_iterations!r}: expected an integer >= 1")
    return mu, int(max_iterations), accuracy


def _check_regular(regular, mu):
    if not regular:
        raise ValueError("the constraints are redundant or degenerate: J M^-1 J^T + mu I is "
                         f"singular (mu = {mu}); use the proximal variant, mu > 0")


def _prepare(model, data, q, v, constraints, name_v="v"):
    cs = as_constraint_set(model, constraints)
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs, _ = as_stack(v, model.nv, name_v, (K, single))
    check_data(model, data, K, single)
    return cs, qs, vs, K, single


def constraint_dynamics(model, data, q, v, tau, constraints, mu=0.0, max_iterations=1,
                        accuracy=1e-12):
    """Forward dynamics under rigid constraints (Pinocchio's ``constraintDynamics``).

    Parameters
    ----------
    q : (nq,) or (K, nq); v, tau : (nv,) or (K, nv).
    constraints : a :class:`~geppetto.dynamics.constraints.ConstraintSet` (or a
        list of :class:`~geppetto.dynamics.constraints.RigidConstraint`).
    mu, max_iterations, accuracy : the proximal settings (Pinocchio's
        ``ProximalSettings``); the defaults solve the KKT system exactly; use
        mu > 0 and a few iterations for redundant constraints.

    Returns
    -------
    ddq : (nv,) or (K, nv), and lambda : (nc,) or (K, nc), the constraint
    forces stacked in the order of the constraints (module docstring of
    :mod:`.constraints` for their frames and sign).  Fills ``data.ddq``,
    ``data.M`` (with the placements and ``data.J``), ``data.lambda_c`` and
    ``data.constraint_iterations`` (K,).
    """
    mu, max_iterations, accuracy = _settings(mu, max_iterations, accuracy)
    cs, qs, vs, K, single = _prepare(model, data, q, v, constraints)
    taus, _ = as_stack(tau, model.nv, "tau", (K, single))
    lam = np.empty((K, cs.size))
    iterations = np.zeros(K, dtype=np.int64)
    regular = call_kernel(_constraint_dynamics, model, cs.arrays, qs, vs, taus, mu,
                          max_iterations, accuracy, data.liR, data.lip, data.oR, data.op, data.J,
                          data.oYcrb, data.M, data.ddq, lam, iterations)
    _check_regular(regular, mu)
    data.lambda_c, data.constraint_iterations = lam, iterations
    return result(data.ddq, K, single).copy(), (lam[0] if single else lam)


def constraint_dynamics_derivatives(model, data, q, v, tau, constraints, mu=0.0,
                                    max_iterations=1, accuracy=1e-12):
    """Partial derivatives of (ddq, lambda) = constraint_dynamics(q, v, tau)
    (Pinocchio's ``computeConstraintDynamicsDerivatives``).

    Same arguments as :func:`constraint_dynamics`.  Returns ``(ddq_dq, ddq_dv,
    ddq_dtau, dlambda_dq, dlambda_dv, dlambda_dtau)``, (nv, nv) and (nc, nv)
    each, or with a leading K; derivatives with respect to q are in the
    tangent space.  Also fills what :func:`constraint_dynamics` fills.
    """
    mu, max_iterations, accuracy = _settings(mu, max_iterations, accuracy)
    cs, qs, vs, K, single = _prepare(model, data, q, v, constraints)
    taus, _ = as_stack(tau, model.nv, "tau", (K, single))
    nv, nc = model.nv, cs.size
    lam = np.empty((K, nc))
    iterations = np.zeros(K, dtype=np.int64)
    out = output_arrays(data, "constraint_dynamics_derivatives", [(K, nv, nv)] * 3
                        + [(K, nc, nv)] * 3)
    regular = call_kernel(
        _constraint_dynamics_derivatives, model, cs.arrays, qs, vs, taus, mu, max_iterations,
        accuracy, data.liR, data.lip, data.oR, data.op, data.J, data.oYcrb, data.M, data.ddq, lam,
        iterations, *out)
    _check_regular(regular, mu)
    data.lambda_c, data.constraint_iterations = lam, iterations
    return tuple(x[0] if single else x for x in out)


def _impulse_arguments(restitution, mu, max_iterations, accuracy):
    restitution = float(restitution)
    if not 0.0 <= restitution <= 1.0:
        raise ValueError(f"restitution = {restitution!r}: expected a number in [0, 1]")
    return (restitution,) + _settings(mu, max_iterations, accuracy)


def impulse_dynamics(model, data, q, v, constraints, restitution=0.0, mu=0.0, max_iterations=1,
                     accuracy=1e-12):
    """Velocity after an impact (Pinocchio's ``impulseDynamics``).

    ``v`` is the velocity before the impact; ``restitution`` e in [0, 1] (0:
    the constrained frames stop).  Returns ``(v_after, impulse)``, (nv,) and
    (nc,) or with a leading K: M (v_after - v) = Jc^T impulse, Jc v_after =
    -e Jc v.  Fills ``data.M`` and ``data.J``.
    """
    restitution, mu, max_iterations, accuracy = _impulse_arguments(restitution, mu,
                                                                   max_iterations, accuracy)
    cs, qs, vs, K, single = _prepare(model, data, q, v, constraints)
    v_after = np.empty((K, model.nv))
    impulse = np.empty((K, cs.size))
    iterations = np.zeros(K, dtype=np.int64)
    regular = _impulse_dynamics(model.arrays, cs.arrays, qs, vs, restitution, mu, max_iterations,
                                accuracy, data.liR, data.lip, data.oR, data.op, data.J, data.oYcrb,
                                data.M, v_after, impulse, iterations)
    _check_regular(regular, mu)
    return (v_after[0], impulse[0]) if single else (v_after, impulse)


def _without_gravity(model):
    arrays = getattr(model, "_arrays_without_gravity", None)
    if arrays is None:
        arrays = model._arrays_without_gravity = model.with_changes(gravity=np.zeros(3)).arrays
    return arrays


def _without_gains(cs):
    arrays = getattr(cs, "_arrays_without_gains", None)
    if arrays is None:
        zeros = np.zeros(cs.arrays.n)
        zeros.setflags(write=False)
        arrays = cs.arrays._replace(Kp=zeros, Kd=zeros)
        cs._arrays_without_gains = arrays
    return arrays


def impulse_dynamics_derivatives(model, data, q, v, constraints, restitution=0.0, mu=0.0,
                                 max_iterations=1, accuracy=1e-12):
    """Partial derivatives of (v_after, impulse) = impulse_dynamics(q, v)
    (Pinocchio's ``computeImpulseDynamicsDerivatives``).

    Returns ``(dv_after_dq, dv_after_dv, dimpulse_dq, dimpulse_dv)``, (nv, nv)
    and (nc, nv) each or with a leading K; q derivatives in the tangent space.
    """
    restitution, mu, max_iterations, accuracy = _impulse_arguments(restitution, mu,
                                                                   max_iterations, accuracy)
    cs, qs, vs, K, single = _prepare(model, data, q, v, constraints)
    nv, nc = model.nv, cs.size
    v_after = np.empty((K, nv))
    impulse = np.empty((K, nc))
    iterations = np.zeros(K, dtype=np.int64)
    out = [np.empty((K, nv, nv)) for _ in range(2)] + [np.empty((K, nc, nv)) for _ in range(2)]
    regular = _impulse_dynamics_derivatives(
        model.arrays, _without_gravity(model), cs.arrays, _without_gains(cs), qs, vs, restitution,
        mu, max_iterations, accuracy, data.liR, data.lip, data.oR, data.op, data.J, data.oYcrb,
        data.M, v_after, impulse, iterations, *out)
    _check_regular(regular, mu)
    return tuple(x[0] if single else x for x in out)
