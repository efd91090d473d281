"""Built-in models (pendulum, cartpole, chains, random trees) and the Pinocchio
bridge the dynamics tests rely on (tests/pin_bridge.py)."""
import numpy as np
import pinocchio as pin
import pytest

from geppetto.dynamics.model import FREE_FLYER, JOINT_TYPE_NAMES, ModelBuilder
from geppetto.robots import (Robot, cartpole, chain, double_pendulum, load, pendulum,
                             random_tree)
from geppetto.robots.builtin import RANDOM_JOINT_TYPES
from pin_bridge import assert_same_model, to_pin_model

G = 9.81

BUILTINS = {
    "pendulum": lambda: pendulum(length=0.7, mass=2.0),
    "double_pendulum": lambda: double_pendulum((0.6, 0.9), (1.5, 0.5)),
    "cartpole": cartpole,
    "chain1": lambda: chain(1),
    "chain6": lambda: chain(6),
    "binary15": lambda: chain(15, branching=2),
    "ternary10_all_types": lambda: chain(10, 3, joint_types=list(JOINT_TYPE_NAMES)),
    "chain5_free_flyer": lambda: chain(5, joint_types=["revolute", "spherical"],
                                       root_joint="free-flyer"),
    "random_tree1": lambda: random_tree(1, seed=0),
    "random_tree12": lambda: random_tree(12, seed=1),
    "random_tree25_free_flyer": lambda: random_tree(25, seed=2, root_joint="free-flyer",
                                                    armature=True),
    "random_tree_with_free_flyers": lambda: random_tree(
        8, seed=3, joint_types=["free_flyer", "revolute", "planar"]),
}


def random_state(pin_model, rng):
    q = pin.randomConfiguration(pin_model)
    return q, rng.normal(size=pin_model.nv), rng.normal(size=pin_model.nv)


@pytest.mark.parametrize("name", sorted(BUILTINS))
@pytest.mark.parametrize("aligned", [True, False])
def test_pin_bridge_reproduces_builtin_models(name, aligned):
    model = BUILTINS[name]()
    pin_model = to_pin_model(model, aligned=aligned)
    assert (pin_model.nq, pin_model.nv) == (model.nq, model.nv)
    assert_same_model(model, pin_model, atol=1e-14)


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_aligned_and_unaligned_pin_twins_have_the_same_dynamics(name):
    model, rng = BUILTINS[name](), np.random.default_rng(7)
    aligned, unaligned = to_pin_model(model), to_pin_model(model, aligned=False)
    q, v, a = random_state(aligned, rng)
    for function in (lambda m: pin.rnea(m, m.createData(), q, v, a),
                     lambda m: pin.crba(m, m.createData(), q),
                     lambda m: pin.aba(m, m.createData(), q, v, a)):
        # The two layouts take different Eigen code paths: they agree to round-off, relative to
        # the entries' size (forces of 1e3-1e4 differ in the 12th digit).
        np.testing.assert_allclose(function(aligned), function(unaligned), rtol=1e-11, atol=1e-9)


@pytest.mark.parametrize("name", ["ur5", "panda", "solo12", "hyq", "anymal", "talos"])
def test_pin_bridge_of_loaded_robot_has_pinocchio_dynamics(name):
    robot, rng = load(name), np.random.default_rng(3)
    root = pin.JointModelFreeFlyer() if robot.model.names[1] == "root_joint" else None
    reference = (pin.buildModelFromUrdf(robot.urdf_path, root) if root is not None
                 else pin.buildModelFromUrdf(robot.urdf_path))
    bridged = to_pin_model(robot.model)
    q = pin.normalize(reference, rng.uniform(-1, 1, size=reference.nq))
    v, a = rng.normal(size=(2, reference.nv))
    for function in (lambda m: pin.rnea(m, m.createData(), q, v, a),
                     lambda m: pin.crba(m, m.createData(), q),
                     lambda m: pin.aba(m, m.createData(), q, v, a)):
        np.testing.assert_allclose(function(bridged), function(reference), rtol=1e-10,
                                   atol=1e-10)


# ---------------------------------------------------------------- closed forms
def test_pendulum_closed_form():
    length, mass = 0.7, 2.0
    pin_model = to_pin_model(pendulum(length, mass))
    data, tip = pin_model.createData(), pin_model.getFrameId("tip")
    for q in np.linspace(-3, 3, 7):
        ddq = pin.aba(pin_model, data, np.array([q]), np.zeros(1), np.zeros(1))
        np.testing.assert_allclose(ddq, [-G / length * np.sin(q)], rtol=1e-12, atol=1e-12)
        pin.framesForwardKinematics(pin_model, data, np.array([q]))
        np.testing.assert_allclose(data.oMf[tip].translation,
                                   [-length * np.sin(q), 0, -length * np.cos(q)], atol=1e-12)


def test_double_pendulum_mass_matrix_closed_form():
    (l1, l2), (m1, m2) = (0.6, 0.9), (1.5, 0.5)
    pin_model = to_pin_model(double_pendulum((l1, l2), (m1, m2)))
    for q in np.random.default_rng(0).uniform(-3, 3, size=(5, 2)):
        c2 = np.cos(q[1])
        M = np.array([[(m1 + m2) * l1 ** 2 + m2 * l2 ** 2 + 2 * m2 * l1 * l2 * c2,
                       m2 * l2 ** 2 + m2 * l1 * l2 * c2],
                      [m2 * l2 ** 2 + m2 * l1 * l2 * c2, m2 * l2 ** 2]])
        pin_M = pin.crba(pin_model, pin_model.createData(), q)
        np.testing.assert_allclose(np.triu(pin_M), np.triu(M), rtol=1e-12, atol=1e-12)


def test_cartpole_closed_form():
    m1, m2, length = 1.0, 0.1, 0.5
    pin_model = to_pin_model(cartpole(m1, m2, length))
    rng = np.random.default_rng(1)
    for _ in range(5):
        (x, theta), (dx, dtheta), f = rng.uniform(-2, 2, size=2), rng.normal(size=2), rng.normal()
        s, c = np.sin(theta), np.cos(theta)
        ddx = (f - m2 * G * s * c + m2 * length * s * dtheta ** 2) / (m1 + m2 * s ** 2)
        ddtheta = (G * s - c * ddx) / length
        dd = pin.aba(pin_model, pin_model.createData(), np.array([x, theta]),
                     np.array([dx, dtheta]), np.array([f, 0.0]))
        np.testing.assert_allclose(dd, [ddx, ddtheta], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- generators
def test_chain_structure():
    np.testing.assert_array_equal(chain(5).parents, [0, 0, 1, 2, 3, 4])
    binary = chain(7, branching=2)
    np.testing.assert_array_equal(binary.parents, [0, 0, 1, 2, 2, 1, 5, 5])
    assert [f.name for f in binary.frames if f.name.startswith("tip")] == [
        "tip3", "tip4", "tip6", "tip7"]
    big = chain(300, branching=3)
    assert big.nv == 300 and big.njoints == 301
    floating = chain(4, root_joint="free-flyer")
    assert floating.joint_types[1] == FREE_FLYER and floating.nv == 10


def test_random_tree_has_every_joint_type_and_branches():
    model = random_tree(len(RANDOM_JOINT_TYPES), seed=0)
    assert sorted(model.joint_types[1:]) == sorted(JOINT_TYPE_NAMES[t]
                                                   for t in RANDOM_JOINT_TYPES)
    big = random_tree(40, seed=5, root_joint="free-flyer")
    assert big.names[1] == "root_joint" and big.joint_types[1] == FREE_FLYER
    children = np.bincount(big.parents[1:], minlength=big.njoints)
    assert children.max() >= 3 and (children == 0).sum() >= 5


def test_random_tree_is_reproducible_from_its_seed():
    first, again, other = random_tree(15, seed=4), random_tree(15, seed=4), random_tree(
        15, seed=5)
    for ours, theirs in zip(first.arrays, again.arrays):
        np.testing.assert_array_equal(ours, theirs)
    assert not np.array_equal(first.arrays.inertia, other.arrays.inertia)


@pytest.mark.parametrize("seed", range(4))
def test_random_inertias_are_physically_consistent(seed):
    model = random_tree(20, seed=seed, root_joint="free-flyer")
    for Y in model.inertias[1:]:
        assert np.linalg.eigvalsh(Y).min() > 0
        moments = np.linalg.eigvalsh(Y[3:, 3:] - Y[3:, :3] @ Y[:3, 3:] / Y[0, 0])
        assert moments[0] + moments[1] >= moments[2]


def test_builtins_validate_arguments():
    for bad in (lambda: chain(0), lambda: chain(3, branching=0), lambda: random_tree(2.5, 0),
                lambda: random_tree(3, 0, joint_types=["hinge"]),
                lambda: chain(3, root_joint="planar")):
        with pytest.raises(ValueError):
            bad()


def test_builtin_wrapped_in_robot_starts_neutral():
    robot = Robot(random_tree(6, seed=0, root_joint="free-flyer"))
    np.testing.assert_array_equal(robot.q0, pin.neutral(to_pin_model(robot.model)))


# ---------------------------------------------------------------- Model build
def test_model_build_checks_depth_first_order():
    builder = ModelBuilder("not depth first")
    a = builder.add_joint(0, "revolute", "a", axis=(0, 0, 1))
    builder.add_joint(0, "revolute", "b", axis=(0, 0, 1))
    builder.add_joint(a, "revolute", "c", axis=(0, 0, 1))   # below a, after a's subtree left
    with pytest.raises(ValueError, match="joint 'c' comes after the subtree of its parent 'a'"):
        builder.build()


def test_long_chains_and_wide_trees_build_with_their_subtrees():
    # The depth-first check is linear in the number of joints (it was cubic:
    # 1000 links took 77 s); speed is measured in benchmarks/model_build.py.
    model = chain(5000)
    assert model.njoints == 5001
    np.testing.assert_array_equal(model.arrays.subtree_end, np.full(5001, 5001))
    tree = chain(3000, branching=3)
    subtree_end = tree.arrays.subtree_end
    for i in range(1, tree.njoints):     # i's subtree is i .. subtree_end[i]-1
        parent = tree.parents[i]
        assert parent < i < subtree_end[i] <= subtree_end[parent]
