"""Every script of examples/ runs headless in its reduced form (fewer knots,
iterations or control steps) and does what it claims: the OCPs converge or
lower the cost of their initial guess, the MPC loops shrink their tracking
error, and each writes its HTML animation and plots."""
import importlib
import os

import numpy as np
import pytest

OCP_EXAMPLES = ("ur5_reaching", "panda_reaching", "pendulum_swingup", "pendulum_swingup_box",
                "solo12_trot")
MPC_EXAMPLES = ("ur5_mpc_circle", "cartpole_mpc_push", "solo12_balance_push")


@pytest.fixture(scope="module")
def run_example(tmp_path_factory):
    """run_example(name): what the example's reduced main returns, run once per module."""
    returned = {}

    def run(name):
        if name not in returned:
            module = importlib.import_module(f"geppetto.examples.{name}")
            out = str(tmp_path_factory.mktemp(name))
            returned[name] = module.main(reduced=True, out=out)
            files = sorted(os.listdir(out))
            assert f"{name}.html" in files
            assert any(f.endswith(".png") for f in files)
            for f in files:
                assert os.path.getsize(os.path.join(out, f)) > 1000, f
        return returned[name]

    return run


def initial_guess_cost(problem):
    """The cost of the solvers' default initial guess: x0 repeated, quasi-static us."""
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    return problem.calc(xs, problem.quasi_static(xs))


@pytest.mark.parametrize("name", OCP_EXAMPLES)
def test_ocp_example(name, run_example):
    problem, result = run_example(name)
    assert np.all(np.isfinite(result.xs)) and np.all(np.isfinite(result.us))
    assert result.converged or result.cost < 0.5 * initial_guess_cost(problem), result
    assert result.gaps < 1e-8
    np.testing.assert_allclose(result.xs[0], problem.x0)


@pytest.mark.parametrize("name, frame", [("ur5_reaching", "tool0"),
                                         ("panda_reaching", "panda_hand")])
def test_reaching_examples_reach(name, frame, run_example):
    from geppetto.solvers.plots import end_effector_path
    problem, result = run_example(name)
    model = problem.state.model
    start, end = end_effector_path(result.xs[[0, -1]], model, frame)
    target = np.array(importlib.import_module(f"geppetto.examples.{name}").TARGET)
    assert np.linalg.norm(end - target) < 0.05 * np.linalg.norm(start - target)


def test_box_example_respects_the_bounds(run_example):
    from geppetto.examples import pendulum_swingup_box
    problem, result = run_example("pendulum_swingup_box")
    assert np.max(np.abs(result.us)) <= pendulum_swingup_box.TORQUE_LIMIT + 1e-12
    # the limit binds: lifting the pendulum needs more than 3 N m, so it saturates
    assert np.max(np.abs(result.us)) > pendulum_swingup_box.TORQUE_LIMIT - 1e-6


def test_ur5_mpc_circle_tracks_the_target(run_example):
    log, errors = run_example("ur5_mpc_circle")
    assert np.all(np.isfinite(log.xs))
    assert errors[-1] < 0.25 * errors[0]
    assert np.all(log.iterations == 1)
    assert len(log.solve_times) == len(log.us) == len(log.xs) - 1


def test_cartpole_mpc_recovers_from_the_push(run_example):
    log, deviation = run_example("cartpole_mpc_push")
    peak = int(np.argmax(deviation))
    assert deviation[peak] > 0.05                      # the push did knock it over a bit
    assert deviation[-1] < 0.2 * deviation[peak]       # and MPC brought it back
    assert np.all(np.abs(log.xs[:, 1]) < 0.5)          # the pole never fell


def _com_heights(problem, xs):
    from geppetto.dynamics import center_of_mass
    model = problem.state.model
    data = model.create_data()
    return np.array([center_of_mass(model, data, x[:model.nq])[2] for x in xs])


def test_solo12_jump_takes_off_and_lands(run_example):
    """The guess (standing through the flight) is infeasible; the solution closes the
    gaps, lifts the centre of mass in the flight phase and lands the feet where they
    took off."""
    from geppetto.dynamics import frame_placement
    from geppetto.examples import solo12_jump
    problem, result = run_example("solo12_jump")
    assert np.all(np.isfinite(result.xs)) and result.gaps < 1e-8, result
    heights = _com_heights(problem, result.xs)
    assert heights.max() > heights[0] + 0.3 * solo12_jump.JUMP_HEIGHT
    model = problem.state.model
    data = model.create_data()
    touchdown = [k for k, stage in enumerate(problem.running_models) if stage.dt == 1.0]
    assert len(touchdown) == 1
    for foot in solo12_jump.FEET:
        start = frame_placement(model, data, foot, result.xs[0, :model.nq])[1]
        land = frame_placement(model, data, foot, result.xs[touchdown[0], :model.nq])[1]
        assert np.linalg.norm(land - start) < 0.01, (foot, start, land)


def test_talos_squat_goes_down_and_up(run_example):
    from geppetto.examples import talos_squat
    problem, result = run_example("talos_squat")
    assert np.all(np.isfinite(result.xs)) and result.gaps < 1e-8, result
    assert result.cost < initial_guess_cost(problem), result
    heights = _com_heights(problem, result.xs)
    assert heights.min() < heights[0] - 0.5 * talos_squat.DEPTH
    assert heights[-1] > heights[0] - 0.25 * talos_squat.DEPTH
    running = problem.running_models[0]
    assert np.all(result.us >= running.u_lower - 1e-9)
    assert np.all(result.us <= running.u_upper + 1e-9)


def test_solo12_balance_recovers_from_the_push(run_example):
    log, base = run_example("solo12_balance_push")     # base position - standing (T+1, 3)
    assert np.all(np.isfinite(log.xs))
    deviation = np.linalg.norm(base, axis=1)
    peak = int(np.argmax(deviation))
    assert base[peak, 1] > 5e-3                        # the lateral push moved the trunk
    assert deviation[-1] < 0.2 * deviation[peak]       # and MPC brought it back
    quaternions = log.xs[:, 3:7]                       # (x, y, z, w): upright all along
    assert np.all(1.0 - 2.0 * (quaternions[:, 0] ** 2 + quaternions[:, 1] ** 2) > 0.99)
    assert log.extra["contact_forces"][:, 2::3].min() > 0.0   # no foot would have lifted


def test_a_script_lists_every_file_it_wrote(tmp_path, capsys):
    from geppetto.examples import _common, pendulum_swingup
    out = tmp_path / "pendulum"
    (tmp_path / "pendulum").mkdir()
    (out / "left_by_an_earlier_run.png").write_bytes(b"")
    os.utime(out / "left_by_an_earlier_run.png", (0, 0))
    assert _common.run(pendulum_swingup.main, "pendulum_swingup", pendulum_swingup.__doc__,
                       ["--reduced", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    written = ["convergence.png", "pendulum_swingup.html", "trajectory.png"]
    assert printed.endswith(f"written to {out}:\n" + "".join(f"  {f}\n" for f in written))


def test_constrained_example_holds_its_constraints(run_example):
    """ur5_constrained: ALDDP converges with the terminal equality and the plane held."""
    from geppetto.solvers import ALDDP
    problem, result = run_example("ur5_constrained")
    assert result.converged, result
    assert result.violation <= 1e-6
    assert ALDDP(problem).max_violation(result.xs, result.us) <= 1e-6


def test_trot_cones_example_holds_the_cones(run_example):
    """solo12_trot_cones: ALDDP ends with every cone row >= -1e-6 (its line search
    stalls at mu = 1e-8: see the example's docstring)."""
    from geppetto.examples.solo12_trot_cones import cone_rows
    problem, result = run_example("solo12_trot_cones")
    assert result.converged or result.status.startswith("no step accepted"), result
    assert result.violation <= 1e-6
    assert min(r.min() for r in cone_rows(problem, result.xs, result.us)) >= -1e-6


def test_constrained_mpc_example_holds_the_plane(run_example):
    """ur5_constrained_mpc: the hand above the real plane to 1e-4 at every control step
    under the push."""
    log, height = run_example("ur5_constrained_mpc")
    assert height.min() >= -1e-4
    assert len(height) == 201
