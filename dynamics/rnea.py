"""Recursive Newton-Euler algorithm: inverse dynamics tau = ID(q, v, a, f_ext).

Featherstone (2008), Table 5.1, in the joint frames; gravity enters as the
acceleration of the universe, a_0 = -g.  External forces (njoints, 6) are
spatial forces on each body expressed in its joint frame (Pinocchio's
``fext``), subtracted from the body's net force.
"""
import numpy as np

from . import mimic
from .borrowed import borrowed, borrowed_all, borrowed_model, keep_alive
from .config import inline_kernel, kernel, model_kernel
from .joints import placements_inline
from .kinematics import joint_velocity
from .model_ref import model_arrays
from .spatial import act_force, cross, inv_act_motion_values, rigid_inertia_times
from .one_state import _rnea_one, one_state
from .validation import as_configurations, as_dynamics_arguments, as_stack, call_kernel, result


@inline_kernel
def _rnea_forward_pass(m, q, v, a, f_ext, liR, lip, oR, op, vel, acc, f, XR, Xp, w6):
    """v_i, a_i (with gravity) and the net force f_i of every body; w6 (4, 6) scratch.

    Each body's step runs on locals (the joint's S v_i, S a_i, v_i, a_i, f_i), stored
    once: a store into an array makes LLVM reload every array value read after it.
    Inlined into its callers, as the backward pass: a compiled call per state, with
    the model tuple, cost 11% of RNEA on ur5 (1000 states).  Per joint only straight-line
    code is inlined (a revolute joint's placement, a 1-dof joint's S v_i); other
    joints take compiled calls (:func:`.joints.general_placement`,
    :func:`_joint_motions`)."""
    placements_inline(m, q, XR, Xp, liR, lip, oR, op)
    parents, idx_v, nvs, S, Y = m.parents, m.idx_v, m.nvs, m.S, m.inertia
    for r in range(6):
        vel[0, r] = 0.0
        acc[0, r] = -m.gravity[r]
    for i in range(1, m.njoints):
        par = parents[i]
        iv = idx_v[i]
        if nvs[i] == 1:  # S v_i, S a_i of a 1-dof joint: a column of S times a number
            x, y = v[iv], a[iv]
            s0, s1, s2, s3, s4, s5 = (S[0, iv] * x, S[1, iv] * x, S[2, iv] * x,
                                      S[3, iv] * x, S[4, iv] * x, S[5, iv] * x)
            t0, t1, t2, t3, t4, t5 = (S[0, iv] * y, S[1, iv] * y, S[2, iv] * y,
                                      S[3, iv] * y, S[4, iv] * y, S[5, iv] * y)
        else:
            _joint_motions(S, iv, nvs[i], v, a, w6)
            s0, s1, s2, s3, s4, s5 = w6[0, 0], w6[0, 1], w6[0, 2], w6[0, 3], w6[0, 4], w6[0, 5]
            t0, t1, t2, t3, t4, t5 = w6[2, 0], w6[2, 1], w6[2, 2], w6[2, 3], w6[2, 4], w6[2, 5]
        # v_i = liMi^-1 v_par + S v_i
        v0, v1, v2, v3, v4, v5 = inv_act_motion_values(liR, lip, i, vel[par, 0], vel[par, 1],
                                                       vel[par, 2], vel[par, 3], vel[par, 4],
                                                       vel[par, 5])
        v0, v1, v2, v3, v4, v5 = v0 + s0, v1 + s1, v2 + s2, v3 + s3, v4 + s4, v5 + s5
        # a_i = liMi^-1 a_par + v_i x (S v_i) + S a_i
        a0, a1, a2, a3, a4, a5 = inv_act_motion_values(liR, lip, i, acc[par, 0], acc[par, 1],
                                                       acc[par, 2], acc[par, 3], acc[par, 4],
                                                       acc[par, 5])
        x0, x1, x2 = cross(v3, v4, v5, s0, s1, s2)
        y0, y1, y2 = cross(v0, v1, v2, s3, s4, s5)
        z0, z1, z2 = cross(v3, v4, v5, s3, s4, s5)
        a0, a1, a2 = a0 + (x0 + y0) + t0, a1 + (x1 + y1) + t1, a2 + (x2 + y2) + t2
        a3, a4, a5 = a3 + z0 + t3, a4 + z1 + t4, a5 + z2 + t5
        vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5] = v0, v1, v2, v3, v4, v5
        acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5] = a0, a1, a2, a3, a4, a5
        # f_i = I a_i + v_i x* (I v_i) - f_ext_i (I rigid: ten parameters, 24 products)
        g0, g1, g2, g3, g4, g5 = rigid_inertia_times(Y, i, a0, a1, a2, a3, a4, a5)
        h0, h1, h2, h3, h4, h5 = rigid_inertia_times(Y, i, v0, v1, v2, v3, v4, v5)
        x0, x1, x2 = cross(v3, v4, v5, h0, h1, h2)
        y0, y1, y2 = cross(v3, v4, v5, h3, h4, h5)
        z0, z1, z2 = cross(v0, v1, v2, h0, h1, h2)
        f[i, 0] = g0 + x0 - f_ext[i, 0]
        f[i, 1] = g1 + x1 - f_ext[i, 1]
        f[i, 2] = g2 + x2 - f_ext[i, 2]
        f[i, 3] = g3 + (y0 + z0) - f_ext[i, 3]
        f[i, 4] = g4 + (y1 + z1) - f_ext[i, 4]
        f[i, 5] = g5 + (y2 + z2) - f_ext[i, 5]


@kernel
def _joint_motions(S, iv, nvi, v, a, w6):
    """w6[0] = S v_i and w6[2] = S a_i of a multi-dof joint, a compiled call: inlined,
    the loops and branch of :func:`.kinematics.joint_velocity` kept Numba from pruning
    the reference counts of the forward pass's arrays on every joint."""
    joint_velocity(S, iv, nvi, v, w6, 0)
    joint_velocity(S, iv, nvi, a, w6, 2)


@inline_kernel
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


def stack_scratch(model, data, K):
    """The Data whose arrays receive a call's intermediates: ``data`` itself for one
    state or a stack of one (filled as Pinocchio fills it), else a Data of one state kept
    on ``data``, which every state of the stack overwrites (they stay in cache, and only
    the results reach memory; slots for two or four states measured the same time within
    2 %), initialized as a new Data (oMi of the universe the identity)."""
    if K == 1:
        return data
    scratch = data.__dict__.get("_stack_scratch")
    if scratch is None or scratch._dims != data._dims:
        from .data import Data
        scratch = data.__dict__["_stack_scratch"] = Data(model)
    return scratch


@model_kernel
def _rnea(model, q, v, a, f_ext, liR, lip, oR, op, vel, acc, f, tau):
    """tau of K states.  The intermediates (liR, lip, vel, acc, f) passed with fewer
    states than the stack (one: :func:`stack_scratch`) are kept in slot k % slots: only
    tau and oMi (which every algorithm that takes q fills) reach memory (as
    :func:`.rnea_derivatives._rnea_derivatives`).  The model and the scratch are
    :func:`.borrowed.borrowed_all` as the arguments: each field of the model tuple read
    per state took and released a reference (ur5, 1000 states: 0.53x the time; the
    same bits)."""
    m = borrowed_model(model_arrays(model))
    scratch = (np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((4, 6)))
    XR, Xp, w6 = borrowed_all(scratch)
    slots = min(liR.shape[0], lip.shape[0], vel.shape[0], acc.shape[0], f.shape[0])
    q, v, a, f_ext, tau = borrowed(q), borrowed(v), borrowed(a), borrowed(f_ext), borrowed(tau)
    liR, lip, oR, op = borrowed(liR), borrowed(lip), borrowed(oR), borrowed(op)
    vel, acc, f = borrowed(vel), borrowed(acc), borrowed(f)
    for k in range(q.shape[0]):
        s = k % slots
        _rnea_forward_pass(m, q[k], v[k], a[k], f_ext[k], liR[s], lip[s], oR[k], op[k],
                           vel[s], acc[s], f[s], XR, Xp, w6)
        _rnea_backward_pass(m, a[k], liR[s], lip[s], f[s], tau[k], w6)
    keep_alive(scratch)


def rnea(model, data, q, v, a, f_ext=None):
    """Inverse dynamics tau = M(q) a + b(q, v) - sum J^T f_ext (Featherstone's RNEA).

    Parameters
    ----------
    q : (nq,) or (K, nq) configurations; v, a : (nv,) or (K, nv);
    f_ext : None, (njoints, 6) or (K, njoints, 6) spatial forces on each body
        in its joint frame (index 0, the universe, is ignored).

    Returns tau (nv,) or (K, nv) and fills ``data.tau`` and ``data.oR, op`` (oMi).  For
    one state (or a stack of one) it also fills ``data.liR, lip`` (liMi), ``data.v,
    a_gf`` (local velocities and accelerations with gravity) and ``data.f`` (forces
    transmitted by each joint, local frame); a stack leaves them as they were (its
    intermediates would go to memory that nobody reads).
    """
    if isinstance(model, mimic.MimicModel):
        return mimic.rnea(model, data, q, v, a, f_ext)
    if f_ext is None and one_state(_rnea_one, _rnea, model, data, q, v, a):
        return data.tau[0].copy()
    qs, vs, as_, fs, K, single = as_dynamics_arguments(model, data, q, v, a, f_ext, "a")
    d, t = data, stack_scratch(model, data, K)
    call_kernel(_rnea, model, qs, vs, as_, fs, t.liR, t.lip, d.oR, d.op, t.v, t.a_gf, t.f,
                d.tau)
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
