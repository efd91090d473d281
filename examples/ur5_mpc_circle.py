"""UR5 tracking a target that moves on a circle, by MPC with one FDDP iteration per step.

Demonstrates the receding-horizon loop (:class:`geppetto.solvers.MPC`): at
each 10 ms control step the measured state becomes x0, the previous solution
shifted by one knot is the warm start, the reference of every knot of the
50-knot horizon is moved along the circle (``ShootingProblem.set_reference``),
and one FDDP iteration (a real-time iteration, Diehl et al. 2005) gives the
control; the plant is the RK4 simulator at 1 ms.

    python -m geppetto.examples.ur5_mpc_circle [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.examples.reaching import WEIGHTS as REACHING_WEIGHTS, reaching_problem
from geppetto.solvers import plots

FRAME = "tool0"
WEIGHTS = dict(REACHING_WEIGHTS, reach=10.0)


def circle(t):
    """The target (3,) at time t: radius 0.1 m, 2 rad/s, in a vertical plane."""
    return np.array([0.4, 0.2 + 0.1 * np.cos(2.0 * t), 0.4 + 0.1 * np.sin(2.0 * t)])


def tracking_problem(robot, knots, dt):
    """(problem, target residual): the reaching task towards circle(0) with the
    frame translation weighted 10 (:data:`WEIGHTS`), symplectic Euler ("euler")."""
    return reaching_problem(robot.model, FRAME, circle(0.0), robot.q0, knots=knots, dt=dt,
                            integrator="euler", weights=WEIGHTS)


def main(reduced=False, out="geppetto-examples/ur5_mpc_circle", live=False):
    robot = gp.robots.load("ur5")
    model = robot.model
    N, dt, duration = (25, 0.02, 1.5) if reduced else (50, 0.01, 5.0)
    problem, target = tracking_problem(robot, N, dt)
    x0 = problem.x0.copy()

    def move_target(problem, t):
        problem.set_reference(target, np.array([circle(t + k * dt) for k in range(N + 1)]))

    mpc = gp.solvers.MPC(problem, gp.solvers.FDDP, max_iter=1, update_references=move_target)
    log = gp.solvers.run_mpc(mpc, gp.solvers.Simulator(model, dt=1e-3), x0, duration, dt)
    tool = plots.end_effector_path(log.xs, model, FRAME)
    errors = np.linalg.norm(tool[1:] - np.array([circle(t + dt) for t in log.times]), axis=1)
    print(f"tracking error: {errors[0]:.3f} m after the first step, "
          f"{errors[-1]:.3f} m at the end; solve time median "
          f"{1e3 * log.percentile(50):.2f} ms, 95th percentile {1e3 * log.percentile(95):.2f} ms")

    _common.show(robot, log.xs, dt, out, "ur5_mpc_circle", live, camera_position=(1.2, 1.2, 0.8))
    if out is not None:
        plots.plot_tracking(log.times + dt, errors, path=_common.output(out, "tracking.png"))
        plots.plot_end_effector(log.xs, model, FRAME, [circle(t) for t in log.times],
                                path=_common.output(out, "tool_path.png"))
        plots.plot_solve_times(log, budget=dt, path=_common.output(out, "solve_times.png"))
    return log, errors


if __name__ == "__main__":
    _common.run(main, "ur5_mpc_circle", __doc__)
