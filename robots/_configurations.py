"""Neutral and normalized configurations, computed from joint type codes only.

``robots`` needs these before a :class:`~geppetto.dynamics.model.Model` exists
(SRDF reference configurations are read while the model is being built), so
they work on the list of joint type codes rather than on a Model.  The layout
of ``q`` is Pinocchio's:

- free-flyer ``(x, y, z, qx, qy, qz, qw)``, neutral ``(0, 0, 0, 0, 0, 0, 1)``;
- spherical ``(qx, qy, qz, qw)``, neutral ``(0, 0, 0, 1)``;
- unbounded revolute ``(cos, sin)``, neutral ``(1, 0)``;
- planar ``(x, y, cos, sin)``, neutral ``(0, 0, 1, 0)``;
- every other coordinate is 0 at the neutral configuration.
"""
import numpy as np

from ..dynamics.model import (FREE_FLYER, JOINT_NQ, PLANAR, REVOLUTE_UNBOUNDED,
                              SPHERICAL, UNIVERSE)

# Entries of a joint's q block that form a unit vector: (first index, length,
# index of the entry that is 1 at the neutral configuration).  Joints absent
# from this table have none.
_UNIT_BLOCKS = {FREE_FLYER: (3, 4, 6), SPHERICAL: (0, 4, 3),
                REVOLUTE_UNBOUNDED: (0, 2, 0), PLANAR: (2, 2, 2)}


def configuration_layout(jtypes):
    """``idx_q`` of every joint (universe included) and ``nq``.

    Parameters
    ----------
    jtypes : sequence of int
        Joint type codes, ``jtypes[0]`` being the universe.

    Returns
    -------
    idx_q : list of int, one per joint (0 for the universe)
    nq : int
    """
    idx_q, nq = [0], 0
    for jtype in jtypes[1:]:
        idx_q.append(nq)
        nq += JOINT_NQ[jtype]
    return idx_q, nq


def neutral_configuration(jtypes):
    """Pinocchio's ``neutral(model)`` for the joints ``jtypes``: (nq,) array."""
    idx_q, nq = configuration_layout(jtypes)
    q = np.zeros(nq)
    for jtype, iq in zip(jtypes, idx_q):
        if jtype == UNIVERSE or jtype not in _UNIT_BLOCKS:
            continue
        q[iq + _UNIT_BLOCKS[jtype][2]] = 1.0
    return q


def normalize_configuration(jtypes, q):
    """Copy of ``q`` with every quaternion and (cos, sin) pair of unit norm
    (Pinocchio's ``normalize``)."""
    idx_q, _ = configuration_layout(jtypes)
    q = np.array(q, dtype=float)
    for jtype, iq in zip(jtypes, idx_q):
        if jtype == UNIVERSE or jtype not in _UNIT_BLOCKS:
            continue
        start, size, _ = _UNIT_BLOCKS[jtype]
        block = q[iq + start:iq + start + size]
        norm = np.linalg.norm(block)
        if norm > 0.0:
            block /= norm
    return q
