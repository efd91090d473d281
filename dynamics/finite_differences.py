"""Finite differences on the manifold: the baseline and the test oracle of every derivative.

Not a fallback: the analytical derivatives are the product; these are what
they are checked and timed against (Carpentier & Mansard, RSS 2018, Sec. V).

Configurations are perturbed *on the manifold*, ``q (+) h e_j`` with
:func:`~geppetto.dynamics.integrate` (never ``q + h``), so derivatives with
respect to q have nv columns in Pinocchio's tangent convention (the same as
``computeRNEADerivatives``).  Steps are chosen per variable j:

    forward   h_j = sqrt(eps)   * max(1, |x_j|)     error O(h) + O(eps / h)
    central   h_j = eps^(1/3)   * max(1, |x_j|)     error O(h^2) + O(eps / h)

where x_j is the coordinate itself for vectors (v, a, tau, and the q of
revolute, prismatic and translation joints) and 1 for the tangent
coordinates of SO(2), SO(3), SE(2) and SE(3), which perturb from zero.
Vector steps are the ones actually taken, ``(x + h) - x``.  Forward
differences keep about half of the digits, central about two thirds.

- :func:`numerical_jacobian`: any function of a vector or of a configuration,
  its output a vector (plain subtraction) or on a group (a ``difference``
  such as :func:`se3_difference` for placements);
- :func:`rnea_derivatives_fd`, :func:`aba_derivatives_fd`: one Numba kernel
  call differences a whole stack of states, calling RNEA or ABA 6 nv
  (central) or 3 nv + 1 (forward) times per state inside the kernel;
- :func:`constraint_dynamics_derivatives_fd`,
  :func:`impulse_dynamics_derivatives_fd`: the same for the constrained
  and impulse dynamics of :mod:`.constrained_dynamics`.
"""
import numpy as np

from .aba import _aba_state, aba_workspace
from .config import kernel
from .constrained_dynamics import (_check_regular, _constraint_dynamics_state,
                                   _impulse_arguments, _impulse_state, _prepare, _settings,
                                   constrained_workspace)
from .liegroups import integrate, integrate_state
from .model import PRISMATIC, REVOLUTE, TRANSLATION
from .rnea import _rnea_backward_pass, _rnea_forward_pass
from .validation import as_configurations, as_dynamics_arguments, as_stack, result

EPS = np.finfo(float).eps
FORWARD_STEP = float(np.sqrt(EPS))          # about 1.5e-8
CENTRAL_STEP = float(EPS ** (1.0 / 3.0))    # about 6.1e-6
METHODS = ("central", "forward")

RNEA, ABA = 0, 1


def step_size(method):
    """Base step of ``method``: sqrt(eps) (forward) or eps^(1/3) (central)."""
    return CENTRAL_STEP if _is_central(method) else FORWARD_STEP


def _is_central(method):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return method == "central"


# --- The one place coupled to the internals of rnea.py and aba.py -----------

@kernel
def _workspace(m):
    """Per-state arrays of one RNEA or ABA call (oMi of the universe = identity)."""
    nj, nv = m.njoints, m.nv
    liR, oR = np.zeros((nj, 3, 3)), np.zeros((nj, 3, 3))
    for r in range(3):
        liR[0, r, r] = 1.0
        oR[0, r, r] = 1.0
    return (liR, np.zeros((nj, 3)), oR, np.zeros((nj, 3)),
            np.zeros((nj, 6)), np.zeros((nj, 6)), np.zeros((nj, 6)),
            np.zeros((6, nv)), np.zeros((nj, 6, 6)), np.zeros((6, nv)), np.zeros((nv, 6)),
            np.zeros(nv), np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((4, 6)),
            aba_workspace(m))


@kernel
def _evaluate(which, m, q, state, ws, out):
    """out = RNEA(q, v, u, f_ext) (which = RNEA) or ABA(q, v, u, f_ext) (ABA),
    with (v, u, f_ext) from state = (x, v, u, f_ext)."""
    _, v, u, f_ext = state
    liR, lip, oR, op, vel, acc, f, J, oY, U, Dinv, uu, XR, Xp, w6, aba_ws = ws
    if which == RNEA:
        _rnea_forward_pass(m, q, v, u, f_ext, liR, lip, oR, op, vel, acc, f, XR, Xp, w6)
        _rnea_backward_pass(m, u, liR, lip, f, out, w6)
    else:
        _aba_state(m, q, v, u, f_ext, liR, lip, oR, op, J, oY, vel, acc, f, U, Dinv, uu,
                   out, aba_ws)

# -----------------------------------------------------------------------------


@kernel
def _configuration_magnitude(m, q, j):
    """|x_j| of tangent coordinate j of q (nq,): |q| for vector-space joints, else 1."""
    i = m.dof_joint[j]
    t = m.jtype[i]
    if t == REVOLUTE or t == PRISMATIC or t == TRANSLATION:
        return max(1.0, abs(q[m.idx_q[i] + j - m.idx_v[i]]))
    return 1.0


@kernel
def _tangent_magnitudes(m, q, out):
    for k in range(q.shape[0]):
        for j in range(m.nv):
            out[k, j] = _configuration_magnitude(m, q[k], j)


@kernel
def _store_column(out, k, j, y_plus, y_minus, h):
    """out[k, :, j] = (y_plus - y_minus) / h."""
    for r in range(y_plus.shape[0]):
        out[k, r, j] = (y_plus[r] - y_minus[r]) / h


@kernel
def _q_column(which, m, state, ws, buffers, j, h, central, out, k):
    """Column j of d(dynamics)/dq: perturbation x (+) h e_j on the manifold."""
    x = state[0]
    y0, yp, ym, xp, dx, s4, t4, s3 = buffers
    dx[j] = h
    integrate_state(m, x, dx, xp, s4, t4, s3)
    _evaluate(which, m, xp, state, ws, yp)
    if central:
        dx[j] = -h
        integrate_state(m, x, dx, xp, s4, t4, s3)
        _evaluate(which, m, xp, state, ws, ym)
        _store_column(out, k, j, yp, ym, 2.0 * h)
    else:
        _store_column(out, k, j, yp, y0, h)
    dx[j] = 0.0


@kernel
def _vector_column(which, m, state, ws, buffers, target, j, base, central, out, k):
    """Column j of d(dynamics)/d target, target being state's v or u (perturbed in
    place and restored)."""
    y0, yp, ym = buffers[0], buffers[1], buffers[2]
    xj = target[j]
    h = base * max(1.0, abs(xj))
    target[j] = xj + h
    h_plus = target[j] - xj
    _evaluate(which, m, state[0], state, ws, yp)
    if central:
        target[j] = xj - h
        h_minus = xj - target[j]
        _evaluate(which, m, state[0], state, ws, ym)
        _store_column(out, k, j, yp, ym, h_plus + h_minus)
    else:
        _store_column(out, k, j, yp, y0, h_plus)
    target[j] = xj


@kernel
def _dynamics_fd(m, which, q, v, u, f_ext, central, base, d_dq, d_dv, d_du):
    """d_dq, d_dv, d_du (K, nv, nv) of RNEA (u = a) or ABA (u = tau) at every state."""
    nv = m.nv
    ws = _workspace(m)
    x, vk, uk, fe = np.empty(m.nq), np.empty(nv), np.empty(nv), np.empty((m.njoints, 6))
    state = (x, vk, uk, fe)
    buffers = (np.empty(nv), np.empty(nv), np.empty(nv), np.empty(m.nq), np.zeros(nv),
               np.empty(4), np.empty(4), np.empty(3))
    for k in range(q.shape[0]):
        x[:] = q[k]
        vk[:] = v[k]
        uk[:] = u[k]
        fe[:, :] = f_ext[k]
        if not central:
            _evaluate(which, m, x, state, ws, buffers[0])
        for j in range(nv):
            h = base * _configuration_magnitude(m, x, j)
            _q_column(which, m, state, ws, buffers, j, h, central, d_dq, k)
            _vector_column(which, m, state, ws, buffers, vk, j, base, central, d_dv, k)
            _vector_column(which, m, state, ws, buffers, uk, j, base, central, d_du, k)


def _dynamics_derivatives_fd(which, model, data, q, v, u, u_name, f_ext, method):
    central = _is_central(method)
    qs, vs, us, fs, K, single = as_dynamics_arguments(model, data, q, v, u, f_ext, u_name)
    outs = tuple(np.empty((K, model.nv, model.nv)) for _ in range(3))
    _dynamics_fd(model.arrays, which, qs, vs, us, fs, central, step_size(method), *outs)
    return tuple(result(out, K, single) for out in outs)


def rnea_derivatives_fd(model, data, q, v, a, f_ext=None, method="central"):
    """Finite-difference twin of ``rnea_derivatives``: (dtau_dq, dtau_dv, dtau_da).

    Parameters
    ----------
    q : (nq,) or (K, nq); v, a : (nv,) or (K, nv); f_ext : None, (njoints, 6)
        or (K, njoints, 6), held constant;
    method : "central" (6 nv RNEA calls per state; measured errors against
        Pinocchio ~1e-10 relative) or "forward" (3 nv + 1 calls, ~1e-7).

    Returns three (nv, nv) or (K, nv, nv) arrays; dtau_dq is taken on the
    manifold (columns = tangent directions), as Pinocchio's
    ``computeRNEADerivatives``.  The whole stack is differenced in one kernel
    call; ``data`` is only checked (the kernel has its own workspace).
    """
    return _dynamics_derivatives_fd(RNEA, model, data, q, v, a, "a", f_ext, method)


def aba_derivatives_fd(model, data, q, v, tau, f_ext=None, method="central"):
    """Finite-difference twin of ``aba_derivatives``: (dddq_dq, dddq_dv, dddq_dtau).

    Shapes and ``method`` as :func:`rnea_derivatives_fd` (6 nv or 3 nv + 1 ABA
    calls per state).  ABA's rounding error grows with |ddq|, which reaches
    1e3-1e4 on light-legged robots: the absolute error is about eps |ddq| / h.
    """
    return _dynamics_derivatives_fd(ABA, model, data, q, v, tau, "tau", f_ext, method)


# --- Constrained and impulse dynamics ---------------------------------------------
# One kernel call differences the whole stack, each perturbed state solved by the
# per-state kernels of constrained_dynamics.py in one workspace, rather than
# stacking the 6 nv perturbed states of every sample into one call of the public
# batched function: that stack's Data (M alone is (6 nv K, nv, nv), 0.4 GB for
# talos at K = 100) would outweigh the work, and the kernel allocates nothing per
# state.  Coupled to the signatures of _constraint_dynamics_state and _impulse_state
# (Numba's cache does not see a change there: clear this module's cache then).

CONSTRAINED, IMPULSE = 0, 1


@kernel
def _constrained_workspace(m, ca):
    """Per-state arrays of one constrained solve: liR, lip, oR, op, J, oY, M, the
    outputs (x, y) of the solve, and constrained_workspace's scratch."""
    nj, nv = m.njoints, m.nv
    liR, oR = np.zeros((nj, 3, 3)), np.zeros((nj, 3, 3))
    for r in range(3):
        liR[0, r, r] = 1.0
        oR[0, r, r] = 1.0
    return (liR, np.zeros((nj, 3)), oR, np.zeros((nj, 3)), np.zeros((6, nv)),
            np.zeros((nj, 6, 6)), np.zeros((nv, nv)), np.zeros(nv), np.zeros(ca.nrows),
            constrained_workspace(m, ca))


@kernel
def _evaluate_constrained(which, m, ca, settings, q, state, ws, out):
    """out (nv + nc) = (ddq, lambda) of the constrained dynamics at (q, v, tau = u)
    (which = CONSTRAINED), or (v_after, impulse) at (q, v) (IMPULSE); settings =
    (mu, max_iterations, accuracy, restitution).  Returns whether G was regular."""
    _, v, u = state
    mu, max_iter, accuracy, restitution = settings
    liR, lip, oR, op, J, oY, M, x, y, cws = ws
    if which == CONSTRAINED:
        regular = _constraint_dynamics_state(m, ca, q, v, u, mu, max_iter, accuracy, liR, lip,
                                             oR, op, J, oY, M, x, y, cws)[1]
    else:
        regular = _impulse_state(m, ca, q, v, restitution, mu, max_iter, accuracy, liR, lip,
                                 oR, op, J, oY, M, x, y, cws)[1]
    nv = m.nv
    for r in range(nv):
        out[r] = x[r]
    for r in range(ca.nrows):
        out[nv + r] = y[r]
    return regular


@kernel
def _constrained_column(which, m, ca, settings, state, ws, buffers, target, j, h, central,
                        out, k):
    """Column j of the Jacobian in q (target None-like: the size-0 array) on the
    manifold, or in ``target`` (state's v or u, perturbed in place and restored).
    Returns whether every solve had a regular G."""
    x = state[0]
    y0, yp, ym, xp, dx, s4, t4, s3 = buffers
    if target.shape[0] == 0:
        dx[j] = h
        integrate_state(m, x, dx, xp, s4, t4, s3)
        ok = _evaluate_constrained(which, m, ca, settings, xp, state, ws, yp)
        if central:
            dx[j] = -h
            integrate_state(m, x, dx, xp, s4, t4, s3)
            ok = _evaluate_constrained(which, m, ca, settings, xp, state, ws, ym) and ok
        dx[j] = 0.0
        _store_column(out, k, j, yp, ym if central else y0, 2.0 * h if central else h)
        return ok
    xj = target[j]
    target[j] = xj + h
    h_plus = target[j] - xj
    ok = _evaluate_constrained(which, m, ca, settings, x, state, ws, yp)
    h_minus = 0.0
    if central:
        target[j] = xj - h
        h_minus = xj - target[j]
        ok = _evaluate_constrained(which, m, ca, settings, x, state, ws, ym) and ok
    target[j] = xj
    _store_column(out, k, j, yp, ym if central else y0, h_plus + h_minus)
    return ok


@kernel
def _constrained_fd(m, ca, which, settings, q, v, u, central, base, d_dq, d_dv, d_du):
    """d_dq, d_dv (K, nv + nc, nv) and, for CONSTRAINED, d_du (d tau) of (ddq, lambda)
    or (v_after, impulse) at every state.  Returns whether every G was regular."""
    nv = m.nv
    ws = _constrained_workspace(m, ca)
    x, vk, uk = np.empty(m.nq), np.empty(nv), np.empty(nv)
    state = (x, vk, uk)
    n = nv + ca.nrows
    buffers = (np.empty(n), np.empty(n), np.empty(n), np.empty(m.nq), np.zeros(nv),
               np.empty(4), np.empty(4), np.empty(3))
    no_target = np.empty(0)
    regular = True
    for k in range(q.shape[0]):
        x[:] = q[k]
        vk[:] = v[k]
        uk[:] = u[k]
        if not central:
            regular = _evaluate_constrained(which, m, ca, settings, x, state, ws,
                                            buffers[0]) and regular
        for j in range(nv):
            h = base * _configuration_magnitude(m, x, j)
            regular = _constrained_column(which, m, ca, settings, state, ws, buffers, no_target,
                                          j, h, central, d_dq, k) and regular
            h = base * max(1.0, abs(vk[j]))
            regular = _constrained_column(which, m, ca, settings, state, ws, buffers, vk, j, h,
                                          central, d_dv, k) and regular
            if which == CONSTRAINED:
                h = base * max(1.0, abs(uk[j]))
                regular = _constrained_column(which, m, ca, settings, state, ws, buffers, uk,
                                              j, h, central, d_du, k) and regular
    return regular


def _constrained_derivatives_fd(which, model, data, q, v, u, constraints, settings, method):
    central = _is_central(method)
    cs, qs, vs, K, single = _prepare(model, data, q, v, constraints)
    us = as_stack(u, model.nv, "tau", (K, single))[0] if u is not None else vs
    n = model.nv + cs.size
    outs = [np.empty((K, n, model.nv)) for _ in range(2 if which == IMPULSE else 3)]
    d_du = outs[2] if which == CONSTRAINED else np.empty((K, n, 0))
    regular = _constrained_fd(model.arrays, cs.arrays, which, settings, qs, vs, us, central,
                              step_size(method), outs[0], outs[1], d_du)
    _check_regular(regular, settings[0])
    nv = model.nv
    blocks = [out[:, :nv] for out in outs] + [out[:, nv:] for out in outs]
    return tuple(result(np.ascontiguousarray(b), K, single) for b in blocks)


def constraint_dynamics_derivatives_fd(model, data, q, v, tau, constraints, mu=0.0,
                                       max_iterations=1, accuracy=1e-12, method="central"):
    """Finite-difference twin of ``constraint_dynamics_derivatives``: (ddq_dq, ddq_dv,
    ddq_dtau, dlambda_dq, dlambda_dv, dlambda_dtau), (nv, nv) and (nc, nv) each or
    with a leading K; q on the manifold.  Arguments as ``constraint_dynamics``
    (:mod:`.constrained_dynamics`); ``method`` "central" (6 nv solves per state) or
    "forward" (3 nv + 1).  The whole stack is differenced in one kernel call;
    ``data`` is only checked."""
    mu, max_iterations, accuracy = _settings(mu, max_iterations, accuracy)
    return _constrained_derivatives_fd(CONSTRAINED, model, data, q, v, tau, constraints,
                                       (mu, max_iterations, accuracy, 0.0), method)


def impulse_dynamics_derivatives_fd(model, data, q, v, constraints, restitution=0.0, mu=0.0,
                                    max_iterations=1, accuracy=1e-12, method="central"):
    """Finite-difference twin of ``impulse_dynamics_derivatives``: (dv_after_dq,
    dv_after_dv, dimpulse_dq, dimpulse_dv), as :func:`constraint_dynamics_derivatives_fd`
    (4 nv or 2 nv + 1 solves per state)."""
    restitution, mu, max_iterations, accuracy = _impulse_arguments(restitution, mu,
                                                                   max_iterations, accuracy)
    return _constrained_derivatives_fd(IMPULSE, model, data, q, v, None, constraints,
                                       (mu, max_iterations, accuracy, restitution), method)


# --- Generic Jacobians ---------------------------------------------------------

def tangent_magnitudes(model, q):
    """max(1, |x_j|) per tangent coordinate of q: (nv,) or (K, nv) (see module doc)."""
    qs, single = as_configurations(model, q)
    out = np.empty((qs.shape[0], model.nv))
    _tangent_magnitudes(model.arrays, qs, out)
    return out[0] if single else out


def _perturbations(x, model, h):
    """(K, n, dim) points x (+) h_j e_j for every j (h of shape (K, n), signed)."""
    K, n = h.shape
    if model is None:
        points = np.repeat(x[:, None, :], n, axis=1)
        rows = np.arange(n)
        points[:, rows, rows] += h
        return points, points[:, rows, rows] - x
    tangent = np.zeros((K, n, n))
    tangent[:, np.arange(n), np.arange(n)] = h
    points = integrate(model, np.repeat(x, n, axis=0), tangent.reshape(K * n, n))
    return points.reshape(K, n, -1), h


def _evaluate_points(f, points, vectorized):
    if vectorized:
        return np.asarray(f(points))
    return np.array([np.asarray(f(p)) for p in points])


def numerical_jacobian(f, x, model=None, method="central", difference=None,
                       vectorized=True, step=None):
    """Jacobian of ``f`` at ``x`` by finite differences, on the manifold when ``model`` is given.

    Parameters
    ----------
    f : function of one point (``vectorized=False``) or of a stack of N
        points (N, dim) returning (N, ...) (``vectorized=True``, the default:
        every geppetto dynamics function takes stacks, so all perturbed points
        go through one call).
    x : (dim,) or (K, dim).  With ``model``, x is a configuration (nq) and is
        perturbed as ``integrate(model, x, h e_j)``: the Jacobian has nv
        columns.  Without, x is a vector, perturbed as x + h e_j.
    method : "central" or "forward".
    difference : None (outputs are arrays, subtracted) or a function
        ``difference(y0, y1)`` of two stacks returning (N, m), the tangent
        vector taking y0 to y1 (e.g. :func:`se3_difference`, or
        ``lambda a, b: geppetto.dynamics.difference(model, a, b)``).
    step : base step overriding :func:`step_size` (times max(1, |x_j|)).

    Returns
    -------
    J : out_shape + (n,), or (K,) + out_shape + (n,) for a stack, where
        out_shape is the shape of f's output for one point (m for a
        ``difference``) and n = nv with a model, dim without.
    """
    central = _is_central(method)
    base = step_size(method) if step is None else float(step)
    if model is not None:
        xs, single = as_configurations(model, x, "x")
        h = base * tangent_magnitudes(model, xs)
    else:
        arr = np.asarray(x, dtype=float)
        if arr.ndim not in (1, 2) or not np.all(np.isfinite(arr)):
            raise ValueError(f"x: expected a finite (n,) or (K, n) array, got shape {arr.shape}")
        single = arr.ndim == 1
        xs = np.ascontiguousarray(arr.reshape(1, -1) if single else arr)
        h = base * np.maximum(1.0, np.abs(xs))
    K, n = h.shape
    plus, h_plus = _perturbations(xs, model, h)
    if central:
        minus, h_minus = _perturbations(xs, model, -h)
        h_minus = -h_minus
        points = np.concatenate([plus.reshape(K * n, -1), minus.reshape(K * n, -1)])
    else:
        h_minus = np.zeros_like(h)
        points = np.concatenate([plus.reshape(K * n, -1), xs])
    y = _evaluate_points(f, points, vectorized)
    y_plus = y[:K * n]
    y_minus = y[K * n:] if central else np.repeat(y[K * n:], n, axis=0)
    if difference is None:
        dy = y_plus - y_minus
    else:
        dy = np.asarray(difference(y_minus, y_plus))
    dy = dy.reshape((K, n) + dy.shape[1:]) / (h_plus + h_minus).reshape(
        (K, n) + (1,) * (dy.ndim - 1))
    J = np.moveaxis(dy, 1, -1)
    return J[0] if single else J


# --- SE(3) helpers for placements ----------------------------------------------

def homogeneous(R, p):
    """4x4 homogeneous matrices (..., 4, 4) from R (..., 3, 3) and p (..., 3)."""
    R, p = np.asarray(R, dtype=float), np.asarray(p, dtype=float)
    M = np.zeros(R.shape[:-2] + (4, 4))
    M[..., :3, :3] = R
    M[..., :3, 3] = p
    M[..., 3, 3] = 1.0
    return M


def _rotation_log(R):
    """Rotation vectors (..., 3) of rotation matrices, angle in [0, pi] (via a quaternion)."""
    t = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    # Shepperd's method: each row is 4 q_c (x, y, z, w) for the largest coordinate q_c
    candidates = np.stack([
        np.stack([1.0 + 2.0 * R[..., 0, 0] - t, R[..., 0, 1] + R[..., 1, 0],
                  R[..., 0, 2] + R[..., 2, 0], R[..., 2, 1] - R[..., 1, 2]], -1),
        np.stack([R[..., 0, 1] + R[..., 1, 0], 1.0 + 2.0 * R[..., 1, 1] - t,
                  R[..., 1, 2] + R[..., 2, 1], R[..., 0, 2] - R[..., 2, 0]], -1),
        np.stack([R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1],
                  1.0 + 2.0 * R[..., 2, 2] - t, R[..., 1, 0] - R[..., 0, 1]], -1),
        np.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0],
                  R[..., 1, 0] - R[..., 0, 1], 1.0 + t], -1)], -2)
    diagonal = np.stack([R[..., 0, 0], R[..., 1, 1], R[..., 2, 2], t], -1)
    best = np.argmax(diagonal, axis=-1)
    quat = np.take_along_axis(candidates, best[..., None, None], -2)[..., 0, :]
    quat = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    quat = np.where(quat[..., 3:] < 0.0, -quat, quat)
    n = np.linalg.norm(quat[..., :3], axis=-1)
    w = quat[..., 3]
    small = n < 1e-8
    scale = np.where(small, 2.0 / w * (1.0 - n * n / (3.0 * w * w)),
                     2.0 * np.arctan2(n, w) / np.where(small, 1.0, n))
    return scale[..., None] * quat[..., :3]


def se3_difference(M0, M1):
    """log6(M0^-1 M1) (..., 6) [linear; angular] of homogeneous matrices (..., 4, 4).

    The tangent vector taking M0 to M1 in M0's local frame: with
    ``numerical_jacobian(placement, q, model, difference=se3_difference)``
    the result is a frame's LOCAL Jacobian.
    """
    M0, M1 = np.asarray(M0, dtype=float), np.asarray(M1, dtype=float)
    R0T = np.swapaxes(M0[..., :3, :3], -1, -2)
    R = R0T @ M1[..., :3, :3]
    p = np.einsum("...ij,...j->...i", R0T, M1[..., :3, 3] - M0[..., :3, 3])
    w = _rotation_log(R)
    t2 = np.sum(w * w, axis=-1)
    t = np.sqrt(t2)
    half = 0.5 * np.where(t2 < 1e-6, 1.0, t)
    # V(w)^-1 = I - [w]/2 + C [w]^2, C = 1/t^2 - cot(t/2)/(2t)
    C = np.where(t2 < 1e-6, 1.0 / 12.0 + t2 / 720.0,
                 1.0 / np.where(t2 < 1e-6, 1.0, t2)
                 - np.cos(half) / (4.0 * half * np.sin(half)))
    wxp = np.cross(w, p)
    rho = p - 0.5 * wxp + C[..., None] * np.cross(w, wxp)
    return np.concatenate([rho, w], axis=-1)
