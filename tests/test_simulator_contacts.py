"""The MPC plant with rigid contacts (``Simulator(constraints=...)``) on solo12
standing on its four point feet:

- one simulated step is one RK4 step of the contact stage (ContactDynamics with
  the same Baumgarte gains, ``integrator="rk4"``);
- held by the quasi-static torques, the robot stays still and its feet on their
  targets (the Baumgarte correction keeps the integration drift bounded);
- a push on the base enters as the generalized force J^T f (for a force at the
  free-flyer's origin: R^T f on the base's linear rows, nothing elsewhere), moves
  the trunk along the push while the feet stay put.
"""
import functools

import numpy as np

import geppetto as gp
from geppetto.dynamics import LOCAL_WORLD_ALIGNED, contact_3d, frame_placement

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


@functools.lru_cache(maxsize=None)
def setup():
    robot = gp.robots.load("solo12")
    model = robot.model
    data = model.create_data()
    feet = np.array([frame_placement(model, data, foot, robot.q0)[1] for foot in FEET])
    contacts = [contact_3d(model, foot, reference=LOCAL_WORLD_ALIGNED, Kp=100.0, Kd=20.0,
                           target=p) for foot, p in zip(FEET, feet)]
    dynamics = gp.ocp.ContactDynamics(model, contacts)
    x0 = np.r_[robot.q0, np.zeros(model.nv)]
    return model, feet, contacts, dynamics, x0


def feet_drift(model, feet, x):
    data = model.create_data()
    q = x[:model.nq]
    return max(np.linalg.norm(frame_placement(model, data, foot, q)[1] - p)
               for foot, p in zip(FEET, feet))


def test_one_step_is_the_rk4_contact_stage():
    model, feet, contacts, dynamics, x0 = setup()
    rng = np.random.default_rng(3)
    x = dynamics.state.integrate(x0[None], 0.05 * rng.standard_normal((1, model.nv * 2)))[0]
    u = dynamics.quasi_static(x0[None])[0] + 0.5 * rng.standard_normal(dynamics.nu)
    plant = gp.solvers.Simulator(model, dt=1e-3, actuation=dynamics.actuation,
                                 constraints=contacts)
    stage = gp.ocp.StageModel(dynamics, dt=1e-3, integrator="rk4")
    expected = stage.integrator.calc(stage.integrator.create_data(1), x[None], u[None])[0]
    np.testing.assert_allclose(plant.step(x, u, 1e-3), expected, rtol=0, atol=1e-12)


def test_standing_robot_stays_still():
    model, feet, contacts, dynamics, x0 = setup()
    u = dynamics.quasi_static(x0[None])[0]
    plant = gp.solvers.Simulator(model, dt=1e-3, actuation=dynamics.actuation,
                                 constraints=contacts)
    x = x0.copy()
    for i in range(25):                          # 0.5 s
        x = plant.step(x, u, 0.02, 0.02 * i)
    assert feet_drift(model, feet, x) < 1e-8
    assert np.abs(dynamics.state.difference(x0[None], x[None])).max() < 1e-8
    # the feet carry the weight
    weight = -model.arrays.gravity[2] * model.arrays.inertia[1:, 0, 0].sum()
    np.testing.assert_allclose(plant.contact_forces[2::3].sum(), weight, rtol=1e-8)


def test_push_on_a_standing_robot():
    model, feet, contacts, dynamics, x0 = setup()
    u = dynamics.quasi_static(x0[None])[0]
    base = model.joint_id("root_joint")
    force = np.array([0.0, 5.0, 0.0])
    push = gp.solvers.Push(base, force, 0.0, 0.05)
    plant = gp.solvers.Simulator(model, dt=1e-3, actuation=dynamics.actuation, pushes=[push],
                                 constraints=contacts)
    # the generalized force of a force at the free-flyer's origin
    x = dynamics.state.integrate(x0[None], 0.1 * np.r_[np.ones(model.nv), np.zeros(model.nv)]
                                 [None])[0]
    data = model.create_data()
    R = gp.dynamics.forward_kinematics(model, data, x[:model.nq])[0][base]
    tau = plant.external_torques(x, 0.01)
    np.testing.assert_allclose(tau[:3], R.T @ force, atol=1e-12)
    np.testing.assert_allclose(tau[3:], 0.0, atol=1e-12)
    assert not plant.external_torques(x, 0.06).any()
    # the trunk moves along the push, the feet stay on their targets
    x = x0.copy()
    for i in range(5):                           # the 0.05 s of the push, in 10 ms steps
        x = plant.step(x, u, 0.01, 0.01 * i)
    assert x[1] > 1e-4 and abs(x[0]) < 0.1 * x[1]
    assert feet_drift(model, feet, x) < 1e-5
