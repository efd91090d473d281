"""Kinetic and potential energy (Pinocchio's computeKineticEnergy / computePotentialEnergy)."""
import numpy as np

from .config import kernel
from .kinematics import _fk_state, subtree_mass_and_com
from .spatial import mat6_vec
from .validation import as_configurations, as_stack, call_kernel, check_data


@kernel
def _energy(m, q, v, liR, lip, oR, op, vel, acc, mass, com, kinetic, potential):
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    w6 = np.empty((3, 6))
    Y = m.inertia
    for k in range(q.shape[0]):
        vel[k, 0, :] = 0.0
        _fk_state(m, q[k], v[k], v[k], 1, liR[k], lip[k], oR[k], op[k], vel[k], acc[k],
                  XR, Xp, w6)
        # T = 1/2 sum_i v_i^T Y_i v_i (+ 1/2 armature v^2)
        energy = 0.0
        vk = vel[k]
        for i in range(1, m.njoints):
            mat6_vec(Y, i, vk, i, w6, 0)
            for r in range(6):
                energy += 0.5 * vk[i, r] * w6[0, r]
        for c in range(m.nv):
            energy += 0.5 * m.armature[c] * v[k, c] * v[k, c]
        kinetic[k] = energy
        # V = -m_total g . c
        subtree_mass_and_com(m, oR[k], op[k], mass[k], com[k])
        potential[k] = -mass[k, 0] * (m.gravity[0] * com[k, 0, 0] + m.gravity[1] * com[k, 0, 1]
                                      + m.gravity[2] * com[k, 0, 2])


def _compute(model, data, q, v):
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs = (as_stack(v, model.nv, "v", (K, single))[0] if v is not None
          else np.zeros((K, model.nv)))
    check_data(model, data, K, single)
    call_kernel(_energy, model, qs, vs, data.liR, data.lip, data.oR, data.op, data.v, data.a,
                data.mass, data.com, data.kinetic_energy, data.potential_energy)
    return K, single


def kinetic_energy(model, data, q, v):
    """T(q, v) = 1/2 v^T M(q) v, scalar or (K,)."""
    K, single = _compute(model, data, q, v)
    return float(data.kinetic_energy[0]) if single else data.kinetic_energy[:K].copy()


def potential_energy(model, data, q):
    """V(q) = -m g . c(q) (zero at the world origin), scalar or (K,)."""
    K, single = _compute(model, data, q, None)
    return float(data.potential_energy[0]) if single else data.potential_energy[:K].copy()
