"""Problems built the same way in geppetto and in Crocoddyl 3.2, for the parity tier
(``tests/test_crocoddyl_parity.py``).

A problem is plain data (JSON, :func:`arm_task`, :func:`talos_task`,
:func:`trot_task`) from which each side builds its own: :func:`build` here with
``geppetto.ocp``, :data:`CROCODDYL_SCRIPT` in Crocoddyl's environment
(:mod:`geppetto.benchmarks.crocoddyl_env`) with ``pinocchio.buildModelFromUrdf``
on the URDF file our loader read.  The trot is Crocoddyl's own
``SimpleQuadrupedalGaitProblem.createTrottingProblem`` on its side and
``examples/solo12_trot.py`` on ours (``benchmarks/contacts.py`` compares them
the same way).

A task ``{"kind": "terms", ...}`` lists its terms: every running knot has the
``running`` costs (scaled by dt, as Crocoddyl's integrated models do), the
terminal knot the ``terminal`` ones; a cost is ``{"residual": {"kind": ...},
"activation": {"kind": "quad"} | {"kind": "weighted_quad", "weights": [...]} |
{"kind": "barrier", "lower": [...], "upper": [...]} (Crocoddyl's
``ActivationModelQuadraticBarrier``), "weight": w}``, a residual one of ``state``
(towards x0), ``control`` (towards 0), ``frame_placement``, ``frame_translation``,
``frame_rotation``, ``frame_velocity`` (LOCAL) and ``com``.  ``integrator``:
``"euler"`` means Crocoddyl's ``IntegratedActionModelEuler`` (symplectic: v' =
v + dt a, q' = q (+) dt v') and ``"rk2"``, ``"rk3"``, ``"rk4"`` its
``IntegratedActionModelRK(two | three | four)`` (Crocoddyl 3.2's RK3 ``Fx`` is off its own
central differences by ~4e-5 where RK2 and RK4 agree to 3e-9, ours agree: leave RK3 out
of comparisons of derivatives or iterates; and its free-dynamics running models leave the
centre of mass stale, so a ``com`` cost compares only on contact dynamics);
:data:`INTEGRATORS` names the geppetto scheme that has each meaning in this
branch.  ``contacts``: 6D contacts of the named frames (LOCAL, Baumgarte gains
Kp, Kd; ``"kind": "3d"``: point contacts) on a floating base, or None (on a floating
base: free fall, the base unactuated).

Everything on Crocoddyl's side runs in ONE subprocess per call of
:func:`crocoddyl_side`: for each task the cost and every ``calc_diff`` output
at the given points, and the solvers asked for, from the given guess.
"""
import numpy as np

import geppetto as gp
from geppetto.benchmarks import crocoddyl_env
from geppetto.benchmarks.contacts import CROCODDYL_TROTTING_PROBLEM
from geppetto.benchmarks.ocp import CROCODDYL_REACHING

# Crocoddyl's integrator -> geppetto's scheme with that meaning, in this branch
# (issue 13: "euler" becomes Crocoddyl's symplectic Euler; flip this then).
INTEGRATORS = {"euler": "euler", "rk2": "rk2", "rk3": "rk3", "rk4": "rk4"}
TH_STOP = 1e-9
MAX_ITER = 200
SUBPROCESS_TIMEOUT_S = 900


# -- tasks -------------------------------------------------------------------
def _quad():
    return {"kind": "quad"}


def _cost(residual, weight, activation=None):
    return dict(residual=residual, activation=activation or _quad(), weight=weight)


def _rotation(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def arm_task(name, robot, frame, target, knots=40, dt=0.02, integrator="euler",
             torque_limit=None, turn=None):
    """An arm reaching a placement (SE3) and stopping there: frame placement and
    LOCAL frame-velocity costs, state and control regularization.
    ``torque_limit``: a fraction of the largest quasi-static torque at q0 as
    symmetric control bounds (None: no bounds).  The target's orientation: the
    world rotation by 0.6 rad about (1, 0.5, 0.2), or with ``turn`` = angle the
    frame's orientation at q0 turned by that angle about the same axis (in the
    frame), for an arm whose wrist cannot reach the former."""
    loaded = gp.robots.load(robot)
    model = loaded.model
    q0 = np.asarray(loaded.q0, float)
    rotation = _rotation([1.0, 0.5, 0.2], 0.6)
    if turn is not None:
        data = model.create_data()
        gp.dynamics.forward_kinematics(model, data, q0)
        start = gp.dynamics.frame_placement(model, data, model.frame_id(frame))[0]
        rotation = start @ _rotation([1.0, 0.5, 0.2], turn)
    placement = dict(kind="frame_placement", frame=frame, rotation=rotation.tolist(),
                     translation=list(target))
    velocity = dict(kind="frame_velocity", frame=frame, reference=[0.0] * 6)
    state = dict(kind="state")
    task = dict(kind="terms", name=name, robot=robot, urdf=loaded.urdf_path, free_flyer=False,
                q0=q0.tolist(), knots=knots, dt=dt, integrator=integrator, contacts=None,
                running=[_cost(placement, 1.0), _cost(velocity, 1e-2), _cost(state, 1e-2),
                         _cost(dict(kind="control"), 1e-4)],
                terminal=[_cost(placement, 1e3), _cost(velocity, 1e1), _cost(state, 1e-2)],
                control_bounds=None)
    if torque_limit is not None:
        data = model.create_data()
        gravity = gp.dynamics.rnea(model, data, q0, np.zeros(model.nv), np.zeros(model.nv))
        limit = torque_limit * float(np.max(np.abs(gravity)))
        task["control_bounds"] = [[-limit] * model.nv, [limit] * model.nv]
    return task


def reach_task(name, robot, frame, target, knots=40, dt=0.02, integrator="euler",
               keep_orientation=False, position_band=None):
    """An arm (or any fixed-base chain) taking a frame's origin to ``target`` (frame
    translation cost, running and terminal), with the state regularized by a weighted
    quadratic (positions 1e-2, velocities 1) and the controls by a quadratic.
    ``keep_orientation``: also a frame rotation cost towards the frame's orientation
    at q0.  ``position_band``: a quadratic barrier on the state residual keeping every
    joint position within +-band of q0 (velocities within +-10 rad/s)."""
    loaded = gp.robots.load(robot)
    model = loaded.model
    q0 = np.asarray(loaded.q0, float)
    nv = model.nv
    translation = dict(kind="frame_translation", frame=frame, target=list(target))
    x_reg = _cost(dict(kind="state"), 1.0, dict(
        kind="weighted_quad", weights=np.r_[np.full(nv, 1e-2), np.ones(nv)].tolist()))
    running = [_cost(translation, 1.0), x_reg, _cost(dict(kind="control"), 1e-4)]
    terminal = [_cost(translation, 1e3), dict(x_reg, weight=10.0)]
    if keep_orientation:
        data = model.create_data()
        gp.dynamics.forward_kinematics(model, data, q0)
        start = gp.dynamics.frame_placement(model, data, model.frame_id(frame))[0]
        rotation = dict(kind="frame_rotation", frame=frame, rotation=start.tolist())
        running.append(_cost(rotation, 1e-1))
        terminal.append(_cost(rotation, 1e2))
    if position_band is not None:
        band = np.r_[np.full(nv, position_band), np.full(nv, 10.0)]
        barrier = dict(kind="barrier", lower=(-band).tolist(), upper=band.tolist())
        running.append(_cost(dict(kind="state"), 1e2, barrier))
        terminal.append(_cost(dict(kind="state"), 1e2, barrier))
    return dict(kind="terms", name=name, robot=robot, urdf=loaded.urdf_path, free_flyer=False,
                q0=q0.tolist(), knots=knots, dt=dt, integrator=integrator, contacts=None,
                running=running, terminal=terminal, control_bounds=None)


def talos_task(knots=20, dt=0.03, robot="talos", name="talos_6d"):
    """talos on both soles (6D contacts, LOCAL, Baumgarte Kd = 50) shifting its
    centre of mass sideways and down (``robot``: "talos" or "talos_full", whose arms,
    torso and head are actuated too)."""
    loaded = gp.robots.load(robot)
    model = loaded.model
    q0 = np.asarray(loaded.q0, float)
    com0 = gp.dynamics.center_of_mass(model, model.create_data(), q0)
    nv = model.nv
    weights = np.r_[np.zeros(3), np.full(3, 500.0), np.full(nv - 6, 0.01), np.full(6, 10.0),
                    np.ones(nv - 6)]
    x_reg = _cost(dict(kind="state"), 1.0, dict(kind="weighted_quad", weights=weights.tolist()))
    com = dict(kind="com", target=(com0 + [0.0, 0.05, -0.05]).tolist())
    return dict(kind="terms", name=name, robot=robot, urdf=loaded.urdf_path,
                free_flyer=True, q0=q0.tolist(), knots=knots, dt=dt, integrator="euler",
                contacts=dict(frames=["left_sole_link", "right_sole_link"], Kp=0.0, Kd=50.0),
                running=[_cost(com, 1e3), x_reg, _cost(dict(kind="control"), 1e-3)],
                terminal=[_cost(com, 1e4), dict(x_reg, weight=100.0)],
                control_bounds=None)


def _terms(name, robot, running, terminal, knots, dt, integrator="euler", free_flyer=False,
           contacts=None, control_bounds=None):
    """A ``{"kind": "terms"}`` task (see the module's docstring)."""
    loaded = gp.robots.load(robot)
    return dict(kind="terms", name=name, robot=robot, urdf=loaded.urdf_path,
                free_flyer=free_flyer, q0=np.asarray(loaded.q0, float).tolist(), knots=knots,
                dt=dt, integrator=integrator, contacts=contacts, running=running,
                terminal=terminal, control_bounds=control_bounds)


def _placements(robot, q0, frames):
    """{frame: (rotation, translation)} of ``frames`` at ``q0``."""
    model = gp.robots.load(robot).model
    data = model.create_data()
    gp.dynamics.forward_kinematics(model, data, np.asarray(q0, float))
    return {frame: gp.dynamics.frame_placement(model, data, model.frame_id(frame))
            for frame in frames}


def velocity_task(name, robot, frame, twist, knots=30, dt=0.02, integrator="euler",
                  turn=0.3, position_band=None):
    """An arm's frame following a constant twist (LOCAL frame-velocity cost on every
    running knot) and ending turned by ``turn`` rad about (1, 0.5, 0.2) in the frame
    (frame rotation cost, terminal), the controls regularized by a weighted quadratic
    (weights 1e-3 at the base joint falling by half per joint towards the tip) and the
    state by a quadratic.  ``position_band``: a quadratic barrier on the state keeping
    every joint within +-band of q0 (velocities within +-10 rad/s)."""
    loaded = gp.robots.load(robot)
    nv = loaded.model.nv
    rotation = _placements(robot, loaded.q0, [frame])[frame][0] @ _rotation([1.0, 0.5, 0.2],
                                                                            turn)
    velocity = dict(kind="frame_velocity", frame=frame, reference=list(twist))
    u_reg = _cost(dict(kind="control"), 1.0, dict(
        kind="weighted_quad", weights=(1e-3 * 0.5 ** np.arange(nv)).tolist()))
    x_reg = _cost(dict(kind="state"), 1e-2)
    rotation = _cost(dict(kind="frame_rotation", frame=frame, rotation=rotation.tolist()), 1e2)
    running = [_cost(velocity, 1.0), u_reg, x_reg]
    terminal = [rotation, _cost(velocity, 10.0), dict(x_reg, weight=1.0)]
    if position_band is not None:
        band = np.r_[np.full(nv, position_band), np.full(nv, 10.0)]
        barrier = dict(kind="barrier", lower=(-band).tolist(), upper=band.tolist())
        running.append(_cost(dict(kind="state"), 1e2, barrier))
    return _terms(name, robot, running, terminal, knots, dt, integrator)


def floating_task(name, robot, frame, turn=0.3, knots=30, dt=0.02):
    """A free-flyer without contacts in free fall (unactuated base, no ground), turning
    ``frame`` (its base) by ``turn`` rad about (1, 0.5, 0.2) with its joints alone: frame
    rotation cost (running and terminal), the joints' positions and velocities and the
    base's velocity regularized (the base's pose free), the controls by a quadratic."""
    loaded = gp.robots.load(robot)
    nv = loaded.model.nv
    rotation = _placements(robot, loaded.q0, [frame])[frame][0] @ _rotation([1.0, 0.5, 0.2],
                                                                            turn)
    weights = np.r_[np.zeros(6), np.ones(nv - 6), np.full(6, 1e-2), np.full(nv - 6, 1e-1)]
    x_reg = _cost(dict(kind="state"), 1e-1, dict(kind="weighted_quad", weights=weights.tolist()))
    rotation = dict(kind="frame_rotation", frame=frame, rotation=rotation.tolist())
    return _terms(name, robot, [_cost(rotation, 1.0), x_reg, _cost(dict(kind="control"), 1e-3)],
                  [_cost(rotation, 1e3), dict(x_reg, weight=10.0)], knots, dt,
                  free_flyer=True)


def stance_task(name, robot, lifted=None, knots=25, dt=0.02, com_shift=(0.02, 0.02, -0.02),
                torque_limit=None):
    """A legged robot (a quadruped, bolt) standing on its feet's 3D point contacts (LOCAL,
    Baumgarte Kd = 50) moving its centre of mass by ``com_shift``; ``lifted``: the foot (an
    index of its contact frames) left free and raised 5 cm (frame translation cost), the
    others in contact. The state regularized towards x0 (base pose 10, joints 1, velocities
    1e-1 weighted), the controls by a quadratic. ``torque_limit``: symmetric control bounds,
    that fraction of the largest quasi-static torque at q0 standing on every foot."""
    loaded = gp.robots.load(robot)
    model = loaded.model
    q0 = np.asarray(loaded.q0, float)
    nv = model.nv
    feet = [frame for frame, _ in loaded.contact_frames]
    support = [foot for index, foot in enumerate(feet) if index != lifted]
    com0 = gp.dynamics.center_of_mass(model, model.create_data(), q0)
    com = dict(kind="com", target=(com0 + np.asarray(com_shift)).tolist())
    weights = np.r_[np.full(6, 10.0), np.ones(nv - 6), np.full(nv, 1e-1)]
    x_reg = _cost(dict(kind="state"), 1.0, dict(kind="weighted_quad", weights=weights.tolist()))
    running = [_cost(com, 1e2), x_reg, _cost(dict(kind="control"), 1e-3)]
    terminal = [_cost(com, 1e3), dict(x_reg, weight=10.0)]
    if lifted is not None:
        foot = feet[lifted]
        raised = _placements(robot, q0, [foot])[foot][1] + [0.0, 0.0, 0.05]
        translation = dict(kind="frame_translation", frame=foot, target=raised.tolist())
        running.append(_cost(translation, 1e2))
        terminal.append(_cost(translation, 1e4))
    bounds = None
    if torque_limit is not None:
        dynamics = gp.ocp.ContactDynamics(model, [
            gp.dynamics.contact_3d(model, foot, reference=gp.dynamics.LOCAL) for foot in feet])
        problem = gp.ocp.ShootingProblem(np.r_[q0, np.zeros(nv)], [
            gp.ocp.StageModel(dynamics, [], dt=dt)], gp.ocp.TerminalModel(dynamics.state, []))
        limit = torque_limit * float(np.max(np.abs(problem.quasi_static(
            np.repeat(problem.x0[None], 2, axis=0)))))
        bounds = [[-limit] * (nv - 6), [limit] * (nv - 6)]
    return _terms(name, robot, running, terminal, knots, dt, free_flyer=True,
                  contacts=dict(frames=support, kind="3d", Kp=0.0, Kd=50.0),
                  control_bounds=bounds)


def one_foot_task(name="talos_one_foot", robot="talos", knots=20, dt=0.03):
    """talos on its left sole alone (6D contact, LOCAL, Baumgarte Kd = 50), its centre of
    mass brought over that sole's origin (xy, 2 cm lower) and its right sole raised 3 cm
    (frame placement cost, the sole's orientation kept); the state regularized as in
    :func:`talos_task`."""
    loaded = gp.robots.load(robot)
    model = loaded.model
    q0 = np.asarray(loaded.q0, float)
    nv = model.nv
    soles = _placements(robot, q0, ["left_sole_link", "right_sole_link"])
    com0 = gp.dynamics.center_of_mass(model, model.create_data(), q0)
    com_target = np.r_[soles["left_sole_link"][1][:2], com0[2] - 0.02]
    rotation, translation = soles["right_sole_link"]
    raised = dict(kind="frame_placement", frame="right_sole_link", rotation=rotation.tolist(),
                  translation=(translation + [0.0, 0.0, 0.03]).tolist())
    weights = np.r_[np.zeros(3), np.full(3, 500.0), np.full(nv - 6, 0.01), np.full(6, 10.0),
                    np.ones(nv - 6)]
    x_reg = _cost(dict(kind="state"), 1.0, dict(kind="weighted_quad", weights=weights.tolist()))
    com = dict(kind="com", target=com_target.tolist())
    return _terms(name, robot, [_cost(com, 1e3), _cost(raised, 1e2), x_reg,
                                _cost(dict(kind="control"), 1e-3)],
                  [_cost(com, 1e4), _cost(raised, 1e4), dict(x_reg, weight=100.0)],
                  knots, dt, free_flyer=True,
                  contacts=dict(frames=["left_sole_link"], Kp=0.0, Kd=50.0))


def trot_task(step_knots=10, support_knots=2, dt=0.02):
    """solo12 trot, two diagonal steps with touchdown impulses (Crocoddyl's
    ``createTrottingProblem``; ``examples/solo12_trot.py`` on our side)."""
    from geppetto.examples import solo12_trot
    loaded = gp.robots.load("solo12")
    return dict(kind="trot", name="solo12_trot", robot="solo12", urdf=loaded.urdf_path,
                free_flyer=True, q0=np.asarray(loaded.q0, float).tolist(),
                step_length=solo12_trot.STEP_LENGTH, step_height=solo12_trot.STEP_HEIGHT,
                dt=dt, step_knots=step_knots, support_knots=support_knots)


def walk_task(robot="hyq", step_knots=20, support_knots=2, dt=0.01):
    """A quadruped's walk, one foot at a time (right hind, right front, four-feet support,
    left hind, left front), each step ending with its touchdown impulse (Crocoddyl's
    ``createWalkingProblem``; ``examples/solo12_trot.py`` ``walking_problem`` on our
    side): 2 support_knots + 4 (step_knots + 1) running knots."""
    from geppetto.examples import solo12_trot
    loaded = gp.robots.load(robot)
    feet = [frame for frame, _ in loaded.contact_frames]
    return dict(kind="walk", name=f"{robot}_walk", robot=robot, urdf=loaded.urdf_path,
                free_flyer=True, q0=np.asarray(loaded.q0, float).tolist(), feet=feet,
                step_length=solo12_trot.STEP_LENGTH, step_height=solo12_trot.STEP_HEIGHT,
                dt=dt, step_knots=step_knots, support_knots=support_knots)


# -- geppetto's side -------------------------------------------------------------
def _residual(model, state, nu, spec, x0):
    kind = spec["kind"]
    if kind == "state":
        return gp.ocp.StateResidual(state, x0)
    if kind == "control":
        return gp.ocp.ControlResidual(nu)
    if kind == "frame_placement":
        return gp.ocp.FramePlacementResidual(model, spec["frame"], spec["rotation"],
                                             spec["translation"])
    if kind == "frame_translation":
        return gp.ocp.FrameTranslationResidual(model, spec["frame"], spec["target"])
    if kind == "frame_rotation":
        return gp.ocp.FrameRotationResidual(model, spec["frame"], spec["rotation"])
    if kind == "frame_velocity":
        return gp.ocp.FrameVelocityResidual(model, spec["frame"], spec["reference"],
                                            gp.dynamics.LOCAL)
    if kind == "com":
        return gp.ocp.CenterOfMassResidual(model, spec["target"])
    raise ValueError(f"unknown residual kind {kind!r}")


def _costs(model, state, nu, specs, x0):
    out = []
    for spec in specs:
        activation = None
        if spec["activation"]["kind"] == "weighted_quad":
            activation = gp.ocp.WeightedQuadratic(np.array(spec["activation"]["weights"]))
        elif spec["activation"]["kind"] == "barrier":
            activation = gp.ocp.QuadraticBarrier(np.array(spec["activation"]["lower"]),
                                                 np.array(spec["activation"]["upper"]))
        out.append(gp.ocp.Cost(_residual(model, state, nu, spec["residual"], x0), activation,
                               weight=spec["weight"]))
    return out


def build(task):
    """Our ShootingProblem for ``task``."""
    model = gp.robots.load(task["robot"]).model
    x0 = np.r_[task["q0"], np.zeros(model.nv)]
    if task["kind"] == "trot":
        from geppetto.examples import solo12_trot
        return solo12_trot.trotting_problem(model, x0, 2, task["step_knots"],
                                            task["support_knots"], task["dt"])
    if task["kind"] == "walk":
        from geppetto.examples import solo12_trot
        return solo12_trot.walking_problem(model, x0, task["feet"], task["step_knots"],
                                           task["support_knots"], task["dt"])
    if task["contacts"]:
        contacts = task["contacts"]
        contact = (gp.dynamics.contact_3d if contacts.get("kind", "6d") == "3d" else
                   gp.dynamics.contact_6d)
        dynamics = gp.ocp.ContactDynamics(model, [
            contact(model, frame, reference=gp.dynamics.LOCAL, Kp=contacts["Kp"],
                    Kd=contacts["Kd"])
            for frame in contacts["frames"]])
    elif task["free_flyer"]:            # no contacts: a floating base in free fall
        dynamics = gp.ocp.FreeDynamics(model, gp.ocp.Actuation.floating_base(model))
    else:
        dynamics = gp.ocp.FreeDynamics(model)
    state, nu = dynamics.state, dynamics.nu
    bounds = task["control_bounds"]
    running = gp.ocp.StageModel(dynamics, _costs(model, state, nu, task["running"], x0),
                                dt=task["dt"], integrator=INTEGRATORS[task["integrator"]],
                                control_bounds=None if bounds is None else
                                (np.array(bounds[0]), np.array(bounds[1])))
    terminal = gp.ocp.TerminalModel(state, _costs(model, state, nu, task["terminal"], x0))
    return gp.ocp.ShootingProblem(x0, [running] * task["knots"], terminal)


def impulse_knots(problem):
    """Indices of the running knots whose dynamics is an impact."""
    return [k for model, start, stop, _ in problem.phases
            if isinstance(model.dynamics, gp.ocp.ImpulseDynamics) for k in range(start, stop)]


def random_point(problem, seed):
    """A seeded random (xs, us): configurations moved by 0.2 rad (on the manifold),
    standard normal velocities, quasi-static controls plus standard normal offsets
    (zero at impulse knots, whose controls Crocoddyl does not have)."""
    rng = np.random.default_rng(seed)
    state, N = problem.state, problem.N
    model = state.model
    xs = np.repeat(problem.x0[None], N + 1, axis=0)
    xs[:, :state.nq] = gp.dynamics.integrate(model, xs[:, :state.nq],
                                             0.2 * rng.standard_normal((N + 1, state.nv)))
    xs[:, state.nq:] = rng.standard_normal((N + 1, state.nv))
    us = problem.quasi_static(xs) + rng.standard_normal((N, problem.nu))
    us[impulse_knots(problem)] = 0.0
    return xs, us


def initial_guess(problem, infeasible_seed=None):
    """x0 repeated and the quasi-static controls (zero at impulse knots).
    ``infeasible_seed``: a seed to move xs[1:] off the rollout (configurations by
    0.05 rad on the manifold, velocities by 0.1 standard normal), the controls
    quasi-static at those states: a guess with gaps at every knot."""
    xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
    if infeasible_seed is not None:
        rng = np.random.default_rng(infeasible_seed)
        state, N = problem.state, problem.N
        xs[1:, :state.nq] = gp.dynamics.integrate(state.model, xs[1:, :state.nq],
                                                  0.05 * rng.standard_normal((N, state.nv)))
        xs[1:, state.nq:] = 0.1 * rng.standard_normal((N, state.nv))
    us = problem.quasi_static(xs)
    us[impulse_knots(problem)] = 0.0
    return xs, us


def crocoddyl_controls(problem, us):
    """``us`` as Crocoddyl's list: no controls at impulse knots."""
    impulses = set(impulse_knots(problem))
    return [[] if k in impulses else np.asarray(u).tolist() for k, u in enumerate(us)]


# -- Crocoddyl's side ------------------------------------------------------------
CROCODDYL_SCRIPT = CROCODDYL_REACHING + CROCODDYL_TROTTING_PROBLEM + '''
import json, sys


def residual(state, model, spec, x0, nu):
    kind = spec["kind"]
    if kind == "state":
        return crocoddyl.ResidualModelState(state, x0, nu)
    if kind == "control":
        return crocoddyl.ResidualModelControl(state, nu)
    frame = model.getFrameId(spec.get("frame", "universe"))
    if kind == "frame_placement":
        placement = pinocchio.SE3(np.array(spec["rotation"]), np.array(spec["translation"]))
        return crocoddyl.ResidualModelFramePlacement(state, frame, placement, nu)
    if kind == "frame_translation":
        return crocoddyl.ResidualModelFrameTranslation(state, frame, np.array(spec["target"]),
                                                       nu)
    if kind == "frame_rotation":
        return crocoddyl.ResidualModelFrameRotation(state, frame, np.array(spec["rotation"]),
                                                    nu)
    if kind == "frame_velocity":
        return crocoddyl.ResidualModelFrameVelocity(
            state, frame, pinocchio.Motion(np.array(spec["reference"])),
            pinocchio.ReferenceFrame.LOCAL, nu)
    if kind == "com":
        return crocoddyl.ResidualModelCoMPosition(state, np.array(spec["target"]), nu)
    raise ValueError(kind)


def cost_sum(state, model, specs, x0, nu):
    costs = crocoddyl.CostModelSum(state, nu)
    for index, spec in enumerate(specs):
        r = residual(state, model, spec["residual"], x0, nu)
        if spec["activation"]["kind"] == "weighted_quad":
            activation = crocoddyl.ActivationModelWeightedQuad(
                np.array(spec["activation"]["weights"]))
        elif spec["activation"]["kind"] == "barrier":
            activation = crocoddyl.ActivationModelQuadraticBarrier(crocoddyl.ActivationBounds(
                np.array(spec["activation"]["lower"]), np.array(spec["activation"]["upper"])))
        else:
            activation = crocoddyl.ActivationModelQuad(r.nr)
        costs.addCost(f"{index}_{spec['residual']['kind']}",
                      crocoddyl.CostModelResidual(state, activation, r), spec["weight"])
    return costs


def terms_problem(task):
    if task["free_flyer"]:
        model = pinocchio.buildModelFromUrdf(task["urdf"], pinocchio.JointModelFreeFlyer())
    else:
        model = pinocchio.buildModelFromUrdf(task["urdf"])
    state = crocoddyl.StateMultibody(model)
    if task["free_flyer"]:
        actuation = crocoddyl.ActuationModelFloatingBase(state)
    else:
        actuation = crocoddyl.ActuationModelFull(state)
    nu = actuation.nu
    x0 = np.concatenate([task["q0"], np.zeros(model.nv)])

    def differential(specs):
        costs = cost_sum(state, model, specs, x0, nu)
        if not task["contacts"]:
            return crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
        contacts = crocoddyl.ContactModelMultiple(state, nu)
        data = model.createData()
        pinocchio.framesForwardKinematics(model, data, np.array(task["q0"]))
        gains = np.array([task["contacts"]["Kp"], task["contacts"]["Kd"]])
        for name in task["contacts"]["frames"]:
            frame = model.getFrameId(name)
            if task["contacts"].get("kind", "6d") == "3d":
                contact = crocoddyl.ContactModel3D(state, frame, data.oMf[frame].translation,
                                                   pinocchio.ReferenceFrame.LOCAL, nu, gains)
            else:
                contact = crocoddyl.ContactModel6D(state, frame, data.oMf[frame],
                                                   pinocchio.ReferenceFrame.LOCAL, nu, gains)
            contacts.addContact(name, contact)
        return crocoddyl.DifferentialActionModelContactFwdDynamics(state, actuation, contacts,
                                                                   costs, 0.0, True)

    def integrated(dam, dt):
        if task["integrator"] in ("rk2", "rk3", "rk4"):
            order = dict(rk2=crocoddyl.RKType.two, rk3=crocoddyl.RKType.three,
                         rk4=crocoddyl.RKType.four)[task["integrator"]]
            return crocoddyl.IntegratedActionModelRK(dam, order, dt)
        return crocoddyl.IntegratedActionModelEuler(dam, dt)

    running_dam = differential(task["running"])
    running = integrated(running_dam, task["dt"])
    if task["control_bounds"] is not None:
        lower, upper = (np.array(b) for b in task["control_bounds"])
        running_dam.u_lb, running_dam.u_ub = lower, upper
        running.u_lb, running.u_ub = lower, upper
    terminal = integrated(differential(task["terminal"]), 0.0)
    return crocoddyl.ShootingProblem(x0, [running] * task["knots"], terminal)


def walking_problem(task):
    """SimpleQuadrupedalGaitProblem.createWalkingProblem for task."""
    model = pinocchio.buildModelFromUrdf(task["urdf"], pinocchio.JointModelFreeFlyer())
    model.referenceConfigurations["standing"] = np.array(task["q0"])
    x0 = np.concatenate([np.array(task["q0"]), np.zeros(model.nv)])
    gait = SimpleQuadrupedalGaitProblem(model, *task["feet"])
    return gait.createWalkingProblem(x0, task["step_length"], task["step_height"], task["dt"],
                                     task["step_knots"], task["support_knots"])


def make_problem(task):
    if task["kind"] == "trot":
        return trotting_problem(task)[0]
    if task["kind"] == "walk":
        return walking_problem(task)
    return terms_problem(task)


def derivatives(problem):
    out = {name: [np.asarray(getattr(d, name)).tolist() for d in problem.runningDatas]
           for name in ("Fx", "Fu", "Lx", "Lu", "Lxx", "Luu", "Lxu")}
    out["costs"] = [float(d.cost) for d in problem.runningDatas]
    out["terminal_Lx"] = np.asarray(problem.terminalData.Lx).tolist()
    out["terminal_Lxx"] = np.asarray(problem.terminalData.Lxx).tolist()
    return out


SOLVERS = dict(FDDP=crocoddyl.SolverFDDP, DDP=crocoddyl.SolverDDP,
               BoxFDDP=crocoddyl.SolverBoxFDDP)


def solve(problem, name, xs, us, payload):
    solver = SOLVERS[name](problem)
    solver.th_stop = payload["th_stop"]
    logger = crocoddyl.CallbackLogger()
    solver.setCallbacks([logger])
    feasible = name == "DDP"            # DDP starts from the rollout of its controls
    if feasible:
        xs = list(problem.rollout(us))
    converged = solver.solve(xs, us, payload["max_iter"], feasible)
    return dict(converged=bool(converged), cost=float(solver.cost), stop=float(solver.stop),
                iterations=len(logger.costs), costs=[float(c) for c in logger.costs])


payload = json.load(sys.stdin)
result = dict(versions=versions(), tasks={})
for task in payload["tasks"]:
    problem = make_problem(task)
    row = dict(knots=problem.T, nu=[int(m.nu) for m in problem.runningModels],
               points=[])
    for point in task["points"]:
        xs, us = stdvec(point["xs"]), stdvec(point["us"])
        cost = problem.calc(xs, us)
        problem.calcDiff(xs, us)
        row["points"].append(dict(cost=float(cost), **derivatives(problem)))
    guess_xs, guess_us = stdvec(task["guess"]["xs"]), stdvec(task["guess"]["us"])
    row["guess_cost"] = float(problem.calc(guess_xs, guess_us))
    row["solvers"] = {name: solve(problem, name, guess_xs, guess_us, payload)
                      for name in task["solvers"]}
    result["tasks"][task["name"]] = row
print(json.dumps(result))
'''


def crocoddyl_side(tasks, points, guesses):
    """Run :data:`CROCODDYL_SCRIPT` once on every task; ``points[name]`` is a
    list of (xs, us), ``guesses[name]`` the (xs, us) the solvers start from, in
    Crocoddyl's layout (:func:`crocoddyl_controls`).  Returns (result, None) or
    (None, reason)."""
    payload = dict(th_stop=TH_STOP, max_iter=MAX_ITER, tasks=[
        dict(task, points=[dict(xs=np.asarray(xs).tolist(), us=us) for xs, us in
                           points[task["name"]]],
             guess=dict(xs=np.asarray(guesses[task["name"]][0]).tolist(),
                        us=guesses[task["name"]][1]))
        for task in tasks])
    return crocoddyl_env.run(CROCODDYL_SCRIPT, payload, timeout=SUBPROCESS_TIMEOUT_S)
