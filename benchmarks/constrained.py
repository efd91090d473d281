"""ALDDP and ProxDDP (augmented-Lagrangian DDPs) beside IPOPT on constrained reaching tasks.

    python -m geppetto.benchmarks.constrained [--robots ur5 panda] [--knots 100]
                                              [--tasks plane stiff vbound torque untuned2 untuned3
                                                       untuned4]
                                              [--solvers ALDDP ProxDDP] [--repeats 3]
                                              [--casadi] [--no-csqp] [--out DIR]

Tasks (per robot, 100 knots, dt = 10 ms, semi-implicit Euler, the costs of
:mod:`.nlp`'s reaching task: frame translation to (0.4, 0.2, 0.4), state and
control regularization):

- ``plane``: the tool exactly at the target at the last knot (a terminal
  equality) and at z >= 0.45 on knots 50..89 (a path inequality);
- ``stiff``: the same with the plane up to knot 99, so that the tool must drop
  5 cm to the target in the last step;
- ``nlp`` (``--tasks nlp``): :mod:`.nlp`'s constrained task (other weights, the
  plane on knots 50..99 at a height from the unconstrained optimum), on which
  the Gauss-Newton IPOPT does not converge for panda;
- ``untuned2`` (or one of its names; each on its own robot, ``--robots`` does not apply):
  other robots and constraint kinds, :func:`untuned2`: kinova "box" (the tool in a box on
  knots 30..79; continuous joints), z1 "joints" (joint position bounds as state bounds,
  the tool at rest at the target), ur10 "orient" (torque bounds saturating from the first
  knot, a terminal orientation equality), talos_arm "effort" (30 % of its URDF effort limits),
  go1 "cones" (contact dynamics, hard friction pyramids mu = 0.3, centre-of-mass height
  bound, 40 knots of 20 ms) and ur5 "infeasible" (contradicting terminal rows).  No
  mim_solvers rows for them.
- ``untuned3`` (or one of its names; each on its own robot and horizon, ``--robots`` and
  ``--knots`` do not apply): robots and constraint kinds nobody had run (round rob21),
  :func:`untuned3`: ur5_limited "limits" (URDF position and velocity limits, a path
  inequality), panda "obstacle" (a user Numba residual: the distance from a point, a
  non-convex row), double_pendulum "swingup" (torque bounds too weak to lift it, a
  terminal state equality), ur3 "start_bound" (a state bound active at x0) and ur5
  "barely" (a reach in 0.3 s under torque bounds).  No mim_solvers rows for them.
- ``untuned4`` (or one of its names; as ``untuned3``): the tasks of round rob34,
  :func:`untuned4`: free-flyer state bounds (solo12 "knees"), a trot with an impulse,
  hard cones and torque bounds (a1 "trot"), 6D contacts and a centre-of-mass box (talos
  "com_box"), a terminal rotation and a tool speed bound (panda "tool_speed"), many
  binding joint boxes over 200 knots (ur10 "joint_box"), a path equality (kinova
  "on_plane"), RK4 over 250 knots (z1 "rk4"), an MPC-sized horizon (ur5 "mpc", 15 knots),
  an infeasible row (ur5 "unreachable") and duplicate / dependent rows (panda
  "degenerate").  No mim_solvers rows for them.

Starts: ``cold`` (xs = [x0] * (N + 1), us quasi-static) and ``fddp`` (FDDP's
unconstrained optimum).  Solvers: ours in :data:`SOLVERS` (ALDDP, ProxDDP, CSQP; default
options: th_stop 1e-10, violation <= 1e-8; ``--solvers`` picks), IPOPT (tol 1e-8)
(``--ipopt-tol``) on :class:`geppetto.solvers.NLP` with analytical derivatives
(Gauss-Newton Hessian) and, with ``--casadi``, the CasADi exact Hessian; FDDP on the
same problem (it leaves the constraints
out: the unconstrained optimum, the ``fddp`` start) for the time per
iteration.  Columns: iterations, final cost, largest constraint violation,
dynamics gaps, status, wall and CPU time (of the calling thread, which runs
IPOPT and MUMPS too) of ``solve`` (FDDP and ours: the median of
``repeats`` interleaved rounds, FDDP's solve in each round beside ours; IPOPT: one run) and CPU
time per iteration.  One Numba thread (the script restarts itself with
NUMBA_NUM_THREADS=1).  Numba was compiled by a warm-up solve.  On a shared machine the CPU time is the
figure to compare (the machine line gives the load average); compare solvers
by their ratio in the same run.

CSQP (``--csqp``, on by default; ``--no-csqp``): mim_solvers' SolverCSQP
(:data:`CSQP_OPTIONS`: its defaults but the ADMM QP's tolerance ``eps_abs``
1e-6, ``eps_rel`` 0; with its default 1e-4 / 1e-4 the QP's multipliers are
too inexact for its KKT test, ``termination_tolerance`` 1e-6, to pass: ur5
plane ran its 500 iterations to KKT 9e-6; mim_solvers' examples use 1e-5 / 0)
on the same problems (every task but ``nlp``: the untuned tasks' velocity bounds as a
ConstraintModelResidual on ResidualModelState, the torque bounds and the passive joint
on ResidualModelControl), built term for term with Crocoddyl's C++ models (no
Python callback per knot) in mim_solvers' pinned environment
(``crocoddyl_env.run(..., environment="mim_solvers")``, made once under
~/.cache/geppetto; skipped with the reason when it cannot be made), from the
same two starts, without callbacks.  Its ShootingProblem runs on one thread
(``nthreads`` = 1, as ours): that environment's Crocoddyl 3.2.1 is built with
OpenMP and defaults to one thread per core, whose spin-waits on the loaded
2-core machine made calc 14x slower in CPU time (7.5 ms against 0.54 ms, ur5,
100 knots) and CSQP 60x (ur5 plane from the guess 13.6 s against 0.22 s);
the rows store both counts (``threads``, ``default_threads``).  The two
problems are checked first to give the same cost at the same (xs, us) (1e-10
relative).  ALDDP and CSQP run interleaved in ``repeats`` rounds (each round:
ALDDP from both starts, then one subprocess solving CSQP from both); each
solve is timed alone by the CPU time of its thread (``time.thread_time``,
problem construction, imports and process start left out), the rows give the
median over the rounds (``cpu_rounds``: every round's), and the comparison
table the median of the per-round ALDDP / CSQP ratios with their range.
CSQP's rows give SQP iterations, total QP (ADMM) iterations (counted by a
callback in one more, untimed, run in the first round), the cost, the
violation measured here with our problem on the returned (xs, us).  CSQP gets
``max_iter`` = 500 SQP iterations like ALDDP (mim_solvers' own default is
100; ``--csqp-max-iter``); its row also stores its final KKT residual
(``kkt``), and its status is "not converged" when it stopped on ``max_iter``
(then the time ratio compares a converged ALDDP with a CSQP that ran out of
iterations).  ``--no-ipopt`` leaves IPOPT out.

Writes ``results/constrained.json`` and ``results/constrained.md`` beside this file
(``--out``: elsewhere).  Measurements and variants tried: ``constrained_notes.md``.
"""
import argparse
import json
import os
import time

import numba
import numpy as np

import geppetto as gp
from geppetto.benchmarks import _common, crocoddyl_env, nlp
from geppetto.benchmarks.ocp import CROCODDYL_REACHING
from geppetto.benchmarks._common import RESULTS_DIR, describe_machine, machine
from geppetto.solvers.nlp import NLP

DT = 0.01
PLANE_Z = 0.45
COST_AGREEMENT = 1e-10  # relative, our cost vs Crocoddyl's at the same (xs, us)
# mim_solvers' defaults but the ADMM QP's stopping tolerances (see the module docstring)
CSQP_OPTIONS = dict(eps_abs=1e-6, eps_rel=0.0)

# The constrained reaching task in Crocoddyl, solved with mim_solvers' SolverCSQP:
# run in mim_solvers' environment (crocoddyl imported before mim_solvers).
CSQP_SCRIPT = CROCODDYL_REACHING + '''
import time
import mim_solvers


def constrained_problem(task):
    """benchmarks/nlp.py's reaching costs (CROCODDYL_REACHING's terms), the tool at the
    target at the terminal knot and, by task["kind"]: "plane" / "stiff" the tool at
    z >= plane_z on knots first..last-1; "vbound" every joint velocity within
    +-velocity_limit on the running knots and the tool at y <= wall_y on the wall's
    knots; "torque" every torque within +-torque_limit and the first joint's torque
    zero on knots 0..passive_knots-1 (untuned(): the same rows as our problem's)."""
    model, state, actuation, x0, reach_residual, running_costs, terminal_costs = \
        reaching_terms(task)
    nu, nq, nv = actuation.nu, model.nq, model.nv
    frame = model.getFrameId(task["frame"])
    big = task["infinity"]
    kind = task["kind"]

    def manager(*named):
        constraints = crocoddyl.ConstraintModelManager(state, nu)
        for name, residual, lower, upper in named:
            constraints.addConstraint(name, crocoddyl.ConstraintModelResidual(
                state, residual, np.array(lower, dtype=float), np.array(upper, dtype=float)))
        return constraints

    def translation():
        return crocoddyl.ResidualModelFrameTranslation(state, frame, np.zeros(3), nu)

    def integrated(costs, constraints, dt):
        if constraints is None:
            dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
        else:
            dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs,
                                                                   constraints)
        return crocoddyl.IntegratedActionModelEuler(dam, dt)

    terminal = integrated(terminal_costs, manager(("at_target", reach_residual, np.zeros(3),
                                                   np.zeros(3))), 0.0)
    if kind in ("plane", "stiff"):
        plane = integrated(running_costs, manager(
            ("above", translation(), [-big, -big, task["plane_z"]], [big, big, big])),
            task["dt"])
        running = integrated(running_costs, None, task["dt"])
        models = [plane if task["first"] <= k < task["last"] else running
                  for k in range(task["knots"])]
    elif kind == "vbound":
        limit = np.r_[np.full(nq, big), np.full(nv, task["velocity_limit"])]
        velocity = ("velocity", crocoddyl.ResidualModelState(state, np.zeros(nq + nv), nu),
                    -limit, limit)
        wall = ("wall", translation(), [-big, -big, -big], [big, task["wall_y"], big])
        free = integrated(running_costs, manager(velocity), task["dt"])
        walled = integrated(running_costs, manager(velocity, wall), task["dt"])
        models = [walled if task["wall_knots"][0] <= k < task["wall_knots"][1] else free
                  for k in range(task["knots"])]
    else:
        limit = np.full(nu, task["torque_limit"])
        bounds = ("torque", crocoddyl.ResidualModelControl(state, nu), -limit, limit)
        lower, upper = np.full(nu, -big), np.full(nu, big)
        lower[0] = upper[0] = 0.0
        passive = ("passive", crocoddyl.ResidualModelControl(state, nu), lower, upper)
        free = integrated(running_costs, manager(bounds), task["dt"])
        held = integrated(running_costs, manager(bounds, passive), task["dt"])
        models = [held if k < task["passive_knots"] else free for k in range(task["knots"])]
    return crocoddyl.ShootingProblem(x0, models, terminal)


class QPIterations(mim_solvers.CallbackAbstract):
    """Sums the solver's QP iterations over the SQP iterations."""

    def __init__(self):
        mim_solvers.CallbackAbstract.__init__(self)
        self.total = 0

    def __call__(self, solver, *_):            # mim_solvers passes (solver, verbose)
        self.total += int(solver.qp_iters)


def vectors(rows):
    return [np.array(row, dtype=float) for row in rows]


def csqp(problem, options):
    solver = mim_solvers.SolverCSQP(problem)
    for name, value in options.items():
        setattr(solver, name, value)
    return solver


payload = json.load(sys.stdin)
task = payload["task"]
problem = constrained_problem(task)
# Crocoddyl 3.2.1's wheel is built with OpenMP and its ShootingProblem defaults to one
# thread per core; its threads spin-wait for each other, and on a loaded machine calc and
# calcDiff took 14x the CPU time of one thread (7.5 ms against 0.54 ms per calc, ur5, 100
# knots): every knot runs on this thread, as ours do.
default_threads = int(problem.nthreads)
problem.nthreads = payload["threads"]
out = dict(versions=versions(), threads=int(problem.nthreads), default_threads=default_threads,
           check_cost=problem.calc(vectors(payload["check_xs"]), vectors(payload["check_us"])),
           runs={})
for start, (xs, us) in payload["starts"].items():
    xs, us = vectors(xs), vectors(us)
    solver = csqp(problem, payload["options"])
    begin = time.thread_time()
    converged = solver.solve(xs, us, payload["max_iter"], False)
    cpu = time.thread_time() - begin
    run = dict(cpu=cpu, converged=bool(converged), iterations=int(solver.iter),
               cost=float(solver.cost), kkt=float(solver.KKT),
               xs=[np.array(x).copy().tolist() for x in solver.xs],
               us=[np.array(u).copy().tolist() for u in solver.us])
    if payload["count_qp"]:                 # one more run, untimed, counting QP iterations
        solver = csqp(problem, payload["options"])
        counter = QPIterations()
        solver.setCallbacks([counter])
        solver.solve(xs, us, payload["max_iter"], False)
        run.update(qp_iterations=counter.total, counted_iterations=int(solver.iter))
    out["runs"][start] = run
print(json.dumps(out))
'''


def reaching(name, knots, plane_z=None, first=None, last=None):
    """benchmarks/nlp.py's reaching problem; with ``plane_z`` the tool at the target at
    the last knot (equality) and at z >= plane_z on knots first..last-1 (default
    N/2 .. 0.9 N)."""
    last = int(0.9 * knots) if last is None else last
    return nlp.reaching(name, knots, plane_z, first, last)


# Tasks ALDDP was not tuned on (its options are the defaults measured on plane / stiff)
VELOCITY_LIMIT = {"ur5": 3.0, "panda": 0.6}     # rad/s; FDDP's optimum peaks at 3.9 / 0.9
WALL_Y, WALL_KNOTS = 0.15, (50, 80)             # "vbound": y <= 0.15 on knots 50..79
TORQUE_LIMIT = {"ur5": 60.0, "panda": 12.0}     # N m; FDDP's optimum peaks at 122 / 23
PASSIVE_KNOTS = 40                              # u[0] = 0 on knots 0..39 ("torque")
UNTUNED = ("vbound", "torque")


def untuned(name, knots, task):
    """:mod:`.nlp`'s reaching costs, the tool at the target at the last knot (equality),
    and for ``task``:

    - "vbound": every joint velocity within +-VELOCITY_LIMIT on the running knots (state
      bounds) and the tool at y <= WALL_Y on knots 50..79 (a wall: the target is at
      y = 0.2);
    - "torque": every torque within +-TORQUE_LIMIT (control bounds) and the first
      joint's torque zero on knots 0 .. PASSIVE_KNOTS - 1 (an equality on one row of a
      control residual, the other rows free).
    """
    robot = gp.robots.load(name)
    model, frame = robot.model, nlp.FRAMES[name]
    dynamics = gp.ocp.FreeDynamics(model)
    state, nu = dynamics.state, dynamics.nu
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    reach = gp.ocp.FrameTranslationResidual(model, frame, nlp.TARGET)
    costs = [gp.ocp.Cost(reach), gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2),
             gp.ocp.Cost(gp.ocp.ControlResidual(nu), weight=1e-4)]
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(reach, weight=1e3), costs[1]],
                                    [gp.ocp.Constraint(reach, 0.0, 0.0)])
    options = dict(dt=DT, integrator="semi_implicit_euler")
    if task == "vbound":
        limit = np.r_[np.full(model.nq, np.inf), np.full(model.nv, VELOCITY_LIMIT[name])]
        options["state_bounds"] = (-limit, limit)
        wall = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(
            model, frame, [0, WALL_Y, 0], axes=[1]), -np.inf, 0.0)
        free = gp.ocp.StageModel(dynamics, costs, **options)
        walled = gp.ocp.StageModel(dynamics, costs, [wall], **options)
        models = [walled if WALL_KNOTS[0] <= k < WALL_KNOTS[1] else free
                  for k in range(knots)]
    else:
        limit = np.full(nu, TORQUE_LIMIT[name])
        options["control_bounds"] = (-limit, limit)
        lower, upper = np.full(nu, -np.inf), np.full(nu, np.inf)
        lower[0] = upper[0] = 0.0
        passive = gp.ocp.Constraint(gp.ocp.ControlResidual(nu), lower, upper)
        free = gp.ocp.StageModel(dynamics, costs, **options)
        held = gp.ocp.StageModel(dynamics, costs, [passive], **options)
        models = [held if k < PASSIVE_KNOTS else free for k in range(knots)]
    return gp.ocp.ShootingProblem(x0, models, terminal)


# Tasks on other robots and constraint kinds, nobody tuned for (round ext18): task name ->
# robot.  Each is the reaching task of :func:`untuned` (the same cost weights, 100 knots of
# 10 ms, semi-implicit Euler) to a target offset from the tool's start, or a quadruped's
# centre-of-mass shift, with the constraints of :func:`untuned2`.
UNTUNED2 = {"box": "kinova", "joints": "z1", "orient": "ur10", "effort": "talos_arm",
            "cones": "go1", "infeasible": "ur5"}
UNTUNED2_TOOLS = {"kinova": "j2s6s200_end_effector", "z1": "gripperMover", "ur10": "tool0",
                  "talos_arm": "gripper_left_motor_single_link", "ur5": "tool0"}
UNTUNED2_OFFSETS = {"kinova": (-0.2, 0.25, -0.15), "z1": (0.25, 0.15, 0.05),
                    "ur10": (-0.4, 0.3, 0.4), "talos_arm": (0.1, 0.05, 0.1)}
BOX = ((0.5, -0.1, 0.35), (0.8, 0.22, 0.6), (30, 80))   # kinova's tool: lower, upper, knots
# z1: its base yaw and wrist pitch, where FDDP's motion ends at 0.36 and -0.29 (bounds on
# the shoulder or the elbow that bind, q1 <= 1.4 (FDDP: 1.46), leave the target out of reach:
# IPOPT and CSQP stop at violations 0.02-0.24)
Z1_JOINT_BOUNDS = {0: (0.0, 0.3), 3: (-0.1, 0.1)}
UR10_TORQUE_LIMIT = np.array([150.0, 120.0, 40.0, 54.0, 54.0, 54.0])  # FDDP's peaks 28 191 49
UR10_TURN = 0.3                                         # rad about z, of the start orientation
# talos_arm: 30 % of its URDF effort limits (at 100 % they bind only where the target
# leaves the reach of 1 s: offset (0.14, 0.07, 0.14), one row; 0.15 / 0.1 / 0.15 infeasible)
TALOS_EFFORT_SCALE = 0.3
GO1_FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
GO1_MU, GO1_SHIFT, GO1_DROP = 0.3, (0.04, 0.03, 0.0), 0.02   # cones; CoM target; z >= z0 - drop
GO1_KNOTS, GO1_DT = 40, 0.02


def _tool_position(model, frame, q):
    data = model.create_data()
    gp.dynamics.forward_kinematics(model, data, q)
    return gp.dynamics.frame_placement(model, data, model.frame_id(frame))


def untuned2(task, knots):
    """The problem of task ``task`` of :data:`UNTUNED2` (its robot is the task's):

    - "box" (kinova: continuous joints, nq = 9 != nv = 6): the tool inside the box
      :data:`BOX` (all three axes, lower and upper; at the optimum y <= 0.22 binds on 12
      knots, z >= 0.35 on 30) on knots 30..79, the tool at the target at the last knot;
    - "joints" (z1): joint position bounds :data:`Z1_JOINT_BOUNDS` as state bounds (both
      bind: the unconstrained motion leaves them), the tool at the target and at rest
      (its LOCAL_WORLD_ALIGNED spatial velocity zero, six equality rows) at the last knot;
    - "orient" (ur10): torque bounds :data:`UR10_TORQUE_LIMIT` (the elbow's saturates on
      knots 0..18 at the optimum from the guess), the tool at the target and at the start
      orientation turned by :data:`UR10_TURN` about the world z axis at the last knot
      (six equality rows);
    - "effort" (talos_arm): :data:`TALOS_EFFORT_SCALE` of the arm's URDF effort limits as
      control bounds (151 rows at a bound at the optimum, from the first knot), the
      terminal equality;
    - "cones" (go1 on its four feet, contact dynamics, :data:`GO1_KNOTS` knots of
      :data:`GO1_DT`): shift the centre of mass by :data:`GO1_SHIFT`, every foot's force
      inside its friction pyramid of mu = :data:`GO1_MU` (hard cones) and the centre of
      mass at z >= z0 - :data:`GO1_DROP` on every knot;
    - "infeasible" (ur5): the tool exactly at :data:`nlp.TARGET` (z = 0.4) and at
      z >= PLANE_Z = 0.45 at the last knot: no point satisfies both.
    """
    if task == "cones":
        return _go1_cones()
    name = UNTUNED2[task]
    robot = gp.robots.load(name)
    model, frame = robot.model, UNTUNED2_TOOLS[name]
    dynamics = gp.ocp.FreeDynamics(model)
    state, nu = dynamics.state, dynamics.nu
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    start_rotation, start = _tool_position(model, frame, robot.q0)
    target = nlp.TARGET if task == "infeasible" else start + UNTUNED2_OFFSETS[name]
    reach = gp.ocp.FrameTranslationResidual(model, frame, target)
    costs = [gp.ocp.Cost(reach), gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2),
             gp.ocp.Cost(gp.ocp.ControlResidual(nu), weight=1e-4)]
    options = dict(dt=DT, integrator="semi_implicit_euler")
    terminal = [gp.ocp.Constraint(reach, 0.0, 0.0)]
    running = [gp.ocp.StageModel(dynamics, costs, **options)] * knots
    if task == "box":
        lower, upper, (first, last) = BOX
        inside = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(model, frame, np.zeros(3)),
                                   lower, upper)
        boxed = gp.ocp.StageModel(dynamics, costs, [inside], **options)
        running = [boxed if first <= k < last else running[0] for k in range(knots)]
    elif task == "joints":
        lower, upper = np.full(state.nx, -np.inf), np.full(state.nx, np.inf)
        for joint, (low, high) in Z1_JOINT_BOUNDS.items():
            lower[joint], upper[joint] = low, high
        running = [gp.ocp.StageModel(dynamics, costs, state_bounds=(lower, upper),
                                     **options)] * knots
        terminal.append(gp.ocp.Constraint(gp.ocp.FrameVelocityResidual(
            model, frame, reference_frame="LOCAL_WORLD_ALIGNED"), 0.0, 0.0))
    elif task == "orient":
        running = [gp.ocp.StageModel(dynamics, costs, control_bounds=(-UR10_TORQUE_LIMIT,
                                                                      UR10_TORQUE_LIMIT),
                                     **options)] * knots
        c, s = np.cos(UR10_TURN), np.sin(UR10_TURN)
        turned = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ start_rotation
        terminal.append(gp.ocp.Constraint(gp.ocp.FrameRotationResidual(model, frame, turned),
                                          0.0, 0.0))
    elif task == "effort":
        limit = TALOS_EFFORT_SCALE * np.asarray(model.effort_limit, float)
        running = [gp.ocp.StageModel(dynamics, costs, control_bounds=(-limit, limit),
                                     **options)] * knots
    elif task == "infeasible":
        terminal.append(gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(
            model, frame, [0, 0, PLANE_Z], axes=[2]), 0.0, np.inf))
    else:
        raise ValueError(f"unknown task {task!r}: expected one of {sorted(UNTUNED2)}")
    return gp.ocp.ShootingProblem(x0, running, gp.ocp.TerminalModel(
        state, [gp.ocp.Cost(reach, weight=1e3), costs[1]], terminal))


def quadruped_com_shift(name, feet, shift, mu):
    """The pieces of a quadruped standing on its point ``feet`` (LOCAL_WORLD_ALIGNED
    contacts, Baumgarte Kd = 20) asked to move its centre of mass by ``shift``:
    (dynamics, x0, the centre of mass at q0, its shift residual, the costs (the shift
    1e2, the state about x0 weighted 0 / 10 / 1 / 0.1 on base position / base
    orientation / joints / velocities, the controls 1e-3), the friction pyramids of
    coefficient ``mu``, one per foot).  The go1 task here and the tests' solo12 balance
    build on it."""
    robot = gp.robots.load(name)
    model = robot.model
    contacts = [gp.dynamics.constraints.contact_3d(model, foot, reference="LOCAL_WORLD_ALIGNED",
                                                   Kd=20.0) for foot in feet]
    dynamics = gp.ocp.ContactDynamics(model, contacts)
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    com = gp.dynamics.center_of_mass(model, model.create_data(), robot.q0)
    residual, costs = com_shift_costs(model, dynamics, x0, com + np.asarray(shift))
    cones = [gp.ocp.FrictionConeResidual(dynamics, foot, mu) for foot in feet]
    return dynamics, x0, com, residual, costs, cones


def com_shift_costs(model, dynamics, x0, target):
    """(the centre-of-mass residual to ``target``, the costs of a floating-base robot
    moving its centre of mass there: the residual 1e2, the state about x0 weighted
    0 / 10 / 1 / 0.1 on base position / base orientation / joints / velocities, the
    controls 1e-3): :func:`quadruped_com_shift`'s and talos "com_box"'s."""
    residual = gp.ocp.CenterOfMassResidual(model, target)
    weights = np.r_[np.zeros(3), np.full(3, 10.0), np.full(model.nv - 6, 1.0),
                    np.full(model.nv, 0.1)]
    return residual, [gp.ocp.Cost(residual, weight=1e2),
                      gp.ocp.Cost(gp.ocp.StateResidual(dynamics.state, x0),
                                  gp.ocp.WeightedQuadratic(weights)),
                      gp.ocp.Cost(gp.ocp.ControlResidual(dynamics.nu), weight=1e-3)]


def _go1_cones():
    """go1 on its four point feet (:func:`quadruped_com_shift`) shifting its centre of mass
    by :data:`GO1_SHIFT` in :data:`GO1_KNOTS` knots: hard friction pyramids (mu =
    :data:`GO1_MU`) and the centre of mass at z >= z0 - :data:`GO1_DROP`."""
    dynamics, x0, com, shift, costs, cones = quadruped_com_shift("go1", GO1_FEET, GO1_SHIFT,
                                                                 GO1_MU)
    model, state = dynamics.model, dynamics.state
    height = gp.ocp.Constraint(gp.ocp.CenterOfMassResidual(model, com), [-np.inf, -np.inf,
                               -GO1_DROP], np.inf)
    constraints = [gp.ocp.Constraint(cone, *cone.bounds) for cone in cones] + [height]
    running = gp.ocp.StageModel(dynamics, costs, constraints, dt=GO1_DT,
                                integrator="semi_implicit_euler")
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(shift, weight=1e4), costs[1]],
                                    [height])
    return gp.ocp.ShootingProblem(x0, [running] * GO1_KNOTS, terminal)


# Tasks on robots and constraint kinds nobody had run (round rob21, issue 19's outside
# checker): task name -> robot.  Each horizon is the task's own (``--knots`` does not
# apply): :func:`untuned3`.
UNTUNED3 = {"limits": "ur5_limited", "obstacle": "panda", "swingup": "double_pendulum",
            "start_bound": "ur3", "barely": "ur5", "pose": "kinova"}
OBSTACLE_RADIUS, OBSTACLE_OFFSET = 0.12, (0.0, 0.4, -0.1)   # panda_joint7's reach
SWINGUP_TORQUE = np.array([12.0, 6.0])      # N m; holding it upright takes 29.4 / 9.8
POSE_TURN = 0.5                             # rad about the world x axis, kinova's tool


@numba.njit(cache=True)
def sphere_distance(x, u, oR, op, J, reference, parameters, r, Rx, Ru, with_jacobian):
    """A user residual (:class:`geppetto.ocp.NumbaResidual`): the distance |p - c| of
    joint ``parameters[0]``'s origin p from the centre c = ``parameters[2:5]``; the
    joint on a chain supported by the dofs 0 .. ``parameters[1]`` - 1.  Its Jacobian:
    (p - c)^T / |p - c| times the point's velocity v_o + w x p of each dof's world motion
    (J's columns: the motion at the world origin, [linear; angular])."""
    joint, support = int(parameters[0]), int(parameters[1])
    d0 = op[joint, 0] - parameters[2]
    d1 = op[joint, 1] - parameters[3]
    d2 = op[joint, 2] - parameters[4]
    distance = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    r[0] = distance
    if with_jacobian:
        p0, p1, p2 = op[joint, 0], op[joint, 1], op[joint, 2]
        for i in range(support):
            w0, w1, w2 = J[3, i], J[4, i], J[5, i]
            v0 = J[0, i] + w1 * p2 - w2 * p1
            v1 = J[1, i] + w2 * p0 - w0 * p2
            v2 = J[2, i] + w0 * p1 - w1 * p0
            Rx[0, i] = (d0 * v0 + d1 * v1 + d2 * v2) / distance


def _reach(name, frame, target, knots, dt, stage_rows=(), terminal_rows=(), **options):
    """:func:`untuned`'s reaching costs on ``name``'s ``frame`` to ``target``, the tool at
    the target at the last knot (equality) and the ``terminal_rows`` besides, the
    ``stage_rows`` on every running knot, StageModel ``options`` (bounds)."""
    robot = gp.robots.load(name)
    model = robot.model
    dynamics = gp.ocp.FreeDynamics(model)
    state, nu = dynamics.state, dynamics.nu
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    reach = gp.ocp.FrameTranslationResidual(model, frame, target)
    costs = [gp.ocp.Cost(reach), gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2),
             gp.ocp.Cost(gp.ocp.ControlResidual(nu), weight=1e-4)]
    stage = gp.ocp.StageModel(dynamics, costs, list(stage_rows), dt=dt,
                              integrator="semi_implicit_euler", **options)
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(reach, weight=1e3), costs[1]],
                                    [gp.ocp.Constraint(reach, 0.0, 0.0)] + list(terminal_rows))
    return gp.ocp.ShootingProblem(x0, [stage] * knots, terminal)


def untuned3(task, knots=None):
    """The problem of task ``task`` of :data:`UNTUNED3` (its robot is the task's):

    - "limits" (ur5_limited, 100 knots of 6 ms): its URDF joint position and velocity
      limits as state bounds (the velocity limits bind), the tool at z >= its start's
      - 5 cm on every running knot, the terminal equality at (-0.5, 0.4, 0.1) from the
      tool's start;
    - "obstacle" (panda, 100 knots of 10 ms): panda_joint7's origin to (0, 0.4, -0.1)
      from its start, at least :data:`OBSTACLE_RADIUS` from a point 2 cm above the
      straight path's midpoint on every running knot (:func:`sphere_distance`, a user
      Numba residual: a non-convex row), the terminal equality;
    - "swingup" (the builtin double pendulum, hanging at q = 0, 100 knots of 20 ms): to
      (pi, 0) at rest at the last knot (a terminal state equality) with the torques
      within :data:`SWINGUP_TORQUE` (too weak to lift it without swinging);
    - "start_bound" (ur3, 100 knots of 10 ms): state bounds q1 >= 0 (active at the start
      q0 = 0) and q2 <= 0.2, the tool to (-0.1, 0.1, -0.15) from its start, which pulls q1
      below 0;
    - "barely" (ur5, 30 knots of 10 ms): :data:`nlp.TARGET` in 0.3 s with the torques
      within 40 % of the URDF effort limits (they bind on most knots);
    - "pose" (kinova, 100 knots of 10 ms; glob25's task): the tool to untuned2's target
      (:data:`UNTUNED2_OFFSETS`) and to its start orientation turned by
      :data:`POSE_TURN` about the world x axis at the last knot (terminal position and
      rotation equalities), the URDF velocity limits as state bounds (from FDDP's
      optimum CSQP's line search crawls at its smallest step for five iterations and
      then recovers by itself; ALDDP and ProxDDP do not converge in 500 iterations).

    ``knots``: another horizon of the same knot duration (the tests' 30 knots).
    """
    if task == "limits":
        robot = gp.robots.load("ur5_limited")
        model = robot.model
        _, start = _tool_position(model, "tool0", robot.q0)
        speed = np.asarray(model.velocity_limit)
        floor = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(
            model, "tool0", [0, 0, start[2] - 0.05], axes=[2]), 0.0, np.inf)
        bounds = (np.r_[model.lower_position_limit, -speed],
                  np.r_[model.upper_position_limit, speed])
        return _reach("ur5_limited", "tool0", start + np.array([-0.5, 0.4, 0.1]), knots or 100,
                      0.006,
                      [floor], state_bounds=bounds)
    if task == "obstacle":
        robot = gp.robots.load("panda")
        model = robot.model
        _, start = _tool_position(model, "panda_joint7", robot.q0)
        target = start + np.asarray(OBSTACLE_OFFSET)
        centre = 0.5 * (start + target) + np.array([0.0, 0.0, 0.02])
        joint = list(model.names).index("panda_joint7")
        distance = gp.ocp.NumbaResidual(1, sphere_distance, parameters=[joint, 7, *centre],
                                        needs_kinematics=True)
        return _reach("panda", "panda_joint7", target, knots or 100, DT,
                      [gp.ocp.Constraint(distance, OBSTACLE_RADIUS, np.inf)])
    if task == "swingup":
        dynamics = gp.ocp.FreeDynamics(gp.robots.double_pendulum())
        state, nu = dynamics.state, dynamics.nu
        up = gp.ocp.StateResidual(state, [np.pi, 0.0, 0.0, 0.0])
        stage = gp.ocp.StageModel(dynamics, [gp.ocp.Cost(up, weight=1e-2), gp.ocp.Cost(
            gp.ocp.ControlResidual(nu), weight=1e-3)], dt=0.02,
            integrator="semi_implicit_euler", control_bounds=(-SWINGUP_TORQUE,
                                                               SWINGUP_TORQUE))
        terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(up)],
                                        [gp.ocp.Constraint(up, 0.0, 0.0)])
        return gp.ocp.ShootingProblem(np.zeros(4), [stage] * (knots or 100), terminal)
    if task == "start_bound":
        robot = gp.robots.load("ur3")
        _, start = _tool_position(robot.model, "tool0", robot.q0)
        nx = robot.model.nq + robot.model.nv
        lower, upper = np.full(nx, -np.inf), np.full(nx, np.inf)
        lower[1], upper[2] = 0.0, 0.2
        return _reach("ur3", "tool0", start + np.array([-0.1, 0.1, -0.15]), knots or 100, DT,
                      state_bounds=(lower, upper))
    if task == "barely":
        limit = 0.4 * np.asarray(gp.robots.load("ur5").model.effort_limit)
        return _reach("ur5", "tool0", nlp.TARGET, knots or 30, DT,
                      control_bounds=(-limit, limit))
    if task == "pose":
        robot = gp.robots.load("kinova")
        model, frame = robot.model, UNTUNED2_TOOLS["kinova"]
        start_rotation, start = _tool_position(model, frame, robot.q0)
        c, s = np.cos(POSE_TURN), np.sin(POSE_TURN)
        turned = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]) @ start_rotation
        speed = np.asarray(model.velocity_limit, float)
        nq = model.nq
        lower, upper = np.full(nq + model.nv, -np.inf), np.full(nq + model.nv, np.inf)
        lower[nq:], upper[nq:] = -speed, speed
        rotation = gp.ocp.Constraint(gp.ocp.FrameRotationResidual(model, frame, turned), 0.0,
                                     0.0)
        return _reach("kinova", frame, start + np.asarray(UNTUNED2_OFFSETS["kinova"]),
                      knots or 100, DT, terminal_rows=[rotation], state_bounds=(lower, upper))
    raise ValueError(f"unknown task {task!r}: expected one of {sorted(UNTUNED3)}")


# Tasks on robots and constraint kinds nobody had run (round rob34, issue 19's outside
# check): task name -> robot.  Each horizon is the task's own: :func:`untuned4`.
UNTUNED4 = {"knees": "solo12", "trot": "a1", "com_box": "talos", "tool_speed": "panda",
            "joint_box": "ur10", "on_plane": "kinova", "rk4": "z1", "mpc": "ur5",
            "unreachable": "ur5", "degenerate": "panda"}
SOLO_FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
A1_FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
SOLO_KNEE_RANGE = 0.2       # rad about q0; FDDP's knees move 0.30-0.48 to lower the CoM
A1_EFFORT_SCALE = 0.5       # of the URDF's 33.5 N m; FDDP's peaks 19.7 and 18.7
# ur10's joints, about q0 (rad): about 3/4 of FDDP's excursions on joints 0-4 (0.35, -1.61,
# 2.12, -0.63, 0.47), so that five of the six boxes bind over the arc
UR10_JOINT_BOX = (np.array([-0.05, -1.2, -0.05, -0.47, -0.05, -0.05]),
                  np.array([0.26, 0.05, 1.59, 0.05, 0.36, 0.05]))
TOOL_SPEED = 0.5            # m/s per world axis, panda's hand; the turn 0.4 rad about z
Z1_EFFORT_SCALE = 0.5       # of the URDF limits (15 / 30 N m; FDDP's joint 2 peaks at 16.8)
MPC_EFFORT_SCALE = 0.6      # of ur5's URDF limits (FDDP's shoulder peaks at 146 > 90)


def _solo_knees(knots):
    dynamics, x0, com, shift, costs, cones = quadruped_com_shift(
        "solo12", SOLO_FEET, (0.02, 0.02, -0.05), 0.7)
    lower, upper = np.full(dynamics.state.nx, -np.inf), np.full(dynamics.state.nx, np.inf)
    knees = 7 + 3 * np.arange(4) + 2            # q: base (7), then HAA, HFE, KFE per leg
    lower[knees], upper[knees] = x0[knees] - SOLO_KNEE_RANGE, x0[knees] + SOLO_KNEE_RANGE
    running = gp.ocp.StageModel(dynamics, costs, [gp.ocp.Constraint(c, *c.bounds) for c in cones],
                                dt=0.02, integrator="semi_implicit_euler",
                                state_bounds=(lower, upper))
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(shift, weight=1e4), costs[1]])
    return gp.ocp.ShootingProblem(x0, [running] * knots, terminal)


def _a1_trot(knots):
    robot = gp.robots.load("a1")
    model = robot.model
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    data = model.create_data()
    gp.dynamics.forward_kinematics(model, data, robot.q0)
    ground = {f: gp.dynamics.frame_placement(model, data, model.frame_id(f))[1]
              for f in A1_FEET}
    state = gp.ocp.StateMultibody(model)
    weights = np.r_[np.full(6, 10.0), np.full(model.nv - 6, 1.0), np.full(model.nv, 0.1)]
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(state, x0), gp.ocp.WeightedQuadratic(weights))
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(model.nv - 6), weight=1e-3)
    step = {f: gp.ocp.FrameTranslationResidual(model, f, ground[f] + [0.05, 0.0, 0.05])
            for f in ("FR_foot", "RL_foot")}

    def costs(phase):
        if phase.impulse:
            return [x_reg]
        # the swing feet in A1_FEET's order, not a set's: a set of strings iterates in
        # an order of the process's hash seed (PYTHONHASHSEED), and the order of the
        # costs is the order of their sums (the last bits of Lx, Lxx and of the solve)
        return [x_reg, u_reg] + [gp.ocp.Cost(step[f], weight=1e3)
                                 for f in A1_FEET if f not in phase.feet]
    stance, swing = max(knots // 5, 1), max(knots // 2, 1)
    gait = [(A1_FEET, stance), (("FL_foot", "RR_foot"), swing),
            (A1_FEET, max(knots - stance - swing, 1))]
    stages, _ = gp.ocp.gait_stages(model, gait, costs, dt=0.02, Kd=20.0,
                                   integrator="semi_implicit_euler")
    limit = A1_EFFORT_SCALE * np.asarray(model.effort_limit[6:], float)
    # gait_stages' costs only: each phase's stage again with its hard friction pyramids
    # (mu 0.5) and the torque bounds (the impulse stage has no controls)
    hard = {}
    for stage in stages:
        if id(stage) not in hard and not isinstance(stage.dynamics, gp.ocp.ImpulseDynamics):
            cones = [gp.ocp.FrictionConeResidual(stage.dynamics, f, 0.5)
                     for f in stage.dynamics.constraints.names]
            hard[id(stage)] = gp.ocp.StageModel(
                stage.dynamics, stage.costs, [gp.ocp.Constraint(c, *c.bounds) for c in cones],
                dt=stage.dt, integrator=stage.integrator.scheme, control_bounds=(-limit, limit))
    return gp.ocp.ShootingProblem(x0, [hard.get(id(s), s) for s in stages],
                                  gp.ocp.TerminalModel(state, [x_reg]))


def _talos_com_box(knots):
    robot = gp.robots.load("talos")
    model = robot.model
    contacts = [gp.dynamics.contact_6d(model, sole, reference=gp.dynamics.LOCAL_WORLD_ALIGNED,
                                       Kd=20.0) for sole in ("left_sole_link", "right_sole_link")]
    dynamics = gp.ocp.ContactDynamics(model, contacts)
    x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
    com = gp.dynamics.center_of_mass(model, model.create_data(), robot.q0).copy()
    target, costs = com_shift_costs(model, dynamics, x0, com + np.array([0.03, 0.0, -0.1]))
    box = gp.ocp.Constraint(gp.ocp.CenterOfMassResidual(model, com), [-0.02, -0.02, -0.05],
                            [0.015, 0.02, 0.0])
    running = gp.ocp.StageModel(dynamics, costs, [box], dt=0.03,
                                integrator="semi_implicit_euler")
    terminal = gp.ocp.TerminalModel(dynamics.state, [gp.ocp.Cost(target, weight=1e4),
                                                     costs[1]], [box])
    return gp.ocp.ShootingProblem(x0, [running] * knots, terminal)


def untuned4(task, knots=None):
    """The problem of task ``task`` of :data:`UNTUNED4` (its robot is the task's):

    - "knees" (solo12 on its four point feet, 40 knots of 20 ms): the centre of mass
      (2, 2, -5) cm from its start (:func:`quadruped_com_shift`), hard friction pyramids
      mu = 0.7, the knees within :data:`SOLO_KNEE_RANGE` of q0 (state bounds of a
      free-flyer state);
    - "trot" (a1, 20 knots of 20 ms and a touchdown impulse, :func:`gait_stages`): a
      diagonal step (two feet 5 cm forward and up), hard pyramids mu = 0.5 on the stance
      feet, the torques within :data:`A1_EFFORT_SCALE` of the URDF limits;
    - "com_box" (talos, two 6D sole contacts, 30 knots of 30 ms): the centre of mass to
      (3, 0, -10) cm from its start inside the box (-2..1.5, -2..2, -5..0) cm about it on
      every knot (x and z bind);
    - "tool_speed" (panda, 100 knots of 10 ms): the hand to (0.3, -0.25, -0.2) from its
      start and turned 0.4 rad about z at the last knot (position and rotation
      equalities), its linear velocity within :data:`TOOL_SPEED` per axis on every knot;
    - "joint_box" (ur10, 200 knots of 10 ms): untuned2's "orient" target, every joint in
      :data:`UR10_JOINT_BOX` about q0 (state bounds, five binding over the arc);
    - "on_plane" (kinova, 100 knots of 10 ms): the tool on its start's height on every
      knot (a path equality) to (-0.2, 0.25, 0) from its start;
    - "rk4" (z1, 250 knots of 4 ms, RK4): untuned2's z1 target with the torques within
      :data:`Z1_EFFORT_SCALE` of the URDF limits;
    - "mpc" (ur5, 15 knots of 25 ms): :data:`nlp.TARGET` at rest (terminal position and
      spatial velocity equalities) with the torques within :data:`MPC_EFFORT_SCALE` of the
      URDF limits;
    - "unreachable" (ur5, 50 knots): the tool at z >= 1.5 m at the last knot, above its
      reach: infeasible;
    - "degenerate" (panda, 100 knots): :func:`reaching`'s plane on knots 50..89 twice
      (duplicate rows), the terminal position equality, the same again as a Constraint
      of lower = upper on z, and z <= target (an inequality on an equality's row).

    ``knots``: another horizon of the same knot duration.
    """
    if task == "knees":
        return _solo_knees(knots or 40)
    if task == "trot":
        return _a1_trot(knots or 20)
    if task == "com_box":
        return _talos_com_box(knots or 30)
    if task == "tool_speed":
        robot = gp.robots.load("panda")
        model, frame = robot.model, "panda_hand_tcp"
        start_rotation, start = _tool_position(model, frame, robot.q0)
        c, s = np.cos(0.4), np.sin(0.4)
        turned = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ start_rotation
        speed = gp.ocp.Constraint(gp.ocp.FrameVelocityResidual(
            model, frame, reference_frame="LOCAL_WORLD_ALIGNED"),
            [-TOOL_SPEED] * 3 + [-np.inf] * 3, [TOOL_SPEED] * 3 + [np.inf] * 3)
        rotation = gp.ocp.Constraint(gp.ocp.FrameRotationResidual(model, frame, turned), 0.0,
                                     0.0)
        return _reach("panda", frame, start + np.array([0.3, -0.25, -0.2]), knots or 100, DT,
                      [speed], [rotation])
    if task == "joint_box":
        robot = gp.robots.load("ur10")
        _, start = _tool_position(robot.model, "tool0", robot.q0)
        nx = robot.model.nq + robot.model.nv
        lower, upper = np.full(nx, -np.inf), np.full(nx, np.inf)
        lower[:6], upper[:6] = robot.q0 + UR10_JOINT_BOX[0], robot.q0 + UR10_JOINT_BOX[1]
        return _reach("ur10", "tool0", start + np.asarray(UNTUNED2_OFFSETS["ur10"]),
                      knots or 200, DT, state_bounds=(lower, upper))
    if task == "on_plane":
        robot = gp.robots.load("kinova")
        model, frame = robot.model, UNTUNED2_TOOLS["kinova"]
        _, start = _tool_position(model, frame, robot.q0)
        plane = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(
            model, frame, [0, 0, start[2]], axes=[2]), 0.0, 0.0)
        return _reach("kinova", frame, start + np.array([-0.2, 0.25, 0.0]), knots or 100, DT,
                      [plane])
    if task == "rk4":
        robot = gp.robots.load("z1")
        model, frame = robot.model, UNTUNED2_TOOLS["z1"]
        _, start = _tool_position(model, frame, robot.q0)
        dynamics = gp.ocp.FreeDynamics(model)
        state, nu = dynamics.state, dynamics.nu
        x0 = np.concatenate([robot.q0, np.zeros(model.nv)])
        reach = gp.ocp.FrameTranslationResidual(model, frame,
                                                start + np.asarray(UNTUNED2_OFFSETS["z1"]))
        costs = [gp.ocp.Cost(reach), gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2),
                 gp.ocp.Cost(gp.ocp.ControlResidual(nu), weight=1e-4)]
        limit = Z1_EFFORT_SCALE * np.asarray(model.effort_limit, float)
        stage = gp.ocp.StageModel(dynamics, costs, dt=0.004, integrator="rk4",
                                  control_bounds=(-limit, limit))
        terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(reach, weight=1e3), costs[1]],
                                        [gp.ocp.Constraint(reach, 0.0, 0.0)])
        return gp.ocp.ShootingProblem(x0, [stage] * (knots or 250), terminal)
    if task == "mpc":
        model = gp.robots.load("ur5").model
        limit = MPC_EFFORT_SCALE * np.asarray(model.effort_limit, float)
        rest = gp.ocp.Constraint(gp.ocp.FrameVelocityResidual(
            model, "tool0", reference_frame="LOCAL_WORLD_ALIGNED"), 0.0, 0.0)
        return _reach("ur5", "tool0", nlp.TARGET, knots or 15, 0.025, terminal_rows=[rest],
                      control_bounds=(-limit, limit))
    if task == "unreachable":
        robot = gp.robots.load("ur5")
        _, start = _tool_position(robot.model, "tool0", robot.q0)
        high = gp.ocp.Constraint(gp.ocp.FrameTranslationResidual(
            robot.model, "tool0", [0, 0, 1.5], axes=[2]), 0.0, np.inf)
        return _reach("ur5", "tool0", start + np.array([0.1, 0.1, 0.1]), knots or 50, DT,
                      terminal_rows=[high])
    if task == "degenerate":
        model, frame = gp.robots.load("panda").model, "panda_hand_tcp"
        reach = gp.ocp.FrameTranslationResidual(model, frame, nlp.TARGET)
        plane = gp.ocp.FrameTranslationResidual(model, frame, [0, 0, PLANE_Z], axes=[2])
        twice = [gp.ocp.Constraint(plane, 0.0, np.inf), gp.ocp.Constraint(plane, 0.0, np.inf)]
        terminal = [gp.ocp.Constraint(reach, [-np.inf, -np.inf, 0.0], [np.inf, np.inf, 0.0]),
                    gp.ocp.Constraint(reach, -np.inf, 0.0)]
        knots = knots or 100
        free = _reach("panda", frame, nlp.TARGET, knots, DT, terminal_rows=terminal)
        plain = free.running_models[0]
        held = gp.ocp.StageModel(plain.dynamics, plain.costs, twice, dt=DT,
                                 integrator="semi_implicit_euler")
        first, last = knots // 2, int(0.9 * knots)
        return gp.ocp.ShootingProblem(free.x0, [held if first <= k < last else plain
                                                for k in range(knots)], free.terminal_model)
    raise ValueError(f"unknown task {task!r}: expected one of {sorted(UNTUNED4)}")


# mim_solvers' SolverCSQP's row label (ours is "CSQP")
MIM_CSQP = "CSQP (mim_solvers)"

# our constrained solvers, by row label: each is built on the task's ShootingProblem
# (default options) and timed from both starts (another solver: one more entry)
SOLVERS = {
    "ALDDP": gp.solvers.ALDDP,
    "ProxDDP": gp.solvers.ProxDDP,
    "CSQP": gp.solvers.CSQP,
}


def _best(solve, repeats):
    """(wall seconds, CPU seconds of this thread, result) of the fastest of ``repeats``."""
    best = None
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.thread_time()
        result = solve()
        cpu = time.thread_time() - cpu_start
        total = time.perf_counter() - start
        if best is None or cpu < best[1]:
            best = (total, cpu, result)
    return best


def devs_problem(robot, knots):
    """:mod:`.nlp`'s constrained task (its costs, its plane halfway between the
    unconstrained optimum's tool height at the middle knot and the target's)."""
    free = gp.solvers.FDDP(nlp.reaching(robot, knots)).solve(max_iter=200)
    plane_z = 0.5 * (nlp.tool_heights(robot, free.xs)[knots // 2, 2] + nlp.TARGET[2])
    return nlp.reaching(robot, knots, plane_z)


def csqp_payload(robot, task, knots, problem, starts, count_qp=True, max_iter=500,
                 options=None, threads=1):
    """What :data:`CSQP_SCRIPT` reads: the task, the starts (``starts`` and the cold
    one), a check point, CSQP's ``options`` (default :data:`CSQP_OPTIONS`), the
    ShootingProblem's thread count and whether to count the QP iterations."""
    loaded = gp.robots.load(robot)
    spec = dict(robot=robot, urdf=loaded.urdf_path, frame=nlp.FRAMES[robot],
                q0=[float(q) for q in loaded.q0], target=list(map(float, nlp.TARGET)), dt=DT,
                knots=knots, kind=task, plane_z=PLANE_Z, first=knots // 2,
                last=int(0.9 * knots) if task == "plane" else knots, infinity=np.inf,
                velocity_limit=VELOCITY_LIMIT[robot], wall_y=WALL_Y, wall_knots=WALL_KNOTS,
                torque_limit=TORQUE_LIMIT[robot], passive_knots=PASSIVE_KNOTS,
                weights=dict(reach=1.0, x_reg=1e-2, u_reg=1e-4, terminal_reach=1e3,
                             terminal_x_reg=1e-2))
    rng = np.random.default_rng(0)              # a point where every term is non-zero
    check_xs = [problem.x0 + 0.1 * rng.standard_normal(problem.x0.size)
                for _ in range(knots + 1)]
    check_us = [rng.standard_normal(problem.nu) for _ in range(knots)]
    cold_xs = np.tile(problem.x0, (knots + 1, 1))       # what the DDP solvers start from
    starts = dict(starts, cold=(cold_xs, problem.quasi_static(cold_xs)))
    return dict(task=spec, count_qp=count_qp, max_iter=max_iter, threads=threads,
                options=dict(CSQP_OPTIONS if options is None else options),
                check_xs=[x.tolist() for x in check_xs],
                check_us=[u.tolist() for u in check_us],
                starts={name: ([np.asarray(x).tolist() for x in xs],
                               [np.asarray(u).tolist() for u in us])
                        for name, (xs, us) in starts.items()})


def csqp_runs(robot, task, knots, problem, starts, count_qp=True, max_iter=500,
              options=None):
    """One solve of mim_solvers' SolverCSQP per start on the same problem, built in its
    environment: ``(output of CSQP_SCRIPT, None)`` or ``(None, reason)``."""
    payload = csqp_payload(robot, task, knots, problem, starts, count_qp, max_iter, options)
    theirs, reason = crocoddyl_env.run(CSQP_SCRIPT, payload, environment="mim_solvers")
    if theirs is None:
        return None, reason
    ours = float(problem.calc(payload["check_xs"], payload["check_us"]))
    difference = abs(ours - theirs["check_cost"]) / max(abs(ours), 1e-300)
    if difference > COST_AGREEMENT:
        return None, (f"the problems differ: cost {ours!r} here, {theirs['check_cost']!r} in "
                      f"Crocoddyl ({difference:.1e} relative > {COST_AGREEMENT:g})")
    theirs["cost_agreement"] = difference
    return theirs, None


def csqp_row(robot, task, problem, measure, start, rounds, theirs):
    """CSQP's row for ``start``: the first round's solution and QP count, the median
    CPU time over ``rounds`` (CSQP_SCRIPT outputs)."""
    run = rounds[0]["runs"][start]
    cpus = [r["runs"][start]["cpu"] for r in rounds]
    xs, us = np.array(run["xs"]), np.array(run["us"])
    return dict(solver=MIM_CSQP, start=start, total=np.nan,
                cpu=float(np.median(cpus)), cpu_rounds=cpus, robot=robot, task=task,
                iterations=run["iterations"], qp_iterations=run["qp_iterations"],
                cost=run["cost"], our_cost=float(problem.calc(xs, us)),
                violation=measure.max_violation(xs, us),
                gaps=float(np.max(np.abs(problem.gaps(xs)))) if problem.N else 0.0,
                status="converged" if run["converged"] else "not converged",
                per_iteration=float(np.median(cpus)) / max(run["iterations"], 1),
                kkt=run["kkt"], cost_agreement=theirs["cost_agreement"],
                threads=theirs["threads"], default_threads=theirs["default_threads"],
                versions=theirs["versions"])


def run(robot, task, knots, repeats, casadi, ipopt=True, csqp=True, csqp_max_iter=500,
        solvers=tuple(SOLVERS), ipopt_tol=1e-8):
    """The rows of one robot and task.  Our ``solvers`` (names of :data:`SOLVERS`) and
    CSQP run interleaved in ``repeats`` rounds (each round: ours from every start, then
    CSQP from every start in one subprocess); their rows give the median CPU time of
    the rounds and the round times (``cpu_rounds``)."""
    if task == "nlp":
        problem = devs_problem(robot, knots)
    elif task in UNTUNED2:
        problem = untuned2(task, knots)
    elif task in UNTUNED3:
        problem = untuned3(task)
    elif task in UNTUNED4:
        problem = untuned4(task)
    elif task in UNTUNED:
        problem = untuned(robot, knots, task)
    else:
        last = int(0.9 * knots) if task == "plane" else knots
        problem = reaching(robot, knots, PLANE_Z, knots // 2, last)
    fddp = gp.solvers.FDDP(problem)              # FDDP leaves the constraints out
    fddp.solve(max_iter=200)                                       # compile
    warm = fddp.solve(max_iter=200)
    rows = []
    measure = gp.solvers.ALDDP(problem)          # the violation of any trajectory
    starts = {"cold": (None, None), "fddp": (warm.xs, warm.us)}
    # per (solver, start): (wall, CPU, result) per round; FDDP runs in the same rounds as
    # ours and its row is taken the same way (the median round), so that the per-iteration
    # ratios compare like with like (its best of a separate block against our median read
    # 5-20 % high under load; bar25)
    ours = {("FDDP (no constraints)", "cold"): []}
    built = {"FDDP (no constraints)": fddp}
    for name in solvers:
        SOLVERS[name](problem).solve(max_iter=500)                 # compile
        ours.update({(name, start): [] for start in starts})
    built.update({name: SOLVERS[name](problem) for name in solvers})
    csqp = csqp and task in ("plane", "stiff") + UNTUNED       # mim_solvers: ur5 / panda
    theirs, reason = [], None
    for round_ in range(repeats):
        for (name, start), runs in ours.items():
            xs, us = starts[start]
            if name.startswith("FDDP"):
                runs.append(_best(lambda: fddp.solve(max_iter=200), 1))
            else:
                runs.append(_best(lambda: built[name].solve(xs, us, max_iter=500), 1))
        if csqp and reason is None:
            output, reason = csqp_runs(robot, task, knots, problem, {"fddp": starts["fddp"]},
                                       count_qp=round_ == 0, max_iter=csqp_max_iter)
            if output is not None:
                theirs.append(output)
    for (name, start), runs in ours.items():
        cpus = [cpu for _, cpu, _ in runs]
        middle = int(np.argsort(cpus)[len(cpus) // 2])
        total, cpu, result = runs[middle]
        rows.append(dict(solver=name, start=start, total=total, cpu=cpu, cpu_rounds=cpus,
                         result=result))
    modes = (["analytical"] if ipopt else []) + (["casadi"] if casadi else [])
    for mode in modes:
        nlp = NLP(problem, derivatives=mode, tol=ipopt_tol)
        nlp.solve(max_iter=3)                                      # compile, create IPOPT
        for start, (xs, us) in starts.items():
            total, cpu, result = _best(lambda: nlp.solve(xs, us, max_iter=500), 1)
            label = {"analytical": "IPOPT analytical (GN)", "casadi": "IPOPT CasADi (exact)"}
            rows.append(dict(solver=label[mode], start=start, total=total, cpu=cpu,
                             result=result))
    out = []
    for row in rows:
        result = row.pop("result")
        if row["solver"].startswith("FDDP"):
            violation = np.nan
        else:
            violation = measure.max_violation(result.xs, result.us)
        out.append(dict(row, robot=robot, task=task, iterations=result.iterations,
                        cost=result.cost, violation=violation, gaps=result.gaps,
                        status=result.status,
                        per_iteration=row["cpu"] / max(result.iterations, 1)))
    if csqp and reason is not None:
        print(f"CSQP ({robot} {task}): skipped ({reason})", flush=True)
    elif csqp:
        out += [csqp_row(robot, task, problem, measure, start, theirs, theirs[0])
                for start in theirs[0]["runs"]]
    return out


def csqp_comparison(rows):
    """ALDDP beside CSQP, per robot, task and start: the median of the per-round
    ALDDP / CSQP CPU-time ratios and their range."""
    lines = ["| robot | task | start | ALDDP iters | CSQP SQP iters | CSQP QP iters | "
             "ALDDP cost | CSQP cost | ALDDP violation | CSQP violation | CSQP status | "
             "ALDDP CPU ms | CSQP CPU ms | ALDDP / CSQP (range) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    index = {(r["robot"], r["task"], r["start"], r["solver"]): r for r in rows}
    comparison = []
    for (robot, task, start, solver), theirs in index.items():
        ours = index.get((robot, task, start, "ALDDP"))
        if solver != MIM_CSQP or ours is None:
            continue
        ratios = np.array(ours["cpu_rounds"]) / np.array(theirs["cpu_rounds"])
        ratio = float(np.median(ratios))
        comparison.append(dict(robot=robot, task=task, start=start, ratio=ratio,
                               ratio_min=float(ratios.min()), ratio_max=float(ratios.max())))
        lines.append(f"| {robot} | {task} | {start} | {ours['iterations']} | "
                     f"{theirs['iterations']} | {theirs['qp_iterations']} | "
                     f"{ours['cost']:.9g} | {theirs['cost']:.9g} | {ours['violation']:.1e} | "
                     f"{theirs['violation']:.1e} | {theirs['status']} | "
                     f"{1e3 * ours['cpu']:.1f} | {1e3 * theirs['cpu']:.1f} | "
                     f"{ratio:.3g} ({ratios.min():.3g}-{ratios.max():.3g}) |")
    return "\n".join(lines), comparison


def markdown(rows):
    lines = ["| robot | task | start | solver | iters | cost | violation | gaps | status | "
             "wall ms | CPU ms | CPU ms / iter |",
             "|---|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['robot']} | {r['task']} | {r['start']} | {r['solver']} | "
                     f"{r['iterations']} | {r['cost']:.9g} | {r['violation']:.1e} | "
                     f"{r['gaps']:.1e} | {r['status']} | {1e3 * r['total']:.1f} | "
                     f"{1e3 * r['cpu']:.1f} | {1e3 * r['per_iteration']:.2f} |")
    return "\n".join(lines)


def main():
    # One Numba thread, as the other benchmarks: with more, a constraint or cost left to
    # the per-term path runs its threaded kernel copy even on one knot (cq30: kinova
    # "pose" 8-12 ms a call under load, against ~10 us on one thread).
    _common.run_single_threaded("geppetto.benchmarks.constrained")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=["ur5", "panda"])
    parser.add_argument("--tasks", nargs="+", default=["plane", "stiff"],
                        choices=["plane", "stiff", "nlp"] + list(UNTUNED) + list(UNTUNED2) +
                        list(UNTUNED3) + list(UNTUNED4) + ["untuned2", "untuned3", "untuned4"],
                        help="untuned2 / untuned3 / untuned4: every task of UNTUNED2 / "
                        "UNTUNED3 / UNTUNED4, each on its own robot (--robots "
                        "does not apply to them)")
    parser.add_argument("--knots", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--casadi", action="store_true", help="also IPOPT with CasADi's exact "
                        "Hessian")
    parser.add_argument("--csqp", action=argparse.BooleanOptionalAction, default=True,
                        help="mim_solvers' SolverCSQP in its environment (default on)")
    parser.add_argument("--csqp-max-iter", type=int, default=500,
                        help="CSQP's SQP iteration limit (default %(default)s)")
    parser.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=list(SOLVERS),
                        help="our constrained solvers (default: all)")
    parser.add_argument("--no-ipopt", dest="ipopt", action="store_false",
                        help="leave IPOPT out")
    parser.add_argument("--ipopt-tol", type=float, default=1e-8,
                        help="IPOPT's tol (default %(default)s; at 1e-8 its cost on the "
                        "untuned2 tasks is 1e-6 to 8e-6 above the local optimum it reaches at "
                        "1e-11)")
    parser.add_argument("--out", default=RESULTS_DIR)
    args = parser.parse_args()
    info = machine()
    print(describe_machine(info))
    rows = []
    sets = {"untuned2": UNTUNED2, "untuned3": UNTUNED3, "untuned4": UNTUNED4}
    tasks = [t for name in args.tasks for t in sets.get(name, [name])]
    own = dict(UNTUNED2, **UNTUNED3, **UNTUNED4)        # task -> its robot
    runs = [(robot, task) for robot in args.robots for task in tasks if task not in own]
    runs += [(own[task], task) for task in dict.fromkeys(tasks) if task in own]
    for robot, task in runs:
        rows += run(robot, task, args.knots, args.repeats, args.casadi, args.ipopt,
                    args.csqp, args.csqp_max_iter, args.solvers, args.ipopt_tol)
        print(markdown([r for r in rows if r["robot"] == robot and r["task"] == task]),
              flush=True)
    info["load_average_end"] = os.getloadavg()
    table, comparison = csqp_comparison(rows)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "constrained.json"), "w") as f:
        json.dump(dict(machine=info, rows=rows, alddp_vs_csqp=comparison), f, indent=1,
                  default=float)
    with open(os.path.join(args.out, "constrained.md"), "w") as f:
        f.write(f"Machine: {describe_machine(info)}\n\n{markdown(rows)}\n")
        if comparison:
            f.write(f"\nALDDP beside mim_solvers' CSQP:\n\n{table}\n")
    print(markdown(rows))
    if comparison:
        print("\nALDDP beside mim_solvers' CSQP:\n" + table)
    print(f"load average at the end: {info['load_average_end']}")


if __name__ == "__main__":
    main()
