"""Model predictive control: a receding-horizon FDDP loop and a simulator to close it.

- :class:`MPC`: at each control step it sets the problem's x0 to the measured
  state, shifts the previous solution by one knot as the warm start, updates
  the references (a user hook), runs at most ``max_iter`` iterations of FDDP
  (or BoxFDDP) within a time budget, and returns the first control, or the
  feedback policy u = u0 - K (x (-) x0) when asked (Crocoddyl's sign: the
  solvers' gains apply as u - K dx).  Knots may have different numbers of
  controls (padded ``us``, see :class:`~geppetto.ocp.ShootingProblem`): the
  shifted warm start moves each knot's row one knot earlier, the solver's
  validation zeroes the padding, and the returned control has the first
  knot's ``nus[0]`` entries.
- :class:`Simulator`: the "true" plant: the multibody integrated with RK4 at
  a finer step than the controller (one jitted kernel per control step), with
  an optional model mismatch (another Model, e.g. a payload) and external
  pushes (a force on a body for a time window).  With ``constraints=`` (rigid
  contacts, e.g. the feet of a standing robot) the plant integrates the
  constrained dynamics instead (ddq from ``constraint_dynamics``, stabilized
  by the constraints' own Baumgarte gains), the pushes entering as the
  generalized force -J^T f of the pushed bodies.
- :func:`run_mpc`: the closed loop, logging states, controls, solve times and
  iteration counts, with a progress line for long runs.
"""
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..dynamics.config import kernel
from ..ocp.dynamics import Actuation
from ..dynamics.constrained_dynamics import (_constraint_dynamics_state, _settings,
                                             constrained_workspace)
from ..dynamics.constraints import as_constraint_set
from ..dynamics.validation import as_real, as_vector, check_joint, check_model
from ..ocp.problem import ShootingProblem
from ..ocp.step import SCHEME_CODES, _state_integrate, free_step, step_workspace
from ..ocp.trial import trial_control
from .ddp import DDP, FDDP, SolverResult
from .options import check_solve_arguments


class MPC:
    """Receding-horizon controller on ``problem`` (its x0 is overwritten each step).
    ``xs``, ``us`` hold the last solution until the next step (a DDP-family solver's
    own arrays, not copies), ``cost`` and ``iterations`` its cost and iteration count,
    ``last`` the last solve's :class:`~.ddp.SolverResult`.

    With a DDP-family solver a step allocates no arrays: the shifted warm start is
    written into the solver's free trial buffers, the iterations run by
    :meth:`~.ddp.DDP.iterate` (no per-iteration records, no result), and ``last`` is
    built only when read (its ``history`` then empty; the solver's ``split`` holds the
    last iteration's seconds).  Other solvers (ALDDP) run their ``solve``.

    Parameters
    ----------
    problem : ShootingProblem (the horizon).
    solver : a solver class (FDDP, BoxFDDP, DDP) or instance.
    max_iter : iterations per control step (1 for real-time iteration schemes).
    time_budget : seconds per control step (the solver stops after the
        iteration that exceeds it), or None.
    use_feedback : return the policy u0 - K0 (x (-) x0) instead of u0 alone.
    update_references : callable(problem, t) called before each solve to move
        targets (see :meth:`ShootingProblem.set_reference`).
    """

    def __init__(self, problem, solver=FDDP, max_iter=1, time_budget=None, use_feedback=False,
                 update_references=None):
        if not isinstance(problem, ShootingProblem):
            raise ValueError(f"problem: expected a ShootingProblem, got {type(problem).__name__}")
        self.problem = problem
        self.solver = solver(problem) if isinstance(solver, type) else solver
        if getattr(self.solver, "problem", None) is not problem:
            raise ValueError("solver: expected a solver class or a solver built on this "
                             f"problem, got {self.solver!r}")
        if update_references is not None and not callable(update_references):
            raise ValueError("update_references: expected a callable(problem, t), got "
                             f"{update_references!r}")
        self.max_iter, self.time_budget = check_solve_arguments(max_iter, time_budget)
        self.use_feedback = use_feedback
        self.update_references = update_references
        self.xs = None
        self.us = None
        self.cost, self.iterations = np.nan, 0
        self._last = None
        self._outcome = None          # the lean path's (xs, us, cost, iterations, ...)
        self._lean = isinstance(self.solver, DDP)
        # the padding of knots with fewer controls, zeroed after the shift moved it
        self._padding = np.arange(problem.nu)[None, :] >= problem.nus[:, None]
        self._has_padding = bool(self._padding.any())
        self._x = np.empty((1, problem.nx))
        if not self._lean:
            # the shifted warm start, built in place each step
            self._xs = np.empty((problem.N + 1, problem.nx))
            self._us = np.empty((problem.N, problem.nu))

    @property
    def last(self):
        """The last step's :class:`~.ddp.SolverResult` (its arrays the solver's own).  On
        the lean path it is built at the first read after a step, its ``gaps`` from the
        problem's predicted states: read it before evaluating the problem again."""
        if self._last is None and self._outcome is not None:
            xs, us, cost, iterations, converged, status, stop = self._outcome
            solver = self.solver
            self._last = SolverResult(xs=xs, us=us, K=solver.K, k=solver.k, cost=float(cost),
                                      iterations=iterations, converged=converged,
                                      status=status, gaps=solver.gap_norm(xs, cost),
                                      stop=stop, history={})
        return self._last

    def _warm_start(self, x):
        """The previous solution shifted by one knot (its last knot repeated), xs[0] = x
        (into the solver's trial buffers that do not hold it, on the lean path); the
        first step: x repeated and quasi-static controls."""
        problem = self.problem
        if self._lean:
            xs, us, _ = self.solver.forward_pass.free_buffers(self.xs)
        else:
            xs, us = self._xs, self._us
        if self.xs is None:
            xs[:] = x
            us[:] = problem.quasi_static(xs)
            return xs, us
        xs[:-1] = self.xs[1:]
        xs[-1] = self.xs[-1]
        us[:-1] = self.us[1:]
        us[-1] = self.us[-1]
        xs[0] = x
        return xs, us

    def step(self, x, t=0.0):
        """The control to apply at the measured state x (nx,) at time t."""
        problem = self.problem
        problem.x0[:] = problem._validate_states(x, "x", single=True)
        x = problem.x0
        if self.update_references is not None:
            self.update_references(problem, t)
        xs, us = self._warm_start(x)
        solver = self.solver
        if self._has_padding:
            us[self._padding] = 0.0    # what the shift moved into the padding
        if self._lean:
            deadline = (np.inf if self.time_budget is None
                        else time.perf_counter() + self.time_budget)
            outcome = solver.iterate(xs, us, self.max_iter, deadline)
            self._outcome, self._last = outcome, None
            self.xs, self.us, self.cost, self.iterations = outcome[:4]
        else:
            result = solver.solve(xs, us, max_iter=self.max_iter, time_limit=self.time_budget)
            self.xs, self.us, self._last = result.xs, result.us, result
            self.cost, self.iterations = result.cost, result.iterations
        nu = problem.nus[0]            # the first knot's controls (the rest is padding)
        if not self.use_feedback:
            return self.us[0, :nu].copy()
        self._x[0] = x
        dx = problem.state.difference(self.xs[:1], self._x)[0]
        k, K = (solver.k, solver.K) if self._lean else (self._last.k, self._last.K)
        u = np.empty(nu)              # the solvers' law at alpha = 0, unbounded: u0 - K0 dx
        trial_control(self.us[0, :nu], k[0, :nu], K[0, :nu], dx, 0.0, False, u, u, u)
        return u


SCHEME_RK4 = SCHEME_CODES["rk4"]


@kernel
def _simulate(m, B, damping, dt, n_steps, x, u, f_ext, out, ws):
    """out = x after n_steps RK4 steps of dt with constant u and f_ext (local frames)."""
    for i in range(f_ext.shape[0]):
        for r in range(6):
            ws[0][13][i, r] = f_ext[i, r]
    current = x.copy()
    for _ in range(n_steps):
        free_step(m, B, damping, SCHEME_RK4, dt, current, u, out, ws)
        for i in range(out.shape[0]):
            current[i] = out[i]


@kernel
def _constrained_field(m, ca, B, damping, tau_ext, mu, max_iter, accuracy, x, u, out, ws, cws,
                       liR, lip, oR, op, J, oY, M, ddq, lam):
    """out (2 nv,) = (v, ddq) with ddq, lam = constraint_dynamics(q, v, B u - D v + tau_ext);
    returns whether J M^-1 J^T + mu I was regular."""
    nq, nv = m.nq, m.nv
    tau = ws[0][14]
    for i in range(nv):
        s = tau_ext[i] - damping[i] * x[nq + i]
        for j in range(B.shape[1]):
            s += B[i, j] * u[j]
        tau[i] = s
    _, ok = _constraint_dynamics_state(m, ca, x[:nq], x[nq:], tau, mu, max_iter, accuracy, liR,
                                       lip, oR, op, J, oY, M, ddq, lam, cws)
    for i in range(nv):
        out[i] = x[nq + i]
        out[nv + i] = ddq[i]
    return ok


@kernel
def _simulate_constrained(m, ca, B, damping, tau_ext, mu, max_iter, accuracy, dt, n_steps, x, u,
                          out, ws, cws, liR, lip, oR, op, J, oY, M, ddq, lam):
    """out = x after n_steps RK4 steps of dt of the constrained dynamics with constant u
    and generalized external force tau_ext; lam holds the forces at the last step's
    start.  Returns False (and stops) when the contacts were degenerate."""
    k, w, xi = ws[1]
    nv = m.nv
    lam_start = lam.copy()
    current = x.copy()
    for _ in range(n_steps):
        ok = _constrained_field(m, ca, B, damping, tau_ext, mu, max_iter, accuracy, current, u,
                                k[0], ws, cws, liR, lip, oR, op, J, oY, M, ddq, lam)
        for i in range(lam.shape[0]):
            lam_start[i] = lam[i]
        for stage in range(1, 4):
            c = 1.0 if stage == 3 else 0.5
            for i in range(2 * nv):
                w[i] = c * dt * k[stage - 1, i]
            _state_integrate(m, current, w, xi, ws)
            ok = ok and _constrained_field(m, ca, B, damping, tau_ext, mu, max_iter, accuracy,
                                           xi, u, k[stage], ws, cws, liR, lip, oR, op, J, oY, M,
                                           ddq, lam)
        if not ok:
            return False
        for i in range(2 * nv):
            w[i] = dt / 6.0 * (k[0, i] + 2.0 * k[1, i] + 2.0 * k[2, i] + k[3, i])
        _state_integrate(m, current, w, out, ws)
        for i in range(out.shape[0]):
            current[i] = out[i]
    for i in range(lam.shape[0]):
        lam[i] = lam_start[i]
    return True


@dataclass
class Push:
    """A force (3,) in world axes applied at the origin of ``joint`` from
    ``start`` to ``start + duration`` seconds."""

    joint: int
    force: np.ndarray
    start: float
    duration: float


class Simulator:
    """The plant: ``model`` (possibly different from the controller's) under
    ``actuation``, integrated with RK4 at ``dt``; ``pushes`` a list of :class:`Push`.

    ``constraints``: rigid contacts of the plant (a list of
    :class:`~geppetto.dynamics.constraints.RigidConstraint` or a ConstraintSet,
    built on ``model``), or None for the free dynamics.  With contacts, every
    RK4 stage solves ``constraint_dynamics`` (the KKT system, with ``mu``,
    ``max_iterations`` and ``accuracy`` its proximal settings) and the drift of
    the integration is held by the constraints' Baumgarte gains (give them
    Kp, Kd > 0 and the contact points' world ``target``: without gains the
    feet slowly drift at the integration error).  The contacts are bilateral
    (a foot never lifts): read ``contact_forces`` (nc,), the forces at the
    start of the last simulated step, to check that the normal ones stay
    positive.  A push then enters as the generalized force tau_ext = -J^T f
    (RNEA with and without the force) evaluated at the start of the control
    step and held over it (in the free dynamics the force is held in the
    body's frame instead); ``constraint_dynamics`` takes no f_ext.
    """

    def __init__(self, model, dt=1e-3, actuation=None, damping=None, pushes=(),
                 constraints=None, mu=0.0, max_iterations=1, accuracy=1e-12):
        check_model(model)
        self.model = model
        # checked here, not per step: the compiled plant reads them without bounds checks
        self.dt = as_real(dt, "dt", 0.0, low_open=True)
        self.actuation = Actuation.full(model) if actuation is None else actuation
        if not isinstance(self.actuation, Actuation) or self.actuation.nv != model.nv:
            shape = getattr(getattr(self.actuation, "B", None), "shape", None)
            raise ValueError(f"actuation: expected an Actuation of {model.nv} rows (the "
                             f"model's nv), got {type(self.actuation).__name__} of B shape "
                             f"{shape}")
        self.damping = (np.zeros(model.nv) if damping is None
                        else as_vector(damping, model.nv, "damping"))
        self.pushes = [_checked_push(model, push, f"pushes[{i}]")
                       for i, push in enumerate(pushes)]
        self._ws = step_workspace(model.arrays, model.nq + model.nv)
        self._data = model.create_data()
        self.constraints = None
        if constraints is not None:
            self.constraints = as_constraint_set(model, constraints)
            self.mu, self.max_iterations, self.accuracy = _settings(mu, max_iterations,
                                                                    accuracy)
            self._cws = constrained_workspace(model.arrays, self.constraints.arrays)
            self._cdata = model.create_data()
            self.contact_forces = np.zeros(self.constraints.size)

    def external_forces(self, x, t):
        """(njoints, 6) local spatial forces of the pushes active at time t."""
        from ..dynamics.kinematics import forward_kinematics
        f = np.zeros((self.model.njoints, 6))
        active = [p for p in self.pushes if p.start <= t < p.start + p.duration]
        if not active:
            return f
        R, _ = forward_kinematics(self.model, self._data, x[:self.model.nq])
        for push in active:
            f[push.joint, :3] += R[push.joint].T @ np.asarray(push.force, float)
        return f

    def external_torques(self, x, t):
        """(nv,) generalized force -J^T f of the pushes active at time t (zero if none)."""
        from ..dynamics.rnea import rnea
        f = self.external_forces(x, t)
        if not f.any():
            return np.zeros(self.model.nv)
        q, v = x[:self.model.nq], x[self.model.nq:]
        a = np.zeros(self.model.nv)
        return rnea(self.model, self._data, q, v, a) - rnea(self.model, self._data, q, v, a, f)

    def _step_constrained(self, x, u, duration, t, n):
        d, out = self._cdata, np.empty_like(x)
        ok = _simulate_constrained(
            self.model.arrays, self.constraints.arrays, self.actuation.B, self.damping,
            self.external_torques(x, t), self.mu, self.max_iterations, self.accuracy,
            duration / n, n, np.ascontiguousarray(x, dtype=float),
            np.ascontiguousarray(u, dtype=float), out, self._ws, self._cws, d.liR[0], d.lip[0],
            d.oR[0], d.op[0], d.J[0], d.Ycrb[0], d.M[0], d.ddq[0], self.contact_forces)
        if not ok:
            raise FloatingPointError(f"contacts {self.constraints.names} are degenerate: "
                                     f"J M^-1 J^T + mu I is singular (mu = {self.mu})")
        return out

    def step(self, x, u, duration, t=0.0):
        """The state after applying u for ``duration`` seconds from x at time t."""
        model = self.model
        x = as_vector(x, model.nq + model.nv, "x")
        u = as_vector(u, self.actuation.nu, "u")
        duration = as_real(duration, "duration", 0.0)
        n = max(1, int(round(duration / self.dt)))
        if self.constraints is not None:
            return self._step_constrained(x, u, duration, t, n)
        out = np.empty_like(x)
        _simulate(self.model.arrays, self.actuation.B, self.damping, duration / n, n,
                  np.ascontiguousarray(x, dtype=float), np.ascontiguousarray(u, dtype=float),
                  self.external_forces(x, t), out, self._ws)
        return out


def _checked_push(model, push, name):
    """A :class:`Push` whose joint exists and whose force, start and duration are
    finite: the plant indexes its joint's placement in compiled code."""
    if not isinstance(push, Push):
        raise ValueError(f"{name}: expected a Push, got {type(push).__name__}")
    return Push(joint=check_joint(model, push.joint, f"{name}.joint"),
                force=as_vector(push.force, 3, f"{name}.force"),
                start=as_real(push.start, f"{name}.start"),
                duration=as_real(push.duration, f"{name}.duration", 0.0))


@dataclass
class MPCLog:
    """Closed-loop record: times (T,), xs (T+1, nx), us (T, nu), solve_times (T,),
    iterations (T,), costs (T,)."""

    times: np.ndarray
    xs: np.ndarray
    us: np.ndarray
    solve_times: np.ndarray
    iterations: np.ndarray
    costs: np.ndarray
    extra: dict = field(default_factory=dict)

    def percentile(self, q):
        return float(np.percentile(self.solve_times, q))


def run_mpc(mpc, simulator, x0, duration, dt_control, progress=True):
    """Close the loop for ``duration`` seconds with a control period ``dt_control``."""
    duration = as_real(duration, "duration", 0.0)
    dt_control = as_real(dt_control, "dt_control", 0.0, low_open=True)
    steps = int(round(duration / dt_control))
    x = np.asarray(x0, dtype=float).copy()
    xs, us, solve_times, iterations, costs = [x.copy()], [], [], [], []
    for i in range(steps):
        t = i * dt_control
        start = time.perf_counter()
        u = mpc.step(x, t)
        solve_times.append(time.perf_counter() - start)
        iterations.append(mpc.iterations)
        costs.append(mpc.cost)
        x = simulator.step(x, u, dt_control, t)
        xs.append(x.copy())
        us.append(u)
        if progress and (i + 1) % max(1, steps // 20) == 0:
            sys.stderr.write(f"\rMPC {i + 1}/{steps} steps, median solve "
                             f"{1e3 * np.median(solve_times):.2f} ms")
            sys.stderr.flush()
    if progress:
        sys.stderr.write("\n")
    return MPCLog(times=np.arange(steps) * dt_control, xs=np.array(xs), us=np.array(us),
                  solve_times=np.array(solve_times), iterations=np.array(iterations),
                  costs=np.array(costs))
