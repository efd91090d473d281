"""Robots, dynamics and seeded states shared by the ``tests/test_ocp_*.py`` files.

- ``ROBOTS``: the robots of the OCP tests (name -> the frame the kinematic
  residuals use): ur5 and panda (fixed base), talos (free-flyer root).
- ``robot(name)``: loaded once per session (example-robot-data).
- ``free_dynamics(name)``: the stage dynamics of each robot: ur5 with armature
  and viscous damping, panda with damping, talos with floating-base actuation
  (the 6 root coordinates unactuated) and armature.
- ``states(model, K, seed)``: K seeded random states x = (q, v).
- ``rotations(rng, K, angle)``: K random rotations of at most ``angle`` rad.
"""
import functools
import zlib

import numpy as np

import geppetto as gp

ROBOTS = {"ur5": "tool0", "panda": "panda_hand", "talos": "gripper_left_fingertip_1_link"}
K = 3


@functools.lru_cache(maxsize=None)
def robot(name):
    return gp.robots.load(name)


def rng_for(name, seed=0):
    return np.random.default_rng([zlib.crc32(name.encode()), seed])


@functools.lru_cache(maxsize=None)
def free_dynamics(name):
    model = robot(name).model
    rng = rng_for(name, 100)
    if name == "ur5":
        return gp.ocp.FreeDynamics(model, armature=rng.uniform(0.05, 0.2, model.nv),
                                   damping=rng.uniform(0.1, 1.0, model.nv))
    if name == "panda":
        return gp.ocp.FreeDynamics(model, damping=rng.uniform(0.1, 1.0, model.nv))
    armature = np.concatenate([np.zeros(6), rng.uniform(0.05, 0.2, model.nv - 6)])
    return gp.ocp.FreeDynamics(model, gp.ocp.Actuation.floating_base(model), armature=armature)


def states(model, K=K, seed=0, velocity=1.0):
    """(K, nq + nv): random configurations within the limits, velocities ~ N(0, velocity^2)."""
    rng = rng_for(model.name, seed)
    q = gp.dynamics.random_configuration(model, rng, size=K)
    v = velocity * rng.standard_normal((K, model.nv))
    return np.hstack([q, v])


def controls(name, K=K, seed=0, scale=2.0):
    dynamics = free_dynamics(name)
    return scale * rng_for(name, seed + 50).standard_normal((K, dynamics.nu))


def rotation(axis_angle):
    """exp([w]x) by Rodrigues' formula."""
    w = np.asarray(axis_angle, dtype=float)
    t = np.linalg.norm(w)
    W = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    if t < 1e-12:
        return np.eye(3) + W
    return np.eye(3) + np.sin(t) / t * W + (1.0 - np.cos(t)) / t ** 2 * W @ W


def rotations(rng, K=K, angle=1.0):
    out = np.empty((K, 3, 3))
    for k in range(K):
        axis = rng.standard_normal(3)
        out[k] = rotation(axis / np.linalg.norm(axis) * rng.uniform(0.0, angle))
    return out


def frame_placements(model, xs, frame):
    """(R (K, 3, 3), p (K, 3)) of ``frame`` at the configurations of xs."""
    data = model.create_data()
    R, p = np.empty((xs.shape[0], 3, 3)), np.empty((xs.shape[0], 3))
    for k, x in enumerate(xs):
        R[k], p[k] = gp.dynamics.frame_placement(model, data, frame, x[:model.nq])
    return R, p
