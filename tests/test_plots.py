"""The figures of geppetto.solvers.plots: what they draw, where they save, bad input."""
import numpy as np
import pytest

import geppetto as gp
from geppetto.solvers import plots


@pytest.fixture(scope="module")
def pendulum_solution():
    model = gp.robots.pendulum()
    dynamics = gp.ocp.FreeDynamics(model)
    goal = gp.ocp.StateResidual(dynamics.state, [np.pi, 0.0])
    running = gp.ocp.StageModel(dynamics, [gp.ocp.Cost(gp.ocp.ControlResidual(1), weight=1e-2)],
                                dt=0.02, control_bounds=([-5.0], [5.0]))
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(goal, weight=1e3)])
    problem = gp.ocp.ShootingProblem(np.zeros(2), [running] * 60, terminal)
    return model, gp.solvers.BoxFDDP(problem).solve(max_iter=5)


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_trajectories_draw_each_coordinate_with_its_bounds(pendulum_solution, tmp_path):
    model, result = pendulum_solution
    path = tmp_path / "sub" / "joints.png"
    figure = plots.plot_trajectories(result.xs, result.us, 0.02, model,
                                     u_bounds=([-5.0], [5.0]), path=str(path))
    assert is_png(path)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_ylabel() for ax in visible] == ["q [rad]", "v [rad/s]", "u [N m]"]
    assert all(ax.get_xlabel() == "time [s]" for ax in visible[2:])
    u_axis = visible[2]
    np.testing.assert_allclose(u_axis.lines[0].get_ydata(), result.us[:, 0])
    bounds = sorted(line.get_ydata()[0] for line in u_axis.lines[1:])
    assert bounds == [-5.0, 5.0]                       # the box binds: drawn, in range
    low, high = u_axis.get_ylim()
    assert low <= -5.0 and high >= 5.0


def test_far_bounds_are_written_and_violated_bounds_are_red():
    robot = gp.robots.load("ur5")
    xs = np.tile(np.concatenate([robot.q0, np.zeros(6)]), (11, 1))
    xs[5:, 0] = robot.model.upper_position_limit[0] + 0.01 * np.arange(1, 7)   # past it
    figure = plots.plot_trajectories(xs, np.zeros((10, 6)), 0.1, robot.model)
    u_axes = [ax for ax in figure.axes if ax.get_visible() and ax.get_ylabel() == "u [N m]"]
    assert len(u_axes) == 6                            # default: +-effort_limit, far off u = 0
    assert u_axes[0].get_title() == "shoulder_pan_joint"
    assert len(u_axes[0].lines) == 1
    assert [t.get_text() for t in u_axes[0].texts] == ["bounds -150, 150: off scale"]
    q_axis = next(ax for ax in figure.axes if ax.get_title() == "shoulder_pan_joint")
    assert q_axis.get_ylabel() == "q [rad]"
    upper = [line for line in q_axis.lines[1:]
             if line.get_ydata()[0] == robot.model.upper_position_limit[0]]
    assert len(upper) == 1 and upper[0].get_color() == "tab:red"


def test_units_of_prismatic_joints_and_of_a_floating_base():
    cartpole = gp.robots.cartpole()
    xs, us = np.zeros((6, 4)), np.zeros((5, 1))
    figure = plots.plot_trajectories(xs, us, 0.1, cartpole, u_labels=["cart force"],
                                     u_units="N")
    labels = [ax.get_ylabel() for ax in figure.axes if ax.get_visible()]
    assert labels == ["q [m]", "q [rad]", "v [m/s]", "v [rad/s]", "u [N]"]
    solo = gp.robots.load("solo12")
    xs = np.tile(np.concatenate([solo.q0, np.zeros(solo.model.nv)]), (3, 1))
    figure = plots.plot_trajectories(xs, np.zeros((2, 12)), 0.1, solo.model)
    u_axes = [ax for ax in figure.axes if ax.get_visible() and ax.get_ylabel() == "u [N m]"]
    assert [ax.get_title() for ax in u_axes][:2] == ["FL_HAA", "FL_HFE"]


def test_long_titles_are_wrapped_to_the_figure(pendulum_solution):
    model, result = pendulum_solution
    figure = plots.plot_trajectories(result.xs, result.us, 0.02, model)
    title = figure._suptitle
    renderer = figure.canvas.get_renderer()
    box = title.get_window_extent(renderer)
    assert "\n" in title.get_text()
    assert box.x0 >= 0 and box.x1 <= figure.bbox.width


def test_end_effector_path_matches_the_kinematics(pendulum_solution, tmp_path):
    model, result = pendulum_solution
    p = plots.end_effector_path(result.xs, model, "tip")
    # the tip of a 1 m pendulum turned by q about y: Ry(q) (0, 0, -1) = (-sin q, 0, -cos q)
    q = result.xs[:, 0]
    np.testing.assert_allclose(p, np.stack([-np.sin(q), 0 * q, -np.cos(q)], axis=1), atol=1e-12)
    plots.plot_end_effector(result.xs, model, "tip", target=[0, 0, 1],
                            path=str(tmp_path / "tip.png"))
    assert is_png(tmp_path / "tip.png")


def test_convergence_and_solve_times(pendulum_solution, tmp_path):
    _, result = pendulum_solution
    figure = plots.plot_convergence(result, path=str(tmp_path / "convergence.png"))
    np.testing.assert_allclose(figure.axes[0].lines[0].get_ydata(), result.history["cost"])
    log = gp.solvers.MPCLog(times=np.arange(5.0), xs=None, us=None,
                            solve_times=np.array([1e-3, 2e-3, 3e-3, 4e-3, 5e-3]),
                            iterations=np.ones(5), costs=np.zeros(5),
                            extra=dict(cpu_times=np.full(5, 1e-3)))
    figure = plots.plot_solve_times(log, budget=4e-3, path=str(tmp_path / "times.png"))
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert any(label.startswith("wall clock: p50 3.00") for label in labels)
    assert any(label.startswith("CPU") for label in labels)
    assert "budget 4 ms" in labels
    assert is_png(tmp_path / "times.png")


def test_figures_stay_out_of_pyplot(pendulum_solution):
    import matplotlib.pyplot as plt
    before = plt.get_fignums()
    plots.plot_convergence(pendulum_solution[1])
    assert plt.get_fignums() == before


def test_bad_input():
    model = gp.robots.pendulum()
    with pytest.raises(ValueError, match="expected xs"):
        plots.plot_trajectories(np.zeros((5, 3)), np.zeros((4, 1)), 0.1, model)
    with pytest.raises(ValueError, match="empty"):
        plots.plot_convergence({"cost": []})
