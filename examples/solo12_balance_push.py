"""solo12 standing on its four feet keeps its balance under a lateral push, by MPC.

The controller is an FDDP receding horizon on the contact dynamics of the
four point feet (:class:`geppetto.ocp.ContactDynamics`, 20 knots of 20 ms):
a regularization of the state to the standing posture, of the controls to
the quasi-static torques that hold it, and a quadratic barrier on the
linearized friction cones.  The plant (:class:`geppetto.solvers.Simulator`
with ``constraints=``, RK4 at 1 ms) integrates the same constrained dynamics,
the feet held at their standing positions by Baumgarte gains, and a 0.1 s
lateral push of 10 N on the base (:class:`geppetto.solvers.Push`) knocks the
trunk sideways.  Three FDDP iterations per 20 ms control step, feedback policy
u0 - K0 dx applied over the step.  The plots show the base position against
time and the solve times.

    python -m geppetto.examples.solo12_balance_push [--out DIR] [--live] [--reduced]
"""
import contextlib

import numba
import numpy as np

import geppetto as gp
from geppetto.dynamics import LOCAL_WORLD_ALIGNED, contact_3d, frame_placement
from geppetto.examples import _common
from geppetto.solvers import plots

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
PUSH = (0.0, 10.0, 0.0)     # N, world axes, on the base
PUSH_START, PUSH_DURATION = 0.1, 0.1
MAX_ITER = 3


def standing(robot):
    """The standing state x0 and the world positions (4, 3) of the feet in it."""
    model = robot.model
    data = model.create_data()
    feet = np.array([frame_placement(model, data, foot, robot.q0)[1] for foot in FEET])
    return np.r_[robot.q0, np.zeros(model.nv)], feet


def main(reduced=False, out="geppetto-examples/solo12_balance_push", live=False):
    robot = gp.robots.load("solo12")
    model = robot.model
    x0, feet = standing(robot)
    # controller: contact dynamics without Baumgarte terms (the feet's drift is the plant's)
    contacts = [contact_3d(model, foot, reference=LOCAL_WORLD_ALIGNED) for foot in FEET]
    dynamics = gp.ocp.ContactDynamics(model, contacts)
    u0 = dynamics.quasi_static(x0[None])[0]
    weights = np.r_[np.full(3, 100.0), np.full(3, 100.0), np.full(model.nv - 6, 1.0),
                    np.full(6, 1.0), np.full(model.nv - 6, 0.1)]
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(dynamics.state, x0),
                        gp.ocp.WeightedQuadratic(weights))
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu, u0), weight=1e-2)
    cones = [gp.ocp.FrictionConeResidual(dynamics, foot, mu=0.7) for foot in FEET]
    friction = [gp.ocp.Cost(c, gp.ocp.QuadraticBarrier(*c.bounds), weight=10.0) for c in cones]
    N, dt = 20, 0.02
    running = gp.ocp.StageModel(dynamics, [x_reg, u_reg] + friction, dt=dt)
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(x_reg.residual,
                                                                 x_reg.activation, 10.0)])
    problem = gp.ocp.ShootingProblem(x0, [running] * N, terminal)
    mpc = gp.solvers.MPC(problem, gp.solvers.FDDP, max_iter=MAX_ITER, use_feedback=True)

    # plant: the same robot on the same feet, held by Baumgarte gains
    held = [contact_3d(model, foot, reference=LOCAL_WORLD_ALIGNED, Kp=100.0, Kd=20.0,
                       target=p) for foot, p in zip(FEET, feet)]
    push = gp.solvers.Push(model.joint_id("root_joint"), PUSH, PUSH_START, PUSH_DURATION)
    plant = gp.solvers.Simulator(model, dt=1e-3, actuation=dynamics.actuation, pushes=[push],
                                 constraints=held)
    duration = 0.8 if reduced else 2.0
    forces = []                      # the plant's contact forces at every control step
    simulate = plant.step

    def step(x, u, duration, t=0.0):
        x = simulate(x, u, duration, t)
        forces.append(plant.contact_forces.copy())
        return x

    plant.step = step
    # one Numba thread: the solver's knot-by-knot rollout of contact stages would
    # otherwise launch a thread team per knot (ms each on a loaded machine)
    with one_numba_thread():
        log = gp.solvers.run_mpc(mpc, plant, x0, duration, dt)
    log.extra["contact_forces"] = np.array(forces)        # (T, 12), world axes

    times = dt * np.arange(len(log.xs))
    base = log.xs[:, :3] - x0[:3]
    deviation = np.linalg.norm(base, axis=1)
    peak = int(deviation.argmax())
    print(f"base deviation at most {1e3 * deviation[peak]:.1f} mm (t = {times[peak]:.2f} s), "
          f"{1e3 * deviation[-1]:.2f} mm at the end; smallest normal force "
          f"{log.extra['contact_forces'][:, 2::3].min():.2f} N; median solve "
          f"{1e3 * np.median(log.solve_times):.2f} ms")

    _common.show(robot, log.xs, dt, out, "solo12_balance_push", live,
                 camera_position=(0.0, -1.2, 0.5))
    if out is not None:
        plot_base(times, base, _common.output(out, "base_position.png"))
        plots.plot_solve_times(log, budget=dt, path=_common.output(out, "solve_times.png"))
    return log, base


@contextlib.contextmanager
def one_numba_thread():
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def plot_base(times, base, path):
    """The base position (x, y, z) relative to standing against time, the push shaded."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    figure = Figure(figsize=(7.0, 3.5))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    for i, label in enumerate("xyz"):
        ax.plot(times, 1e3 * base[:, i], label=label)
    ax.axvspan(PUSH_START, PUSH_START + PUSH_DURATION, color="0.85", label="push")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("base position - standing [mm]")
    ax.legend()
    ax.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return figure


if __name__ == "__main__":
    _common.run(main, "solo12_balance_push", __doc__)
