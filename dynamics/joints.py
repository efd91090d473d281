"""Joint models: the placement ``liMi = jointPlacement * XJ(q)`` of every joint type.

The motion subspace S of each type is constant in the joint frame and is
stored in ``model.S``; only the joint transform XJ(q) depends on the type.
The dispatch is on the integer type code of :mod:`.model` (one compiled
kernel for every model, so the cache is shared).
"""
import math

from .config import kernel
from .model import (REVOLUTE, REVOLUTE_UNBOUNDED, PRISMATIC, FREE_FLYER,
                    SPHERICAL, PLANAR, TRANSLATION)


@kernel
def quaternion_to_rotation(x, y, z, w, R):
    """R (3, 3) from a unit quaternion (x, y, z, w), Eigen's convention."""
    R[0, 0] = 1.0 - 2.0 * (y * y + z * z)
    R[0, 1] = 2.0 * (x * y - z * w)
    R[0, 2] = 2.0 * (x * z + y * w)
    R[1, 0] = 2.0 * (x * y + z * w)
    R[1, 1] = 1.0 - 2.0 * (x * x + z * z)
    R[1, 2] = 2.0 * (y * z - x * w)
    R[2, 0] = 2.0 * (x * z - y * w)
    R[2, 1] = 2.0 * (y * z + x * w)
    R[2, 2] = 1.0 - 2.0 * (x * x + y * y)


@kernel
def axis_rotation(a, c, s, R):
    """Rodrigues: rotation of angle theta about unit axis a, given c, s = cos, sin."""
    t = 1.0 - c
    R[0, 0] = c + t * a[0] * a[0]
    R[0, 1] = t * a[0] * a[1] - s * a[2]
    R[0, 2] = t * a[0] * a[2] + s * a[1]
    R[1, 0] = t * a[0] * a[1] + s * a[2]
    R[1, 1] = c + t * a[1] * a[1]
    R[1, 2] = t * a[1] * a[2] - s * a[0]
    R[2, 0] = t * a[0] * a[2] - s * a[1]
    R[2, 1] = t * a[1] * a[2] + s * a[0]
    R[2, 2] = c + t * a[2] * a[2]


@kernel
def joint_transform(jtype, axis, qj, R, p):
    """XJ(q) of one joint: rotation R (3, 3) and translation p (3,), written in place.

    ``qj`` is the joint's slice of q (nq_j,).
    """
    for r in range(3):
        p[r] = 0.0
        for c in range(3):
            R[r, c] = 1.0 if r == c else 0.0
    if jtype == REVOLUTE:
        axis_rotation(axis, math.cos(qj[0]), math.sin(qj[0]), R)
    elif jtype == REVOLUTE_UNBOUNDED:
        axis_rotation(axis, qj[0], qj[1], R)
    elif jtype == PRISMATIC:
        for r in range(3):
            p[r] = axis[r] * qj[0]
    elif jtype == FREE_FLYER:
        for r in range(3):
            p[r] = qj[r]
        quaternion_to_rotation(qj[3], qj[4], qj[5], qj[6], R)
    elif jtype == SPHERICAL:
        quaternion_to_rotation(qj[0], qj[1], qj[2], qj[3], R)
    elif jtype == PLANAR:
        p[0] = qj[0]
        p[1] = qj[1]
        R[0, 0] = qj[2]
        R[0, 1] = -qj[3]
        R[1, 0] = qj[3]
        R[1, 1] = qj[2]
    elif jtype == TRANSLATION:
        for r in range(3):
            p[r] = qj[r]


@kernel
def compose(R1, p1, R2, p2, R_out, p_out):
    """(R_out, p_out) = (R1, p1) * (R2, p2); the outputs must not alias the inputs."""
    for r in range(3):
        p_out[r] = p1[r] + R1[r, 0] * p2[0] + R1[r, 1] * p2[1] + R1[r, 2] * p2[2]
        for c in range(3):
            R_out[r, c] = R1[r, 0] * R2[0, c] + R1[r, 1] * R2[1, c] + R1[r, 2] * R2[2, c]


@kernel
def joint_placement(m, i, q, XR, Xp, liR, lip):
    """liMi of joint i at configuration q (nq,), using XR, Xp as scratch."""
    iq = m.idx_q[i]
    joint_transform(m.jtype[i], m.axis[i], q[iq:iq + m.nqs[i]], XR, Xp)
    compose(m.jR[i], m.jp[i], XR, Xp, liR, lip)
