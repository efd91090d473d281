"""Forward kinematics, frame placements, Jacobians and centre of mass kernels.

Every kernel takes a stack of K states (leading axis) and loops over it; the
per-state work is in small ``@kernel`` helpers shared with the dynamics
algorithms.  Shapes: ``q (K, nq)``, ``v, a (K, nv)``, placements ``R (K, n, 3,
3)``, ``p (K, n, 3)``, spatial vectors ``(K, n, 6)``, Jacobians ``(K, 6, nv)``.
"""
import numpy as np

from .borrowed import frame_empty
from .config import inline_kernel, kernel
from .joints import compose, placements
from .one_state import (_center_of_mass_one, _forward_kinematics_one, _frame_jacobian_one,
                        one_state)
from .spatial import inv_act_motion, motion_cross
from .validation import (as_configurations, as_dynamics_arguments, as_stack, call_kernel,
                         check_data, check_frame, check_joint, check_placements, result)

LOCAL = 0
WORLD = 1
LOCAL_WORLD_ALIGNED = 2
REFERENCE_FRAMES = {"LOCAL": LOCAL, "WORLD": WORLD,
                    "LOCAL_WORLD_ALIGNED": LOCAL_WORLD_ALIGNED}


@inline_kernel
def joint_velocity(S, iv, nvi, v, out, o):
    """out[o] = S_i v_i: the joint's own spatial velocity in its frame (dofs iv..iv+nvi)."""
    if nvi == 1:
        x = v[iv]
        for r in range(6):
            out[o, r] = S[r, iv] * x
        return
    for r in range(6):
        s = 0.0
        for c in range(iv, iv + nvi):
            s += S[r, c] * v[c]
        out[o, r] = s


@kernel
def _fk_state(m, q, v, a, order, liR, lip, oR, op, vel, acc, XR, Xp, w6):
    """Placements (order 0), local velocities (1) and accelerations (2) of one state.

    Scratch w6 (3, 6): rows 0 = S v_i, 1 = temporary, 2 = S a_i.
    """
    placements(m, q, XR, Xp, liR, lip, oR, op)
    if order < 1:
        return
    parents, idx_v, nvs, S = m.parents, m.idx_v, m.nvs, m.S
    for i in range(1, m.njoints):
        par = parents[i]
        joint_velocity(S, idx_v[i], nvs[i], v, w6, 0)
        inv_act_motion(liR, lip, i, vel, par, vel, i)
        for r in range(6):
            vel[i, r] += w6[0, r]
        if order < 2:
            continue
        # a_i = liMi^-1 a_par + v_i x (S v_i) + S a_i
        inv_act_motion(liR, lip, i, acc, par, acc, i)
        motion_cross(vel, i, w6, 0, w6, 1)
        joint_velocity(S, idx_v[i], nvs[i], a, w6, 2)
        for r in range(6):
            acc[i, r] += w6[1, r] + w6[2, r]


@kernel
def _forward_kinematics(m, q, v, a, order, liR, lip, oR, op, vel, acc):
    XR = frame_empty((1, 3, 3))
    Xp = frame_empty((1, 3))
    w6 = frame_empty((3, 6))
    for k in range(q.shape[0]):
        vel[k, 0, :] = 0.0
        acc[k, 0, :] = 0.0
        _fk_state(m, q[k], v[k], a[k], order, liR[k], lip[k], oR[k], op[k],
                  vel[k], acc[k], XR, Xp, w6)


@kernel
def frame_placements_state(m, oR, op, oRf, opf):
    """oMf = oMi[joint] * jMf for every frame of one state."""
    for f in range(m.frame_joint.shape[0]):
        compose(oR, op, m.frame_joint[f], m.frame_R, m.frame_p, f, oRf, opf, f)


@kernel
def _frame_placements(m, oR, op, oRf, opf):
    for k in range(oR.shape[0]):
        frame_placements_state(m, oR[k], op[k], oRf[k], opf[k])


@kernel
def joint_jacobians_state(m, oR, op, J):
    """Columns of the world-frame Jacobian J (6, nv): J_c = oMi.act(S_c)."""
    idx_v, nvs, S = m.idx_v, m.nvs, m.S
    for i in range(1, m.njoints):
        for c in range(idx_v[i], idx_v[i] + nvs[i]):
            jacobian_column(oR, op, i, S, c, J)


@inline_kernel
def jacobian_column(oR, op, i, S, c, J):
    """J[:, c] = oMi.act(S_c) = [R s_lin + p x R s_ang; R s_ang], oMi = (oR[i], op[i]),
    on locals and stored once."""
    r00, r01, r02 = oR[i, 0, 0], oR[i, 0, 1], oR[i, 0, 2]
    r10, r11, r12 = oR[i, 1, 0], oR[i, 1, 1], oR[i, 1, 2]
    r20, r21, r22 = oR[i, 2, 0], oR[i, 2, 1], oR[i, 2, 2]
    p0, p1, p2 = op[i, 0], op[i, 1], op[i, 2]
    s0, s1, s2, s3, s4, s5 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
    w0 = r00 * s3 + r01 * s4 + r02 * s5
    w1 = r10 * s3 + r11 * s4 + r12 * s5
    w2 = r20 * s3 + r21 * s4 + r22 * s5
    J[0, c] = r00 * s0 + r01 * s1 + r02 * s2 + (p1 * w2 - p2 * w1)
    J[1, c] = r10 * s0 + r11 * s1 + r12 * s2 + (p2 * w0 - p0 * w2)
    J[2, c] = r20 * s0 + r21 * s1 + r22 * s2 + (p0 * w1 - p1 * w0)
    J[3, c] = w0
    J[4, c] = w1
    J[5, c] = w2


@inline_kernel
def joint_world_motion(i, par, iv, nvi, v, a, order, J, ov, oa, w6):
    """The step of :func:`world_motions` for joint i (parent par, dofs iv .. iv + nvi):
    ov_i = ov_par + J_i v_i and (order 2) oa_i = oa_par + J_i a_i + ov_i x J_i v_i."""
    for r in range(6):
        sv = 0.0
        sa = 0.0
        for c in range(iv, iv + nvi):
            sv += J[r, c] * v[c]
            sa += J[r, c] * a[c]
        w6[0, r] = sv
        w6[1, r] = sa
        ov[i, r] = ov[par, r] + sv
    if order > 1:
        for r in range(6):
            oa[i, r] = oa[par, r] + w6[1, r]
        motion_cross(ov, i, w6, 0, w6, 1)
        for r in range(6):
            oa[i, r] += w6[1, r]


@kernel
def world_motions(m, v, a, order, with_gravity, J, ov, oa, w6):
    """World spatial velocities ov_i = ov_lambda + J_i v_i and (order 2) accelerations
    oa_i = oa_lambda + J_i a_i + ov_i x J_i v_i, from the world Jacobian J (6, nv);
    oa_0 = -g when ``with_gravity`` (RNEA's trick), else 0.  w6 (2, 6) scratch.

    With order 1, ``a`` is not used and ``oa`` not written (callers may pass stand-ins)."""
    parents, idx_v, nvs = m.parents, m.idx_v, m.nvs
    for r in range(6):
        ov[0, r] = 0.0
        if order > 1:
            oa[0, r] = -m.gravity[r] if with_gravity else 0.0
    for i in range(1, m.njoints):
        par = parents[i]
        iv = idx_v[i]
        joint_world_motion(i, par, iv, nvs[i], v, a, order, J, ov, oa, w6)


@kernel
def local_motions(m, oR, op, ov, oa_gf, vel, acc, oa):
    """Joint-frame velocities vel_i = oMi^-1 ov_i and accelerations acc_i = oMi^-1 oa_i,
    with oa_i = oa_gf_i + g the world acceleration without RNEA's gravity term
    (one state).  Pinocchio's split: ``v, a`` joint frame, ``ov, oa, oa_gf`` world."""
    for r in range(6):
        vel[0, r] = 0.0
        acc[0, r] = 0.0
        oa[0, r] = 0.0
    for i in range(1, m.njoints):
        for r in range(6):
            oa[i, r] = oa_gf[i, r] + m.gravity[r]
        inv_act_motion(oR, op, i, ov, i, vel, i)
        inv_act_motion(oR, op, i, oa, i, acc, i)


@kernel
def _compute_joint_jacobians(m, q, liR, lip, oR, op, J):
    XR = frame_empty((1, 3, 3))
    Xp = frame_empty((1, 3))
    for k in range(q.shape[0]):
        placements(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k])
        joint_jacobians_state(m, oR[k], op[k], J[k])


@kernel
def express_jacobian(m, joint, J, R, p, f, reference, out):
    """Columns of the world Jacobian J (6, nv) that support ``joint``, expressed at
    the frame (R[f], p[f]) of the world: LOCAL (0), WORLD (1) or
    LOCAL_WORLD_ALIGNED (2); zero elsewhere.
    """
    out[:, :] = 0.0
    idx_v, nvs, parents = m.idx_v, m.nvs, m.parents
    j = joint
    while j > 0:
        for c in range(idx_v[j], idx_v[j] + nvs[j]):
            w0, w1, w2 = J[3, c], J[4, c], J[5, c]
            if reference == 1:
                for r in range(6):
                    out[r, c] = J[r, c]
                continue
            # linear velocity of the point p: v + w x p
            v0 = J[0, c] + w1 * p[f, 2] - w2 * p[f, 1]
            v1 = J[1, c] + w2 * p[f, 0] - w0 * p[f, 2]
            v2 = J[2, c] + w0 * p[f, 1] - w1 * p[f, 0]
            if reference == 2:
                out[0, c], out[1, c], out[2, c] = v0, v1, v2
                out[3, c], out[4, c], out[5, c] = w0, w1, w2
            else:
                for r in range(3):
                    out[r, c] = R[f, 0, r] * v0 + R[f, 1, r] * v1 + R[f, 2, r] * v2
                    out[3 + r, c] = R[f, 0, r] * w0 + R[f, 1, r] * w1 + R[f, 2, r] * w2
        j = parents[j]


@kernel
def _frame_jacobian(m, q, frame, reference, liR, lip, oR, op, oRf, opf, J, out):
    XR = frame_empty((1, 3, 3))
    Xp = frame_empty((1, 3))
    joint = m.frame_joint[frame]
    for k in range(q.shape[0]):
        placements(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k])
        joint_jacobians_state(m, oR[k], op[k], J[k])
        compose(oR[k], op[k], joint, m.frame_R, m.frame_p, frame, oRf[k], opf[k], frame)
        express_jacobian(m, joint, J[k], oRf[k], opf[k], frame, reference, out[k])


@kernel
def subtree_mass_and_com(m, oR, op, mass, com):
    """mass[i], com[i] (world) of the subtree of joint i; index 0 = whole robot."""
    Y = m.inertia
    mass[0] = 0.0
    com[0, :] = 0.0
    for i in range(1, m.njoints):
        mi = Y[i, 0, 0]
        h0, h1, h2 = Y[i, 5, 1], Y[i, 3, 2], Y[i, 4, 0]
        mass[i] = mi
        for r in range(3):
            com[i, r] = oR[i, r, 0] * h0 + oR[i, r, 1] * h1 + oR[i, r, 2] * h2 + mi * op[i, r]
    subtree_averages(m, mass, com, True)


@inline_kernel
def subtree_averages(m, mass, x, sum_mass):
    """x[i] <- (sum of x[j] over the subtree of joint i) / mass[i] for x (njoints, 3)
    of per-body first moments (m c, m vc) and the subtree masses ``mass``
    (``sum_mass``: given per body, summed over the subtrees here)."""
    parents = m.parents
    for i in range(m.njoints - 1, 0, -1):
        par = parents[i]
        if sum_mass:
            mass[par] += mass[i]
        for r in range(3):
            x[par, r] += x[i, r]
    for i in range(m.njoints):
        if mass[i] > 0.0:
            for r in range(3):
                x[i, r] /= mass[i]


@inline_kernel
def com_jacobian(m, k, J, mass, com, Jcom):
    """Jcom[k] (3, nv) of state k of stacks from the world Jacobian J and the subtree
    masses and centres of mass: a column of joint i moves its whole subtree,
    v + w x c_i, weighted by the subtree's share m_i / M of the mass."""
    total = mass[k, 0]
    for i in range(1, m.njoints):
        ratio = mass[k, i] / total
        c0, c1, c2 = com[k, i, 0], com[k, i, 1], com[k, i, 2]
        for col in range(m.idx_v[i], m.idx_v[i] + m.nvs[i]):
            w0, w1, w2 = J[k, 3, col], J[k, 4, col], J[k, 5, col]
            Jcom[k, 0, col] = ratio * (J[k, 0, col] + w1 * c2 - w2 * c1)
            Jcom[k, 1, col] = ratio * (J[k, 1, col] + w2 * c0 - w0 * c2)
            Jcom[k, 2, col] = ratio * (J[k, 2, col] + w0 * c1 - w1 * c0)


@kernel
def _center_of_mass(m, q, with_jacobian, liR, lip, oR, op, J, mass, com, Jcom):
    """Subtree masses and centres of mass; with_jacobian: also Jcom (3, nv)."""
    XR = frame_empty((1, 3, 3))
    Xp = frame_empty((1, 3))
    for k in range(q.shape[0]):
        placements(m, q[k], XR, Xp, liR[k], lip[k], oR[k], op[k])
        subtree_mass_and_com(m, oR[k], op[k], mass[k], com[k])
        if not with_jacobian:
            continue
        joint_jacobians_state(m, oR[k], op[k], J[k])
        com_jacobian(m, k, J, mass, com, Jcom)


def forward_kinematics(model, data, q, v=None, a=None):
    """Placements (and velocities, accelerations) of every joint.

    ``q`` (nq,) or (K, nq); ``v``, ``a`` (nv,) or (K, nv), optional.  Fills
    ``data.liR, lip`` (liMi), ``data.oR, op`` (oMi), and with v the local
    spatial velocities ``data.v`` (K, njoints, 6), with a the local spatial
    accelerations ``data.a`` (gravity not included), as Pinocchio's
    ``forwardKinematics``.  Returns ``(oR, op)`` of shape (njoints, 3, 3),
    (njoints, 3) or with a leading K.
    """
    if v is not None and a is not None:  # q, v, a checked together, as rnea's
        if one_state(_forward_kinematics_one, _forward_kinematics, model, data, q, v, a, (2,)):
            return data.oR[0].copy(), data.op[0].copy()
        qs, vs, accs, _, K, single = as_dynamics_arguments(model, data, q, v, a, None, "a")
        order = 2
    else:
        qs, single = as_configurations(model, q)
        K = qs.shape[0]
        order = 0 if v is None else 1
        vs = np.zeros((K, model.nv)) if v is None else as_stack(v, model.nv, "v", (K, single))[0]
        accs = np.zeros((K, model.nv)) if a is None else as_stack(a, model.nv, "a", (K, single))[0]
        check_data(model, data, K, single)
    call_kernel(_forward_kinematics, model, qs, vs, accs, order, data.liR, data.lip, data.oR,
                data.op, data.v, data.a)
    return result(data.oR, K, single).copy(), result(data.op, K, single).copy()


def update_frame_placements(model, data):
    """oMf of every frame from the oMi of the last forward_kinematics (all K states).

    Fills ``data.oRf, data.opf``; returns None."""
    K, _ = check_placements(model, data, "update_frame_placements")
    call_kernel(_frame_placements, model, data.oR[:K], data.op[:K], data.oRf[:K], data.opf[:K])


def frame_placement(model, data, frame, q=None):
    """Placement (R, p) of a frame in the world.

    Requires ``forward_kinematics`` on the same data, unless ``q`` is given
    (then it is run first).  ``frame`` is an id or a name.  Returns R (3, 3),
    p (3,), or (K, 3, 3), (K, 3) for the K states of the last call.
    """
    frame = check_frame(model, frame)
    if q is not None:
        forward_kinematics(model, data, q)
    K, single = check_placements(model, data, "frame_placement")
    j = model.arrays.frame_joint[frame]
    fR, fp = model.arrays.frame_R[frame], model.arrays.frame_p[frame]
    R = data.oR[:K, j] @ fR
    p = data.op[:K, j] + np.einsum("kij,j->ki", data.oR[:K, j], fp)
    if single:
        return R[0], p[0]
    return R, p


def compute_joint_jacobians(model, data, q):
    """World-frame Jacobian J (6, nv) of all joints (column c = world motion of dof c).

    Returns J (6, nv) or (K, 6, nv); fills ``data.J`` and the placements.
    """
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    call_kernel(_compute_joint_jacobians, model, qs, data.liR, data.lip, data.oR, data.op, data.J)
    return result(data.J, K, single).copy()


def _reference_code(reference):
    if isinstance(reference, str):
        try:
            return REFERENCE_FRAMES[reference.upper()]
        except KeyError:
            raise ValueError(f"unknown reference frame {reference!r}; expected one of "
                             f"{sorted(REFERENCE_FRAMES)}") from None
    if reference not in (LOCAL, WORLD, LOCAL_WORLD_ALIGNED):
        raise ValueError(f"unknown reference frame {reference!r}")
    return int(reference)


def frame_jacobian(model, data, q, frame, reference=LOCAL):
    """Jacobian (6, nv) of a frame in LOCAL, WORLD or LOCAL_WORLD_ALIGNED.

    As Pinocchio's ``computeFrameJacobian``: LOCAL is the frame's spatial
    velocity in its own axes, WORLD the spatial velocity at the world origin,
    LOCAL_WORLD_ALIGNED the velocity of the frame origin in world axes.
    ``q`` (nq,) or (K, nq); returns (6, nv) or (K, 6, nv).
    """
    frame = check_frame(model, frame)
    code = _reference_code(reference)
    out = np.empty((6, model.nv))
    if one_state(_frame_jacobian_one, _frame_jacobian, model, data, q, extra=(frame, code, out)):
        return out
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    out = np.empty((K, 6, model.nv))
    call_kernel(_frame_jacobian, model, qs, frame, code, data.liR, data.lip, data.oR, data.op,
                data.oRf, data.opf, data.J, out)
    return out[0] if single else out


def joint_jacobian(model, data, q, joint, reference=LOCAL):
    """Jacobian (6, nv) of a joint frame, as Pinocchio's ``computeJointJacobian``."""
    joint = check_joint(model, joint)
    code = _reference_code(reference)
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    J = compute_joint_jacobians(model, data, qs)
    out = np.empty((K, 6, model.nv))
    for k in range(K):
        call_kernel(express_jacobian, model, joint, J[k], data.oR[k], data.op[k], joint, code,
                    out[k])
    return out[0] if single else out


def center_of_mass(model, data, q):
    """Centre of mass of the whole robot in the world, (3,) or (K, 3).

    Fills ``data.com[:, i]`` and ``data.mass[:, i]``: centre of mass and mass of
    the subtree of every joint i (index 0: whole robot), as Pinocchio with
    ``computeSubtreeComs``.
    """
    if one_state(_center_of_mass_one, _center_of_mass, model, data, q, extra=(False,)):
        return data.com[0, 0].copy()
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    call_kernel(_center_of_mass, model, qs, False, data.liR, data.lip, data.oR, data.op, data.J,
                data.mass, data.com, data.Jcom)
    return result(data.com[:, 0], K, single).copy()


def jacobian_center_of_mass(model, data, q):
    """Jacobian of the centre of mass (3, nv) or (K, 3, nv); also fills ``data.com``."""
    if one_state(_center_of_mass_one, _center_of_mass, model, data, q, extra=(True,)):
        return data.Jcom[0].copy()
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    check_data(model, data, K, single)
    call_kernel(_center_of_mass, model, qs, True, data.liR, data.lip, data.oR, data.op, data.J,
                data.mass, data.com, data.Jcom)
    return result(data.Jcom, K, single).copy()
