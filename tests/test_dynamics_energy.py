"""Energy along simulated motions: conservation and power balance.

A 4th-order Runge-Kutta-Munthe-Kaas integrator (q(t) = q_n (+) theta(t),
theta' = dexp^-1(v), the right Jacobian of integrate taken from Pinocchio's
dIntegrate) rolls out the ABA with zero torque for 0.2 s (dt = 1 ms):
kinetic energy is conserved without gravity, T + V with it, to 1e-8 of the
energy (the drift is ~1e-13 with this integrator).  With a torque, d(T + V)/dt = v^T tau.
"""
import numpy as np
import pytest

import geppetto.dynamics as gd

pin = pytest.importorskip("pinocchio")

DT = 1e-3
DURATION = 0.2
ROLLOUT_MODELS = ("double_pendulum", "random_tree", "random_tree_ff", "solo12")


def with_gravity(model, gravity):
    """A copy of ``model`` (same joints, inertias, limits, frames) under another gravity."""
    a = model.arrays
    builder = gd.ModelBuilder(model.name, gravity=gravity)
    for i in range(1, a.njoints):
        iq, nq, iv, nv = a.idx_q[i], a.nqs[i], a.idx_v[i], a.nvs[i]
        axis = a.axis[i] if a.jtype[i] in (gd.REVOLUTE, gd.REVOLUTE_UNBOUNDED,
                                           gd.PRISMATIC) else None
        builder.add_joint(int(a.parents[i]), int(a.jtype[i]), model.names[i], R=a.jR[i],
                          p=a.jp[i], axis=axis,
                          lower=model.lower_position_limit[iq:iq + nq],
                          upper=model.upper_position_limit[iq:iq + nq],
                          velocity_limit=model.velocity_limit[iv:iv + nv],
                          effort_limit=model.effort_limit[iv:iv + nv],
                          armature=a.armature[iv:iv + nv])
    for i in range(a.njoints):
        mass, com, inertia = gd.inertia_parameters(a.inertia[i])
        builder.append_body_inertia(i, mass, com, inertia)
    for frame in model.frames[1:]:
        builder.add_frame(frame.name, frame.joint, frame.R, frame.p, frame.type,
                          frame.parent_frame)
    return builder.build()


def rkmk4_step(model, data, pin_model, q, v, tau, dt):
    """One Runge-Kutta-Munthe-Kaas step of (q, v)' = (v, aba(q, v, tau))."""
    def derivative(theta, velocity):
        q_theta = gd.integrate(model, q, theta)
        Jr = pin.dIntegrate(pin_model, q, theta, pin.ArgumentPosition.ARG1)
        return (np.linalg.solve(np.atleast_2d(Jr), velocity),
                gd.aba(model, data, q_theta, velocity, tau))

    zero = np.zeros(model.nv)
    k1 = derivative(zero, v)
    k2 = derivative(0.5 * dt * k1[0], v + 0.5 * dt * k1[1])
    k3 = derivative(0.5 * dt * k2[0], v + 0.5 * dt * k2[1])
    k4 = derivative(dt * k3[0], v + dt * k3[1])
    theta = dt / 6.0 * (k1[0] + 2.0 * k2[0] + 2.0 * k3[0] + k4[0])
    v_next = v + dt / 6.0 * (k1[1] + 2.0 * k2[1] + 2.0 * k3[1] + k4[1])
    return gd.integrate(model, q, theta), v_next


def energy(model, data, q, v):
    return gd.kinetic_energy(model, data, q, v) + gd.potential_energy(model, data, q)


def test_with_gravity_copies_the_model(load_case, assert_close):
    case = load_case("random_tree_ff")
    m = case.model
    copy = with_gravity(m, m.gravity)
    for field, value in m.arrays._asdict().items():
        np.testing.assert_allclose(getattr(copy.arrays, field), value, rtol=1e-14,
                                   atol=1e-15, err_msg=field)
    s = case.states(3, seed=4)
    assert_close(gd.rnea(copy, copy.create_data(), s.q, s.v, s.a),
                 gd.rnea(m, case.data(), s.q, s.v, s.a), 1e-14, "rnea of the copy")
    weightless = with_gravity(m, (0.0, 0.0, 0.0))
    assert_close(gd.generalized_gravity(weightless, weightless.create_data(), s.q),
                 np.zeros((3, m.nv)), 0.0, "no gravity")


@pytest.mark.parametrize("gravity", [False, True], ids=["zero_gravity", "gravity"])
@pytest.mark.parametrize("name", ROLLOUT_MODELS)
def test_energy_conserved_without_torque(load_case, name, gravity):
    case = load_case(name)
    m = case.model if gravity else with_gravity(case.model, (0.0, 0.0, 0.0))
    d = m.create_data()
    s = case.states(1, seed=5)
    q, v = s.q[0], s.v[0]
    tau = np.zeros(m.nv)
    E0 = energy(m, d, q, v)
    if not gravity:
        assert gd.potential_energy(m, d, q) == 0.0
    scale = gd.kinetic_energy(m, d, q, v) + abs(gd.potential_energy(m, d, q))
    drift = 0.0
    for _ in range(int(round(DURATION / DT))):
        q, v = rkmk4_step(m, d, case.pin_model, q, v, tau, DT)
        drift = max(drift, abs(energy(m, d, q, v) - E0))
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(v))
    assert drift <= 1e-8 * scale, f"energy drift {drift:.3e} of {scale:.3e}"


@pytest.mark.parametrize("name", ROLLOUT_MODELS + ("talos", "cartpole"))
def test_power_balance(load_case, name, assert_close):
    """d(T + V)/dt = v^T tau along ddq = aba(q, v, tau), by central differences
    in time (the second-order terms of q(t +- h) cancel)."""
    case = load_case(name)
    m, d = case.model, case.data()
    s = case.states(5, seed=6)
    h = 1e-5
    for k in range(5):
        q, v, tau = s.q[k], s.v[k], 10.0 * s.tau[k]
        ddq = gd.aba(m, d, q, v, tau)
        E_plus = energy(m, d, gd.integrate(m, q, h * v), v + h * ddq)
        E_minus = energy(m, d, gd.integrate(m, q, -h * v), v - h * ddq)
        scale = max(1.0, abs(v @ tau), np.abs(ddq).max() * np.abs(v).max())
        assert_close((E_plus - E_minus) / (2 * h), v @ tau, 1e-6 * scale,
                     f"dE/dt = v^T tau, state {k}")
