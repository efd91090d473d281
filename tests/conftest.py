"""Shared fixtures of the test suite.

Dynamics (``tests/test_dynamics_*.py``)
---------------------------------------
- ``dynamics_case``: parametrized over every model of :data:`DYNAMICS_MODELS`
  (the robots of example-robot-data through ``geppetto.robots.load`` and the
  built-in models), a :class:`DynamicsCase` holding the geppetto model and its
  Pinocchio twin (``pin.buildModelFromUrdf`` on the same URDF for a robot,
  ``pin_bridge.to_pin_model`` for a built-in model);
- ``load_case``: the function behind it, ``load_case(name)``, for tests that
  want one model;
- ``case``: ``dynamics_case`` under the short name the dynamics modules use (a
  module may define its own, e.g. over fewer models);
- ``states``: ``case.states(N_STATES)``, N_STATES read from the test module
  (default 20);
- ``assert_close``: ``assert_close(actual, desired, rtol, err_msg)`` checks
  ``max|actual - desired| <= rtol * max(1, max|desired|)`` (the error is
  scaled by the size of the reference, as ABA and M^-1 of light-legged robots
  reach large magnitudes).

Every model is built once per session; every random state is seeded.
"""
import functools
import zlib
from collections import namedtuple

import numpy as np
import pytest

# Robots of example-robot-data (name -> free-flyer root) and built-in models.
REAL_ROBOTS = ("ur5", "panda", "solo12", "hyq", "talos")
BUILTIN_MODELS = {
    "pendulum": lambda b: b.pendulum(),
    "double_pendulum": lambda b: b.double_pendulum(),
    "cartpole": lambda b: b.cartpole(),
    "chain": lambda b: b.chain(7, branching=2),
    # every joint type but the free-flyer, unaligned axes, random placements
    "random_tree": lambda b: b.random_tree(12, seed=3),
    # the same on a free-flyer root, with armature
    "random_tree_ff": lambda b: b.random_tree(9, seed=11, root_joint="free-flyer",
                                              armature=True),
}
DYNAMICS_MODELS = REAL_ROBOTS + tuple(BUILTIN_MODELS)

States = namedtuple("States", ["q", "v", "a", "tau", "f_ext", "q1", "u"])
States.__doc__ = """Seeded random states: q, q1 (n, nq) configurations, v, a, tau
(n, nv), f_ext (n, njoints, 6) spatial forces in the joint frames (the
universe's entry included, which every algorithm ignores), u (n,) in [0, 1]."""


class DynamicsCase:
    """A geppetto model and its Pinocchio twin.

    Attributes ``name``, ``model``, ``pin_model``, ``robot`` (None for a
    built-in model).  ``data()`` and ``pin_data()`` create fresh workspaces;
    ``states(n, seed)`` draws seeded random states.
    """

    def __init__(self, name, model, pin_model, robot=None):
        self.name, self.model, self.pin_model, self.robot = name, model, pin_model, robot

    def data(self):
        return self.model.create_data()

    def pin_data(self):
        return self.pin_model.createData()

    @property
    def has_free_flyer(self):
        from geppetto.dynamics import FREE_FLYER
        return self.model.njoints > 1 and int(self.model.joint_types[1]) == FREE_FLYER

    def states(self, n=20, seed=0):
        from geppetto.dynamics import random_configuration
        rng = np.random.default_rng([zlib.crc32(self.name.encode()), seed])
        m = self.model
        q = random_configuration(m, rng, size=n)
        q1 = random_configuration(m, rng, size=n)
        v, a, tau = (rng.standard_normal((n, m.nv)) for _ in range(3))
        f_ext = rng.standard_normal((n, m.njoints, 6))
        u = rng.uniform(0.0, 1.0, size=n)
        return States(q, v, a, tau, f_ext, q1, u)

    def __repr__(self):
        return f"DynamicsCase({self.name!r})"


@functools.lru_cache(maxsize=None)
def _load_case(name):
    import pinocchio as pin
    from geppetto import robots
    if name in BUILTIN_MODELS:
        from pin_bridge import to_pin_model
        model = BUILTIN_MODELS[name](robots)
        return DynamicsCase(name, model, to_pin_model(model))
    robot = robots.load(name)
    case = DynamicsCase(name, robot.model, None, robot)
    if case.has_free_flyer:
        case.pin_model = pin.buildModelFromUrdf(robot.urdf_path, pin.JointModelFreeFlyer())
    else:
        case.pin_model = pin.buildModelFromUrdf(robot.urdf_path)
    return case


@pytest.fixture(scope="session")
def load_case():
    """``load_case(name)`` -> the session's :class:`DynamicsCase` of that model."""
    pytest.importorskip("pinocchio")
    return _load_case


@pytest.fixture(scope="session", params=DYNAMICS_MODELS)
def dynamics_case(request, load_case):
    """Every model of DYNAMICS_MODELS in turn, built once per session."""
    return load_case(request.param)


@pytest.fixture(scope="module")
def case(dynamics_case):
    return dynamics_case


@pytest.fixture(scope="module")
def states(request, case):
    """Seeded random states of ``case``, as many as the test module's N_STATES."""
    return case.states(getattr(request.module, "N_STATES", 20))


def _assert_close(actual, desired, rtol=1e-10, err_msg=""):
    actual = np.asarray(actual, dtype=float)
    desired = np.asarray(desired, dtype=float)
    assert actual.shape == desired.shape, (
        f"{err_msg}: shape {actual.shape} != expected {desired.shape}")
    if desired.size == 0:
        return
    scale = max(1.0, float(np.max(np.abs(desired))))
    error = np.abs(actual - desired)
    worst = float(np.max(error)) if np.all(np.isfinite(error)) else np.inf
    if not worst <= rtol * scale:
        index = np.unravel_index(int(np.argmax(np.where(np.isfinite(error), error, np.inf))),
                                 error.shape)
        pytest.fail(f"{err_msg}: max |actual - desired| = {worst:.3e} > {rtol:.1e} * "
                    f"{scale:.3e} at index {tuple(int(i) for i in index)} "
                    f"(actual {actual[index]!r}, desired {desired[index]!r})")


@pytest.fixture(scope="session")
def assert_close():
    """``assert_close(actual, desired, rtol=1e-10, err_msg="")``: see the module docstring."""
    return _assert_close


# -- the order in which pytest-xdist hands out test files ---------------------
# With ``--dist loadfile`` each worker takes whole files, and Numba's on-disk
# cache is shared: a kernel one worker compiled, the other loads.  But two
# workers that start kernel-heavy files of the same layer at the same moment
# both compile the same kernels.  So the run opens with the file that compiles
# the OCP layer's chain (free, contact and impulse phases, RK4, box controls)
# on one worker while the other compiles the dynamics kernels; the OCP files
# that follow load what the first compiled.  The rest follow in xdist's own
# order (most tests first).  pyproject's addopts turn xdist's reordering off.
FIRST_FILES = (
    "test_crocoddyl_parity.py",
    "test_dynamics_batch.py", "test_dynamics_validation.py", "test_derivatives.py",
    "test_dynamics_pinocchio.py", "test_constrained_dynamics.py", "test_batch_lanes.py",
)


def pytest_collection_modifyitems(config, items):
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0].rsplit("/", 1)[-1], []).append(item)
    first = [name for name in FIRST_FILES if name in files]
    rest = sorted((name for name in files if name not in FIRST_FILES),
                  key=lambda name: -len(files[name]))
    items[:] = [item for name in first + rest for item in files[name]]
