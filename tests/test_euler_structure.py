"""The block structure of the symplectic Euler knots in the Riccati backward pass
(``ShootingProblem.euler_structure``, :func:`geppetto.solvers.riccati._q_function_euler`)
on a tree whose Lie rows are not one block at the top of the state: a free-flyer root
(tangent rows 0-5), revolute joints, and a spherical joint in the middle of the chain
(three more Lie rows between revolute dofs).  FDDP's iterates on the structured
products equal those on the dense products to rounding.
"""
import numpy as np

import geppetto as gp
import geppetto.ocp.problem as ocp_problem
from geppetto.examples.reaching import reaching_problem
from geppetto.solvers import FDDP

# joint1..joint5 on the free flyer: revolute, revolute, spherical, revolute, revolute
JOINT_TYPES = ["revolute", "revolute", "spherical", "revolute", "revolute"]


def spherical_mid_chain_problem(knots=10):
    """A reaching problem (examples/reaching.py, symplectic Euler, 20 ms knots) on
    ``chain(5)`` with JOINT_TYPES on a free-flyer root, from a seeded configuration."""
    model = gp.robots.builtin.chain(5, joint_types=JOINT_TYPES, root_joint="free-flyer")
    q0 = gp.dynamics.random_configuration(model, np.random.default_rng(7))
    problem, _ = reaching_problem(model, "tip5", [0.3, 0.2, 0.8], q0, knots=knots, dt=0.02)
    return model, problem


def test_spherical_joint_mid_chain_adds_its_lie_rows_and_marks_every_knot_structured(
        monkeypatch):
    model, problem = spherical_mid_chain_problem()
    spherical = model.joint_id("joint3")
    assert model.arrays.jtype[spherical] == gp.dynamics.model.SPHERICAL
    first = model.arrays.idx_v[spherical]
    # the free flyer's six rows, then the spherical joint's three after two revolute dofs
    assert first == 8
    # nv 13 with 9 Lie rows: "auto" (the default) marks every Euler knot (4 other rows,
    # at least ocp.problem.STRUCTURED_MIN_ROWS), and so does True
    auto_dts, _ = problem.euler_structure
    np.testing.assert_array_equal(auto_dts, np.full(problem.N, 0.02))
    with monkeypatch.context() as patch:    # fewer rows than the threshold: dense products
        patch.setattr(ocp_problem, "STRUCTURED_MIN_ROWS", 5)
        assert problem.euler_structure[0].size == 0
    problem.structured_backward = True
    dts, lie_rows = problem.euler_structure
    np.testing.assert_array_equal(lie_rows, [0, 1, 2, 3, 4, 5, 8, 9, 10])
    np.testing.assert_array_equal(dts, np.full(problem.N, 0.02))
    problem.structured_backward = False
    dense_dts, dense_rows = problem.euler_structure
    assert dense_dts.size == 0 and dense_rows.size == 0


def test_fddp_iterates_on_the_euler_structure_equal_the_dense_ones():
    """xs, us and the cost of every iteration within 1e-10 (relative to each array's
    largest entry) with and without the structured backward pass, which must have
    changed some bits (it ran).  Quu's condition number is about 1.4e8 here (the free
    flyer's torques near 180 N m hold the chain up): the rounding of the two products
    reaches us at 4e-10 absolute, 2.4e-12 of the largest torque (measured).  The costs are
    compared to 1e-9: on a machine with other BLAS kernels the same two runs differ by
    1.2e-10 relative at iteration 2 (xs and us by 5.5e-12 and 1.3e-12 of their largest
    entries), each run's bits being the same on the old and the new code."""
    runs = []
    for structured in (False, True):
        _, problem = spherical_mid_chain_problem()
        problem.structured_backward = structured
        runs.append(FDDP(problem).solve(max_iter=8))
    dense, structured = runs
    costs, structured_costs = np.array(dense.history["cost"]), structured.history["cost"]
    assert len(costs) == len(structured_costs) == 8 == structured.iterations
    assert costs[-1] < 0.01 * costs[0]                                  # it made progress
    assert not np.array_equal(structured.us, dense.us)                  # the blocks ran
    np.testing.assert_allclose(structured_costs, costs, rtol=1e-9, atol=0)
    for ours, reference in ((structured.xs, dense.xs), (structured.us, dense.us)):
        np.testing.assert_allclose(ours, reference, rtol=0,
                                   atol=1e-10 * np.abs(reference).max())
