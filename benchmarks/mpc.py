"""Achieved MPC control rate: one warm-started FDDP iteration per control step.

    python -m geppetto.benchmarks.mpc [--duration 5] [--control-dt 0.01] [--knots 50]
                                      [--blocks 5] [--no-crocoddyl] [--out DIR]

The task of ``examples/ur5_mpc_circle.py``: the UR5's tool tracks a target
moving on a circle (radius 0.1 m, 2 rad/s); a 50-knot horizon of dt = 10 ms
(semi-implicit Euler, Crocoddyl's IntegratedActionModelEuler), frame
translation (weight 10, terminal 1e3), state (1e-1) and control (1e-4)
regularization.  A closed loop of ``--duration`` seconds: every
``--control-dt`` (100 Hz by default) the measured state becomes x0, the
previous solution shifted by one knot is the warm start, the 51 references
move along the circle, and **one** FDDP iteration gives the control; the
plant is the RK4 simulator at 1 ms (:class:`geppetto.solvers.Simulator`).

Per control step, two clocks (the machine may be loaded: the CPU time of the
process, ``time.process_time``, is the steadier figure; one Numba thread):

- ``FDDP iteration``: ours, the ``FDDP.iterate(xs, us, 1)`` call that
  :meth:`geppetto.solvers.MPC.step` makes (calc_diff, backward pass, line
  search; the shifted warm start is already in the solver's buffers and no
  result is built); Crocoddyl's, ``solver.solve(xs, us, 1, False)``, which
  also copies the warm start in (its Python lists of 51 and 50 vectors:
  ``setCandidate``) and keeps its own result arrays;
- ``MPC step``: all of :meth:`geppetto.solvers.MPC.step` (the reference
  update of the 51 knots, the warm start, the iteration, the control), and
  on Crocoddyl's side the same: x0, the 51 references, the solve, the
  control, the shifted warm start (the like-for-like clock).

Percentiles 50/95/99 of each; the achieved rate is 1 / p50 (and 1 / p99 for
a rate that is met 99 % of the time).  Target (issue 9): one iteration under
1 ms (a 1 kHz MPC).  The median split of our iteration (calc_diff, backward,
forward, the whole iteration) comes from the solver's ``split``.

Crocoddyl 3.2 (its own virtual environment, :mod:`.crocoddyl_env`, one
thread) runs the same closed loop in the same run: the same costs on
Pinocchio's model of the same URDF, one action model per knot (so that each
knot holds its own reference), ``solver.solve(xs, us, 1)`` with the same
shifted warm start, and its plant integrated with ``pinocchio.aba`` and RK4 at
1 ms.  Skipped, saying why, when that environment cannot be made.  The two
loops are interleaved in ``--blocks`` blocks of steps (ours, then Crocoddyl's
in one subprocess with its own discarded warm-up steps; each block continues
the loop where the previous one left it), so that a busy spell of the machine
hits both; the ratio of the median CPU times of one iteration is reported per
block, with its median and range over the blocks.

Writes ``results/mpc.json`` and ``results/mpc.png`` (histogram of the solve
times, both clocks, both libraries) beside this file.
"""
import argparse
import os
import textwrap
import time

import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common
from geppetto.examples.ur5_mpc_circle import FRAME, WEIGHTS, circle, tracking_problem
from geppetto.solvers import plots

ROBOT = "ur5"
SIMULATION_DT = 1e-3
TARGET_S = 1e-3
PERCENTILES = (50, 95, 99)
WARMUP_STEPS = 20


class TimedFDDP(gp.solvers.FDDP):
    """FDDP whose ``iterate`` (what :class:`geppetto.solvers.MPC` runs per step: the
    iterations without building a result) records its wall-clock and CPU seconds."""

    def __init__(self, problem):
        super().__init__(problem)
        self.wall, self.cpu = [], []

    def iterate(self, *args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        outcome = super().iterate(*args, **kwargs)
        self.cpu.append(time.process_time() - cpu)
        self.wall.append(time.perf_counter() - wall)
        return outcome


class ClosedLoop:
    """Our closed loop, run in blocks of steps (:meth:`run`) that continue one another."""

    def __init__(self, robot, knots, dt, control_dt):
        problem, target = tracking_problem(robot, knots, dt)
        self.robot, self.control_dt = robot, control_dt
        self.x = problem.x0.copy()
        references = np.empty((knots + 1, 3))

        def move_target(problem, t):
            for k in range(knots + 1):
                references[k] = circle(t + k * dt)
            problem.set_reference(target, references)

        self.solver = TimedFDDP(problem)
        self.mpc = gp.solvers.MPC(problem, self.solver, max_iter=1,
                                  update_references=move_target)
        self.simulator = gp.solvers.Simulator(robot.model, dt=SIMULATION_DT)
        self.step_index = 0
        self.step_wall, self.step_cpu, self.split, self.xs = [], [], [], [self.x]

    def run(self, steps):
        """``steps`` more control steps; returns the (wall, cpu) seconds of their solves."""
        first = len(self.solver.cpu)
        for _ in range(steps):
            t = self.step_index * self.control_dt
            wall, cpu = time.perf_counter(), time.process_time()
            u = self.mpc.step(self.x, t)
            self.step_cpu.append(time.process_time() - cpu)
            self.step_wall.append(time.perf_counter() - wall)
            self.split.append(self.solver.split.copy())
            self.x = self.simulator.step(self.x, u, self.control_dt, t)
            self.xs.append(self.x)
            self.step_index += 1
        return self.solver.wall[first:], self.solver.cpu[first:]

    def results(self):
        """A dict of per-step seconds, the split and the tracking errors."""
        steps = self.step_index
        tool = plots.end_effector_path(np.array(self.xs), self.robot.model, FRAME)
        errors = np.linalg.norm(tool[1:] - np.array([circle((i + 1) * self.control_dt)
                                                     for i in range(steps)]), axis=1)
        return dict(iteration_wall=np.array(self.solver.wall),
                    iteration_cpu=np.array(self.solver.cpu),
                    step_wall=np.array(self.step_wall), step_cpu=np.array(self.step_cpu),
                    split=np.array(self.split), errors=errors)


CROCODDYL_MPC_SCRIPT = '''
import json, sys, time
import numpy as np
import pinocchio
import crocoddyl

task = json.load(sys.stdin)
model = pinocchio.buildModelFromUrdf(task["urdf"])
data = model.createData()
state = crocoddyl.StateMultibody(model)
actuation = crocoddyl.ActuationModelFull(state)
nu, N, dt, w = actuation.nu, task["knots"], task["dt"], task["weights"]
x0 = np.array(task["x0"])
frame = model.getFrameId(task["frame"])


def circle(t):
    return np.array([0.4, 0.2 + 0.1 * np.cos(2.0 * t), 0.4 + 0.1 * np.sin(2.0 * t)])


def knot(terminal):
    track = crocoddyl.ResidualModelFrameTranslation(state, frame, circle(0.0), nu)
    costs = crocoddyl.CostModelSum(state, nu)
    costs.addCost("track", crocoddyl.CostModelResidual(state, track),
                  w["terminal_reach" if terminal else "reach"])
    costs.addCost("x_reg", crocoddyl.CostModelResidual(
        state, crocoddyl.ResidualModelState(state, x0, nu)),
        w["terminal_x_reg" if terminal else "x_reg"])
    if not terminal:
        costs.addCost("u_reg", crocoddyl.CostModelResidual(
            state, crocoddyl.ResidualModelControl(state, nu)), w["u_reg"])
    return crocoddyl.IntegratedActionModelEuler(
        crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs),
        0.0 if terminal else dt), track


knots = [knot(False) for _ in range(N)] + [knot(True)]
problem = crocoddyl.ShootingProblem(x0, [m for m, _ in knots[:N]], knots[N][0])
solver = crocoddyl.SolverFDDP(problem)
nq = model.nq


def plant(x, u, duration):
    """RK4 at sim_dt of the multibody under constant torques u."""
    n = int(round(duration / task["sim_dt"]))
    h = duration / n

    def f(x):
        return np.concatenate([x[nq:], pinocchio.aba(model, data, x[:nq], x[nq:], u)])

    for _ in range(n):
        k1 = f(x); k2 = f(x + h / 2 * k1); k3 = f(x + h / 2 * k2); k4 = f(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


x = np.array(task["x"])
if task["xs"] is None:
    xs = [x.copy()] * (N + 1)
    us = list(problem.quasiStatic(xs[:N]))
else:
    xs, us = [np.array(r) for r in task["xs"]], [np.array(r) for r in task["us"]]
x_start, xs_start, us_start = x.copy(), list(xs), list(us)
out = {key: [] for key in ("iteration_wall", "iteration_cpu", "step_wall", "step_cpu",
                           "errors")}
first = task["first_step"]
for i in range(-task["warmup"], task["steps"]):
    if i == 0:          # the warm-up steps are discarded: back to the block's start
        x, xs, us = x_start.copy(), list(xs_start), list(us_start)
    t = (first + max(i, 0)) * task["control_dt"]
    wall, cpu = time.perf_counter(), time.process_time()
    problem.x0 = x
    for k, (_, track) in enumerate(knots):
        track.reference = circle(t + k * dt)
    xs[0] = x
    w_solve, c_solve = time.perf_counter(), time.process_time()
    solver.solve(xs, us, 1, False)
    c_solve, w_solve = time.process_time() - c_solve, time.perf_counter() - w_solve
    u = np.array(solver.us[0])
    xs, us = list(solver.xs), list(solver.us)
    xs, us = xs[1:] + xs[-1:], us[1:] + us[-1:]
    c_step, w_step = time.process_time() - cpu, time.perf_counter() - wall
    x = plant(x, u, task["control_dt"])
    if i < 0:
        continue
    pinocchio.framesForwardKinematics(model, data, x[:nq])
    out["errors"].append(float(np.linalg.norm(
        data.oMf[frame].translation - circle(t + task["control_dt"]))))
    for key, value in (("iteration_wall", w_solve), ("iteration_cpu", c_solve),
                       ("step_wall", w_step), ("step_cpu", c_step)):
        out[key].append(value)
out.update(crocoddyl=crocoddyl.__version__, pinocchio=pinocchio.__version__, x=x.tolist(),
           xs=[np.asarray(r).tolist() for r in xs], us=[np.asarray(r).tolist() for r in us])
print(json.dumps(out))
'''


class CrocoddylLoop:
    """The same loop in Crocoddyl's environment, run in blocks (one subprocess each,
    with its own warm-up steps, discarded) that continue one another; ``reason``
    says why it is skipped when that environment cannot be made."""

    def __init__(self, robot, knots, dt, control_dt):
        self.reason = None
        try:
            from geppetto.benchmarks import crocoddyl_env
        except ImportError:
            self.reason = "benchmarks/crocoddyl_env.py, which makes its environment, is absent"
            return
        self.env = crocoddyl_env
        x0 = np.concatenate([robot.q0, np.zeros(robot.model.nv)]).tolist()
        self.task = dict(urdf=robot.urdf_path, frame=FRAME, knots=knots, dt=dt,
                         weights=WEIGHTS, x0=x0, control_dt=control_dt, sim_dt=SIMULATION_DT,
                         warmup=WARMUP_STEPS)
        self.x, self.xs, self.us = x0, None, None
        self.step_index = 0
        self.out = {key: [] for key in ("iteration_wall", "iteration_cpu", "step_wall",
                                        "step_cpu", "errors")}
        self.versions = None

    def run(self, steps):
        """``steps`` more control steps; returns the (wall, cpu) seconds of their solves,
        or None (``reason`` set) when the subprocess failed."""
        if self.reason is not None:
            return None
        payload = dict(self.task, x=self.x, xs=self.xs, us=self.us,
                       first_step=self.step_index, steps=steps)
        result, self.reason = self.env.run(CROCODDYL_MPC_SCRIPT, payload)
        if result is None:
            return None
        self.x, self.xs, self.us = result["x"], result["xs"], result["us"]
        self.step_index += steps
        self.versions = dict(crocoddyl=result["crocoddyl"], pinocchio=result["pinocchio"])
        for key in self.out:
            self.out[key].extend(result[key])
        return result["iteration_wall"], result["iteration_cpu"]

    def results(self):
        """The dict of :meth:`ClosedLoop.results` (no split), or None when skipped."""
        if self.reason is not None or self.versions is None:
            return None
        out = {key: np.array(value) for key, value in self.out.items()}
        out.update(self.versions)
        return out


def summary(seconds):
    """{"p50": ms, "p95": ms, "p99": ms, "mean": ms, "max": ms} of an array of seconds."""
    ms = 1e3 * np.asarray(seconds)
    out = {f"p{q}": float(np.percentile(ms, q)) for q in PERCENTILES}
    out.update(mean=float(ms.mean()), max=float(ms.max()))
    return out


def report(ours, theirs, reason, control_dt):
    rows, table = [], {}
    sides = [("geppetto", ours)] + ([("Crocoddyl", theirs)] if theirs is not None else [])
    for side, run in sides:
        for what, key in (("FDDP iteration", "iteration"), ("MPC step", "step")):
            for clock in ("cpu", "wall"):
                s = summary(run[f"{key}_{clock}"])
                table[f"{side} {what} {clock}"] = s
                rows.append([f"{side} {what} ({clock})"] + [f"{s[f'p{q}']:.3f}"
                                                            for q in PERCENTILES]
                            + [f"{s['mean']:.3f}", f"{s['max']:.2f}",
                               f"{1e3 / s['p50']:.0f}", f"{1e3 / s['p99']:.0f}"])
    print(f"\nSolve times per control step over {len(ours['step_wall'])} steps (ms), "
          "rates in Hz:")
    print(_common.format_table(["", "p50", "p95", "p99", "mean", "max", "rate p50",
                                "rate p99"], rows))
    if theirs is None:
        print(f"Crocoddyl: skipped ({reason})")
    split = 1e3 * np.median(ours["split"], axis=0)
    print(f"\nOur iteration, median split (ms, wall): calc_diff {split[0]:.3f}, backward "
          f"{split[1]:.3f}, forward (line search) {split[2]:.3f}, in the solver loop "
          f"{split[3]:.3f}; iterate() call {1e3 * np.median(ours['iteration_wall']):.3f}")
    for side, run in sides:
        e = run["errors"]
        print(f"{side}: tracking error {e[0]:.3f} m after the first step, median over the "
              f"last second {np.median(e[-int(round(1 / control_dt)):]):.4f} m")
    p50 = table["geppetto FDDP iteration cpu"]["p50"]
    met = p50 < 1e3 * TARGET_S
    verdict = "met" if met else "not met"
    print(f"\nTarget: one iteration < {1e3 * TARGET_S:g} ms (1 kHz MPC): {verdict} "
          f"(median {p50:.3f} ms of CPU, {1e3 / p50:.0f} Hz achievable)")
    if theirs is not None:
        ratio = p50 / table["Crocoddyl FDDP iteration cpu"]["p50"]
        print(f"geppetto / Crocoddyl, median CPU time of one iteration: {ratio:.2f}")
    return table, met


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of closed loop")
    parser.add_argument("--control-dt", type=float, default=0.01,
                        help="control period in seconds (default 0.01: 100 Hz)")
    parser.add_argument("--knots", type=int, default=50, help="horizon length N")
    parser.add_argument("--dt", type=float, default=0.01, help="knot spacing in seconds")
    parser.add_argument("--blocks", type=int, default=5,
                        help="interleaved blocks of ours and Crocoddyl's loop (default 5)")
    parser.add_argument("--no-crocoddyl", action="store_true")
    parser.add_argument("--out", default=_common.RESULTS_DIR)
    options = parser.parse_args(argv)
    _common.run_single_threaded("geppetto.benchmarks.mpc")
    started = time.perf_counter()
    info = _common.machine()
    machine_line = _common.describe_machine(info)
    print(f"machine: {machine_line}", flush=True)
    robot = gp.robots.load(ROBOT)
    print(f"{ROBOT}, {options.knots} knots of {1e3 * options.dt:g} ms, control every "
          f"{1e3 * options.control_dt:g} ms for {options.duration:g} s, one FDDP iteration "
          "per step, plant RK4 at 1 ms", flush=True)
    compile_start = time.perf_counter()
    print("compiling / loading the kernels (a short loop first)...", flush=True)
    ClosedLoop(robot, options.knots, options.dt, options.control_dt).run(WARMUP_STEPS)
    compile_s = time.perf_counter() - compile_start
    steps = int(round(options.duration / options.control_dt))
    blocks = max(1, min(options.blocks, steps))
    print(f"  ready in {compile_s:.1f} s; timing the closed loop in {blocks} blocks, "
          "ours and Crocoddyl's interleaved...", flush=True)
    ours_loop = ClosedLoop(robot, options.knots, options.dt, options.control_dt)
    theirs_loop = CrocoddylLoop(robot, options.knots, options.dt, options.control_dt)
    if options.no_crocoddyl:
        theirs_loop.reason = "--no-crocoddyl"
    block_ratios, step_ratios = [], []
    for block in range(blocks):
        n = steps * (block + 1) // blocks - steps * block // blocks
        first = len(ours_loop.step_cpu)
        _, ours_cpu = ours_loop.run(n)
        theirs_block = theirs_loop.run(n)
        if theirs_block is not None:
            block_ratios.append(float(np.median(ours_cpu) / np.median(theirs_block[1])))
            step_ratios.append(float(np.median(ours_loop.step_cpu[first:])
                                     / np.median(theirs_loop.out["step_cpu"][-n:])))
    ours, theirs, reason = ours_loop.results(), theirs_loop.results(), theirs_loop.reason
    table, met = report(ours, theirs, reason, options.control_dt)
    if block_ratios:
        print(f"geppetto / Crocoddyl per block (median CPU time of one iteration, {blocks} "
              f"interleaved blocks): median {np.median(block_ratios):.2f}, range "
              f"{min(block_ratios):.2f}-{max(block_ratios):.2f}; MPC step: median "
              f"{np.median(step_ratios):.2f}, range {min(step_ratios):.2f}-"
              f"{max(step_ratios):.2f}")
    series = {"geppetto iteration, CPU": ours["iteration_cpu"],
              "geppetto iteration, wall": ours["iteration_wall"]}
    if theirs is not None:
        series.update({f"Crocoddyl {theirs['crocoddyl']} iteration, CPU":
                       theirs["iteration_cpu"],
                       f"Crocoddyl {theirs['crocoddyl']} iteration, wall":
                       theirs["iteration_wall"]})
    png = os.path.join(options.out, "mpc.png")
    plots.plot_solve_times(series, budget=TARGET_S, path=png, title=(
        f"one warm-started FDDP iteration per MPC step, {ROBOT}, {options.knots} knots\n"
        + textwrap.fill(machine_line, 100)))
    path = os.path.join(options.out, "mpc.json")
    _common.write_json(path, dict(
        machine=info, robot=ROBOT, knots=options.knots, dt=options.dt,
        control_dt=options.control_dt, duration=options.duration, weights=WEIGHTS,
        simulation_dt=SIMULATION_DT, compile_s=compile_s, unit="milliseconds",
        summary=table, target_ms=1e3 * TARGET_S, target_met=bool(met),
        split_median_ms=dict(zip(("calc_diff", "backward", "forward", "loop"),
                                 (1e3 * np.median(ours["split"], axis=0)).tolist())),
        tracking_error_m=dict(geppetto=ours["errors"].tolist(),
                              crocoddyl=None if theirs is None else theirs["errors"].tolist()),
        crocoddyl=None if theirs is None else dict(crocoddyl=theirs["crocoddyl"],
                                                   pinocchio=theirs["pinocchio"]),
        crocoddyl_skipped=None if theirs is not None else reason, blocks=blocks,
        ratio_per_block=block_ratios,
        ratio_median=float(np.median(block_ratios)) if block_ratios else None,
        step_ratio_per_block=step_ratios,
        step_ratio_median=float(np.median(step_ratios)) if step_ratios else None,
        load_average_end=os.getloadavg(), total_s=time.perf_counter() - started))
    print(f"\nwrote {path}, {png}")


if __name__ == "__main__":
    main()
