"""One jitted discrete step of :class:`~.contacts.ContactDynamics` (and the impact of
:class:`~.contacts.ImpulseDynamics`), for sequential loops.

The contact counterpart of :mod:`.step`: a solver's line search rolls a
contact phase out in one kernel call that steps knot after knot, instead of
one Python call (and one kernel launch) per knot.  The step matches
:class:`~.integrators.Integrator` on the contact field exactly for the two
schemes contact problems use:

- ``explicit_euler`` (code 0): w = dt (v, ddq)
- ``euler`` (code 1):          w = (dt (v + dt ddq), dt ddq) (symplectic, Crocoddyl's)

with ddq from ``constraint_dynamics`` at tau = B u - D v, and x' = x (+) w;
an impact (:func:`impulse_step`) maps x = (q, v) to (q, v+).  The tests
compare both with the stage models.
"""
import numpy as np

from ..dynamics.config import inline_kernel, kernel
from ..dynamics.constrained_dynamics import (_constraint_dynamics_state, _impulse_state,
                                             constrained_workspace)
from .step import _state_integrate, actuated_torque, placements_workspace

CONTACT_SCHEMES = {"explicit_euler": 0, "euler": 1}

# What a ContactDynamicsData holds for its stamp: nothing, values, values and derivatives.
EMPTY, VALUES, DERIVATIVES = 0, 1, 2


@kernel
def contact_step_workspace(m, ca, nx):
    """Scratch of :func:`contact_step` and :func:`impulse_step` for one state:
    (per-state dynamics arrays, stage vectors, constrained-dynamics scratch, Lie scratch)."""
    nj, nv = m.njoints, m.nv
    liR, lip, oR, op = placements_workspace(nj)
    dyn = (liR, lip, oR, op, np.empty((6, nv)),
           np.empty((nj, 6, 6)), np.empty((nv, nv)), np.empty(nv), np.empty(ca.nrows),
           np.empty(nv))
    return (dyn, (np.empty(2 * nv), np.empty(nx)), constrained_workspace(m, ca),
            (np.empty(4), np.empty(4), np.empty(3)))


def solved_store(owner, K):
    """Where a phase's trial rollout keeps each knot's solve (:func:`.trial.rollout_contact`)
    for ``calc_diff`` at the accepted trial (:func:`.fused._contact_field_diff`), as
    Crocoddyl's calcDiff reuses its calc: (liR, lip, oR, op, J, M, ddq, lam, L, Y, G,
    iterations, xs, us) of K knots, L the factor of M = L^T L, Y = L^-T Jc^T and G the
    factor of Jc M^-1 Jc^T + mu I (:func:`~geppetto.dynamics.constrained_dynamics.
    _kkt_solve`); (xs, us) the stamp of each knot's arrays, NaN when they hold nothing."""
    model, nc, nx = owner.model, owner.constraints.size, owner.state.nx
    nj, nv = model.njoints, model.nv
    liR = np.zeros((K, nj, 3, 3))
    oR = np.zeros((K, nj, 3, 3))
    for a in range(3):
        liR[:, 0, a, a] = 1.0       # the universe's rotation (the kernels never write it)
        oR[:, 0, a, a] = 1.0
    return (liR, np.zeros((K, nj, 3)), oR, np.zeros((K, nj, 3)), np.zeros((K, 6, nv)),
            np.zeros((K, nv, nv)), np.zeros((K, nv)), np.zeros((K, nc)), np.zeros((K, nv, nv)),
            np.zeros((K, nv, nc)), np.zeros((K, nc, nc)), np.zeros(K, dtype=np.int64),
            np.full((K, nx), np.nan), np.full((K, owner.nu), np.nan))


@kernel
def contact_step(m, ca, B, damping, settings, scheme, dt, x, u, xnext, ws):
    """xnext = F(x, u) of one contact knot; ``settings`` = (mu, max_iterations,
    accuracy) of the KKT solve.  Returns (the solve's iterations, False when the contacts
    are degenerate)."""
    liR, lip, oR, op, J, oY, M, ddq, lam, tau = ws[0]
    w = ws[1][0]
    mu, max_iterations, accuracy = settings
    nq, nv = m.nq, m.nv
    actuated_torque(m, B, damping, x, u, tau)
    iterations, regular = _constraint_dynamics_state(m, ca, x[:nq], x[nq:], tau, mu,
                                                     max_iterations, accuracy, liR, lip, oR, op,
                                                     J, oY, M, ddq, lam, ws[2])
    for i in range(nv):
        w[nv + i] = dt * ddq[i]
        w[i] = dt * x[nq + i] + (dt * w[nv + i] if scheme == 1 else 0.0)
    _state_integrate(m, x, w, xnext, ws)
    return iterations, regular


# The same step inlined into the trial's loop over knots (:func:`.trial.rollout_contact`): a
# compiled call passed the model, constraint and workspace tuples flattened, 652 scalar
# arguments through the stack, per knot; inlined (with trial_state and state_difference
# written out), the solo12 trot's rollout took 0.85x (0.82-0.96) of the time, the same
# bits, +1.1-1.4 s to its cold compile (round ctr30 of benchmarks/threads_notes.md).  Its
# solve stays a compiled call: inlined too (0.75x) it made the rollout's compile 52 s
# instead of 5.
contact_step_inline = inline_kernel(contact_step.py_func)


@inline_kernel
def knot_workspace(ws, solved, t):
    """The workspace ``ws`` of :func:`contact_step` with its solve's outputs (placements,
    Jacobians, M, ddq, lambda and the KKT factors) in knot t's arrays of ``solved``
    (:func:`solved_store`): the step leaves them there, no copy."""
    liR, lip, oR, op, J, M, ddq, lam, L, Y, G = solved[:11]
    one = ws[0]
    kin, con, kkt = ws[2]
    return ((liR[t], lip[t], oR[t], op[t], J[t], one[5], M[t], ddq[t], lam[t], one[9]), ws[1],
            (kin, con, (L[t], kkt[1], kkt[2], Y[t], G[t], kkt[5])), ws[3])


@inline_kernel
def solved_at(solved, k, x, u):
    """Whether knot k's arrays of ``solved`` hold the solve at (x, u) (its stamp)."""
    sx, su = solved[12], solved[13]
    if sx.shape[0] <= k or su.shape[1] != u.shape[0]:
        return False
    for i in range(x.shape[0]):
        if sx[k, i] != x[i]:
            return False
    for i in range(u.shape[0]):
        if su[k, i] != u[i]:
            return False
    return True


@kernel
def impulse_step(m, ca, restitution, settings, x, xnext, ws):
    """xnext = (q, v+) of one impact.  Returns False when the contacts are degenerate."""
    liR, lip, oR, op, J, oY, M, v_after, impulse, _ = ws[0]
    mu, max_iterations, accuracy = settings
    nq, nv = m.nq, m.nv
    _, regular = _impulse_state(m, ca, x[:nq], x[nq:], restitution, mu, max_iterations,
                                accuracy, liR, lip, oR, op, J, oY, M, v_after, impulse, ws[2])
    for i in range(nq):
        xnext[i] = x[i]
    for i in range(nv):
        xnext[nq + i] = v_after[i]
    return regular


@inline_kernel
def _times_actuation(A, B, out, r0):
    """out[r0 + i] = A[i] B for every row i of A (nv, nv), B (nv, nu): each row as a sum of
    rows of B, j in increasing order (the same sum per entry as a dot product over j, so
    the same bits), along contiguous rows that vectorize where a dot product per entry
    (a chain of dependent additions) did not."""
    nv, nu = B.shape
    for i in range(A.shape[0]):
        row = out[r0 + i]
        for c in range(nu):
            row[c] = 0.0
        for j in range(nv):
            a = A[i, j]
            for c in range(nu):
                row[c] += a * B[j, c]


@kernel
def _contact_jacobians(v, ddq, ddq_dq, ddq_dv, ddq_dtau, dlam_dq, dlam_dv, dlam_dtau, B, D, f,
                       f_x, f_u, lam_x, lam_u):
    """f = (v, ddq), f_x = [[0, I], [ddq_dq, ddq_dv - ddq_dtau D]], f_u = [[0], [ddq_dtau B]],
    lam_x = [dlam_dq, dlam_dv - dlam_dtau D], lam_u = dlam_dtau B for every knot."""
    K, nv = v.shape
    nc, nu = dlam_dq.shape[1], B.shape[1]
    for k in range(K):
        for i in range(nv):
            f[k, i] = v[k, i]
            f[k, nv + i] = ddq[k, i]
        f_x[k, :nv] = 0.0
        for i in range(nv):
            f_x[k, i, nv + i] = 1.0
        f_u[k, :nv] = 0.0
        _state_columns(ddq_dq[k], ddq_dv[k], ddq_dtau[k], D, f_x[k], nv)
        _times_actuation(ddq_dtau[k], B, f_u[k], nv)
        _state_columns(dlam_dq[k], dlam_dv[k], dlam_dtau[k], D, lam_x[k], 0)
        _times_actuation(dlam_dtau[k], B, lam_u[k], 0)


@inline_kernel
def _state_columns(d_dq, d_dv, d_dtau, D, out, r0):
    """out[r0 + i] = [d_dq[i], d_dv[i] - d_dtau[i] D] (rows of a field's or a force's
    derivative in x = (q, v), damping D), one contiguous loop per half row."""
    nv = d_dq.shape[1]
    for i in range(d_dq.shape[0]):
        row = out[r0 + i]
        for j in range(nv):
            row[j] = d_dq[i, j]
        for j in range(nv):
            row[nv + j] = d_dv[i, j] - d_dtau[i, j] * D[j]
