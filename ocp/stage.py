"""Stage models: what happens at one knot, evaluated for all knots of a phase at once.

A running :class:`StageModel` has dynamics (continuous, discretized by an
integrator with step dt), costs and constraints; its stage cost is
``dt * sum_i w_i a_i(r_i(x, u))`` (running costs are scaled by dt, as
Crocoddyl's integrated action models do).  A :class:`TerminalModel` has no
dynamics and no controls; its costs are not scaled.

Contract (Crocoddyl's): ``calc_diff`` recomputes everything it needs; the
kinematic residuals read the knots' placements and world Jacobians from the
dynamics' first evaluation (running stages) or from the terminal stage's own
kinematics pass.
"""
import numpy as np

from ..dynamics.kinematics import _compute_joint_jacobians, _forward_kinematics
from .dynamics import FreeDynamics
from .integrators import Integrator
from .state import StateMultibody


class StageOutputs:
    """Views of one phase into the problem's arrays: cost, Lx, Lu, Lxx, Luu, Lxu."""

    def __init__(self, cost, Lx, Lu, Lxx, Luu, Lxu):
        self.cost, self.Lx, self.Lu, self.Lxx, self.Luu, self.Lxu = cost, Lx, Lu, Lxx, Luu, Lxu

    def clear(self, with_derivatives):
        self.cost[:] = 0.0
        if with_derivatives:
            for array in (self.Lx, self.Lu, self.Lxx, self.Luu, self.Lxu):
                array[:] = 0.0


class StageData:
    def __init__(self, K, integrator_data, cost_data, constraint_data, outputs, kinematics):
        self.K = K
        self.integrator = integrator_data
        self.costs = cost_data
        self.constraints = constraint_data
        self.outputs = outputs
        self.kinematics = kinematics


def _check_terms(costs, constraints, multibody, terminal):
    for term in list(costs) + list(constraints):
        residual = term.residual
        if residual.needs_kinematics and not multibody:
            raise ValueError(f"{term.name}: a kinematic residual needs a multibody state")
        if terminal and residual.uses_control:
            raise ValueError(f"{term.name}: the terminal model has no controls "
                             "(remove control residuals from it)")


def _state_bounds(bounds, nx):
    """(lower (nx,), upper (nx,)) from (lower, upper) or None (unbounded)."""
    if bounds is None:
        return np.full(nx, -np.inf), np.full(nx, np.inf)
    lower = np.broadcast_to(np.asarray(bounds[0], float), (nx,)).copy()
    upper = np.broadcast_to(np.asarray(bounds[1], float), (nx,)).copy()
    if np.any(np.isnan(lower)) or np.any(np.isnan(upper)) or np.any(lower > upper):
        raise ValueError("state_bounds: NaN, or lower above upper")
    return lower, upper


class StageModel:
    """A running knot: ``dynamics`` integrated over ``dt`` with ``integrator``.

    Parameters
    ----------
    dynamics : FreeDynamics or CustomDynamics.
    costs : list of :class:`~.costs.Cost`.
    constraints : list of :class:`~.costs.Constraint` (used by BoxFDDP / the NLP).
    dt : step in seconds.  integrator : "euler", "semi_implicit_euler", "rk2", "rk4".
    control_bounds : (lower (nu,), upper (nu,)) or None: box limits on u.
    state_bounds : (lower (nx,), upper (nx,)) or None: box limits on x at these knots
        (±inf where unbounded; enforced by the NLP solver, see :mod:`geppetto.solvers.nlp`).
    """

    terminal = False

    def __init__(self, dynamics, costs=(), constraints=(), dt=0.01, integrator="euler",
                 control_bounds=None, name="running", state_bounds=None):
        self.dynamics = dynamics
        self.state = dynamics.state
        self.nu = dynamics.nu
        self.integrator = Integrator(dynamics, dt, integrator)
        self.dt = self.integrator.dt
        self.costs = list(costs)
        self.constraints = list(constraints)
        _check_terms(self.costs, self.constraints, dynamics.multibody, False)
        self.name = name
        if control_bounds is None:
            self.u_lower = np.full(self.nu, -np.inf)
            self.u_upper = np.full(self.nu, np.inf)
        else:
            self.u_lower = np.broadcast_to(np.asarray(control_bounds[0], float), (self.nu,)).copy()
            self.u_upper = np.broadcast_to(np.asarray(control_bounds[1], float), (self.nu,)).copy()
            if np.any(self.u_lower > self.u_upper):
                raise ValueError("control_bounds: lower above upper")
        self.x_lower, self.x_upper = _state_bounds(state_bounds, self.state.nx)

    @property
    def has_control_bounds(self):
        return bool(np.any(np.isfinite(self.u_lower)) or np.any(np.isfinite(self.u_upper)))

    def create_data(self, K, outputs):
        ndx, nu = self.state.ndx, self.nu
        idata = self.integrator.create_data(K)
        kinematics = idata.stages[0].dynamics
        return StageData(K, idata, [c.create_data(K, ndx, nu) for c in self.costs],
                         [c.create_data(K, ndx, nu) for c in self.constraints], outputs,
                         kinematics)

    def calc(self, data, xs, us):
        """x' (data.integrator.xnext) and the stage costs (data.outputs.cost)."""
        self.integrator.calc(data.integrator, xs, us)
        self._costs(data, xs, us, False)

    def calc_diff(self, data, xs, us):
        """x', Fx, Fu and the cost derivatives Lx, Lu, Lxx, Luu, Lxu (Gauss-Newton)."""
        self.integrator.calc_diff(data.integrator, xs, us)
        self._costs(data, xs, us, True)

    def calc_costs(self, data, xs, us):
        """Stage costs only (placements of the knots, no dynamics): for the solvers'
        line search, whose rollout already evaluated the dynamics.  The placements
        are refreshed for the constraints too (ALDDP evaluates them after it)."""
        kin = data.kinematics
        if kin is not None and any(c.residual.needs_kinematics
                                   for c in self.costs + self.constraints):
            nq = self.state.nq
            zeros = np.zeros((xs.shape[0], self.state.nv))
            _forward_kinematics(self.dynamics.arrays, np.ascontiguousarray(xs[:, :nq]), zeros,
                                zeros, 0, kin.liR, kin.lip, kin.oR, kin.op, kin.v, kin.a)
        self._costs(data, xs, us, False)

    def trial_workspace(self):
        """Scratch of :meth:`rollout_trial` (one per solver and phase)."""
        return self.dynamics.trial_workspace(self.integrator)

    def rollout_trial(self, inputs, x_start, outputs, workspace):
        """The solvers' line-search trial over the knots of a phase (see
        :mod:`.trial`: inputs, outputs); returns -1 or the knot that failed."""
        return self.dynamics.rollout_trial(self.integrator, inputs, x_start, outputs, workspace)

    def _costs(self, data, xs, us, with_derivatives):
        data.outputs.clear(with_derivatives)
        for cost, cdata in zip(self.costs, data.costs):
            cost.add(cdata, data.kinematics, xs, us, self.dt, data.outputs, with_derivatives)

    def calc_constraints(self, data, xs, us, with_derivatives):
        """Evaluate the constraint residuals (values, and Jacobians when asked)."""
        return [c.calc(cd, data.kinematics, xs, us, with_derivatives)
                for c, cd in zip(self.constraints, data.constraints)]


class TerminalModel:
    """The last knot: costs and constraints on x only (not scaled by dt).

    ``state_or_model`` is a dynamics Model, a state, or the running dynamics.
    ``state_bounds``: (lower (nx,), upper (nx,)) or None, as for :class:`StageModel`.
    """

    terminal = True
    nu = 0

    def __init__(self, state_or_model, costs=(), constraints=(), name="terminal",
                 state_bounds=None):
        if isinstance(state_or_model, FreeDynamics) or (
                hasattr(state_or_model, "calc_diff") and hasattr(state_or_model, "state")):
            state = state_or_model.state        # any dynamics object
        elif hasattr(state_or_model, "ndx"):
            state = state_or_model
        elif hasattr(state_or_model, "dynamics") and hasattr(state_or_model, "state"):
            state = state_or_model.state
        else:
            state = StateMultibody(state_or_model)
        self.state = state
        self.multibody = isinstance(state, StateMultibody)
        self.costs = list(costs)
        self.constraints = list(constraints)
        _check_terms(self.costs, self.constraints, self.multibody, True)
        self.name = name
        self.dt = 1.0
        self.x_lower, self.x_upper = _state_bounds(state_bounds, state.nx)

    def create_data(self, K, outputs):
        ndx = self.state.ndx
        kinematics = None
        if self.multibody:
            kinematics = self.state.model.create_data()
            kinematics.resize(K)
        return StageData(K, None, [c.create_data(K, ndx, 0) for c in self.costs],
                         [c.create_data(K, ndx, 0) for c in self.constraints], outputs,
                         kinematics)

    def _kinematics(self, data, xs):
        if self.multibody and any(t.residual.needs_kinematics
                                  for t in self.costs + self.constraints):
            k = data.kinematics
            _compute_joint_jacobians(self.state.model.arrays,
                                     np.ascontiguousarray(xs[:, :self.state.nq]), k.liR, k.lip,
                                     k.oR, k.op, k.J)

    def calc(self, data, xs, us=None):
        self._kinematics(data, xs)
        data.outputs.clear(False)
        for cost, cdata in zip(self.costs, data.costs):
            cost.add(cdata, data.kinematics, xs, None, 1.0, data.outputs, False)

    def calc_diff(self, data, xs, us=None):
        self._kinematics(data, xs)
        data.outputs.clear(True)
        for cost, cdata in zip(self.costs, data.costs):
            cost.add(cdata, data.kinematics, xs, None, 1.0, data.outputs, True)

    def calc_constraints(self, data, xs, us, with_derivatives):
        self._kinematics(data, xs)
        return [c.calc(cd, data.kinematics, xs, None, with_derivatives)
                for c, cd in zip(self.constraints, data.constraints)]
