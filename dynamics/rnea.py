"""Recursive Newton-Euler algorithm: inverse dynamics tau = ID(q, v, a, f_ext).

Featherstone (2008), Table 5.1, in the joint frames; gravity enters as the
acceleration of the universe, a_0 = -g.  External forces (njoints, 6) are
spatial forces on each body expressed in its joint frame (Pinocchio's
``fext``), subtracted from the body's net force.
"""
import numpy as np

from . import mimic
from .config import kernel
from .joints import placements
from .kinematics import joint_velocity
from .spatial import act_force, force_cross, inv_act_motion, motion_cross, rigid_inertia_times
from .validation import as_configurations, as_dynamics_arguments, as_stack, call_kernel, result


@kernel
def _rnea_forward_pass(m, q, v, a, f_ext, liR, lip, oR, op, vel, acc, f, XR, Xp, w6):
    """v_i, a_i (with gravity) and the net force f_i of every body; w6 (4, 6) scratch."""
    placements(m, q, XR, Xp, liR, lip, oR, op)
    parents, idx_v, nvs, S, Y = m.parents, m.idx_v, m.nvs, m.S, m.inertia
    for r in range(6):
        vel[0, r] = 0.0
        acc[0, r] = -m.gravity[r]
    for i in range(1, m.njoints):
        par = parents[i]
        joint_velocity(S, idx_v[i], nvs[i], v, w6, 0)
        inv_act_motion(liR, lip, i, vel, par, vel, i)
        for r in range(6):
            vel[i, r] += w6[0, r]
        # a_i = liMi^-1 a_par + v_i x (S v_i) + S a_i
        inv_act_motion(liR, lip, i, acc, par, acc, i)
        motion_cross(vel, i, w6, 0, w6, 1)
        joint_velocity(S, idx_v[i], nvs[i], a, w6, 2)
        for r in range(6):
            acc[i, r] += w6[1, r] + w6[2, r]
        # f_i = I a_i + v_i x* I v_i - f_ext_i (I rigid: ten parameters, 24 products)
        (f[i, 0], f[i, 1], f[i, 2], f[i, 3], f[i, 4],
         f[i, 5]) = rigid_inertia_times(Y, i, acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3],
                                        acc[i, 4], acc[i, 5])
        (w6[3, 0], w6[3, 1], w6[3, 2], w6[3, 3], w6[3, 4],
         w6[3, 5]) = rigid_inertia_times(Y, i, vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3],
                                         vel[i, 4], vel[i, 5])
        force_cross(vel, i, w6, 3, w6, 1)
        for r in range(6):
            f[i, r] += w6[1, r] - f_ext[i, r]


@kernel
def _rnea_backward_pass(m, a, liR, lip, f, tau, w6):
    """tau_i = S_i^T f_i (+ armature a_i); f_parent += liMi * f_i."""
    parents, idx_v, nvs, S, armature = m.parents, m.idx_v, m.nvs, m.S, m.armature
    for i in range(m.njoints - 1, 0, -1):
        iv = idx_v[i]
        for c in range(iv, iv + nvs[i]):
            s = armature[c] * a[c]
            for r in range(6):
                s += S[r, c] * f[i, r]
            tau[c] = s
        par = parents[i]
        if par > 0:
            act_force(liR, lip, i, f, i, w6, 0)
            for r in range(6):
                f[par, r] += w6[0, r]


@kernel
def _rnea(m, q, v, a, f_ext, liR, lip, oR, op, vel, acc, f, tau):
    XR = np.empty((1, 3, 3))
    Xp = np.empty((1, 3))
    w6 = np.empty((4, 6))
    for k in range(q.shape[0]):
        _rnea_forward_pass(m, q[k], v[k], a[k], f_ext[k], liR[k], lip[k], oR[k], op[k],
                           vel[k], acc[k], f[k], XR, Xp, w6)
        _rnea_backward_pass(m, a[k], liR[k], lip[k], f[k], tau[k], w6)


def rnea(model, data, q, v, a, f_ext=None):
    """Inverse dynamics tau = M(q) a + b(q, v) - sum J^T f_ext (Featherstone's RNEA).

    Parameters
    ----------
    q : (nq,) or (K, nq) configurations; v, a : (nv,) or (K, nv);
    f_ext : None, (njoints, 6) or (K, njoints, 6) spatial forces on each body
        in its joint frame (index 0, the universe, is ignored).

    Returns tau (nv,) or (K, nv).  Fills ``data.liR, lip, oR, op`` (placements),
    ``data.v, a_gf`` (local velocities and accelerations with gravity) and
    ``data.f`` (forces transmitted by each joint, local frame).
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.rnea(model, data, q, v, a, f_ext)
    qs, vs, as_, fs, K, single = as_dynamics_arguments(model, data, q, v, a, f_ext, "a")
    call_kernel(_rnea, model, qs, vs, as_, fs, data.liR, data.lip, data.oR, data.op,
                data.v, data.a_gf, data.f, data.tau)
    return result(data.tau, K, single).copy()


def nonlinear_effects(model, data, q, v):
    """b(q, v) = C(q, v) v + g(q): RNEA with zero acceleration.  Shapes as :func:`rnea`."""
    qs, single = as_configurations(model, q)
    vs, _ = as_stack(v, model.nv, "v", (qs.shape[0], single))
    out = rnea(model, data, qs, vs, np.zeros_like(vs))
    return out[0] if single else out


def generalized_gravity(model, data, q):
    """g(q): RNEA with zero velocity and acceleration.  Shapes as :func:`rnea`."""
    qs, single = as_configurations(model, q)
    zeros = np.zeros((qs.shape[0], model.nv))
    out = rnea(model, data, qs, zeros, zeros)
    return out[0] if single else out
