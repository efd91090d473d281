"""A residual written by the user as a Numba kernel, joining the phase's compiled call.

The reaching task of :mod:`.reaching` with its frame translation written here, in
Python, as a Numba kernel of one knot (the protocol of :class:`geppetto.ocp.NumbaResidual`):

    r = p_f(q) - p_ref,   p_f = oR_j fp + op_j   (the frame's origin in the world),
    dr/dq_c = J_c,lin + J_c,ang x p_f   for the dofs c that move joint j
    (the world Jacobian's column c seen at the point p_f: LOCAL_WORLD_ALIGNED, as
    Pinocchio's ``getFrameJacobian``), zero for the others and for dr/dv.

Crocoddyl users write such a residual in C++ to get C++ speed; here the kernel is
compiled into the same Numba function as the built-in terms of the stage
(:mod:`geppetto.ocp.fused`), so it runs as fast as the built-in
FrameTranslationResidual (``python -m geppetto.benchmarks.custom_residual`` measures
it).  The script checks its Jacobian against finite differences, solves the task both
ways with FDDP and prints the two costs.

    python -m geppetto.examples.custom_residual [--out DIR] [--reduced]
"""
import numba
import numpy as np

import geppetto as gp
from geppetto.examples import _common, reaching

TARGET = (0.4, 0.2, 0.4)


@numba.njit(cache=True)
def frame_translation(x, u, oR, op, J, reference, parameters, r, Rx, Ru, with_jacobian):
    """One knot; parameters = [joint, fp (3), mask (nv): 1 for the dofs that move joint]."""
    j = int(parameters[0])
    p = np.empty(3)
    for a in range(3):
        p[a] = op[j, a] + oR[j, a, 0] * parameters[1] + oR[j, a, 1] * parameters[2] + \
            oR[j, a, 2] * parameters[3]
        r[a] = p[a] - reference[a]
    if not with_jacobian:
        return
    for c in range(J.shape[1]):
        if parameters[4 + c] == 0.0:
            continue
        w0, w1, w2 = J[3, c], J[4, c], J[5, c]
        Rx[0, c] = J[0, c] + w1 * p[2] - w2 * p[1]
        Rx[1, c] = J[1, c] + w2 * p[0] - w0 * p[2]
        Rx[2, c] = J[2, c] + w0 * p[1] - w1 * p[0]


def user_frame_translation(model, frame, target):
    """The NumbaResidual of :func:`frame_translation` for ``frame`` of ``model``."""
    f = model.frame_id(frame)
    a = model.arrays
    joint = int(a.frame_joint[f])
    mask = np.zeros(model.nv)
    i = joint
    while i > 0:
        mask[a.idx_v[i]:a.idx_v[i] + a.nvs[i]] = 1.0
        i = int(a.parents[i])
    parameters = np.concatenate([[joint], a.frame_p[f], mask])
    return gp.ocp.NumbaResidual(3, frame_translation, parameters, reference=target,
                                needs_kinematics=True)


def main(reduced=False, out=None, live=False):
    robot = gp.robots.load("ur5")
    model = robot.model
    N, dt = (20, 0.05) if reduced else (100, 0.01)
    user = user_frame_translation(model, "tool0", TARGET)

    state = gp.ocp.StateMultibody(model)
    rng = np.random.default_rng(0)
    xs = np.array([state.zero() for _ in range(5)])
    xs[:, :model.nq] = [gp.dynamics.random_configuration(model, rng) for _ in range(5)]
    print("Jacobian vs finite differences:", gp.ocp.check_residual(user, state, xs))

    results = {}
    for name, reach in (("built-in", None), ("user kernel", user)):
        problem, _ = reaching.reaching_problem(model, "tool0", TARGET, robot.q0, knots=N, dt=dt,
                                               reach=reach)
        results[name] = gp.solvers.FDDP(problem).solve(max_iter=10 if reduced else 100)
        print(f"{name:12s}", results[name])
    gap = abs(results["built-in"].cost - results["user kernel"].cost)
    print(f"cost difference: {gap:.3g}")
    return results


if __name__ == "__main__":
    _common.run(main, "custom_residual", __doc__)
