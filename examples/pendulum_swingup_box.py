"""Torque-limited pendulum swing-up with BoxFDDP: it has to pump.

Demonstrates control bounds (``StageModel(control_bounds=...)``) handled by
BoxFDDP (Mastalli et al., "A feasibility-driven approach to control-limited
DDP", Autonomous Robots 2022): each backward pass solves a box QP by
projected Newton (Tassa et al., ICRA 2014) and the rollout clamps the
controls.  With |u| <= 3 N m against a gravity torque of up to m g l = 9.81
N m, lifting the pendulum straight up is impossible: the solution swings it
back and forth, the torque saturating, until it reaches the top at t = 4 s.

    python -m geppetto.examples.pendulum_swingup_box [--out DIR] [--live] [--reduced]
"""
import numpy as np

import geppetto as gp
from geppetto.examples import _common
from geppetto.examples.pendulum_swingup import show_swingup, swingup_problem

TORQUE_LIMIT = 3.0


def main(reduced=False, out="geppetto-examples/pendulum_swingup_box", live=False):
    dt = 0.02
    robot, problem = swingup_problem(200, control_weight=1e-3, dt=dt,
                                     control_bounds=([-TORQUE_LIMIT], [TORQUE_LIMIT]))
    result = gp.solvers.BoxFDDP(problem).solve(max_iter=8 if reduced else 200, verbose=True)
    print(result, f"final state {result.xs[-1]}, max |u| = {np.abs(result.us).max():.3f}")
    running = problem.running_models[0]
    show_swingup(robot, result, dt, out, "pendulum_swingup_box", live,
                 u_bounds=(running.u_lower, running.u_upper))
    return problem, result


if __name__ == "__main__":
    _common.run(main, "pendulum_swingup_box", __doc__)
