"""Residuals r(x, u) with analytical Jacobians Rx (nr, ndx) and Ru (nr, nu).

Each residual evaluates all K knots of a phase in one kernel (``prange`` over
knots).  References (targets) are one value for the phase or one per knot
(a leading K axis).  The kinematic residuals read the placements ``oR, op``
and the world Jacobian ``J`` of each knot from the stage's kinematics data,
filled before the costs by the dynamics (running knots) or by the terminal
stage: the contract "calc_diff uses what the stage computed" of Crocoddyl.

- :class:`StateResidual`:            r = x (-) x_ref, Rx = d difference/dx
- :class:`ControlResidual`:          r = u - u_ref, Ru = I
- :class:`FrameTranslationResidual`: r = p_f - p_ref, Rq = R_f J_f^LOCAL[:3]
- :class:`FrameRotationResidual`:    r = log3(R_ref^T R_f), Rq = Jr(r)^-1 J_f^LOCAL[3:]
- :class:`FramePlacementResidual`:   r = log6(M_ref^-1 M_f), Rq = Jr(r)^-1 J_f^LOCAL
  (Jr the right Jacobian of SE(3), "Jlog6" in Pinocchio)
- :class:`FrameVelocityResidual`:    r = v_f(q, v) - v_ref (LOCAL, LOCAL_WORLD_ALIGNED or
  WORLD), Rv = J_f, Rq from dov_i/dq_c = J_c x (ov_i - ov_parent)
- :class:`CenterOfMassResidual`:     r = c - c_ref, Rq = Jcom
- :class:`JointTorqueResidual`:      r = RNEA(q, v, u) - tau_ref (controls are
  accelerations: an inverse-dynamics formulation), Rx = dtau/dx, Ru = M
"""
import math
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from numba import prange

from ..dynamics.borrowed import frame_empty, frame_empty_int
from ..dynamics.config import inline_kernel, kernel, parallel_kernel
from ..dynamics.liegroup_derivatives import (_N_SCRATCH, _difference_stack, _lie_jacobians,
                                              _scratch, _se3_jr_inverse, _so3_jr_inverse)
from ..dynamics.liegroups import log3_quaternion
from ..dynamics.rnea_derivatives import rnea_derivatives
from ..dynamics.validation import as_count, check_frame
from .state import StateMultibody

FRAME_LOCAL, FRAME_WORLD, FRAME_LOCAL_WORLD_ALIGNED = 0, 1, 2


class ResidualData:
    """r (K, nr), Rx (K, nr, ndx), Ru (K, nr, nu) and the per-knot reference."""

    def __init__(self, K, nr, ndx, nu, reference):
        self.r = np.zeros((K, nr))
        self.Rx = np.zeros((K, nr, ndx))
        self.Ru = np.zeros((K, nr, nu))
        self.reference = reference


# (first, knots) within :func:`knot_window`, else None
_KNOT_WINDOW = ContextVar("knot_window", default=None)


@contextmanager
def knot_window(first, knots):
    """Within it, a reference given per knot of a phase of ``knots`` knots makes the data
    of that phase's knots first .. first + K (``create_data(K, ...)``): the data of a part
    of the phase (``ShootingProblem.parallel_plan`` cuts phases at chunk boundaries)."""
    token = _KNOT_WINDOW.set((int(first), int(knots)))
    try:
        yield
    finally:
        _KNOT_WINDOW.reset(token)


def _per_knot(value, shape, K, name):
    """``value`` of shape ``shape`` or (K,) + shape, as a new contiguous (K,) + shape
    array (owned and writable: ``ShootingProblem.set_reference`` writes into it); within
    :func:`knot_window` (first, knots), also (knots,) + shape, of which rows first ..
    first + K are taken."""
    arr = np.asarray(value, dtype=float)
    window = _KNOT_WINDOW.get()
    if arr.shape == tuple(shape):
        arr = np.broadcast_to(arr, (K,) + tuple(shape))
    elif window is not None and arr.shape == (window[1],) + tuple(shape) and \
            window[0] + K <= window[1]:
        arr = arr[window[0]:window[0] + K]
    elif arr.shape != (K,) + tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)} or {(K,) + tuple(shape)} "
                         f"(one per knot of the phase), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf")
    return np.array(arr, dtype=float, order="C", copy=True)


def _check_rotations(R, name, tolerance=1e-6):
    """R (K, 3, 3) must be rotation matrices (orthonormal, det +1)."""
    error = np.abs(np.swapaxes(R, 1, 2) @ R - np.eye(3)).max(initial=0.0)
    if error > tolerance or np.any(np.linalg.det(R) < 0.0):
        raise ValueError(f"{name}: not a rotation matrix (|R^T R - I| = {error:.3g}, "
                         "or det R < 0)")
    return R


# What a residual's values (calc) read from the stage's kinematics data:
# nothing, the placements oR, op of the knots, or the placements and world Jacobians J.
# (calc_diff reads the placements and J of every kinematic residual.)
NONE, PLACEMENTS, JACOBIANS = 0, 1, 2


def structure_key(value):
    """A hashable key equal for values that evaluate alike: arrays by value, numbers and
    strings as themselves, sequences item by item, objects with a ``structure_key``
    method by it, other objects by identity."""
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.dtype.str, value.tobytes())
    if value is None or isinstance(value, (bool, int, float, str, np.number)):
        return value
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(structure_key(v) for v in value)
    if hasattr(value, "structure_key"):
        return value.structure_key()
    return ("id", id(value))


def attributes_key(obj, exclude=()):
    """(type, every attribute but ``exclude`` by :func:`structure_key`)."""
    return (type(obj),) + tuple((name, structure_key(v)) for name, v in sorted(vars(obj).items())
                                if name not in exclude)


class Residual:
    """Base class: ``nr``, whether it needs the knots' kinematics (``needs_kinematics``;
    ``kinematics``: what its values read, :data:`NONE`, :data:`PLACEMENTS` or
    :data:`JACOBIANS`), whether it uses u.

    Two residuals with the same :meth:`structure_key` differ only by their
    references (the attributes named in ``reference_attributes``): the problem
    evaluates their knots in one kernel call, each knot with its own reference.
    """

    nr = 0
    needs_kinematics = False
    kinematics = NONE
    uses_control = False
    depends_on_state = True
    reference_attributes = ("reference",)

    def reference_shape(self):
        return (self.nr,)

    def structure_key(self):
        return attributes_key(self, self.reference_attributes)

    def has_knot_references(self):
        """Whether a reference was given per knot (a leading K axis), or is missing (a
        residual that keeps no ``reference``): such residuals are not grouped."""
        shapes = self.reference_shape()
        values = [getattr(self, name, None) for name in self.reference_attributes]
        if len(values) == 1:
            shapes = (shapes,)
        return any(v is None or np.shape(v) != tuple(s) for v, s in zip(values, shapes))

    def create_data(self, K, ndx, nu):
        return ResidualData(K, self.nr, ndx, nu,
                            _per_knot(self.reference, self.reference_shape(), K,
                                      f"{type(self).__name__} reference"))

    def calc(self, data, kinematics, xs, us):
        raise NotImplementedError

    def calc_diff(self, data, kinematics, xs, us):
        raise NotImplementedError

    def fused_step(self, data, kinematics, state):
        """The step of a phase function (:mod:`.fused`) evaluating this residual on
        ``data`` with the stage's ``kinematics``, or None (the stage then takes the
        per-term path)."""
        return None


class StateResidual(Residual):
    """r = x (-) x_ref (ndx,); default reference: the state's zero (neutral, v = 0)."""

    def __init__(self, state, reference=None):
        self.state = state
        self.nr = state.ndx
        self.reference = state.zero() if reference is None else np.asarray(reference, float)

    def reference_shape(self):
        return (self.state.nx,)

    def create_data(self, K, ndx, nu):
        data = super().create_data(K, ndx, nu)
        self.state.validate(data.reference, "StateResidual reference")   # unit quaternions
        return data

    def calc(self, data, kinematics, xs, us):
        data.r[:] = self.state.difference(data.reference, xs)

    def calc_diff(self, data, kinematics, xs, us):
        if not (isinstance(self.state, StateMultibody) and not self.state.flat):
            self.calc(data, kinematics, xs, us)
        if self.state.flat:
            if not getattr(data, "identity_set", False):
                data.Rx[:] = np.eye(self.nr)          # constant: written once
                data.identity_set = True
        elif isinstance(self.state, StateMultibody):
            _multibody_state_jacobian(self.state, data, xs)
        else:
            data.Rx[:] = self.state.jacobians_difference(data.reference, xs)[1]

    def fused_step(self, data, kinematics, state):
        from .fused import Step, _state
        if not isinstance(self.state, StateMultibody):
            return None
        K, nq, nv = data.r.shape[0], self.state.nq, self.state.nv
        if self.state.flat:
            data.Rx[:] = np.eye(self.nr)
            data.identity_set = True
        else:
            data.Rx[:, :nv, nv:] = 0.0
            data.Rx[:, nv:, :nv] = 0.0
            data.Rx[:, nv:, nv:] = np.eye(nv)
            data.velocity_blocks_set = True
        return Step((bool(self.state.flat), data.reference,
                     np.zeros((K, nq)), np.zeros((K, nq)), np.zeros((K, nv)), data.r, data.Rx,
                     np.zeros((K, nv, nv))) + _scratch(), _state,
                    model=self.state.model.arrays)


class ControlResidual(Residual):
    """r = u - u_ref (nu,); default reference zero."""

    uses_control = True
    depends_on_state = False

    def __init__(self, nu, reference=None):
        self.nr = as_count(nu, "nu")
        self.reference = np.zeros(self.nr) if reference is None else np.asarray(reference, float)

    def create_data(self, K, ndx, nu):
        if nu != self.nr:
            raise ValueError(f"ControlResidual has nu={self.nr}, the stage has nu={nu}")
        data = super().create_data(K, ndx, nu)
        data.Ru[:] = np.eye(nu)
        return data

    def calc(self, data, kinematics, xs, us):
        np.subtract(us, data.reference, out=data.r)

    def calc_diff(self, data, kinematics, xs, us):
        self.calc(data, kinematics, xs, us)

    def fused_step(self, data, kinematics, state):
        from .fused import Step, _control
        return Step((data.reference, data.r), _control)


# --- frame kinematics kernels ----------------------------------------------------------

@inline_kernel
def _frame_pose(oR, op, k, joint, fR, fp, R, p):
    """R (3, 3), p (3,) = oMi[joint] * jMf at knot k."""
    for a in range(3):
        p[a] = op[k, joint, a]
        for b in range(3):
            p[a] += oR[k, joint, a, b] * fp[b]
            s = 0.0
            for c in range(3):
                s += oR[k, joint, a, c] * fR[c, b]
            R[a, b] = s


@kernel
def _local_jacobian(m, J, k, joint, R, p, out, row0, rows):
    """out[row0 + r, c] = rows ``rows`` (0..5) of the LOCAL frame Jacobian at (R, p),
    for the dofs supporting ``joint`` (other columns untouched)."""
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    j = joint
    while j > 0:
        for c in range(idx_v[j], idx_v[j] + nvs[j]):
            w0, w1, w2 = J[k, 3, c], J[k, 4, c], J[k, 5, c]
            v0 = J[k, 0, c] + w1 * p[2] - w2 * p[1]
            v1 = J[k, 1, c] + w2 * p[0] - w0 * p[2]
            v2 = J[k, 2, c] + w0 * p[1] - w1 * p[0]
            for r in range(rows.shape[0]):
                a = rows[r]
                if a < 3:
                    out[row0 + r, c] = R[0, a] * v0 + R[1, a] * v1 + R[2, a] * v2
                else:
                    b = a - 3
                    out[row0 + r, c] = R[0, b] * w0 + R[1, b] * w1 + R[2, b] * w2
        j = parents[j]


@kernel
def _rotation_log(R, out, o):
    """out[o:o+3] = log3(R) through a quaternion (Shepperd's method: robust near pi)."""
    t = R[0, 0] + R[1, 1] + R[2, 2]
    if t > 0.0:
        s = 2.0 * math.sqrt(t + 1.0)
        w, x, y, z = 0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, \
            (R[1, 0] - R[0, 1]) / s
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        w, x, y, z = (R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, \
            (R[0, 2] + R[2, 0]) / s
    elif R[1, 1] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        w, x, y, z = (R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, \
            (R[1, 2] + R[2, 1]) / s
    else:
        s = 2.0 * math.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        w, x, y, z = (R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, \
            (R[1, 2] + R[2, 1]) / s, 0.25 * s
    log3_quaternion(x, y, z, w, out[o:o + 3])


# knots per chunk of a residual's knot loop: each chunk allocates its scratch once (per
# knot, eight small allocations cost ~6 us per 50 knots of a frame placement, against
# 20 us for its arithmetic); chunks of a few knots still spread over any thread count.
# (The thread count read inside the kernel, numba.get_num_threads(), is a dynamic global:
# it made the kernel, and the phase interpreter it is inlined into, uncacheable.)
_KNOTS_PER_CHUNK = 8


@inline_kernel
def _chunk_knots(chunk, K):
    """The knots (start, stop) of chunk ``chunk`` of a K-knot loop."""
    start = chunk * _KNOTS_PER_CHUNK
    return start, min(K, start + _KNOTS_PER_CHUNK)


@parallel_kernel("r")
def _frame_residual(m, oR, op, J, joint, fR, fp, kind, ref_R, ref_p, with_jacobian, r, Rx):
    """kind 0: translation (3), 1: rotation (3), 2: placement (6), for every knot (in
    :data:`_KNOTS_PER_CHUNK` chunks, the same arithmetic per knot)."""
    K = r.shape[0]
    n_chunks = (K + _KNOTS_PER_CHUNK - 1) // _KNOTS_PER_CHUNK
    # the chunks' local Jacobian rows (nv wide), one allocation per call
    rows_J = np.empty((n_chunks, 6, m.nv))
    for chunk in prange(n_chunks):
        start, stop = _chunk_knots(chunk, K)
        _frame_residual_knots(m, oR, op, J, joint, fR, fp, kind, ref_R, ref_p, with_jacobian,
                              r, Rx, rows_J[chunk], start, stop)


@kernel
def _frame_residual_knots(m, oR, op, J, joint, fR, fp, kind, ref_R, ref_p, with_jacobian,
                          r, Rx, J6, start, stop):
    """The knots start .. stop - 1 of :func:`_frame_residual` (one chunk), J6 (6, nv)
    its scratch.  A function of its own so that its fixed scratch lives in its stack
    frame (:func:`~geppetto.dynamics.borrowed.frame_empty` needs literal shapes, which
    the parallel loop's outlined body does not keep)."""
    # fixed scratch in the stack frame; J3 the first three rows of J6 (each use
    # zeroes it first)
    R = frame_empty((3, 3))
    p = frame_empty(3)
    Rrel = frame_empty((3, 3))
    xi = frame_empty(6)
    S = frame_empty((_N_SCRATCH, 3, 3))
    W = frame_empty((6, 6))
    J3 = J6[:3]
    rows_p = frame_empty_int(6)
    for a in range(6):
        rows_p[a] = a
    rows_t, rows_r = rows_p[:3], rows_p[3:]
    for k in range(start, stop):
        _frame_pose(oR, op, k, joint, fR, fp, R, p)
        if kind == 0:
            for a in range(3):
                r[k, a] = p[a] - ref_p[k, a]
            if with_jacobian:
                # LOCAL_WORLD_ALIGNED linear rows: R J_local[:3]
                Jl = J3
                Jl[:, :] = 0.0
                _local_jacobian(m, J, k, joint, R, p, Jl, 0, rows_t)
                for a in range(3):
                    for c in range(m.nv):
                        Rx[k, a, c] = R[a, 0] * Jl[0, c] + R[a, 1] * Jl[1, c] + \
                            R[a, 2] * Jl[2, c]
            continue
        # relative placement M_ref^-1 M_f
        for a in range(3):
            xi[a] = 0.0
            for b in range(3):
                xi[a] += ref_R[k, b, a] * (p[b] - ref_p[k, b])
                s = 0.0
                for c in range(3):
                    s += ref_R[k, c, a] * R[c, b]
                Rrel[a, b] = s
        _rotation_log(Rrel, xi, 3)
        if kind == 1:
            for a in range(3):
                r[k, a] = xi[3 + a]
            if with_jacobian:
                Jl = J3
                Jl[:, :] = 0.0
                _local_jacobian(m, J, k, joint, R, p, Jl, 0, rows_r)
                _so3_jr_inverse(xi, 3, 1.0, S, 0)
                for a in range(3):
                    for c in range(m.nv):
                        Rx[k, a, c] = S[0, a, 0] * Jl[0, c] + S[0, a, 1] * Jl[1, c] + \
                            S[0, a, 2] * Jl[2, c]
            continue
        _se3_log_translation(xi, S)
        for a in range(6):
            r[k, a] = xi[a]
        if with_jacobian:
            Jl = J6
            Jl[:, :] = 0.0
            _local_jacobian(m, J, k, joint, R, p, Jl, 0, rows_p)
            _se3_jr_inverse(xi, 1.0, W, S)
            for a in range(6):
                for c in range(m.nv):
                    s = 0.0
                    for b in range(6):
                        s += W[a, b] * Jl[b, c]
                    Rx[k, a, c] = s


@kernel
def _se3_log_translation(xi, S):
    """Given xi[:3] = relative translation p and xi[3:] = phi = log3(R), set
    xi[:3] = rho = V(phi)^-1 p (the linear part of log6)."""
    t2 = xi[3] * xi[3] + xi[4] * xi[4] + xi[5] * xi[5]
    t = math.sqrt(t2)
    if t < 1e-4:
        coef = 1.0 / 12.0 + t2 / 720.0
    else:
        coef = (1.0 - t * math.sin(t) / (2.0 * (1.0 - math.cos(t)))) / t2
    w0, w1, w2 = xi[3], xi[4], xi[5]
    x0, x1, x2 = xi[0], xi[1], xi[2]
    c0 = w1 * x2 - w2 * x1
    c1 = w2 * x0 - w0 * x2
    c2 = w0 * x1 - w1 * x0
    d0 = w1 * c2 - w2 * c1
    d1 = w2 * c0 - w0 * c2
    d2 = w0 * c1 - w1 * c0
    xi[0] = x0 - 0.5 * c0 + coef * d0
    xi[1] = x1 - 0.5 * c1 + coef * d1
    xi[2] = x2 - 0.5 * c2 + coef * d2


class _FrameResidual(Residual):
    needs_kinematics = True
    kinematics = PLACEMENTS
    kind = 0

    def __init__(self, model, frame, reference):
        self.model = model
        self.frame = check_frame(model, frame)
        self.joint = int(model.arrays.frame_joint[self.frame])
        self.fR = np.ascontiguousarray(model.arrays.frame_R[self.frame])
        self.fp = np.ascontiguousarray(model.arrays.frame_p[self.frame])
        self.reference = reference

    def _references(self, data):
        raise NotImplementedError

    def _run(self, data, kinematics, with_jacobian):
        ref_R, ref_p = self._references(data)
        _frame_residual(self.model.arrays, kinematics.oR, kinematics.op, kinematics.J,
                        self.joint, self.fR, self.fp, self.kind, ref_R, ref_p, with_jacobian,
                        data.r, data.Rx)

    def calc(self, data, kinematics, xs, us):
        self._run(data, kinematics, False)

    def calc_diff(self, data, kinematics, xs, us):
        self._run(data, kinematics, True)

    def fused_step(self, data, kinematics, state):
        if getattr(self, "axes", None) is not None:
            return None
        return self._fused_frame(data, kinematics)

    def _fused_frame(self, data, kinematics):
        from .fused import Step, _frame
        ref_R, ref_p = self._references(data)
        return Step((kinematics.oR, kinematics.op, kinematics.J, int(self.joint),
                     np.array(self.fR), np.array(self.fp), int(self.kind), ref_R, ref_p,
                     data.r, data.Rx), _frame, model=self.model.arrays)


class FrameTranslationResidual(_FrameResidual):
    """r = p_f(q) - target (3,): the frame origin in the world.

    ``axes``: keep only these world axes (e.g. ``[2]``, the height above the
    target's: a plane constraint ``Constraint(..., 0, inf)``); r is then
    (len(axes),) and the target stays a point (3,).
    """

    nr = 3
    kind = 0

    def __init__(self, model, frame, target, axes=None):
        super().__init__(model, frame, np.asarray(target, float))
        self.axes = None
        if axes is not None:
            self.axes = np.array(axes, dtype=int).reshape(-1)
            if self.axes.size == 0 or np.any((self.axes < 0) | (self.axes > 2)) or \
                    len(set(self.axes.tolist())) != self.axes.size:
                raise ValueError(f"axes must be distinct world axes in (0, 1, 2), got {axes}")
            self.nr = int(self.axes.size)

    def reference_shape(self):
        return (3,)

    def create_data(self, K, ndx, nu):
        data = super().create_data(K, ndx, nu)
        if self.axes is not None:
            data.full = ResidualData(K, 3, ndx, nu, None)    # all three rows, then selected
        return data

    def _run(self, data, kinematics, with_jacobian):
        if self.axes is None:
            return super()._run(data, kinematics, with_jacobian)
        full = data.full
        full.reference = data.reference
        super()._run(full, kinematics, with_jacobian)
        data.r[:] = full.r[:, self.axes]
        if with_jacobian:
            data.Rx[:] = full.Rx[:, self.axes]

    def _references(self, data):
        return np.empty((data.r.shape[0], 3, 3)), data.reference

    def fused_rows(self, data, kinematics, state):
        """(the fused step of all three rows, on ``data.full``; its data; the rows kept)
        with ``axes``, else None: for readers that select the rows themselves (ALDDP's
        constraints, :mod:`.constraints`)."""
        if self.axes is None:
            return None
        data.full.reference = data.reference
        return self._fused_frame(data.full, kinematics), data.full, self.axes


class FrameRotationResidual(_FrameResidual):
    """r = log3(R_ref^T R_f(q)) (3,)."""

    nr = 3
    kind = 1

    def __init__(self, model, frame, rotation):
        super().__init__(model, frame, np.asarray(rotation, float))

    def reference_shape(self):
        return (3, 3)

    def create_data(self, K, ndx, nu):
        data = super().create_data(K, ndx, nu)
        _check_rotations(data.reference, "FrameRotationResidual rotation")
        return data

    def _references(self, data):
        return data.reference, np.zeros((data.r.shape[0], 3))


class FramePlacementResidual(_FrameResidual):
    """r = log6(M_ref^-1 M_f(q)) (6,), [linear; angular]; reference (R (3, 3), p (3,))
    or per knot (R (K, 3, 3), p (K, 3))."""

    nr = 6
    kind = 2
    reference_attributes = ("rotation", "translation")

    def reference_shape(self):
        return ((3, 3), (3,))

    def __init__(self, model, frame, rotation, translation):
        super().__init__(model, frame, None)
        self.rotation = np.asarray(rotation, float)
        self.translation = np.asarray(translation, float)

    def create_data(self, K, ndx, nu):
        data = ResidualData(K, self.nr, ndx, nu, None)
        data.reference = (_per_knot(self.rotation, (3, 3), K, "FramePlacementResidual rotation"),
                          _per_knot(self.translation, (3,), K,
                                    "FramePlacementResidual translation"))
        _check_rotations(data.reference[0], "FramePlacementResidual rotation")
        return data

    def _references(self, data):
        return data.reference


@parallel_kernel("r")
def _com_residual(m, oR, op, J, ref, with_jacobian, r, Rx):
    K = r.shape[0]
    Y, parents, idx_v, nvs = m.inertia, m.parents, m.idx_v, m.nvs
    # the knots' subtree masses and first moments, two allocations per call (not per knot)
    masses = np.zeros((K, m.njoints))
    moments = np.zeros((K, m.njoints, 3))
    for k in prange(K):
        mass = masses[k]
        h = moments[k]
        for i in range(1, m.njoints):
            mass[i] = Y[i, 0, 0]
            h0, h1, h2 = Y[i, 5, 1], Y[i, 3, 2], Y[i, 4, 0]
            for a in range(3):
                h[i, a] = oR[k, i, a, 0] * h0 + oR[k, i, a, 1] * h1 + oR[k, i, a, 2] * h2 \
                    + Y[i, 0, 0] * op[k, i, a]
        for i in range(m.njoints - 1, 0, -1):
            mass[parents[i]] += mass[i]
            for a in range(3):
                h[parents[i], a] += h[i, a]
        total = mass[0]
        for a in range(3):
            r[k, a] = h[0, a] / total - ref[k, a]
        if not with_jacobian:
            continue
        for i in range(1, m.njoints):
            # column of joint i: (m_sub v + w x h_sub) / m_total
            for c in range(idx_v[i], idx_v[i] + nvs[i]):
                w0, w1, w2 = J[k, 3, c], J[k, 4, c], J[k, 5, c]
                Rx[k, 0, c] = (mass[i] * J[k, 0, c] + w1 * h[i, 2] - w2 * h[i, 1]) / total
                Rx[k, 1, c] = (mass[i] * J[k, 1, c] + w2 * h[i, 0] - w0 * h[i, 2]) / total
                Rx[k, 2, c] = (mass[i] * J[k, 2, c] + w0 * h[i, 1] - w1 * h[i, 0]) / total


class CenterOfMassResidual(Residual):
    """r = c(q) - c_ref (3,): the centre of mass of the whole robot in the world."""

    nr = 3
    needs_kinematics = True
    kinematics = PLACEMENTS

    def __init__(self, model, target):
        self.model = model
        self.reference = np.asarray(target, float)

    def calc(self, data, kinematics, xs, us):
        _com_residual(self.model.arrays, kinematics.oR, kinematics.op, kinematics.J,
                      data.reference, False, data.r, data.Rx)

    def calc_diff(self, data, kinematics, xs, us):
        _com_residual(self.model.arrays, kinematics.oR, kinematics.op, kinematics.J,
                      data.reference, True, data.r, data.Rx)

    def fused_step(self, data, kinematics, state):
        from .fused import Step, _com
        return Step((kinematics.oR, kinematics.op, kinematics.J,
                     data.reference, data.r, data.Rx), _com, model=self.model.arrays)


class JointTorqueResidual(Residual):
    """r = RNEA(q, v, u) - tau_ref (nv,), for stages whose controls are the joint
    accelerations (nu = nv, inverse-dynamics formulation)."""

    uses_control = True

    def __init__(self, model, reference=None):
        self.model = model
        self.nr = model.nv
        self.reference = np.zeros(model.nv) if reference is None else np.asarray(reference, float)

    def _split(self, xs):
        return xs[:, :self.model.nq], xs[:, self.model.nq:]

    def create_data(self, K, ndx, nu):
        if nu != self.model.nv:
            raise ValueError("JointTorqueResidual needs the controls to be accelerations "
                             f"(nu = nv = {self.model.nv}), the stage has nu = {nu}")
        data = super().create_data(K, ndx, nu)
        data.dynamics = self.model.create_data()
        return data

    def calc(self, data, kinematics, xs, us):
        from ..dynamics.rnea import rnea
        q, v = self._split(xs)
        data.r[:] = rnea(self.model, data.dynamics, q, v, us) - data.reference

    def calc_diff(self, data, kinematics, xs, us):
        q, v = self._split(xs)
        dq, dv, da = rnea_derivatives(self.model, data.dynamics, q, v, us)
        nv = self.model.nv
        data.r[:] = data.dynamics.tau[:xs.shape[0]] - data.reference
        data.Rx[:, :, :nv] = dq
        data.Rx[:, :, nv:] = dv
        data.Ru[:] = da


# --- frame velocity ----------------------------------------------------------------------

@inline_kernel
def _express_motion(reference, R, p, X, out):
    """out = X (a world motion [linear at the origin; angular]) seen at the frame
    (R, p): WORLD (1) unchanged, LOCAL_WORLD_ALIGNED (2) [X_lin + X_ang x p; X_ang],
    LOCAL (0) the same in the frame's axes."""
    v0 = X[0] + X[4] * p[2] - X[5] * p[1]
    v1 = X[1] + X[5] * p[0] - X[3] * p[2]
    v2 = X[2] + X[3] * p[1] - X[4] * p[0]
    if reference == FRAME_WORLD:
        for a in range(6):
            out[a] = X[a]
    elif reference == FRAME_LOCAL_WORLD_ALIGNED:
        out[0], out[1], out[2] = v0, v1, v2
        out[3], out[4], out[5] = X[3], X[4], X[5]
    else:
        for a in range(3):
            out[a] = R[0, a] * v0 + R[1, a] * v1 + R[2, a] * v2
            out[3 + a] = R[0, a] * X[3] + R[1, a] * X[4] + R[2, a] * X[5]


@inline_kernel
def _motion_cross(A, B, out):
    """out = A x B for motions [linear; angular]: [A_ang x B_lin + A_lin x B_ang; A_ang x B_ang]."""
    out[0] = A[4] * B[2] - A[5] * B[1] + A[1] * B[5] - A[2] * B[4]
    out[1] = A[5] * B[0] - A[3] * B[2] + A[2] * B[3] - A[0] * B[5]
    out[2] = A[3] * B[1] - A[4] * B[0] + A[0] * B[4] - A[1] * B[3]
    out[3] = A[4] * B[5] - A[5] * B[4]
    out[4] = A[5] * B[3] - A[3] * B[5]
    out[5] = A[3] * B[4] - A[4] * B[3]


@inline_kernel
def _frame_velocity_columns(m, J, k, joint, reference, R, p, ov, Rx, work):
    """Rx[k] (6, 2 nv) of r = T ov_joint for the dofs c supporting ``joint`` (zero elsewhere):
    dr/dv_c = T J_c; dr/dq_c from dov_i/dq_c = J_c x (ov_i - ov_lambda), lambda the parent of
    joint(c), and the motion of the frame: LOCAL T (ov_lambda x J_c), WORLD J_c x (ov_i -
    ov_lambda), LOCAL_WORLD_ALIGNED T(J_c x (ov_i - ov_lambda)) + [ov_i,ang x (T J_c)_lin; 0]."""
    nv = m.nv
    Jc, D, Y, col = work[0], work[1], work[2], work[3]
    Rx[k, :, :] = 0.0
    j = joint
    while j > 0:
        lam = m.parents[j]
        for c in range(m.idx_v[j], m.idx_v[j] + m.nvs[j]):
            for a in range(6):
                Jc[a] = J[k, a, c]
                D[a] = ov[joint, a] - ov[lam, a]
            _express_motion(reference, R, p, Jc, col)
            for a in range(6):
                Rx[k, a, nv + c] = col[a]
            if reference == FRAME_LOCAL:
                _motion_cross(ov[lam], Jc, Y)
            else:
                _motion_cross(Jc, D, Y)
            _express_motion(reference, R, p, Y, D)
            if reference == FRAME_LOCAL_WORLD_ALIGNED:
                X3, X4, X5 = ov[joint, 3], ov[joint, 4], ov[joint, 5]
                D[0] += X4 * col[2] - X5 * col[1]
                D[1] += X5 * col[0] - X3 * col[2]
                D[2] += X3 * col[1] - X4 * col[0]
            for a in range(6):
                Rx[k, a, c] = D[a]
        j = lam


@parallel_kernel("r")
def _frame_velocity_residual(m, oR, op, J, vs, joint, fR, fp, reference, ref, with_jacobian,
                             r, Rx):
    """r = velocity of the frame (fR, fp) of ``joint`` in ``reference`` - ref, every knot
    (in :data:`_KNOTS_PER_CHUNK` chunks, the same arithmetic per knot)."""
    K = r.shape[0]
    n_chunks = (K + _KNOTS_PER_CHUNK - 1) // _KNOTS_PER_CHUNK
    # the chunks' world velocities of the joints up to ``joint``, one allocation per call
    velocities = np.empty((n_chunks, joint + 1, 6))
    for chunk in prange(n_chunks):
        start, stop = _chunk_knots(chunk, K)
        _frame_velocity_knots(m, oR, op, J, vs, joint, fR, fp, reference, ref, with_jacobian,
                              r, Rx, velocities[chunk], start, stop)


@kernel
def _frame_velocity_knots(m, oR, op, J, vs, joint, fR, fp, reference, ref, with_jacobian,
                          r, Rx, ov, start, stop):
    """The knots start .. stop - 1 of :func:`_frame_velocity_residual` (one chunk), ov
    (joint + 1, 6) its scratch (a function of its own: see :func:`_frame_residual_knots`)."""
    R = frame_empty((3, 3))
    p = frame_empty(3)
    work = frame_empty((4, 6))
    for k in range(start, stop):
        ov[:, :] = 0.0
        _frame_pose(oR, op, k, joint, fR, fp, R, p)
        # world velocities ov_i = ov_parent + J_i v_i of the joints up to ``joint``
        for i in range(1, joint + 1):
            for a in range(6):
                s = ov[m.parents[i], a]
                for c in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
                    s += J[k, a, c] * vs[k, c]
                ov[i, a] = s
        _express_motion(reference, R, p, ov[joint], work[0])
        for a in range(6):
            r[k, a] = work[0, a] - ref[k, a]
        if with_jacobian:
            _frame_velocity_columns(m, J, k, joint, reference, R, p, ov, Rx, work)


class FrameVelocityResidual(_FrameResidual):
    """r = v_f(q, v) - v_ref (6,), the spatial velocity [linear; angular] of a frame.

    ``reference_frame``: LOCAL (the frame's velocity in its own axes, Pinocchio's
    ``getFrameVelocity``), LOCAL_WORLD_ALIGNED (the velocity of its origin and its
    angular velocity in world axes) or WORLD (at the world origin); the codes of
    :mod:`geppetto.dynamics` or their names.  Analytical Jacobians: dr/dv = J_f (the
    frame Jacobian in that reference), dr/dq from the world-frame identity
    dov_i/dq_c = J_c x (ov_i - ov_parent(joint(c))) (Carpentier & Mansard 2018,
    identity (13); Pinocchio's ``getFrameVelocityDerivatives``).
    """

    nr = 6
    kinematics = JACOBIANS     # the velocities are J v

    def __init__(self, model, frame, reference=None, reference_frame=FRAME_LOCAL):
        from ..dynamics.kinematics import _reference_code
        super().__init__(model, frame, np.zeros(6) if reference is None
                         else np.asarray(reference, float))
        self.reference_frame = _reference_code(reference_frame)

    def _run(self, data, kinematics, xs, with_jacobian):
        vs = np.ascontiguousarray(xs[:, self.model.nq:])
        _frame_velocity_residual(self.model.arrays, kinematics.oR, kinematics.op, kinematics.J,
                                 vs, self.joint, self.fR, self.fp, self.reference_frame,
                                 data.reference, with_jacobian, data.r, data.Rx)

    def calc(self, data, kinematics, xs, us):
        self._run(data, kinematics, xs, False)

    def calc_diff(self, data, kinematics, xs, us):
        self._run(data, kinematics, xs, True)

    def fused_step(self, data, kinematics, state):
        from .fused import Step, _frame_velocity
        K = data.r.shape[0]
        return Step((kinematics.oR, kinematics.op, kinematics.J,
                     np.zeros((K, self.model.nv)), int(self.joint), np.array(self.fR),
                     np.array(self.fp), int(self.reference_frame), data.reference, data.r,
                     data.Rx),
                    _frame_velocity, model=self.model.arrays)


def _multibody_state_jacobian(state, data, xs):
    """r = x (-) x_ref and Rx = d r / dx of a :class:`StateResidual` on a multibody
    state with Lie-group joints, in place: one difference and one Lie-Jacobian
    kernel (the configuration block, block-diagonal per joint); the velocity
    blocks (0 and I) are constant, written once."""
    nq, nv = state.nq, state.nv
    K = xs.shape[0]
    dq = np.empty((K, nv))
    _difference_stack(state.model.arrays, np.ascontiguousarray(data.reference[:, :nq]),
                      np.ascontiguousarray(xs[:, :nq]), dq)
    data.r[:, :nv] = dq
    np.subtract(xs[:, nq:], data.reference[:, nq:], out=data.r[:, nv:])
    block = np.empty((K, nv, nv))
    _lie_jacobians(state.model.arrays, dq, 2, 1.0, 1.0, block, *_scratch())
    data.Rx[:, :nv, :nv] = block
    if not getattr(data, "velocity_blocks_set", False):
        data.Rx[:, :nv, nv:] = 0.0
        data.Rx[:, nv:, :nv] = 0.0
        data.Rx[:, nv:, nv:] = np.eye(nv)
        data.velocity_blocks_set = True
