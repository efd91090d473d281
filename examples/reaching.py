"""The reaching task: an arm's end effector goes to a point (DESIGN.md's benchmark task).

Running costs: a frame translation towards ``target`` (the frame's position
in the world), a state regularization towards x0 = (q0, 0) and a control
regularization towards zero, each ``weight * 1/2 |r|^2`` (Crocoddyl's
CostModelResidual with the default ActivationModelQuad) and scaled by dt;
terminal costs: the frame translation and the state regularization.  The
weights are :data:`WEIGHTS` unless overridden.

Built here once for the examples (``ur5_reaching``, ``panda_reaching``,
``ur5_mpc_circle``), the benchmarks (``ocp``, ``solvers``, ``mpc``) and the
solver tests; :func:`solve` is the whole reaching example (FDDP from the
quasi-static guess, the animation, the plots) that ``ur5_reaching`` and
``panda_reaching`` run on their robot.
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.solvers import plots

WEIGHTS = dict(reach=1.0, x_reg=1e-1, u_reg=1e-4, terminal_reach=1e3, terminal_x_reg=1e-1)


def reaching_problem(model, frame, target, q0, knots=100, dt=0.01, integrator="euler",
                     weights=None, reach=None):
    """(problem, reach): the reaching ShootingProblem from x0 = (q0, 0) and its
    frame-translation residual (to move the target: ``problem.set_reference``).

    ``target`` (3,) in the world; ``weights`` a dict overriding entries of
    :data:`WEIGHTS`; ``integrator`` one of :data:`geppetto.ocp.INTEGRATORS`;
    ``reach``: a residual to use instead of the frame translation (e.g. a user
    residual, :mod:`geppetto.examples.custom_residual`).
    """
    w = dict(WEIGHTS, **(weights or {}))
    dynamics = gp.ocp.FreeDynamics(model)
    state = dynamics.state
    x0 = np.concatenate([q0, np.zeros(model.nv)])
    if reach is None:
        reach = gp.ocp.FrameTranslationResidual(model, frame, target)
    x_reg = gp.ocp.StateResidual(state, x0)
    u_reg = gp.ocp.ControlResidual(dynamics.nu)
    running = gp.ocp.StageModel(dynamics, [gp.ocp.Cost(reach, weight=w["reach"]),
                                           gp.ocp.Cost(x_reg, weight=w["x_reg"]),
                                           gp.ocp.Cost(u_reg, weight=w["u_reg"])],
                                dt=dt, integrator=integrator)
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(reach, weight=w["terminal_reach"]),
                                            gp.ocp.Cost(x_reg, weight=w["terminal_x_reg"])])
    return gp.ocp.ShootingProblem(x0, [running] * knots, terminal), reach


def solve(robot_name, frame, target, reduced, out, live, path_png, camera_position):
    """The reaching example on one robot: 100 knots of 10 ms, symplectic Euler
    (reduced: 20 knots of 50 ms, 10 iterations), FDDP from the quasi-static
    guess with its iteration table; writes ``<robot_name>_reaching.html``,
    ``joints.png``, ``path_png`` (the frame's path) and ``convergence.png``
    into ``out`` (None: nothing).  Returns (problem, result)."""
    robot = gp.robots.load(robot_name)
    model, target = robot.model, np.array(target)
    N, dt = (20, 0.05) if reduced else (100, 0.01)
    problem, _ = reaching_problem(model, frame, target, robot.q0, knots=N, dt=dt)

    result = gp.solvers.FDDP(problem).solve(max_iter=10 if reduced else 100, verbose=True)
    print(result)

    _common.show(robot, result.xs, dt, out, f"{robot_name}_reaching", live,
                 camera_position=camera_position)
    if out is not None:
        plots.plot_trajectories(result.xs, result.us, dt, model,
                                path=_common.output(out, "joints.png"))
        plots.plot_end_effector(result.xs, model, frame, target,
                                path=_common.output(out, path_png))
        plots.plot_convergence(result, path=_common.output(out, "convergence.png"))
    return problem, result
