"""Jacobians of integrate and difference: Pinocchio's ``dIntegrate`` / ``dDifference``.

With ``q (+) v = q exp(v)`` and ``q1 (-) q0 = log(q0^-1 q1)`` on each joint's
group (see :mod:`.liegroups`), every Jacobian is taken in the tangent spaces,
as Pinocchio does: ``d(q (+) v)/dq`` maps a tangent perturbation ``dq`` of q
(``q (+) dq``) to the tangent perturbation of the result.  All four are block
diagonal, one block per joint:

    d_integrate   arg="q":   Ad(exp(-v))                (Ad(exp(v)^-1))
                  arg="v":   Jr(v)                      (right Jacobian of exp)
    d_difference  arg="q0": -Jr(-d)^-1 = -Jl(d)^-1      d = log(q0^-1 q1)
                  arg="q1":  Jr(d)^-1

- vector spaces (revolute, prismatic, translation) and SO(2) (unbounded
  revolute): identity blocks (minus identity for ``q0``);
- SO(3) (spherical): Ad(exp(w)) = R(w), and Jr(w) = I - (1 - cos t)/t^2 [w]
  + (t - sin t)/t^3 [w]^2, t = |w|;
- SE(3) (free-flyer), twist xi = (rho, phi) [linear; angular]:
  Ad(exp(xi)) = [[R, [p] R], [0, R]] with R = exp(phi), p = Jl(phi) rho, and
  Jr(xi) = Jl(-xi), Jl(xi) = [[Jl(phi), Q(rho, phi)], [0, Jl(phi)]] with
  Barfoot's Q (Barfoot & Furgale 2014, eq. 102; Sola et al., "A micro Lie
  theory", 2018, eq. 180); Jr(xi)^-1 = [[A, -A Q A], [0, A]], A = Jr(phi)^-1;
- SE(2) (planar) is the subgroup of SE(3) with twists (vx, vy, 0, 0, 0, wz):
  its blocks are the rows and columns (0, 1, 5) of the SE(3) ones.

Kernels batch over a leading K axis.  The per-joint helpers take whole arrays
and integer offsets (never slices: a view made per joint costs more than the
arithmetic), a 6x6 scratch ``W`` and a stack of 3x3 scratch matrices ``S``.
"""
import math

import numpy as np

from .borrowed import frame_empty
from .config import kernel
from .liegroups import difference_state
from .model import FREE_FLYER, PLANAR, SPHERICAL
from .validation import as_configurations, as_stack

# Scratch matrices S[n] (3x3) used by the SE(3) helpers.  NumPy integers: a Python int
# global is a literal in Numba, and a helper called with one compiled once per constant
# (_matmul3 six times, _so3_polynomial five: ~8 s of the first run)
_RHO, _PHI, _P, _PP, _PPP, _X, _A, _B, _C = (np.int64(n) for n in range(9))
_N_SCRATCH = 9


@kernel
def _so3_coefficients(t2):
    """(sin t / t, (1 - cos t) / t^2, (t - sin t) / t^3) for t^2 = |w|^2."""
    if t2 < 1e-6:
        return (1.0 - t2 / 6.0 + t2 * t2 / 120.0, 0.5 - t2 / 24.0 + t2 * t2 / 720.0,
                1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0)
    t = math.sqrt(t2)
    s = math.sin(t)
    h = math.sin(0.5 * t)
    return s / t, 2.0 * h * h / t2, (t - s) / (t2 * t)


@kernel
def _so3_inverse_coefficient(t2):
    """C of Jr(w)^-1 = I + [w] / 2 + C [w]^2: 1/t^2 - cot(t/2) / (2 t)."""
    if t2 < 1e-6:
        return 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0
    t = math.sqrt(t2)
    # cot(t/2) from the half angle: 1 - cos t would lose digits near 0
    return 1.0 / t2 - math.cos(0.5 * t) / (2.0 * t * math.sin(0.5 * t))


@kernel
def _se3_q_coefficients(t2):
    """Barfoot's coefficients of Q: (t - sin t)/t^3, (t^2 + 2 cos t - 2)/(2 t^4),
    (2 t - 3 sin t + t cos t)/(2 t^5); their series below t = 0.1, where the
    closed forms cancel."""
    if t2 < 1e-2:
        return (1.0 / 6.0 - t2 * (1.0 / 120.0 - t2 * (1.0 / 5040.0 - t2 * (
                    1.0 / 362880.0 - t2 / 39916800.0))),
                1.0 / 24.0 - t2 * (1.0 / 720.0 - t2 * (1.0 / 40320.0 - t2 * (
                    1.0 / 3628800.0 - t2 / 479001600.0))),
                1.0 / 120.0 - t2 * (2.0 / 5040.0 - t2 * (3.0 / 362880.0 - t2 * (
                    4.0 / 39916800.0 - t2 * 5.0 / 6227020800.0))))
    t = math.sqrt(t2)
    s, c = math.sin(t), math.cos(t)
    return ((t - s) / (t2 * t), (t2 + 2.0 * c - 2.0) / (2.0 * t2 * t2),
            (2.0 * t - 3.0 * s + t * c) / (2.0 * t2 * t2 * t))


@kernel
def _so3_polynomial(xi, o, sign, a, b, S, n):
    """S[n] = I + a [w] + b [w]^2 with w = sign * xi[o:o+3]."""
    x, y, z = sign * xi[o], sign * xi[o + 1], sign * xi[o + 2]
    t2 = x * x + y * y + z * z
    # [w]^2 = w w^T - t2 I
    S[n, 0, 0] = 1.0 + b * (x * x - t2)
    S[n, 1, 1] = 1.0 + b * (y * y - t2)
    S[n, 2, 2] = 1.0 + b * (z * z - t2)
    S[n, 0, 1] = -a * z + b * x * y
    S[n, 1, 0] = a * z + b * x * y
    S[n, 0, 2] = a * y + b * x * z
    S[n, 2, 0] = -a * y + b * x * z
    S[n, 1, 2] = -a * x + b * y * z
    S[n, 2, 1] = a * x + b * y * z


@kernel
def _squared_norm(xi, o):
    return xi[o] * xi[o] + xi[o + 1] * xi[o + 1] + xi[o + 2] * xi[o + 2]


@kernel
def _so3_exp(xi, o, sign, S, n):
    """S[n] = R(w) = exp([w]), w = sign * xi[o:o+3] (Rodrigues)."""
    sinc, cosc, _ = _so3_coefficients(_squared_norm(xi, o))
    _so3_polynomial(xi, o, sign, sinc, cosc, S, n)


@kernel
def _so3_jr(xi, o, sign, S, n):
    """S[n] = Jr(w) = I - (1 - cos t)/t^2 [w] + (t - sin t)/t^3 [w]^2."""
    _, cosc, sinc3 = _so3_coefficients(_squared_norm(xi, o))
    _so3_polynomial(xi, o, sign, -cosc, sinc3, S, n)


@kernel
def _so3_jr_inverse(xi, o, sign, S, n):
    """S[n] = Jr(w)^-1 = I + [w] / 2 + C [w]^2."""
    _so3_polynomial(xi, o, sign, 0.5, _so3_inverse_coefficient(_squared_norm(xi, o)), S, n)


@kernel
def _skew(xi, o, sign, S, n):
    """S[n] = [w] with w = sign * xi[o:o+3]."""
    _so3_polynomial(xi, o, sign, 1.0, 0.0, S, n)
    for r in range(3):
        S[n, r, r] = 0.0


@kernel
def _matmul3(S, a, b, c):
    """S[c] = S[a] S[b]."""
    for r in range(3):
        for col in range(3):
            S[c, r, col] = (S[a, r, 0] * S[b, 0, col] + S[a, r, 1] * S[b, 1, col]
                            + S[a, r, 2] * S[b, 2, col])


@kernel
def _se3_q(xi, sign, S, n):
    """S[n] = Q(rho, phi) of Jl(xi) (Barfoot), xi = sign * (rho, phi)."""
    c1, c2, c3 = _se3_q_coefficients(_squared_norm(xi, 3))
    _skew(xi, 0, sign, S, _RHO)
    _skew(xi, 3, sign, S, _PHI)
    _matmul3(S, _PHI, _RHO, _P)      # [phi][rho]
    _matmul3(S, _P, _PHI, _PP)       # [phi][rho][phi]
    _matmul3(S, _PHI, _P, _PPP)      # [phi]^2 [rho]
    _matmul3(S, _PP, _PHI, _X)       # [phi][rho][phi]^2
    # [rho][phi] = ([phi][rho])^T, [rho][phi]^2 = -([phi]^2[rho])^T,
    # [phi]^2[rho][phi] = ([phi][rho][phi]^2)^T
    for r in range(3):
        for c in range(3):
            S[n, r, c] = (0.5 * S[_RHO, r, c]
                          + c1 * (S[_P, r, c] + S[_P, c, r] + S[_PP, r, c])
                          + c2 * (S[_PPP, r, c] - S[_PPP, c, r] - 3.0 * S[_PP, r, c])
                          + c3 * (S[_X, r, c] + S[_X, c, r]))


@kernel
def _se3_ad_exp(xi, sign, W, S):
    """W = Ad(exp(sign * xi)) = [[R, [p] R], [0, R]], p = Jl(phi) rho."""
    _so3_exp(xi, 3, sign, S, _A)
    _so3_jr(xi, 3, -sign, S, _B)          # Jl(phi) = Jr(-phi)
    for r in range(3):
        S[_C, 0, r] = 0.0
    p0 = sign * (S[_B, 0, 0] * xi[0] + S[_B, 0, 1] * xi[1] + S[_B, 0, 2] * xi[2])
    p1 = sign * (S[_B, 1, 0] * xi[0] + S[_B, 1, 1] * xi[1] + S[_B, 1, 2] * xi[2])
    p2 = sign * (S[_B, 2, 0] * xi[0] + S[_B, 2, 1] * xi[1] + S[_B, 2, 2] * xi[2])
    for c in range(3):
        for r in range(3):
            W[r, c] = S[_A, r, c]
            W[r + 3, c + 3] = S[_A, r, c]
            W[r + 3, c] = 0.0
        W[0, c + 3] = p1 * S[_A, 2, c] - p2 * S[_A, 1, c]
        W[1, c + 3] = p2 * S[_A, 0, c] - p0 * S[_A, 2, c]
        W[2, c + 3] = p0 * S[_A, 1, c] - p1 * S[_A, 0, c]


@kernel
def _se3_jr(xi, sign, W, S):
    """W = Jr(sign * xi) = Jl(-sign * xi)."""
    _so3_jr(xi, 3, sign, S, _A)
    _se3_q(xi, -sign, S, _B)
    for r in range(3):
        for c in range(3):
            W[r, c] = S[_A, r, c]
            W[r + 3, c + 3] = S[_A, r, c]
            W[r + 3, c] = 0.0
            W[r, c + 3] = S[_B, r, c]


@kernel
def _se3_jr_inverse(xi, sign, W, S):
    """W = Jr(sign * xi)^-1 = [[A, -A Q A], [0, A]], A = Jr(phi)^-1, Q of Jl(-sign * xi)."""
    _so3_jr_inverse(xi, 3, sign, S, _A)
    _se3_q(xi, -sign, S, _B)
    _matmul3(S, _A, _B, _C)
    _matmul3(S, _C, _A, _B)
    for r in range(3):
        for c in range(3):
            W[r, c] = S[_A, r, c]
            W[r + 3, c + 3] = S[_A, r, c]
            W[r + 3, c] = 0.0
            W[r, c + 3] = -S[_B, r, c]


@kernel
def _load_twist(jtype, v, k, iv, xi):
    """xi (6,) = the SE(3) twist of joint velocity v[k, iv:...] (planar embedded,
    spherical as (0, w))."""
    if jtype == FREE_FLYER:
        for r in range(6):
            xi[r] = v[k, iv + r]
    elif jtype == PLANAR:
        xi[0], xi[1], xi[2] = v[k, iv], v[k, iv + 1], 0.0
        xi[3], xi[4], xi[5] = 0.0, 0.0, v[k, iv + 2]
    else:
        xi[0], xi[1], xi[2] = 0.0, 0.0, 0.0
        xi[3], xi[4], xi[5] = v[k, iv], v[k, iv + 1], v[k, iv + 2]


@kernel
def _store_block(jtype, W, S, scale, out, k, iv):
    """out[k] block of the joint at iv = scale * (W for SE(3), W[(0,1,5),(0,1,5)]
    for SE(2), S[_A] for SO(3))."""
    if jtype == FREE_FLYER:
        for r in range(6):
            for c in range(6):
                out[k, iv + r, iv + c] = scale * W[r, c]
    elif jtype == PLANAR:
        for r in range(3):
            wr = r if r < 2 else 5
            for c in range(3):
                out[k, iv + r, iv + c] = scale * W[wr, c if c < 2 else 5]
    else:
        for r in range(3):
            for c in range(3):
                out[k, iv + r, iv + c] = scale * S[_A, r, c]


@kernel
def _identity_block(out, k, iv, n, scale):
    for r in range(n):
        out[k, iv + r, iv + r] = scale


@kernel
def _zero(out, k):
    for r in range(out.shape[1]):
        for c in range(out.shape[2]):
            out[k, r, c] = 0.0


@kernel
def _lie_block(jtype, which, sign, scale, xi, W, S, out, k, iv):
    """One joint's block: which = 0 Ad(exp(sign xi)), 1 Jr(sign xi), 2 Jr(sign xi)^-1."""
    if jtype == SPHERICAL:
        if which == 0:
            _so3_exp(xi, 3, sign, S, _A)
        elif which == 1:
            _so3_jr(xi, 3, sign, S, _A)
        else:
            _so3_jr_inverse(xi, 3, sign, S, _A)
    elif which == 0:
        _se3_ad_exp(xi, sign, W, S)
    elif which == 1:
        _se3_jr(xi, sign, W, S)
    else:
        _se3_jr_inverse(xi, sign, W, S)
    _store_block(jtype, W, S, scale, out, k, iv)


@kernel
def _lie_jacobians(m, tangent, which, sign, scale, out, xi, W, S):
    """out[k] = block diagonal of every joint's Lie block at tangent[k] (K, nv);
    vector-space joints get scale * I."""
    for k in range(tangent.shape[0]):
        _zero(out, k)
        for i in range(1, m.njoints):
            t, iv = m.jtype[i], m.idx_v[i]
            if t == FREE_FLYER or t == SPHERICAL or t == PLANAR:
                _load_twist(t, tangent, k, iv, xi)
                _lie_block(t, which, sign, scale, xi, W, S, out, k, iv)
            else:
                _identity_block(out, k, iv, m.nvs[i], scale)


@kernel
def _difference_stack(m, q0, q1, out):
    s4, t4, s3 = frame_empty(4), frame_empty(4), frame_empty(3)
    for k in range(q0.shape[0]):
        difference_state(m, q0[k], q1[k], out[k], s4, t4, s3)


_ARG_INTEGRATE = {"q": (0, -1.0, 1.0), "v": (1, 1.0, 1.0)}
_ARG_DIFFERENCE = {"q0": (2, -1.0, -1.0), "q1": (2, 1.0, 1.0)}


def _scratch():
    return np.empty(6), np.empty((6, 6)), np.empty((_N_SCRATCH, 3, 3))


def _argument(arg, choices, function):
    try:
        return choices[arg]
    except (KeyError, TypeError):
        raise ValueError(f"{function}: arg must be one of {sorted(choices)}, "
                         f"got {arg!r}") from None


def d_integrate(model, q, v, arg="q"):
    """Jacobian of ``integrate(model, q, v)`` w.r.t. q or v (Pinocchio's ``dIntegrate``).

    Parameters
    ----------
    q : (nq,) or (K, nq) configurations; v : (nv,) or (K, nv) velocities.
    arg : "q" (Pinocchio's ARG0) or "v" (ARG1).

    Returns
    -------
    (nv, nv) or (K, nv, nv), block diagonal: per joint Ad(exp(v)^-1) for
    ``arg="q"`` and the right Jacobian Jr(v) of the joint's group for
    ``arg="v"``, both in the tangent space at ``integrate(q, v)``.
    """
    which, sign, scale = _argument(arg, _ARG_INTEGRATE, "d_integrate")
    qs, single = as_configurations(model, q)
    vs, _ = as_stack(v, model.nv, "v", (qs.shape[0], single))
    out = np.empty((qs.shape[0], model.nv, model.nv))
    _lie_jacobians(model.arrays, vs, which, sign, scale, out, *_scratch())
    return out[0] if single else out


def d_difference(model, q0, q1, arg="q0"):
    """Jacobian of ``difference(model, q0, q1)`` w.r.t. q0 or q1 (Pinocchio's ``dDifference``).

    Parameters
    ----------
    q0, q1 : (nq,) or (K, nq) configurations.
    arg : "q0" (Pinocchio's ARG0) or "q1" (ARG1).

    Returns
    -------
    (nv, nv) or (K, nv, nv), block diagonal: per joint, with d = log(q0^-1 q1),
    -Jr(-d)^-1 for ``arg="q0"`` and Jr(d)^-1 for ``arg="q1"``.
    """
    which, sign, scale = _argument(arg, _ARG_DIFFERENCE, "d_difference")
    q0s, single = as_configurations(model, q0, "q0")
    q1s, _ = as_configurations(model, q1, "q1", (q0s.shape[0], single))
    K = q0s.shape[0]
    d = np.empty((K, model.nv))
    _difference_stack(model.arrays, q0s, q1s, d)
    out = np.empty((K, model.nv, model.nv))
    _lie_jacobians(model.arrays, d, which, sign, scale, out, *_scratch())
    return out[0] if single else out
