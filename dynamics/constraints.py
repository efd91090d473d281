"""Rigid constraints: point contacts (3D), frame contacts (6D) and loop closures.

A constraint ties a frame c1, fixed to joint ``joint1`` at the placement
(R1, p1) in its frame, to a frame c2 fixed to ``joint2`` (joint 0: the world,
then (R2, p2) is c2's placement in the world, the contact's target).  It is
Pinocchio's ``RigidConstraintModel`` (CONTACT_3D / CONTACT_6D, reference frame
LOCAL or LOCAL_WORLD_ALIGNED, Baumgarte corrector gains Kp, Kd), with the same
definitions, so that every quantity compares 1:1 with Pinocchio 4.1:

- the constraint velocity is ``Jc v``: for a 3D constraint the velocity of the
  point c1 relative to the point c2, ``A^T (v_c1 - v_c2)``, with A = R1 (LOCAL,
  the axes of c1) or I (LOCAL_WORLD_ALIGNED); for a 6D constraint the spatial
  velocity of c1 relative to c2, expressed at c1 (LOCAL) or at the origin of
  c1 with world axes (LOCAL_WORLD_ALIGNED);
- the constraint acceleration is ``c(q, v, a) = Jc a + gamma(q, v)``; the
  dynamics enforce ``c = 0``.  gamma holds the velocity-product (drift) terms
  and the Baumgarte corrector, exactly as Pinocchio's ``constraintDynamics``
  builds its right-hand side: with (world frame) ov_i, oa_i the spatial
  velocity and acceleration of joint i (gravity excluded), pc_i the origin of
  c_i, vp_i = ov_i.lin + ov_i.ang x pc_i and ap_i = oa_i.lin + oa_i.ang x pc_i
  + ov_i.ang x vp_i the velocity and classical acceleration of that point,
  M = c1Mc2 and log6 the SE(3) logarithm:

      3D:            c = A^T [ap_1 - ap_2 - Kp (pc_2 - pc_1) + Kd (vp_1 - vp_2)]
      6D LOCAL:      c = X1^-1 [(oa_1 - oa_2) + (ov_1 - ov_2) x ov_2 + Kd (ov_1 - ov_2)]
                         - Kp log6(M)
      6D WORLD_AL.:  c = T1 [(oa_1 - oa_2) + Kd (ov_1 - ov_2)] - Kp R1 log6(M)

  (X1^-1: the world motion seen in c1; T1: the same motion taken at pc_1 with
  world axes; R1 log6(M): both halves rotated by R1);
- the multiplier lambda is the force that c2 (the environment) exerts on c1,
  in the frame of the constraint (LOCAL: c1's axes; LOCAL_WORLD_ALIGNED: world
  axes at pc_1): ``M ddq = tau - b + Jc^T lambda``.  As spatial forces, body 1
  receives F and body 2 the reaction -F (for 3D, F is the linear force f = A
  lambda applied at pc_1 on body 1 and at pc_2 on body 2).

Kernels read a :data:`ConstraintArrays` tuple (one row per constraint) and
write constraint rows ``row[k] .. row[k] + size[k]``.  A dof d "supports"
joint i when its joint is an ancestor of (or is) i: ``s_i(d)``.
"""
from collections import namedtuple

import numpy as np

from .config import inline_kernel, kernel
from .joints import compose, placements
from .model import freeze_arrays
from .kinematics import LOCAL, WORLD, _reference_code, joint_jacobians_state, world_motions
from .liegroups import _apply_v, _se3_vinv_coefficient, log3_quaternion
from .spatial import inv_act_force, inv_act_motion, motion_cross
from .validation import (as_configurations, as_stack, check_data, check_frame, check_model_of,
                         model_fingerprint)

CONTACT_3D = 3
CONTACT_6D = 6
_KINDS = {"CONTACT_3D": CONTACT_3D, "CONTACT_6D": CONTACT_6D, 3: CONTACT_3D, 6: CONTACT_6D}

ConstraintArrays = namedtuple("ConstraintArrays", [
    "n", "nrows", "kind", "row", "joint1", "joint2", "R1", "p1", "R2", "p2", "reference",
    "Kp", "Kd"])


class RigidConstraint:
    """One holonomic constraint between the frames c1 and c2 (Pinocchio's
    ``RigidConstraintModel``).

    Parameters
    ----------
    model : Model
    kind : CONTACT_3D (3) or CONTACT_6D (6), or their names.
    frame1 : frame id or name; c1 is that frame (its joint and placement).
    frame2 : frame id or name for a loop closure; None for a contact with the
        world (joint 0).
    reference : LOCAL or LOCAL_WORLD_ALIGNED (WORLD is refused, as in Pinocchio).
    Kp, Kd : Baumgarte gains of the corrector (>= 0).
    target : world placement of c2 for a contact, ``(R, p)`` or ``p`` (then R =
        I); default the identity, as Pinocchio.  Only the Kp term reads it.
    name : a label (default frame1's name).
    """

    __slots__ = ("kind", "joint1", "R1", "p1", "joint2", "R2", "p2", "reference", "Kp",
                 "Kd", "name", "frame1", "frame2", "model_name", "_constraint_fingerprint")

    def __init__(self, model, kind, frame1, frame2=None, reference=LOCAL, Kp=0.0, Kd=0.0,
                 target=None, name=None):
        try:
            self.kind = _KINDS[kind.upper() if isinstance(kind, str) else int(kind)]
        except (KeyError, ValueError, TypeError):
            raise ValueError(f"constraint kind {kind!r}: expected CONTACT_3D (3) or "
                             "CONTACT_6D (6)") from None
        self.reference = _reference_code(reference)
        if self.reference == WORLD:
            raise ValueError("constraints are expressed in LOCAL or LOCAL_WORLD_ALIGNED, "
                             "not WORLD (as Pinocchio's constraintDynamics)")
        for gain, label in ((Kp, "Kp"), (Kd, "Kd")):
            if not (np.isfinite(gain) and gain >= 0.0):
                raise ValueError(f"Baumgarte gain {label} = {gain!r}: expected a finite "
                                 "number >= 0")
        self.Kp, self.Kd = float(Kp), float(Kd)
        self.model_name = model.name
        self._constraint_fingerprint = model_fingerprint(model)
        self.frame1 = check_frame(model, frame1, "frame1" if frame2 is not None else "frame")
        frame = model.frames[self.frame1]
        self.joint1, self.R1, self.p1 = frame.joint, frame.R.copy(), frame.p.copy()
        if self.joint1 == 0:
            raise ValueError(f"frame {frame.name!r} is fixed to the universe: nothing to "
                             "constrain")
        if frame2 is None:
            self.frame2 = None
            self.joint2 = 0
            self.R2, self.p2 = _placement(target)
        else:
            if target is not None:
                raise ValueError("target is the world placement of a contact; a loop "
                                 "closure takes it from frame2")
            self.frame2 = check_frame(model, frame2, "frame2")
            other = model.frames[self.frame2]
            self.joint2, self.R2, self.p2 = other.joint, other.R.copy(), other.p.copy()
            if self.joint2 == self.joint1:
                raise ValueError(f"frames {frame.name!r} and {other.name!r} are on the same "
                                 "joint: the constraint is void")
        self.name = frame.name if name is None else str(name)

    @property
    def size(self):
        return self.kind

    def __repr__(self):
        kind = "CONTACT_3D" if self.kind == CONTACT_3D else "CONTACT_6D"
        return f"RigidConstraint({self.name!r}, {kind}, joint1={self.joint1}, joint2={self.joint2})"


def _placement(target):
    if target is None:
        return np.eye(3), np.zeros(3)
    if isinstance(target, (tuple, list)) and len(target) == 2:
        R = np.asarray(target[0], dtype=float).reshape(3, 3)
        p = np.asarray(target[1], dtype=float).reshape(3)
    else:
        R, p = np.eye(3), np.asarray(target, dtype=float).reshape(3)
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))):
        raise ValueError("target: contains NaN or inf")
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-9):
        raise ValueError("target: the rotation is not orthonormal")
    return R, p


def contact_3d(model, frame, reference=LOCAL, Kp=0.0, Kd=0.0, target=None, name=None):
    """Point contact of ``frame`` with the world (3 rows)."""
    return RigidConstraint(model, CONTACT_3D, frame, None, reference, Kp, Kd, target, name)


def contact_6d(model, frame, reference=LOCAL, Kp=0.0, Kd=0.0, target=None, name=None):
    """Frame (surface) contact of ``frame`` with the world (6 rows)."""
    return RigidConstraint(model, CONTACT_6D, frame, None, reference, Kp, Kd, target, name)


def loop_closure(model, frame1, frame2, size=6, reference=LOCAL, Kp=0.0, Kd=0.0, name=None):
    """Loop closure between two frames: their origins coincide (size 3) or the
    frames coincide (size 6)."""
    return RigidConstraint(model, size, frame1, frame2, reference, Kp, Kd, None, name)


class ConstraintSet:
    """An ordered set of :class:`RigidConstraint` packed for the kernels.

    ``size`` is the number of rows (sum of the constraint sizes); ``rows(k)``
    the slice of constraint k in a stacked vector (lambda, Jc, gamma);
    ``arrays`` the :data:`ConstraintArrays`.  Build it once and pass it to
    every call (a plain list of constraints is packed at each call).
    """

    def __init__(self, model, constraints):
        try:
            constraints = list(constraints)
        except TypeError:
            raise ValueError("constraints: expected RigidConstraint objects or a ConstraintSet, "
                             f"got {type(constraints).__name__}") from None
        for c in constraints:
            if not isinstance(c, RigidConstraint):
                raise ValueError(f"expected RigidConstraint objects, got {type(c).__name__}")
            check_model_of(model, c, f"constraint {c.name!r}", "_constraint_fingerprint")
        self.constraints = tuple(constraints)
        self.model_name = model.name
        self._constraint_fingerprint = model_fingerprint(model)
        n = len(constraints)
        sizes = np.array([c.kind for c in constraints], dtype=np.int64)
        row = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if n else \
            np.zeros(0, dtype=np.int64)
        self.arrays = ConstraintArrays(
            n=n, nrows=int(sizes.sum()), kind=sizes, row=row,
            joint1=np.array([c.joint1 for c in constraints], dtype=np.int64),
            joint2=np.array([c.joint2 for c in constraints], dtype=np.int64),
            R1=np.array([c.R1 for c in constraints], dtype=float).reshape(n, 3, 3),
            p1=np.array([c.p1 for c in constraints], dtype=float).reshape(n, 3),
            R2=np.array([c.R2 for c in constraints], dtype=float).reshape(n, 3, 3),
            p2=np.array([c.p2 for c in constraints], dtype=float).reshape(n, 3),
            reference=np.array([c.reference for c in constraints], dtype=np.int64),
            Kp=np.array([c.Kp for c in constraints], dtype=float),
            Kd=np.array([c.Kd for c in constraints], dtype=float))
        freeze_arrays(self.arrays)

    def __setstate__(self, state):
        # as Model.__setstate__: NumPy unpickles (and deep-copies) a read-only array as a
        # writable one, which Numba types apart (every kernel would compile again for the
        # copy, e.g. on a Dask worker); the set's arrays and the packings cached on it
        # (contact chains, the arrays without gains) are all read-only
        self.__dict__.update(state)
        for value in state.values():
            if isinstance(value, tuple):
                freeze_arrays(value)

    size = property(lambda self: self.arrays.nrows)
    names = property(lambda self: [c.name for c in self.constraints])

    def rows(self, k):
        start = int(self.arrays.row[k])
        return slice(start, start + int(self.arrays.kind[k]))

    def __len__(self):
        return len(self.constraints)

    def __iter__(self):
        return iter(self.constraints)

    def __repr__(self):
        return f"ConstraintSet({self.names}, size={self.size})"


def as_constraint_set(model, constraints):
    """A :class:`ConstraintSet` of ``model`` from a set or a sequence of constraints."""
    if isinstance(constraints, ConstraintSet):
        if constraints._constraint_fingerprint != model_fingerprint(model):
            check_model_of(model, constraints, "constraints", "_constraint_fingerprint")
        return constraints
    if isinstance(constraints, RigidConstraint):
        constraints = [constraints]
    return ConstraintSet(model, constraints)


# --- Small helpers on rows of arrays ----------------------------------------

@inline_kernel
def supports(subtree_end, j, i):
    """Joint j (> 0) is an ancestor of, or is, joint i (> 0)."""
    return i > 0 and j <= i and i < subtree_end[j]


def supporting_dofs(model, joint):
    """The dofs that support ``joint`` (> 0), in increasing order (Pinocchio's
    ``model.supports`` in dofs): the d whose joint dof_joint[d] :func:`supports` it,
    that very predicate run as Python, for setup code (the lanes' contact chains)."""
    m = model.arrays
    return [d for d in range(model.nv) if supports.py_func(m.subtree_end, m.dof_joint[d], joint)]


@inline_kernel
def add_cross(a, i, ao, b, j, bo, out, o, oo, s):
    """out[o, oo:oo+3] += s * (a[i, ao:ao+3] x b[j, bo:bo+3]) (inputs read first)."""
    x0 = a[i, ao + 1] * b[j, bo + 2] - a[i, ao + 2] * b[j, bo + 1]
    x1 = a[i, ao + 2] * b[j, bo] - a[i, ao] * b[j, bo + 2]
    x2 = a[i, ao] * b[j, bo + 1] - a[i, ao + 1] * b[j, bo]
    out[o, oo] += s * x0
    out[o, oo + 1] += s * x1
    out[o, oo + 2] += s * x2


@inline_kernel
def rotate_transpose(R, k, x, i, xo, out, o, oo, s):
    """out[o, oo:oo+3] = s * R[k]^T x[i, xo:xo+3] (inputs read first)."""
    x0, x1, x2 = x[i, xo], x[i, xo + 1], x[i, xo + 2]
    for r in range(3):
        out[o, oo + r] = s * (R[k, 0, r] * x0 + R[k, 1, r] * x1 + R[k, 2, r] * x2)


@inline_kernel
def rotate(R, k, x, i, xo, out, o, oo):
    """out[o, oo:oo+3] = R[k] x[i, xo:xo+3] (inputs read first)."""
    x0, x1, x2 = x[i, xo], x[i, xo + 1], x[i, xo + 2]
    for r in range(3):
        out[o, oo + r] = R[k, r, 0] * x0 + R[k, r, 1] * x1 + R[k, r, 2] * x2


@inline_kernel
def translate_motion(p, k, x, i, out, o):
    """out[o] = x[i] taken at the point p[k] (world axes): [lin + ang x p; ang]."""
    a0, a1, a2 = x[i, 3], x[i, 4], x[i, 5]
    out[o, 0] = x[i, 0] + a1 * p[k, 2] - a2 * p[k, 1]
    out[o, 1] = x[i, 1] + a2 * p[k, 0] - a0 * p[k, 2]
    out[o, 2] = x[i, 2] + a0 * p[k, 1] - a1 * p[k, 0]
    out[o, 3], out[o, 4], out[o, 5] = a0, a1, a2


@inline_kernel
def point_motion(ov, oa, i, p, k, out, o):
    """out[o, :3] = vp, velocity of the point p[k] of body i; out[o, 3:] = its
    classical acceleration oa.lin + oa.ang x p + ov.ang x vp (world)."""
    translate_motion(p, k, ov, i, out, o)
    translate_motion(p, k, oa, i, out, o + 1)
    for r in range(3):
        out[o, 3 + r] = out[o + 1, r]
    add_cross(ov, i, 3, out, o, 0, out, o, 3, 1.0)


@kernel
def rotation_log(R, k, out):
    """out (3,) = log3(R[k]), the rotation vector (angle in [0, pi])."""
    tr = R[k, 0, 0] + R[k, 1, 1] + R[k, 2, 2]
    if tr > 0.0:
        s = 2.0 * np.sqrt(tr + 1.0)
        qw, qx = 0.25 * s, (R[k, 2, 1] - R[k, 1, 2]) / s
        qy, qz = (R[k, 0, 2] - R[k, 2, 0]) / s, (R[k, 1, 0] - R[k, 0, 1]) / s
    elif R[k, 0, 0] > R[k, 1, 1] and R[k, 0, 0] > R[k, 2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[k, 0, 0] - R[k, 1, 1] - R[k, 2, 2])
        qw, qx = (R[k, 2, 1] - R[k, 1, 2]) / s, 0.25 * s
        qy, qz = (R[k, 0, 1] + R[k, 1, 0]) / s, (R[k, 0, 2] + R[k, 2, 0]) / s
    elif R[k, 1, 1] > R[k, 2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[k, 1, 1] - R[k, 0, 0] - R[k, 2, 2])
        qw, qx = (R[k, 0, 2] - R[k, 2, 0]) / s, (R[k, 0, 1] + R[k, 1, 0]) / s
        qy, qz = 0.25 * s, (R[k, 1, 2] + R[k, 2, 1]) / s
    else:
        s = 2.0 * np.sqrt(1.0 + R[k, 2, 2] - R[k, 0, 0] - R[k, 1, 1])
        qw, qx = (R[k, 1, 0] - R[k, 0, 1]) / s, (R[k, 0, 2] + R[k, 2, 0]) / s
        qy, qz = (R[k, 1, 2] + R[k, 2, 1]) / s, 0.25 * s
    log3_quaternion(qx, qy, qz, qw, out)


@kernel
def relative_log6(cR1, cp1, cR2, cp2, k, xi, RM, pM, t3):
    """xi (6,) = log6(c1Mc2) = (V(w)^-1 p, w) with c1Mc2 = (R, p), w = log3(R).
    RM (1, 3, 3), pM (1, 3), t3 (2, 3) scratch."""
    for r in range(3):
        for c in range(3):
            RM[0, r, c] = (cR1[k, 0, r] * cR2[k, 0, c] + cR1[k, 1, r] * cR2[k, 1, c]
                           + cR1[k, 2, r] * cR2[k, 2, c])
        pM[0, r] = cp2[k, r] - cp1[k, r]
    rotate_transpose(cR1, k, pM, 0, 0, t3, 1, 0, 1.0)
    rotation_log(RM, 0, t3[0])
    w = t3[0]
    _apply_v(w, t3[1], -0.5, _se3_vinv_coefficient(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]),
             xi)
    xi[3], xi[4], xi[5] = w[0], w[1], w[2]


# --- Kernels per state -------------------------------------------------------

@inline_kernel
def constraint_placements_state(ca, oR, op, cR1, cp1, cR2, cp2):
    """oMc1, oMc2 of every constraint (needs oR[0] = I, op[0] = 0)."""
    for k in range(ca.n):
        compose(oR, op, ca.joint1[k], ca.R1, ca.p1, k, cR1, cp1, k)
        compose(oR, op, ca.joint2[k], ca.R2, ca.p2, k, cR2, cp2, k)


@inline_kernel
def constraint_jacobian_state(m, ca, J, cR1, cp1, cp2, Jc):
    """Jc (nrows, nv) from the world joint Jacobian J (module docstring)."""
    subtree_end, dof_joint, nv = m.subtree_end, m.dof_joint, m.nv
    rows, joint1, joint2, kinds, references = ca.row, ca.joint1, ca.joint2, ca.kind, ca.reference
    Jc[:, :] = 0.0
    for k in range(ca.n):
        r0, i1, i2, point = rows[k], joint1[k], joint2[k], kinds[k] == CONTACT_3D
        local = references[k] == LOCAL
        for c in range(nv):
            j = dof_joint[c]
            s1 = supports(subtree_end, j, i1)
            s2 = supports(subtree_end, j, i2)
            if s1 == s2 and (not point or not s1):
                continue
            w0, w1, w2 = J[3, c], J[4, c], J[5, c]
            # linear velocity of pc_1 (l) and pc_2 (e) along the column
            l0 = J[0, c] + w1 * cp1[k, 2] - w2 * cp1[k, 1]
            l1 = J[1, c] + w2 * cp1[k, 0] - w0 * cp1[k, 2]
            l2 = J[2, c] + w0 * cp1[k, 1] - w1 * cp1[k, 0]
            if point:
                x0, x1, x2 = (l0, l1, l2) if s1 else (0.0, 0.0, 0.0)
                if s2:
                    x0 -= J[0, c] + w1 * cp2[k, 2] - w2 * cp2[k, 1]
                    x1 -= J[1, c] + w2 * cp2[k, 0] - w0 * cp2[k, 2]
                    x2 -= J[2, c] + w0 * cp2[k, 1] - w1 * cp2[k, 0]
                for r in range(3):
                    if local:
                        Jc[r0 + r, c] = cR1[k, 0, r] * x0 + cR1[k, 1, r] * x1 + cR1[k, 2, r] * x2
                    else:
                        Jc[r0 + r, c] = (x0, x1, x2)[r]
                continue
            sg = 1.0 if s1 else -1.0
            for r in range(3):
                if local:
                    Jc[r0 + r, c] = sg * (cR1[k, 0, r] * l0 + cR1[k, 1, r] * l1 + cR1[k, 2, r] * l2)
                    Jc[r0 + 3 + r, c] = sg * (cR1[k, 0, r] * w0 + cR1[k, 1, r] * w1
                                              + cR1[k, 2, r] * w2)
                else:
                    Jc[r0 + r, c] = sg * (l0, l1, l2)[r]
                    Jc[r0 + 3 + r, c] = sg * J[3 + r, c]


@inline_kernel
def constraint_values(ca, k, ov, oa, cR1, cp1, cR2, cp2, w, xi, RM, pM, t3):
    """The world quantities of constraint k that c and its derivatives read, in rows of w:
    10 W (3D: w3 in [:3]), 11 and 12 (3D) point motions of pc_1 and pc_2, 13 log6(M),
    14 ov_1 - ov_2; 15 R1 log6(M) (6D LOCAL_WORLD_ALIGNED)."""
    i1, i2, Kp, Kd = ca.joint1[k], ca.joint2[k], ca.Kp[k], ca.Kd[k]
    for r in range(6):
        w[14, r] = ov[i1, r] - ov[i2, r]
        w[13, r] = 0.0
    if ca.kind[k] == CONTACT_3D:
        point_motion(ov, oa, i1, cp1, k, w, 11)
        point_motion(ov, oa, i2, cp2, k, w, 12)
        for r in range(3):
            w[10, r] = (w[11, 3 + r] - w[12, 3 + r] - Kp * (cp2[k, r] - cp1[k, r])
                        + Kd * (w[11, r] - w[12, r]))
            w[10, 3 + r] = 0.0
        return
    for r in range(6):
        w[10, r] = oa[i1, r] - oa[i2, r] + Kd * w[14, r]
    if ca.reference[k] == LOCAL:
        motion_cross(w, 14, ov, i2, w, 9)
        for r in range(6):
            w[10, r] += w[9, r]
    if Kp != 0.0:
        relative_log6(cR1, cp1, cR2, cp2, k, xi, RM, pM, t3)
        for r in range(6):
            w[13, r] = xi[r]
        rotate(cR1, k, w, 13, 0, w, 15, 0)
        rotate(cR1, k, w, 13, 3, w, 15, 3)


@inline_kernel
def constraint_acceleration_state(ca, ov, oa, cR1, cp1, cR2, cp2, out, w, xi, RM, pM, t3):
    """out (nrows,) = c(q, v, a) for the world motions ov, oa (module docstring);
    with oa from a = 0 this is the drift gamma."""
    for k in range(ca.n):
        r0, Kp = ca.row[k], ca.Kp[k]
        constraint_values(ca, k, ov, oa, cR1, cp1, cR2, cp2, w, xi, RM, pM, t3)
        local = ca.reference[k] == LOCAL
        if ca.kind[k] == CONTACT_3D:
            if local:
                rotate_transpose(cR1, k, w, 10, 0, w, 9, 0, 1.0)
            else:
                for r in range(3):
                    w[9, r] = w[10, r]
            for r in range(3):
                out[r0 + r] = w[9, r]
            continue
        if local:
            inv_act_motion(cR1, cp1, k, w, 10, w, 9)
            for r in range(6):
                out[r0 + r] = w[9, r] - Kp * w[13, r]
        else:
            translate_motion(cp1, k, w, 10, w, 9)
            for r in range(6):
                out[r0 + r] = w[9, r] - Kp * w[15, r]


@kernel
def constraint_forces_state(ca, oR, op, cR1, cp1, cp2, lam, f_ext, w):
    """f_ext (njoints, 6) = the spatial forces lambda exerts, in the joint frames
    (Pinocchio's fext convention): F on joint1, -F on joint2 (module docstring).
    World forces at the origin go through rows 0 (body 1) and 1 (body 2) of w (3, 6)."""
    f_ext[:, :] = 0.0
    for k in range(ca.n):
        world_constraint_forces(ca, k, cR1, cp1, cp2, lam, w)
        i1, i2 = ca.joint1[k], ca.joint2[k]
        inv_act_force(oR, op, i1, w, 0, w, 2)
        for r in range(6):
            f_ext[i1, r] += w[2, r]
        if i2 > 0:
            inv_act_force(oR, op, i2, w, 1, w, 2)
            for r in range(6):
                f_ext[i2, r] -= w[2, r]


@inline_kernel
def world_constraint_forces(ca, k, cR1, cp1, cp2, lam, w):
    """w[0] = F1, w[1] = F2: the world spatial forces (at the origin) of constraint k,
    applied to body 1 (+F1) and body 2 (-F2)."""
    r0 = ca.row[k]
    local = ca.reference[k] == LOCAL
    if ca.kind[k] == CONTACT_3D:
        for r in range(3):
            if local:
                w[0, r] = (cR1[k, r, 0] * lam[r0] + cR1[k, r, 1] * lam[r0 + 1]
                           + cR1[k, r, 2] * lam[r0 + 2])
            else:
                w[0, r] = lam[r0 + r]
            w[1, r] = w[0, r]
            w[0, 3 + r] = 0.0
            w[1, 3 + r] = 0.0
        add_cross(cp1, k, 0, w, 0, 0, w, 0, 3, 1.0)
        add_cross(cp2, k, 0, w, 1, 0, w, 1, 3, 1.0)
        return
    for r in range(3):
        if local:
            w[0, r] = (cR1[k, r, 0] * lam[r0] + cR1[k, r, 1] * lam[r0 + 1]
                       + cR1[k, r, 2] * lam[r0 + 2])
            w[0, 3 + r] = (cR1[k, r, 0] * lam[r0 + 3] + cR1[k, r, 1] * lam[r0 + 4]
                           + cR1[k, r, 2] * lam[r0 + 5])
        else:
            w[0, r] = lam[r0 + r]
            w[0, 3 + r] = lam[r0 + 3 + r]
    add_cross(cp1, k, 0, w, 0, 0, w, 0, 3, 1.0)
    for r in range(6):
        w[1, r] = w[0, r]


@inline_kernel
def constraint_kinematics_state(m, ca, q, v, a, motions, liR, lip, oR, op, J, ov, oa, cR1, cp1,
                                cR2, cp2, Jc, XR, Xp, w6):
    """One state's placements (liR, lip, oR, op), world Jacobian J, constraint frames
    (cR1, cp1, cR2, cp2) and Jc (nrows, nv); when ``motions``, also the world motions
    ov, oa (njoints, 6) at (q, v, a), gravity excluded.  XR (1, 3, 3), Xp (1, 3), w6
    (2, 6) scratch.  The first steps of :func:`_constraint_kinematics` and
    :func:`.constraint_derivatives._constraint_acceleration_derivatives`."""
    placements(m, q, XR, Xp, liR, lip, oR, op)
    joint_jacobians_state(m, oR, op, J)
    constraint_placements_state(ca, oR, op, cR1, cp1, cR2, cp2)
    constraint_jacobian_state(m, ca, J, cR1, cp1, cp2, Jc)
    if motions:
        world_motions(m, v, a, 2, False, J, ov, oa, w6)


@kernel
def _constraint_kinematics(m, ca, q, v, a, order, liR, lip, oR, op, J, ov, oa, cR1, cp1, cR2,
                           cp2, Jc, c, w, xi, RM, pM, t3):
    """Placements, J, the constraint frames and Jc; order 1: also c(q, v, a)."""
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    w6 = np.empty((2, 6))
    for k in range(q.shape[0]):
        constraint_kinematics_state(m, ca, q[k], v[k], a[k], order > 0, liR[k], lip[k], oR[k],
                                    op[k], J[k], ov, oa, cR1, cp1, cR2, cp2, Jc[k], XR, Xp, w6)
        if order > 0:
            constraint_acceleration_state(ca, ov, oa, cR1, cp1, cR2, cp2, c[k], w, xi, RM, pM,
                                          t3)


def constraint_workspace(ca):
    """Per-state scratch of the constraint kernels: cR1, cp1, cR2, cp2, w, xi, RM, pM, t3."""
    n = ca.n
    return (np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 3, 3)), np.empty((n, 3)),
            np.zeros((20, 6)), np.zeros(6), np.empty((1, 3, 3)), np.empty((1, 3)),
            np.empty((2, 3)))


def _kinematics(model, data, q, v, a, constraints, order):
    cs = as_constraint_set(model, constraints)
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs = as_stack(v, model.nv, "v", (K, single))[0] if v is not None else np.zeros((K, model.nv))
    accs = as_stack(a, model.nv, "a", (K, single))[0] if a is not None else np.zeros((K, model.nv))
    check_data(model, data, K, single)
    ca = cs.arrays
    Jc = np.empty((K, ca.nrows, model.nv))
    c = np.empty((K, ca.nrows))
    ov = np.empty((model.njoints, 6))
    oa = np.empty((model.njoints, 6))
    cR1, cp1, cR2, cp2, w, xi, RM, pM, t3 = constraint_workspace(ca)
    _constraint_kinematics(model.arrays, ca, qs, vs, accs, order, data.liR, data.lip, data.oR,
                           data.op, data.J, ov, oa, cR1, cp1, cR2, cp2, Jc, c, w, xi, RM, pM, t3)
    return (Jc[0], c[0]) if single else (Jc, c)


def constraint_jacobian(model, data, q, constraints):
    """Constraint Jacobian Jc (nrows, nv) or (K, nrows, nv): ``Jc v`` is the
    constraint velocity (module docstring), as Pinocchio's
    ``getConstraintsJacobian`` (rows stacked in the order of ``constraints``).
    Fills the placements and ``data.J``."""
    return _kinematics(model, data, q, None, None, constraints, 0)[0]


def constraint_drift(model, data, q, v, constraints):
    """gamma (nrows,) or (K, nrows): the constraint acceleration at ddq = 0, drift
    and Baumgarte corrector included, so that the dynamics enforce ``Jc ddq = -gamma``."""
    return _kinematics(model, data, q, v, None, constraints, 1)[1]


def constraint_acceleration(model, data, q, v, a, constraints):
    """c = Jc a + gamma (nrows,) or (K, nrows): zero along the constrained motion."""
    return _kinematics(model, data, q, v, a, constraints, 1)[1]


@kernel
def _constraint_forces(m, ca, q, lam, liR, lip, oR, op, f_ext, cR1, cp1, cR2, cp2, w):
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    for k in range(q.shape[0]):
        placements(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k])
        constraint_placements_state(ca, oR[k], op[k], cR1, cp1, cR2, cp2)
        constraint_forces_state(ca, oR[k], op[k], cR1, cp1, cp2, lam[k], f_ext[k], w)


def constraint_forces(model, data, q, lam, constraints):
    """The spatial forces (njoints, 6) or (K, njoints, 6) that the multipliers
    ``lam`` exert on the bodies, in the joint frames: the ``f_ext`` of
    :func:`~geppetto.dynamics.rnea` / :func:`~geppetto.dynamics.aba`, so that
    ``aba(q, v, tau, f_ext=constraint_forces(q, lam))`` is the constrained ddq."""
    cs = as_constraint_set(model, constraints)
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    lams, _ = as_stack(lam, cs.size, "lam", (K, single))
    check_data(model, data, K, single)
    f_ext = np.zeros((K, model.njoints, 6))
    ws = constraint_workspace(cs.arrays)
    _constraint_forces(model.arrays, cs.arrays, qs, lams, data.liR, data.lip, data.oR, data.op,
                       f_ext, ws[0], ws[1], ws[2], ws[3], ws[4])
    return f_ext[0] if single else f_ext
