"""Configuration spaces: each joint's q lives on a Lie group, its v in the tangent space.

- revolute, prismatic, translation: R^n, q + v;
- unbounded revolute: SO(2) as (cos, sin);
- spherical: SO(3) as a unit quaternion (x, y, z, w), v the local angular velocity;
- planar: SE(2) as (x, y, cos, sin), v = (vx, vy, wz) local;
- free-flyer: SE(3) as (x, y, z, qx, qy, qz, qw), v = (v, w) local.

``integrate(q, v) = q * exp(v)`` and ``difference(q0, q1) = log(q0^-1 q1)``
on each joint's group, as Pinocchio's ``integrate`` / ``difference``;
``interpolate(q0, q1, u) = integrate(q0, u * difference(q0, q1))``.
"""
import math

import numpy as np

from . import mimic
from .config import kernel
from .model import REVOLUTE_UNBOUNDED, FREE_FLYER, SPHERICAL, PLANAR
from .one_state import _integrate_one, model_one_state
from .validation import as_configurations, as_stack, call_kernel


@kernel
def quaternion_multiply(a, b, out):
    """out = a * b for quaternions stored (x, y, z, w); out must not alias."""
    out[0] = a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1]
    out[1] = a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0]
    out[2] = a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3]
    out[3] = a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2]


@kernel
def exp3_quaternion(w, out):
    """Unit quaternion of the rotation vector w (3,)."""
    theta2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    theta = math.sqrt(theta2)
    if theta < 1e-6:
        # Taylor expansions of sin(t/2)/t and cos(t/2), exact to double precision here
        s = 0.5 - theta2 / 48.0
        c = 1.0 - theta2 / 8.0 + theta2 * theta2 / 384.0
    else:
        s = math.sin(0.5 * theta) / theta
        c = math.cos(0.5 * theta)
    out[0] = s * w[0]
    out[1] = s * w[1]
    out[2] = s * w[2]
    out[3] = c


@kernel
def log3_quaternion(qx, qy, qz, qw, out):
    """Rotation vector (3,) of the unit quaternion (qx, qy, qz, qw), angle in [0, pi]."""
    if qw < 0.0:
        qx, qy, qz, qw = -qx, -qy, -qz, -qw
    n = math.sqrt(qx * qx + qy * qy + qz * qz)
    if n < 1e-8:
        # 2 atan2(n, w) / n ~ 2 / w (1 - n^2 / (3 w^2))
        scale = 2.0 / qw * (1.0 - n * n / (3.0 * qw * qw))
    else:
        scale = 2.0 * math.atan2(n, qw) / n
    out[0] = scale * qx
    out[1] = scale * qy
    out[2] = scale * qz


@kernel
def _se3_v_coefficients(theta2):
    """(A, B) of V(w) = I + A [w]x + B [w]x^2, the left Jacobian of SO(3)."""
    theta = math.sqrt(theta2)
    if theta < 1e-4:
        return 0.5 - theta2 / 24.0, 1.0 / 6.0 - theta2 / 120.0
    return (1.0 - math.cos(theta)) / theta2, (theta - math.sin(theta)) / (theta2 * theta)


@kernel
def _se3_vinv_coefficient(theta2):
    """C of V(w)^-1 = I - [w]x / 2 + C [w]x^2."""
    theta = math.sqrt(theta2)
    if theta < 1e-4:
        return 1.0 / 12.0 + theta2 / 720.0
    return (1.0 - theta * math.sin(theta) / (2.0 * (1.0 - math.cos(theta)))) / theta2


@kernel
def _apply_v(w, x, a_coef, b_coef, out):
    """out = (I + a [w]x + b [w]x^2) x."""
    c0 = w[1] * x[2] - w[2] * x[1]
    c1 = w[2] * x[0] - w[0] * x[2]
    c2 = w[0] * x[1] - w[1] * x[0]
    d0 = w[1] * c2 - w[2] * c1
    d1 = w[2] * c0 - w[0] * c2
    d2 = w[0] * c1 - w[1] * c0
    out[0] = x[0] + a_coef * c0 + b_coef * d0
    out[1] = x[1] + a_coef * c1 + b_coef * d1
    out[2] = x[2] + a_coef * c2 + b_coef * d2


@kernel
def _rotate(x, y, z, w, v, out):
    """out = R(q) v for the unit quaternion (x, y, z, w)."""
    # v + 2 w (u x v) + 2 u x (u x v), u = (x, y, z)
    t0 = 2.0 * (y * v[2] - z * v[1])
    t1 = 2.0 * (z * v[0] - x * v[2])
    t2 = 2.0 * (x * v[1] - y * v[0])
    out[0] = v[0] + w * t0 + (y * t2 - z * t1)
    out[1] = v[1] + w * t1 + (z * t0 - x * t2)
    out[2] = v[2] + w * t2 + (x * t1 - y * t0)


@kernel
def integrate_state(m, q, v, out, s4, t4, s3):
    """out = q (+) v for one configuration (nq,) and velocity (nv,)."""
    idx_q, idx_v, jtype, nvs = m.idx_q, m.idx_v, m.jtype, m.nvs
    for i in range(1, m.njoints):
        iq, iv, t = idx_q[i], idx_v[i], jtype[i]
        if t == FREE_FLYER:
            exp3_quaternion(v[iv + 3:iv + 6], t4)
            a_coef, b_coef = _se3_v_coefficients(
                v[iv + 3] ** 2 + v[iv + 4] ** 2 + v[iv + 5] ** 2)
            _apply_v(v[iv + 3:iv + 6], v[iv:iv + 3], a_coef, b_coef, s3)
            _rotate(q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6], s3, s4)
            for r in range(3):
                out[iq + r] = q[iq + r] + s4[r]
            quaternion_multiply(q[iq + 3:iq + 7], t4, out[iq + 3:iq + 7])
        elif t == SPHERICAL:
            exp3_quaternion(v[iv:iv + 3], t4)
            quaternion_multiply(q[iq:iq + 4], t4, out[iq:iq + 4])
        elif t == REVOLUTE_UNBOUNDED:
            c, s = math.cos(v[iv]), math.sin(v[iv])
            out[iq] = q[iq] * c - q[iq + 1] * s
            out[iq + 1] = q[iq + 1] * c + q[iq] * s
        elif t == PLANAR:
            th = v[iv + 2]
            c, s = math.cos(th), math.sin(th)
            if abs(th) < 1e-4:
                sinc, cosc = 1.0 - th * th / 6.0, th / 2.0 - th * th * th / 24.0
            else:
                sinc, cosc = s / th, (1.0 - c) / th
            dx = sinc * v[iv] - cosc * v[iv + 1]
            dy = cosc * v[iv] + sinc * v[iv + 1]
            c0, s0 = q[iq + 2], q[iq + 3]
            out[iq] = q[iq] + c0 * dx - s0 * dy
            out[iq + 1] = q[iq + 1] + s0 * dx + c0 * dy
            out[iq + 2] = c0 * c - s0 * s
            out[iq + 3] = s0 * c + c0 * s
        else:
            for r in range(nvs[i]):
                out[iq + r] = q[iq + r] + v[iv + r]


@kernel
def difference_state(m, q0, q1, out, s4, t4, s3):
    """out = q1 (-) q0 = log(q0^-1 q1) (nv,) for one pair of configurations."""
    idx_q, idx_v, jtype, nvs = m.idx_q, m.idx_v, m.jtype, m.nvs
    for i in range(1, m.njoints):
        iq, iv, t = idx_q[i], idx_v[i], jtype[i]
        if t == FREE_FLYER or t == SPHERICAL:
            o = iq + 3 if t == FREE_FLYER else iq
            w = iv + 3 if t == FREE_FLYER else iv
            # relative rotation q0^-1 q1
            s4[0], s4[1], s4[2], s4[3] = -q0[o], -q0[o + 1], -q0[o + 2], q0[o + 3]
            quaternion_multiply(s4, q1[o:o + 4], t4)
            log3_quaternion(t4[0], t4[1], t4[2], t4[3], out[w:w + 3])
            if t == FREE_FLYER:
                for r in range(3):
                    s3[r] = q1[iq + r] - q0[iq + r]
                # relative translation R0^T (p1 - p0), then V(w)^-1
                _rotate(-q0[o], -q0[o + 1], -q0[o + 2], q0[o + 3], s3, t4)
                ww = out[w:w + 3]
                coef = _se3_vinv_coefficient(ww[0] ** 2 + ww[1] ** 2 + ww[2] ** 2)
                _apply_v(ww, t4, -0.5, coef, out[iv:iv + 3])
        elif t == REVOLUTE_UNBOUNDED:
            c0, s0, c1, s1 = q0[iq], q0[iq + 1], q1[iq], q1[iq + 1]
            out[iv] = math.atan2(c0 * s1 - s0 * c1, c0 * c1 + s0 * s1)
        elif t == PLANAR:
            c0, s0, c1, s1 = q0[iq + 2], q0[iq + 3], q1[iq + 2], q1[iq + 3]
            th = math.atan2(c0 * s1 - s0 * c1, c0 * c1 + s0 * s1)
            dx0, dy0 = q1[iq] - q0[iq], q1[iq + 1] - q0[iq + 1]
            px, py = c0 * dx0 + s0 * dy0, -s0 * dx0 + c0 * dy0
            # V(th)^-1 = (th / 2) [[cot(th/2), 1], [-1, cot(th/2)]]
            if abs(th) < 1e-4:
                a = 1.0 - th * th / 12.0
            else:
                a = 0.5 * th * math.sin(th) / (1.0 - math.cos(th))
            b = 0.5 * th
            out[iv] = a * px + b * py
            out[iv + 1] = -b * px + a * py
            out[iv + 2] = th
        else:
            for r in range(nvs[i]):
                out[iv + r] = q1[iq + r] - q0[iq + r]


@kernel
def normalize_state(m, q):
    """Project the quaternions and (cos, sin) pairs of q (nq,) back to unit norm."""
    for i in range(1, m.njoints):
        iq, t = m.idx_q[i], m.jtype[i]
        if t == FREE_FLYER or t == SPHERICAL:
            o = iq + 3 if t == FREE_FLYER else iq
            n = math.sqrt(q[o] ** 2 + q[o + 1] ** 2 + q[o + 2] ** 2 + q[o + 3] ** 2)
            for r in range(4):
                q[o + r] /= n
        elif t == REVOLUTE_UNBOUNDED or t == PLANAR:
            o = iq if t == REVOLUTE_UNBOUNDED else iq + 2
            n = math.sqrt(q[o] ** 2 + q[o + 1] ** 2)
            q[o] /= n
            q[o + 1] /= n


@kernel
def _integrate(m, q, v, out, s4, t4, s3):
    for k in range(q.shape[0]):
        integrate_state(m, q[k], v[k], out[k], s4, t4, s3)


@kernel
def _difference(m, q0, q1, out, s4, t4, s3):
    for k in range(q0.shape[0]):
        difference_state(m, q0[k], q1[k], out[k], s4, t4, s3)


@kernel
def _interpolate(m, q0, q1, u, out, dv, s4, t4, s3):
    for k in range(q0.shape[0]):
        difference_state(m, q0[k], q1[k], dv, s4, t4, s3)
        for r in range(dv.shape[0]):
            dv[r] *= u[k]
        integrate_state(m, q0[k], dv, out[k], s4, t4, s3)


@kernel
def _normalize(m, q):
    for k in range(q.shape[0]):
        normalize_state(m, q[k])


def _workspace():
    return np.empty(4), np.empty(4), np.empty(3)


def neutral(model):
    """The neutral configuration (nq,): zeros, identity quaternions, (cos, sin) = (1, 0)."""
    if isinstance(model, mimic.MimicModel):
        return mimic.neutral(model)
    q = np.zeros(model.nq)
    a = model.arrays
    for i in range(1, a.njoints):
        t, iq = a.jtype[i], a.idx_q[i]
        if t == FREE_FLYER:
            q[iq + 6] = 1.0
        elif t == SPHERICAL:
            q[iq + 3] = 1.0
        elif t == REVOLUTE_UNBOUNDED:
            q[iq] = 1.0
        elif t == PLANAR:
            q[iq + 2] = 1.0
    return q


def _check_limits_ordered(model, lo, hi):
    """ValueError naming the first coordinate (and its joint) with lower > upper."""
    crossed = np.flatnonzero(lo > hi)
    if crossed.size == 0:
        return
    c = int(crossed[0])
    joint = model.names[int(np.searchsorted(model.arrays.idx_q[1:], c, side="right"))]
    raise ValueError(f"random_configuration: lower_position_limit[{c}] = {lo[c]} > "
                     f"upper_position_limit[{c}] = {hi[c]} (joint {joint!r}); pass lower= "
                     "and upper= to draw within other bounds")


def random_configuration(model, rng=None, size=None, lower=None, upper=None):
    """Random configuration(s), uniform within the position limits.

    Vector-space coordinates are uniform in [lower, upper] where both limits
    are finite, and in a unit-width-2 interval ([-1, 1], or ending at the finite
    limit) where a limit is infinite or +-DBL_MAX; angles of
    unbounded revolute and planar joints are uniform in [-pi, pi]; quaternions
    are uniform on SO(3).  ``rng`` is a ``numpy.random.Generator`` (or a seed);
    ``size`` = K draws a stack (K, nq).
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.random_configuration(model, rng, size, lower, upper)
    rng = np.random.default_rng(rng)
    K = 1 if size is None else int(size)
    lo = np.array(model.lower_position_limit if lower is None else lower, dtype=float)
    hi = np.array(model.upper_position_limit if upper is None else upper, dtype=float)
    _check_limits_ordered(model, lo, hi)
    # Limits at +-inf or +-DBL_MAX (Pinocchio's free-flyer default) count as absent.
    lo_finite = np.isfinite(lo) & (np.abs(lo) < 1e100)
    hi_finite = np.isfinite(hi) & (np.abs(hi) < 1e100)
    lo = np.where(lo_finite, lo, np.where(hi_finite, np.minimum(hi, 1.0) - 2.0, -1.0))
    hi = np.where(hi_finite, hi, lo + 2.0)
    q = rng.uniform(lo, hi, size=(K, model.nq))
    a = model.arrays
    for i in range(1, a.njoints):
        t, iq = a.jtype[i], a.idx_q[i]
        if t in (FREE_FLYER, SPHERICAL):
            o = iq + 3 if t == FREE_FLYER else iq
            quat = rng.standard_normal((K, 4))
            q[:, o:o + 4] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        elif t in (REVOLUTE_UNBOUNDED, PLANAR):
            o = iq if t == REVOLUTE_UNBOUNDED else iq + 2
            angle = rng.uniform(-np.pi, np.pi, size=K)
            q[:, o], q[:, o + 1] = np.cos(angle), np.sin(angle)
    return q[0] if size is None else q


def integrate(model, q, v):
    """q (+) v: (nq,) or (K, nq), integrating the constant velocity v for unit time."""
    out = np.empty(model.nq)
    if model_one_state(_integrate_one, _integrate, model, q, v, out):
        return out
    qs, single = as_configurations(model, q)
    vs, _ = as_stack(v, model.nv, "v", (qs.shape[0], single))
    out = np.empty_like(qs)
    call_kernel(_integrate, model, qs, vs, out, *_workspace())
    return out[0] if single else out


def difference(model, q0, q1):
    """q1 (-) q0 = log(q0^-1 q1), the velocity (nv,) or (K, nv) taking q0 to q1 in unit time."""
    q0s, single = as_configurations(model, q0, "q0")
    q1s, _ = as_configurations(model, q1, "q1", (q0s.shape[0], single))
    out = np.empty((q0s.shape[0], model.nv))
    call_kernel(_difference, model, q0s, q1s, out, *_workspace())
    return out[0] if single else out


def interpolate(model, q0, q1, u):
    """integrate(q0, u * difference(q0, q1)); u scalar or (K,)."""
    q0s, single = as_configurations(model, q0, "q0")
    K = q0s.shape[0]
    q1s, _ = as_configurations(model, q1, "q1", (K, single))
    u_arr = np.asarray(u)
    if u_arr.dtype == object or not (np.issubdtype(u_arr.dtype, np.floating)
                                     or np.issubdtype(u_arr.dtype, np.integer)):
        raise ValueError(f"u: expected real numbers, got dtype {u_arr.dtype}")
    if u_arr.shape not in ((), (1,), (K,)) or (single and u_arr.ndim > 0 and u_arr.size != 1):
        raise ValueError(f"u: expected a scalar or shape ({K},), got {u_arr.shape}")
    us = np.broadcast_to(u_arr.astype(float).reshape(-1), (K,)).copy()
    if not np.all(np.isfinite(us)):
        raise ValueError("u: contains NaN or inf")
    out = np.empty_like(q0s)
    call_kernel(_interpolate, model, q0s, q1s, us, out, np.empty(model.nv), *_workspace())
    return out[0] if single else out


def normalize(model, q):
    """q with its quaternions and (cos, sin) pairs projected to unit norm (a copy)."""
    qs, single = as_stack(q, model.nq, "q")
    qs = qs.copy()
    call_kernel(_normalize, model, qs)
    return qs[0] if single else qs
