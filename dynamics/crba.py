"""Composite rigid-body algorithm: the joint-space inertia matrix M(q).

Featherstone (2008), Table 6.2, written in the world frame as Pinocchio does:
with every quantity in the world, the composite inertia of a subtree is a plain
sum (no spatial transform per joint) and M[r, c] = J_r^T (oYcrb_i J_c) for a
dof c of joint i and every dof r that supports it.  Returns the full symmetric
M, armature added on the diagonal.
"""
import numpy as np

from . import mimic
from .config import kernel
from .joints import placements
from .kinematics import joint_jacobians_state
from .spatial import inertia_to_world
from .validation import as_configurations, check_data, result


@kernel
def world_inertias(m, oR, op, oY):
    """oY[i] = oMi.act(Y_i) for every body of one state."""
    Y = m.inertia
    for i in range(1, m.njoints):
        inertia_to_world(oR, op, Y, oY, i)


@kernel
def world_frame_quantities(m, q, XR, Xp, liR, lip, oR, op, J, oY):
    """What every world-frame algorithm starts from, for one state: liMi and oMi,
    the world Jacobian J (6, nv) and the body inertias oY in the world."""
    placements(m, q, XR, Xp, liR, lip, oR, op)
    joint_jacobians_state(m, oR, op, J)
    world_inertias(m, oR, op, oY)


@kernel
def _crba_backward_pass(m, J, Ycrb, M):
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for i in range(m.njoints - 1, 0, -1):
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            # F = oYcrb_i J_c, then M[r, c] = J_r^T F for every supporting dof r
            F0 = 0.0
            F1 = 0.0
            F2 = 0.0
            F3 = 0.0
            F4 = 0.0
            F5 = 0.0
            for t in range(6):
                F0 += Ycrb[i, 0, t] * J[t, c]
                F1 += Ycrb[i, 1, t] * J[t, c]
                F2 += Ycrb[i, 2, t] * J[t, c]
                F3 += Ycrb[i, 3, t] * J[t, c]
                F4 += Ycrb[i, 4, t] * J[t, c]
                F5 += Ycrb[i, 5, t] * J[t, c]
            j = i
            while j > 0:
                for r in range(idx_v[j], idx_v[j] + nvs[j]):
                    s = (J[0, r] * F0 + J[1, r] * F1 + J[2, r] * F2
                         + J[3, r] * F3 + J[4, r] * F4 + J[5, r] * F5)
                    M[r, c] = s
                    M[c, r] = s
                j = parents[j]
        par = parents[i]
        if par > 0:
            for r in range(6):
                for c in range(6):
                    Ycrb[par, r, c] += Ycrb[i, r, c]
    for c in range(m.nv):
        M[c, c] += m.armature[c]


@kernel
def _crba(m, q, liR, lip, oR, op, J, Ycrb, M):
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    for k in range(q.shape[0]):
        world_frame_quantities(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k], J[k], Ycrb[k])
        _crba_backward_pass(m, J[k], Ycrb[k], M[k])


def crba(model, data, q):
    """Joint-space inertia matrix M(q) (nv, nv), full and symmetric (CRBA).

    ``q`` (nq,) or (K, nq); returns (nv, nv) or (K, nv, nv).  Fills
    ``data.J`` (world joint Jacobian), ``data.oYcrb`` (composite inertias in
    the world) and ``data.M``.  Armature is added on the diagonal.
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.crba(model, data, q)
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    _crba(model.arrays, qs, data.liR, data.lip, data.oR, data.op, data.J, data.oYcrb, data.M)
    return result(data.M, K, single).copy()
