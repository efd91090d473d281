"""Composite rigid-body algorithm: the joint-space inertia matrix M(q).

Featherstone (2008), Table 6.2, written in the world frame as Pinocchio does:
with every quantity in the world, the composite inertia of a subtree is a plain
sum (no spatial transform per joint) and M[r, c] = J_r^T (oYcrb_i J_c) for a
dof c of joint i and every dof r that supports it.  Returns the full symmetric
M, armature added on the diagonal.
"""
import numpy as np

from .config import kernel
from .kinematics import joint_jacobians_state, placements
from .spatial import inertia_to_world, mat6_vec
from .validation import as_configurations, check_data, result


@kernel
def world_inertias(m, oR, op, oY):
    """oY[i] = oMi.act(Y_i) for every body of one state."""
    for i in range(1, m.njoints):
        inertia_to_world(oR[i], op[i], m.inertia[i], oY[i])


@kernel
def _crba_backward_pass(m, J, Ycrb, M, F):
    for i in range(m.njoints - 1, 0, -1):
        for c in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            mat6_vec(Ycrb[i], J[:, c], F)
            j = i
            while j > 0:
                for r in range(m.idx_v[j], m.idx_v[j] + m.nvs[j]):
                    s = 0.0
                    for t in range(6):
                        s += J[t, r] * F[t]
                    M[r, c] = s
                    M[c, r] = s
                j = m.parents[j]
        par = m.parents[i]
        if par > 0:
            for r in range(6):
                for c in range(6):
                    Ycrb[par, r, c] += Ycrb[i, r, c]
    for c in range(m.nv):
        M[c, c] += m.armature[c]


@kernel
def _crba(m, q, liR, lip, oR, op, J, Ycrb, M):
    XR = np.empty((3, 3))
    Xp = np.empty(3)
    s6 = np.empty(6)
    t6 = np.empty(6)
    for k in range(q.shape[0]):
        placements(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k])
        joint_jacobians_state(m, oR[k], op[k], J[k], s6, t6)
        world_inertias(m, oR[k], op[k], Ycrb[k])
        _crba_backward_pass(m, J[k], Ycrb[k], M[k], t6)


def crba(model, data, q):
    """Joint-space inertia matrix M(q) (nv, nv), full and symmetric (CRBA).

    ``q`` (nq,) or (K, nq); returns (nv, nv) or (K, nv, nv).  Fills
    ``data.J`` (world joint Jacobian), ``data.Ycrb`` (composite inertias in
    the world) and ``data.M``.  Armature is added on the diagonal.
    """
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    _crba(model.arrays, qs, data.liR, data.lip, data.oR, data.op, data.J, data.Ycrb, data.M)
    return result(data.M, K, single).copy()
