"""Kinematics derivatives: joint and frame velocity and acceleration
derivatives, the Jacobian time variation and the centre-of-mass derivatives.

Three checks, on 20 seeded random states of ur5, panda, solo12, hyq and talos:

- against Pinocchio's same functions to 1e-9 (errors scaled by the size of
  the reference).  Pinocchio 4.1's LOCAL_WORLD_ALIGNED derivatives with
  respect to q are the WORLD derivatives translated to the frame origin,
  d(ov)/dq seen from p, without the motion of p itself; they differ from the
  derivative of ``getFrameVelocity(..., LOCAL_WORLD_ALIGNED)`` (and fail the
  finite-difference check).  Ours are the true derivatives; the test checks
  ours = Pinocchio's + [w x dp/dq; 0] (w the angular velocity or
  acceleration, dp/dq the linear rows of the LOCAL_WORLD_ALIGNED Jacobian);
- against central finite differences on the manifold (q perturbed with
  ``integrate``), of geppetto's own forward kinematics, frame Jacobians and
  centre of mass, on the robots and on random trees with every joint type;
- a stack of states against single calls.
"""
import numpy as np
import pytest

import geppetto.dynamics as gd

pin = pytest.importorskip("pinocchio")

ROBOTS = ("ur5", "panda", "solo12", "hyq", "talos")
FD_MODELS = ROBOTS + ("random_tree", "random_tree_ff")
N_STATES = 20
N_FD_STATES = 2
RTOL = 1e-9
FD_RTOL = 1e-6
FD_STEP = 1e-5
REFERENCES = (gd.LOCAL, gd.WORLD, gd.LOCAL_WORLD_ALIGNED)
LABELS = {gd.LOCAL: "LOCAL", gd.WORLD: "WORLD", gd.LOCAL_WORLD_ALIGNED: "LOCAL_WORLD_ALIGNED"}


def pin_reference(code):
    return {gd.LOCAL: pin.LOCAL, gd.WORLD: pin.WORLD,
            gd.LOCAL_WORLD_ALIGNED: pin.LOCAL_WORLD_ALIGNED}[code]


def matrix(x, rows, cols):
    return np.array(x, dtype=float).reshape(rows, cols)


def targets(m, k):
    """(joints, frames) checked at state k: all of them on the first two states,
    then the last joint and a middle one, the last frame and a middle one."""
    if k < 2:
        return range(m.njoints), range(m.nframes)
    return (m.njoints - 1, m.njoints // 2), (m.nframes - 1, m.nframes // 2)


def lwa_correction(w_world, dv_dv_lwa):
    """[w x dp/dq; 0]: the motion of the frame origin p, missing from
    Pinocchio's LOCAL_WORLD_ALIGNED derivatives with respect to q."""
    out = np.zeros_like(dv_dv_lwa)
    out[:3] = np.cross(w_world, dv_dv_lwa[:3].T).T
    return out


@pytest.fixture(scope="module", params=ROBOTS)
def case(request, load_case):
    return load_case(request.param)


# --- Against Pinocchio ------------------------------------------------------

def test_forward_pass(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    for k in range(N_STATES):
        assert gd.compute_forward_kinematics_derivatives(m, d, s.q[k], s.v[k], s.a[k]) is None
        pin.computeForwardKinematicsDerivatives(pm, pd, s.q[k], s.v[k], s.a[k])
        for field, pin_field in (("ov", pd.ov), ("oa", pd.oa), ("v", pd.v), ("a", pd.a)):
            assert_close(getattr(d, field)[0], np.array([x.vector for x in pin_field]), RTOL,
                         f"data.{field} state {k}")
        assert_close(d.J[0], matrix(pd.J, 6, m.nv), RTOL, f"data.J state {k}")
        assert_close(d.dJ[0], matrix(pd.dJ, 6, m.nv), RTOL, f"data.dJ state {k}")
        assert_close(d.op[0], np.array([M.translation for M in pd.oMi]), RTOL, f"op state {k}")


def _check_motion_derivatives(case, states, assert_close, kind):
    """kind "joint" or "frame": velocity and acceleration derivatives vs pin."""
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    ours_v = getattr(gd, f"{kind}_velocity_derivatives")
    ours_a = getattr(gd, f"{kind}_acceleration_derivatives")
    pin_v = pin.getJointVelocityDerivatives if kind == "joint" else pin.getFrameVelocityDerivatives
    pin_a = (pin.getJointAccelerationDerivatives if kind == "joint"
             else pin.getFrameAccelerationDerivatives)
    pin_motion = ((pin.getVelocity, pin.getAcceleration) if kind == "joint"
                  else (pin.getFrameVelocity, pin.getFrameAcceleration))
    s = states
    for k in range(N_STATES):
        gd.compute_forward_kinematics_derivatives(m, d, s.q[k], s.v[k], s.a[k])
        pin.forwardKinematics(pm, pd, s.q[k], s.v[k], s.a[k])
        pin.updateFramePlacements(pm, pd)
        pin.computeForwardKinematicsDerivatives(pm, pd, s.q[k], s.v[k], s.a[k])
        joints, frames = targets(m, k)
        for target in (joints if kind == "joint" else frames):
            w = pin_motion[0](pm, pd, target, pin.WORLD).angular
            dw = pin_motion[1](pm, pd, target, pin.WORLD).angular
            for code in REFERENCES:
                label = f"{kind} {target} {LABELS[code]} state {k}"
                expected_v = [matrix(x, 6, m.nv) for x in pin_v(pm, pd, target,
                                                                 pin_reference(code))]
                expected_a = [matrix(x, 6, m.nv) for x in pin_a(pm, pd, target,
                                                                 pin_reference(code))]
                if code == gd.LOCAL_WORLD_ALIGNED:
                    J_lwa = expected_v[1]
                    expected_v[0] = expected_v[0] + lwa_correction(w, J_lwa)
                    expected_a[0] = expected_a[0] + lwa_correction(w, J_lwa)
                    expected_a[1] = expected_a[1] + lwa_correction(dw, J_lwa)
                for x, e, name in zip(ours_v(m, d, target, code), expected_v,
                                      ("dv_dq", "dv_dv")):
                    assert_close(x, e, RTOL, f"{name} {label}")
                for x, e, name in zip(ours_a(m, d, target, code), expected_a,
                                      ("dv_dq", "da_dq", "da_dv", "da_da")):
                    assert_close(x, e, RTOL, f"acceleration {name} {label}")


def test_joint_velocity_and_acceleration_derivatives(case, states, assert_close):
    _check_motion_derivatives(case, states, assert_close, "joint")


def test_frame_velocity_and_acceleration_derivatives(case, states, assert_close):
    _check_motion_derivatives(case, states, assert_close, "frame")


def test_frame_jacobian_time_variation(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    for k in range(N_STATES):
        pin.computeJointJacobiansTimeVariation(pm, pd, s.q[k], s.v[k])
        pin.updateFramePlacements(pm, pd)
        assert_close(gd.compute_joint_jacobians_time_variation(m, d, s.q[k], s.v[k]),
                     matrix(pd.dJ, 6, m.nv), RTOL, f"joint dJ/dt state {k}")
        for frame in targets(m, k)[1]:
            for code in REFERENCES:
                expected = matrix(pin.getFrameJacobianTimeVariation(pm, pd, frame,
                                                                    pin_reference(code)),
                                  6, m.nv)
                assert_close(gd.frame_jacobian_time_variation(m, d, s.q[k], s.v[k], frame, code),
                             expected, RTOL, f"frame {frame} {LABELS[code]} dJ/dt state {k}")


def test_center_of_mass_derivatives(case, states, assert_close):
    m, d, pm, pd = case.model, case.data(), case.pin_model, case.pin_data()
    s = states
    for k in range(N_STATES):
        Jcom = matrix(pin.jacobianCenterOfMass(pm, pd, s.q[k]), 3, m.nv)
        dcom_dq = gd.center_of_mass_derivatives(m, d, s.q[k])
        assert_close(dcom_dq, Jcom, RTOL, f"dcom_dq state {k}")
        assert_close(dcom_dq, gd.jacobian_center_of_mass(m, m.create_data(), s.q[k]), 1e-13,
                     f"dcom_dq = jacobian_center_of_mass, state {k}")
        pin.computeForwardKinematicsDerivatives(pm, pd, s.q[k], s.v[k], s.a[k])
        pin.centerOfMass(pm, pd, s.q[k], s.v[k])
        dvcom_dq, dvcom_dv = gd.center_of_mass_velocity_derivatives(m, d, s.q[k], s.v[k])
        assert_close(dvcom_dq, matrix(pin.getCenterOfMassVelocityDerivatives(pm, pd), 3, m.nv),
                     RTOL, f"dvcom_dq state {k}")
        assert_close(dvcom_dv, Jcom, RTOL, f"dvcom_dv state {k}")
        assert_close(d.vcom[0, 0], pd.vcom[0], RTOL, f"data.vcom state {k}")


# --- Against finite differences on the manifold -----------------------------

def central_differences(model, function, q, v, a, wrt):
    """Columns d function / d wrt (tangent space for q) by central differences.

    ``function(qs, vs, as_)`` evaluates a stack of states and returns (n_states,
    ...); all 2 nv perturbed states go through it at once."""
    nv = model.nv
    steps = np.vstack([np.eye(nv), -np.eye(nv)]) * FD_STEP
    qs, vs, as_ = (np.repeat(x[None], 2 * nv, axis=0) for x in (q, v, a))
    if wrt == "q":
        qs = gd.integrate(model, qs, steps)
    elif wrt == "v":
        vs = vs + steps
    else:
        as_ = as_ + steps
    out = function(qs, vs, as_)
    return np.moveaxis((out[:nv] - out[nv:]) / (2.0 * FD_STEP), 0, -1)


def frame_motions(model, data, frame, code):
    """function(qs, vs, as_) -> (n, 12): spatial velocity and acceleration of
    ``frame`` in reference ``code``, from forward_kinematics."""
    joint = model.frames[frame].joint
    fR, fp = model.frames[frame].R, model.frames[frame].p

    def motions(qs, vs, as_):
        oR, op = gd.forward_kinematics(model, data, qs, vs, as_)
        out = []
        for x in (data.v[:len(qs), joint], data.a[:len(qs), joint]):
            lin, ang = x[:, :3], x[:, 3:]
            if code == gd.WORLD:
                R, p = oR[:, joint], op[:, joint]
                ang_w = np.einsum("kij,kj->ki", R, ang)
                out += [np.einsum("kij,kj->ki", R, lin) + np.cross(p, ang_w), ang_w]
                continue
            # the frame's own spatial motion: fMj applied to x
            lin_f = (lin - np.cross(fp, ang)) @ fR
            ang_f = ang @ fR
            if code == gd.LOCAL_WORLD_ALIGNED:
                oRf = oR[:, joint] @ fR
                lin_f = np.einsum("kij,kj->ki", oRf, lin_f)
                ang_f = np.einsum("kij,kj->ki", oRf, ang_f)
            out += [lin_f, ang_f]
        return np.concatenate(out, axis=1)
    return motions


@pytest.fixture(scope="module", params=FD_MODELS)
def fd_case(request, load_case):
    return load_case(request.param)


def test_motion_derivatives_against_finite_differences(fd_case, assert_close):
    m, d = fd_case.model, fd_case.data()
    s = fd_case.states(N_FD_STATES, seed=1)
    frames = sorted({m.nframes - 1, m.nframes // 2} | {
        next(f for f, fr in enumerate(m.frames) if fr.joint == j) for j in (1, m.njoints - 1)})
    for k in range(N_FD_STATES):
        q, v, a = s.q[k], s.v[k], s.a[k]
        for frame in frames:
            joint = m.frames[frame].joint
            for code in REFERENCES:
                function = frame_motions(m, m.create_data(), frame, code)
                fd = {x: central_differences(m, function, q, v, a, x) for x in "qva"}
                gd.compute_forward_kinematics_derivatives(m, d, q, v, a)
                dv_dq, da_dq, da_dv, da_da = gd.frame_acceleration_derivatives(m, d, frame, code)
                label = f"frame {m.frames[frame].name!r} {LABELS[code]} state {k}"
                assert_close(dv_dq, fd["q"][:6], FD_RTOL, f"dv_dq {label}")
                assert_close(da_dq, fd["q"][6:], FD_RTOL, f"da_dq {label}")
                assert_close(da_dv, fd["v"][6:], FD_RTOL, f"da_dv {label}")
                assert_close(da_da, fd["a"][6:], FD_RTOL, f"da_da {label}")
                assert_close(gd.frame_velocity_derivatives(m, d, frame, code)[1], fd["v"][:6],
                             FD_RTOL, f"dv_dv {label}")
                if m.frames[frame].R.tolist() == np.eye(3).tolist() and not m.frames[frame].p.any():
                    x = gd.joint_acceleration_derivatives(m, d, joint, code)
                    assert_close(x[1], fd["q"][6:], FD_RTOL, f"joint da_dq {label}")


def test_time_variation_and_com_against_finite_differences(fd_case, assert_close):
    m, d = fd_case.model, fd_case.data()
    s = fd_case.states(N_FD_STATES, seed=2)
    frame = m.nframes - 1
    for k in range(N_FD_STATES):
        q, v = s.q[k], s.v[k]
        # along the curve q (+) t v
        qs = gd.integrate(m, np.stack([q, q]), np.stack([v, -v]) * FD_STEP)
        for code in REFERENCES:
            J = gd.frame_jacobian(m, m.create_data(), qs, frame, code)
            assert_close(gd.frame_jacobian_time_variation(m, d, q, v, frame, code),
                         (J[0] - J[1]) / (2.0 * FD_STEP), FD_RTOL,
                         f"dJ/dt {LABELS[code]} state {k}")
        J = gd.compute_joint_jacobians(m, m.create_data(), qs)
        assert_close(gd.compute_joint_jacobians_time_variation(m, d, q, v),
                     (J[0] - J[1]) / (2.0 * FD_STEP), FD_RTOL, f"joint dJ/dt state {k}")
        com = lambda qs, vs, as_: gd.center_of_mass(m, m.create_data(), qs)
        vcom = lambda qs, vs, as_: np.einsum(
            "kij,kj->ki", gd.jacobian_center_of_mass(m, m.create_data(), qs), vs)
        assert_close(gd.center_of_mass_derivatives(m, d, q),
                     central_differences(m, com, q, v, v, "q"), FD_RTOL, f"dcom_dq state {k}")
        dvcom_dq, dvcom_dv = gd.center_of_mass_velocity_derivatives(m, d, q, v)
        assert_close(dvcom_dq, central_differences(m, vcom, q, v, v, "q"), FD_RTOL,
                     f"dvcom_dq state {k}")
        assert_close(dvcom_dv, central_differences(m, vcom, q, v, v, "v"), FD_RTOL,
                     f"dvcom_dv state {k}")


# --- Stacks, errors ----------------------------------------------------------

def test_stack_equals_single_calls(load_case):
    case = load_case("random_tree_ff")
    m, K = case.model, 4
    s = case.states(K, seed=3)
    frame, joint = m.nframes - 1, m.njoints - 1

    def everything(d, q, v, a):
        gd.compute_forward_kinematics_derivatives(m, d, q, v, a)
        out = []
        for code in REFERENCES:
            out += gd.joint_velocity_derivatives(m, d, joint, code)
            out += gd.joint_acceleration_derivatives(m, d, joint, code)
            out += gd.frame_velocity_derivatives(m, d, frame, code)
            out += gd.frame_acceleration_derivatives(m, d, frame, code)
            out.append(gd.frame_jacobian_time_variation(m, d, q, v, frame, code))
        out.append(gd.compute_joint_jacobians_time_variation(m, d, q, v))
        out.append(gd.center_of_mass_derivatives(m, d, q))
        out += gd.center_of_mass_velocity_derivatives(m, d, q, v)
        return out

    stacked = everything(m.create_data(), s.q, s.v, s.a)
    d = m.create_data()
    singles = [everything(d, s.q[k], s.v[k], s.a[k]) for k in range(K)]
    for n, x in enumerate(stacked):
        assert x.shape[0] == K and x.shape[1:] == singles[0][n].shape
        for k in range(K):
            np.testing.assert_allclose(x[k], singles[k][n], rtol=0, atol=1e-13,
                                       err_msg=f"output {n}, state {k}")


def test_errors(load_case):
    m = load_case("ur5").model
    d = m.create_data()
    with pytest.raises(RuntimeError, match="compute_forward_kinematics_derivatives"):
        gd.joint_velocity_derivatives(m, d, 1, gd.LOCAL)
    q, v = gd.neutral(m), np.zeros(m.nv)
    gd.compute_forward_kinematics_derivatives(m, d, q, v, v)
    with pytest.raises(ValueError, match="joint id"):
        gd.joint_acceleration_derivatives(m, d, m.njoints, gd.LOCAL)
    with pytest.raises(ValueError, match="reference"):
        gd.frame_velocity_derivatives(m, d, 0, 7)
    with pytest.raises(ValueError, match="v: expected shape"):
        gd.compute_forward_kinematics_derivatives(m, d, q, np.zeros(m.nv + 1), v)
    with pytest.raises(ValueError, match="NaN"):
        gd.center_of_mass_velocity_derivatives(m, d, q, np.full(m.nv, np.nan))
    # names work where ids do
    name = m.frames[-1].name
    np.testing.assert_array_equal(gd.frame_velocity_derivatives(m, d, name, "WORLD")[1],
                                  gd.frame_velocity_derivatives(m, d, m.nframes - 1, gd.WORLD)[1])
