"""Stage models: what happens at one knot, evaluated for all knots of a phase at once.

A running :class:`StageModel` has dynamics (continuous, discretized by an
integrator with step dt), costs and constraints; its stage cost is
``dt * sum_i w_i a_i(r_i(x, u))`` (running costs are scaled by dt, as
Crocoddyl's integrated action models do).  With an RK integrator the running
cost is integrated over the stage points y_j of the scheme with its weights
b_j, ``dt * sum_j b_j l(y_j, u)``, as Crocoddyl's ``IntegratedActionModelRK``
(``cost_quadrature=False`` charges ``dt * l(x, u)`` at the knot only).  A
:class:`TerminalModel` has no dynamics and no controls; its costs are not
scaled.

Contract (Crocoddyl's): ``calc_diff`` recomputes everything it needs; the
kinematic residuals read the knots' placements and world Jacobians from the
dynamics' evaluation at each point (running stages) or from the terminal
stage's own kinematics pass.  ``calc_costs`` (the solvers' line search)
refreshes exactly the kinematics the stage's residuals read
(:data:`~.residuals.PLACEMENTS` or :data:`~.residuals.JACOBIANS`), except right
after the trial rollout that wrote those states (:meth:`StageModel.rollout_trial`):
a FreeDynamics phase with an Euler scheme stores the placements and world
Jacobians its ABA computed at each knot, a contact or impulse phase those of its
solve and the contact forces, and the costs read them as they are.

Knots are grouped into phases by structure (:meth:`StageModel.structure_key`):
stage objects that differ only by their costs' weights and residuals'
references share one phase data, whose arrays hold each knot's weights and
references (``runs``: which knots belong to which object).
"""
import numpy as np

from ..dynamics.config import num_threads
from ..dynamics.kinematics import _compute_joint_jacobians, _forward_kinematics
from ..dynamics.validation import as_bounds
from .dynamics import FreeDynamics
from .fused import (CALC, COSTS, DIFF, TRIAL, FusedPhase, cost_steps, interpreted,
                    kinematics_step, output_arrays, outputs_tuple)
from .costs import Constraint, Cost, chain_stage_point
from .integrators import Integrator
from .residuals import JACOBIANS, attributes_key, structure_key
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
    """Data of K knots: integrator data, cost and constraint data, outputs, the knots'
    kinematics, and ``runs`` [(stage model, start, stop)]: the knots of each model
    object (indices into the K knots)."""

    def __init__(self, K, integrator_data, cost_data, constraint_data, outputs, kinematics,
                 runs):
        self.K = K
        self.integrator = integrator_data
        self.costs = cost_data
        self.constraints = constraint_data
        self.outputs = outputs
        self.kinematics = kinematics
        self.runs = runs
        self.fused = None           # the FusedPhase (built at the first call), or False
        # (pointer, shape) of the trial states whose kinematics a rollout just stored
        self.trial_states = None


def _address(xs):
    """(data pointer, shape) of the trial states a rollout wrote."""
    return xs.__array_interface__["data"][0], xs.shape


def _holds_trial(data, xs):
    """Whether ``data``'s kinematics are those a trial rollout just stored at the states
    ``xs`` (the same memory it wrote); the mark is consumed."""
    mark = data.trial_states
    data.trial_states = None
    return mark is not None and mark == _address(xs)


def _contiguous(array):
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def fused_phase(model, data):
    """The :class:`~.fused.FusedPhase` of ``data`` when all the stage's components have a
    fused step (built at the first call), else None: the per-term path.  On several
    Numba threads a free-dynamics running stage takes the per-term path and its
    parallel kernels; contact and impulse stages and the terminal knot keep the phase
    (its blocks are serial: the same arrays, to the bit, on any number of threads, and
    their line-search trial reads the kinematics and forces its rollout stored)."""
    if data.fused is None:
        data.fused = model.build_fused(data) or False
    phase = data.fused or None
    if phase is not None and not model.terminal and num_threads() != 1 \
            and isinstance(model.dynamics, FreeDynamics):
        return None
    return phase


def _term_data(runs, K, ndx, nu, is_cost):
    """Data of each term for K knots made of runs [(terms, start, stop)] of structurally
    equal term lists: the first run's terms create it; with several runs, each writes
    its knots' references; each cost binds its knots' weights."""
    first = runs[0][0]
    data = [term.create_data(K, ndx, nu, bind=False) if is_cost
            else term.create_data(K, ndx, nu) for term in first]
    for terms, start, stop in runs:
        for term, tdata in zip(terms, data):
            if len(runs) > 1:
                _copy_references(term.residual, tdata.residual if is_cost else tdata, start,
                                 stop, ndx, nu)
            if is_cost:
                term.bind(tdata, start, stop)
    return data


def _copy_references(residual, rdata, start, stop, ndx, nu):
    """rdata.reference[start:stop] = the references of ``residual`` (validated by its
    own create_data)."""
    own = residual.create_data(stop - start, ndx, nu).reference
    if isinstance(own, tuple):
        for target, value in zip(rdata.reference, own):
            target[start:stop] = value
    else:
        rdata.reference[start:stop] = own


# the kinematics fields an RK trial rollout stores for each stage point of a knot
TRIAL_KINEMATICS = ("liR", "lip", "oR", "op", "J")


def _share_stage_kinematics(idata):
    """Give the RK integrator data ``idata`` of a FreeDynamics phase (K knots, S stages)
    the arrays its trial rollout writes (:func:`.trial.rollout_free`):
    ``trial_kinematics`` (liR, lip, oR, op, J), each (S K, ...), of which each stage's
    kinematics fields become the rows ``j K:(j + 1) K`` (views, so that the rollout
    writes the very arrays the costs read), and ``trial_points`` (S K, nx) with
    ``stage_points`` its views per stage."""
    stages = idata.stages
    S, K = len(stages), idata.xnext.shape[0]
    whole = []
    for name in TRIAL_KINEMATICS:
        joined = np.stack([getattr(stage.dynamics, name) for stage in stages])
        for j, stage in enumerate(stages):
            setattr(stage.dynamics, name, joined[j])
        whole.append(joined.reshape((S * K,) + joined.shape[2:]))
    idata.trial_kinematics = tuple(whole)
    idata.trial_points = np.zeros((S * K, idata.xnext.shape[1]))
    idata.stage_points = [idata.trial_points[j * K:(j + 1) * K] for j in range(S)]


def _stage_point_outputs(data):
    """Scratch outputs (K knots) of the running cost at one RK stage point, in the
    point's own (y, u): :func:`_chain_stage_point` carries them to the knot's (x, u)."""
    scratch = getattr(data, "stage_point_outputs", None)
    if scratch is None:
        out = data.outputs
        scratch = StageOutputs(*(np.zeros(a.shape) for a in
                                 (out.cost, out.Lx, out.Lu, out.Lxx, out.Luu, out.Lxu)))
        data.stage_point_outputs = scratch
        # the chain's operands: these outputs, the stage's, the products' scratch
        ndx, nu = out.Lx.shape[1], out.Lu.shape[1]
        data.chain_scratch = (output_arrays(scratch), output_arrays(out),
                              np.zeros((ndx, ndx)), np.zeros((ndx, nu)),
                              np.zeros((ndx, ndx)), np.zeros((ndx + nu, nu)))
    return scratch


def _chain_stage_point(data, j, mixed):
    """Add the cost at stage point y_j(x, u) and its derivatives in (y_j, u), summed in
    the point's scratch outputs (:func:`_stage_point_outputs`), to the stage outputs in
    the knot's (x, u): :func:`.costs.chain_stage_point` (one compiled call per stage
    point; chaining each term's residual Jacobian instead, R y_x then w R^T A R dense,
    cost a product per term and stage point and made every accumulated row dense).
    ``mixed`` False: no term reads both x and u (no Lyu products)."""
    idata = data.integrator
    scratch = data.chain_scratch
    chain_stage_point(scratch[0], idata.points_x[j], idata.points_u[j], mixed, *scratch[1:])


def _term_list(terms, name):
    """``terms`` (an iterable of Cost or Constraint objects) as a list."""
    if isinstance(terms, (Cost, Constraint)) or not hasattr(terms, "__iter__"):
        raise ValueError(f"{name}: expected a list of terms, got {type(terms).__name__}")
    return list(terms)


def _check_terms(costs, constraints, multibody, terminal):
    for name, terms, kind in (("costs", costs, Cost), ("constraints", constraints, Constraint)):
        for k, term in enumerate(terms):
            if not isinstance(term, kind):
                raise ValueError(f"{name}[{k}]: expected a {kind.__name__} (a residual "
                                 f"wrapped in one), got {type(term).__name__}")
    for term in list(costs) + list(constraints):
        residual = term.residual
        if residual.needs_kinematics and not multibody:
            raise ValueError(f"{term.name}: a kinematic residual needs a multibody state")
        if terminal and residual.uses_control:
            raise ValueError(f"{term.name}: the terminal model has no controls "
                             "(remove control residuals from it)")


def _state_bounds(bounds, nx):
    """(lower (nx,), upper (nx,)) from (lower, upper) or None (unbounded), checked as the
    control bounds are (:func:`~geppetto.dynamics.validation.as_bounds`: shapes, NaN,
    lower <= upper, each error naming the argument)."""
    if bounds is None:
        return np.full(nx, -np.inf), np.full(nx, np.inf)
    try:
        lower, upper = bounds
    except (TypeError, ValueError):
        raise ValueError("state_bounds: expected (lower, upper) of numbers") from None
    return as_bounds(lower, upper, nx, "state_bounds")


class StageModel:
    """A running knot: ``dynamics`` integrated over ``dt`` with ``integrator``.

    Parameters
    ----------
    dynamics : FreeDynamics, ContactDynamics, ImpulseDynamics or CustomDynamics.
    costs : list of :class:`~.costs.Cost`.
    constraints : list of :class:`~.costs.Constraint` (used by BoxFDDP / the NLP).
    dt : step in seconds.
    integrator : a name of :data:`~.integrators.INTEGRATORS`, Crocoddyl's meaning:
        "euler" (default) is symplectic Euler (``IntegratedActionModelEuler``;
        "semi_implicit_euler" is an alias), "explicit_euler" x' = x (+) dt f,
        "rk2", "rk3", "rk4" (``IntegratedActionModelRK``).  An impulse stage
        (:class:`~.contacts.ImpulseDynamics`) is a jump: "explicit_euler", its default.
        Default for a state without positions and velocities (CustomDynamics
        without ``nq``): "explicit_euler".
    control_bounds : (lower (nu,), upper (nu,)) or None: box limits on u.
    state_bounds : (lower (nx,), upper (nx,)) or None: box limits on x at these knots
        (±inf where unbounded; enforced by the NLP solver, see :mod:`geppetto.solvers.nlp`).
    cost_quadrature : True (default): an RK stage's running cost is
        ``dt * sum_j b_j l(y_j, u)`` over its stage points y_j (Crocoddyl's); False:
        ``dt * l(x, u)`` at the knot only.  No effect on the Euler schemes.
    """

    terminal = False

    def __init__(self, dynamics, costs=(), constraints=(), dt=0.01, integrator=None,
                 control_bounds=None, name="running", state_bounds=None, cost_quadrature=True):
        if not (hasattr(dynamics, "state") and hasattr(dynamics, "nu")):
            raise ValueError("dynamics: expected FreeDynamics, ContactDynamics, "
                             f"CustomDynamics or the like, got {type(dynamics).__name__}")
        self.dynamics = dynamics
        self.state = dynamics.state
        self.nu = dynamics.nu
        required = getattr(dynamics, "required_integrator", None)
        if integrator is None:
            positions = getattr(self.state, "nv", None) is not None
            integrator = required or ("euler" if positions else "explicit_euler")
        elif required is not None and integrator != required:
            raise ValueError(f"integrator {integrator!r}: a {type(dynamics).__name__} stage "
                             f"needs {required!r} (x' = x (+) dt f: a jump)")
        self.integrator = Integrator(dynamics, dt, integrator)
        self.dt = self.integrator.dt
        self.costs = _term_list(costs, "costs")
        self.constraints = _term_list(constraints, "constraints")
        _check_terms(self.costs, self.constraints, dynamics.multibody, False)
        self.name = name
        if control_bounds is None:
            self.u_lower = np.full(self.nu, -np.inf)
            self.u_upper = np.full(self.nu, np.inf)
        else:
            try:
                lower, upper = control_bounds
            except (TypeError, ValueError):
                raise ValueError("control_bounds: expected (lower, upper)") from None
            self.u_lower, self.u_upper = as_bounds(lower, upper, self.nu, "control_bounds")
        self.x_lower, self.x_upper = _state_bounds(state_bounds, self.state.nx)
        self.cost_quadrature = bool(cost_quadrature)
        weights = self.integrator.weights if self.cost_quadrature else (1.0,)
        # (stage point j, b_j) of the running cost: the knot alone, or the RK stage points
        self.cost_points = [(j, b) for j, b in enumerate(weights) if b != 0.0]
        # whether a cost reads both x and u (an Lxu block of its own)
        self.mixed_costs = any(c.residual.uses_control and c.residual.depends_on_state
                               for c in self.costs)
        # what calc_costs (the line search) and calc_constraints refresh
        self.kinematics_for_costs = max((c.residual.kinematics
                                         for c in self.costs + self.constraints), default=0)
        self.kinematics_for_constraints = max((c.residual.kinematics for c in self.constraints),
                                              default=0)

    @property
    def has_control_bounds(self):
        return bool(np.any(np.isfinite(self.u_lower)) or np.any(np.isfinite(self.u_upper)))

    def structure_key(self):
        """Equal for stage models whose knots one phase evaluates alike: the same
        dynamics (by structure), integrator, dt, bounds and the same terms (types,
        sizes, activations) in the same order, whatever their weights and references.
        Stages with references given per knot (a leading K axis) are only equal to
        themselves."""
        terms = self.costs + self.constraints
        if any(t.residual.has_knot_references() for t in terms):
            return ("id", id(self))
        return (type(self), attributes_key(self.dynamics), self.integrator.scheme, self.dt,
                self.cost_quadrature, tuple(c.structure_key() for c in self.costs),
                tuple(c.structure_key() for c in self.constraints),
                structure_key([self.u_lower, self.u_upper, self.x_lower, self.x_upper]))

    def create_data(self, K, outputs, runs=None):
        """Data of K knots; ``runs`` [(model, start, stop)]: the knots of each structurally
        equal model object (default: all K are this one)."""
        runs = [(self, 0, K)] if runs is None else runs
        ndx, nu = self.state.ndx, self.nu
        idata = self.integrator.create_data(K)
        if self._rk_trial_stores():
            _share_stage_kinematics(idata)
        kinematics = idata.stages[0].dynamics
        costs = _term_data([(m.costs, a, b) for m, a, b in runs], K, ndx, nu, True)
        constraints = _term_data([(m.constraints, a, b) for m, a, b in runs], K, ndx, nu, False)
        return StageData(K, idata, costs, constraints, outputs, kinematics, runs)

    def _costs_at_stage_points(self):
        """Whether the running cost reads other points than the knot (RK quadrature)."""
        return len(self.cost_points) > 1 or self.cost_points[0][0] != 0

    def _rk_trial_stores(self):
        """Whether the trial rollout stores this RK stage's stage points and their
        kinematics (FreeDynamics of a multibody; costs over the stage points or reading
        kinematics): :func:`_share_stage_kinematics`."""
        return (len(self.integrator.weights) > 1 and type(self.dynamics) is FreeDynamics
                and self.dynamics.stores_trial_kinematics(self.integrator)
                and (self._costs_at_stage_points() or self.kinematics_for_costs > 0))

    def build_fused(self, data):
        """The phase's :class:`~.fused.FusedPhase`: dynamics, integrator, then each cost's
        residual and accumulation; None when a component has no fused step or the
        running cost is integrated over RK stage points."""
        if len(self.cost_points) != 1 or self.cost_points[0][0] != 0:
            return None
        make = getattr(self.dynamics, "fused_step", None)
        dynamics = None if make is None else make(data.integrator.stages[0],
                                                  self.kinematics_for_costs)
        integrator = self.integrator.fused_step(data.integrator)
        out = outputs_tuple(data.outputs)
        terms = cost_steps(self.costs, data.costs, data.kinematics, self.state,
                           self.cost_points[0][1] * self.dt, True)
        if dynamics is None or integrator is None or out is None or terms is None:
            return None
        return FusedPhase([dynamics, integrator] + terms, out, 2)

    def calc(self, data, xs, us):
        """x' (data.integrator.xnext) and the stage costs (data.outputs.cost)."""
        phase = fused_phase(self, data)
        if phase is not None:
            return phase(_contiguous(xs), _contiguous(us), CALC)
        self._point_programs(data)      # built before the integrator's first call
        self.integrator.calc(data.integrator, xs, us)
        self._costs(data, xs, us, False)

    def calc_diff(self, data, xs, us):
        """x', Fx, Fu and the cost derivatives Lx, Lu, Lxx, Luu, Lxu (Gauss-Newton)."""
        phase = fused_phase(self, data)
        if phase is not None:
            return phase(_contiguous(xs), _contiguous(us), DIFF)
        self._point_programs(data)      # built before the integrator's first call
        self.integrator.calc_diff(data.integrator, xs, us)
        self._costs(data, xs, us, True)

    def calc_costs(self, data, xs, us):
        """Stage costs only, equal to those of :meth:`calc`: for the solvers' line search,
        whose rollout already evaluated the dynamics at the knots.  The knots'
        kinematics are refreshed as the residuals need them (placements, or
        placements and world Jacobians), for the constraints too (ALDDP
        evaluates them after it), unless the trial rollout just stored them at these
        very states (:meth:`rollout_trial`).  A cost over RK stage points reads the stage
        points and their kinematics that the trial rollout stored
        (:func:`_share_stage_kinematics`), else it runs :meth:`calc` (the dynamics at
        the knots, for the stage points).  (Through :meth:`calc`, an RK4 trial on kinova,
        50 knots, evaluated ABA eight times per knot, four in the rollout.)"""
        stored = _holds_trial(data, xs)
        if self._costs_at_stage_points():
            if not stored:
                # calc writes x' too, into the problem's predicted states (views): a
                # refused search must leave them the iterate's (a solve's reported gaps
                # read them; review rev31b)
                xnext = data.integrator.xnext
                kept = xnext.copy()
                self.calc(data, xs, us)
                xnext[:] = kept
                return None
            return self._costs(data, xs, us, False, data.integrator.stage_points)
        phase = fused_phase(self, data)
        if phase is not None:
            return phase(_contiguous(xs), _contiguous(us), TRIAL if stored else COSTS)
        self._refresh_kinematics(data, xs, 0 if stored else self.kinematics_for_costs)
        self._costs(data, xs, us, False)

    def trial_workspace(self, data=None):
        """Scratch of :meth:`rollout_trial` (one per solver and phase).  With the phase's
        ``data``, dynamics that can (``stores_trial_kinematics``: FreeDynamics with any
        scheme, ContactDynamics and ImpulseDynamics with the schemes of their jitted step)
        store the trial knots' kinematics in it (and the contact forces, with the
        stamp of the contact data; a FreeDynamics RK phase the kinematics of every
        stage point and the stage points themselves, :func:`_share_stage_kinematics`),
        which :meth:`calc_costs` then reads without recomputing them; the contact RK
        schemes (stepped in Python) recompute them."""
        stores = getattr(self.dynamics, "stores_trial_kinematics", None)
        level = self.kinematics_for_costs
        forces = getattr(data.kinematics, "contact", None) if data is not None else None
        if forces is not None:
            level = JACOBIANS       # the stamp's point, whole: forces and kinematics
        if data is not None and self._rk_trial_stores():
            # every stage's kinematics and stage point (rows stage * K + t)
            kinematics = (int(level),) + data.integrator.trial_kinematics
            return self.dynamics.trial_workspace(self.integrator, kinematics,
                                                 data.integrator.trial_points), data
        if data is None or data.kinematics is None or not level or stores is None or \
                not stores(self.integrator) or len(self.integrator.weights) > 1:
            return self.dynamics.trial_workspace(self.integrator), None
        k = data.kinematics
        kinematics = (int(level), k.liR, k.lip, k.oR, k.op, k.J)
        if forces is None:
            return self.dynamics.trial_workspace(self.integrator, kinematics), data
        return self.dynamics.trial_workspace(self.integrator, kinematics, forces), data

    def trial_cost_programs(self, data, stored):
        """The trial's costs of an RK FreeDynamics phase as the one-call trial runs them
        (:func:`.horizon.horizon_trial`): [(row, program)], the ``values`` programs of
        :meth:`_point_programs` (their interpreter programs, run in CALC mode) in the order
        :meth:`calc_costs` runs them right after the rollout (the first clears the
        outputs, the others add: the same sums in the same order), each on the states of
        its cost point: ``row`` -1 the knots' trial states,
        else the first of the K rows (j K) of stage point j in the rollout's stored
        points (``data.integrator.trial_points``, :func:`_share_stage_kinematics`).
        ``stored``: whether the rollout stores this phase's kinematics and stage points
        (its :meth:`trial_workspace` was given ``data``).  None where :meth:`calc_costs`
        takes another path: no programs (several Numba threads, a term without an
        interpreted step), or costs over stage points that the rollout does not store."""
        programs = self._point_programs(data)
        if programs is None:
            return None
        if self._costs_at_stage_points() and not (stored and self._rk_trial_stores()):
            return None
        if any(values.program is None or values.first_by_mode[CALC] for values in programs[0]):
            return None
        return [(-1 if j == 0 else j * data.K, values.program)
                for (j, _), values in zip(self.cost_points, programs[0])]

    def rollout_trial(self, inputs, x_start, outputs, workspace):
        """The solvers' line-search trial over the knots of a phase (see
        :mod:`.trial`: inputs, outputs); returns -1 or the knot that failed."""
        dynamics_workspace, data = workspace
        if data is not None:
            data.trial_states = None
        failed = self.dynamics.rollout_trial(self.integrator, inputs, x_start, outputs,
                                             dynamics_workspace)
        if data is not None and failed < 0:
            data.trial_states = _address(outputs[0])
        return failed

    def discard_trial(self, data):
        """Forget that ``data`` holds a trial's kinematics (a trial abandoned before its
        costs)."""
        data.trial_states = None

    def _refresh_kinematics(self, data, xs, level):
        """The knots' placements (``level`` PLACEMENTS) or placements and world
        Jacobians (JACOBIANS) at xs; nothing for level 0."""
        kin = data.kinematics
        if kin is None or not level:
            return
        qs = np.ascontiguousarray(xs[:, :self.state.nq])
        if level == JACOBIANS:
            _compute_joint_jacobians(self.dynamics.arrays, qs, kin.liR, kin.lip, kin.oR,
                                     kin.op, kin.J)
        else:
            zeros = np.zeros((xs.shape[0], self.state.nv))
            _forward_kinematics(self.dynamics.arrays, qs, zeros, zeros, 0, kin.liR,
                                kin.lip, kin.oR, kin.op, kin.v, kin.a)

    def _costs(self, data, xs, us, with_derivatives, stage_points=None):
        """dt sum_j b_j l(y_j, u) over the cost points (y_0 = x, the knot); the stage
        points y_j those of the last :meth:`calc` or :meth:`calc_diff`, or
        ``stage_points`` (a trial's, without derivatives).  With derivatives, the terms at
        a stage point y_j add into scratch outputs in (y_j, u), chained to (x, u) once per
        stage point (:func:`_chain_stage_point`).  On one Numba thread, when every term
        has a fused step, each point's terms run as one interpreted program
        (:meth:`_point_programs`), else one call per term."""
        idata = data.integrator
        stage_points = idata.points if stage_points is None else stage_points
        programs = self._point_programs(data)
        if programs is not None:
            us = _contiguous(us)
            if with_derivatives and self.cost_points[0][0] != 0:
                data.outputs.clear(True)
            for (j, _), values, derivatives in zip(self.cost_points, *programs):
                points = _contiguous(xs if j == 0 else stage_points[j])
                if not with_derivatives:
                    values(points, us, CALC)
                    continue
                derivatives(points, us, DIFF)
                if j != 0:
                    _chain_stage_point(data, j, self.mixed_costs)
            return
        data.outputs.clear(with_derivatives)
        for j, b in self.cost_points:
            if j == 0:
                points, kinematics, out = xs, data.kinematics, data.outputs
            else:
                points, kinematics = stage_points[j], idata.stages[j].dynamics
                out = _stage_point_outputs(data) if with_derivatives else data.outputs
                if with_derivatives:
                    out.clear(True)
            for cost, cdata in zip(self.costs, data.costs):
                cost.add(cdata, kinematics, points, us, b * self.dt, out, with_derivatives)
            if out is not data.outputs:
                _chain_stage_point(data, j, self.mixed_costs)

    def _point_programs(self, data):
        """(values, derivatives): per cost point (j, b_j), the :class:`~.fused.FusedPhase`
        of its terms (each residual, then its activation and accumulation at scale
        dt b_j, one interpreted call: no Python per term) on the point's states and
        kinematics (the knot's, or stage j's of the integrator data).  ``values`` add
        into the stage outputs (the first point's clears them): the same sums in the
        same order as the per-term path; ``derivatives`` write the knot's outputs at
        j = 0 (cleared first) and a stage point's scratch outputs in (y_j, u) (cleared
        first, then chained by :func:`_chain_stage_point`).  None on several Numba
        threads (the per-term path and its parallel kernels, as :func:`fused_phase`),
        or when a term has no fused step; built once per data."""
        programs = getattr(data, "point_programs", None)
        if programs is None:
            programs = data.point_programs = self._build_point_programs(data) or False
        if not programs or num_threads() != 1:
            return None
        return programs

    def _build_point_programs(self, data):
        """The programs of :meth:`_point_programs`, or None: only for an RK FreeDynamics
        stage (the Euler stages keep their fused phase or the per-term path, bit for
        bit), and only where every program is one of the interpreter (no generated
        function to compile: a term of another model, say, keeps the per-term path)."""
        stage_outputs = outputs_tuple(data.outputs)
        if (stage_outputs is None or len(self.integrator.weights) == 1
                or type(self.dynamics) is not FreeDynamics or not self.costs):
            return None
        idata, model = data.integrator, self.state.model.arrays
        values, derivatives = [], []
        for n, (j, b) in enumerate(self.cost_points):
            kinematics = data.kinematics if j == 0 else idata.stages[j].dynamics
            out = stage_outputs if j == 0 else outputs_tuple(_stage_point_outputs(data))
            # values: the first point clears the outputs, the others add to them
            for programs, target, clear_at in ((values, stage_outputs, 0 if n == 0 else None),
                                               (derivatives, out, 0)):
                steps = cost_steps(self.costs, data.costs, kinematics, self.state,
                                   b * self.dt, True)
                if steps is None:
                    return None
                if interpreted(steps, clear_at, model) is None:
                    return None
                programs.append(FusedPhase(steps, target, clear_at, model))
        # the stages' dynamics by their fused steps too, unless a constraint's residual
        # has none (a per-term residual may read more of the dynamics' Data than the
        # placements and world Jacobians that those steps leave)
        if all(getattr(c.residual, "fused_step", None) is not None and
               c.residual.fused_step(cdata, data.kinematics, self.state) is not None
               for c, cdata in zip(self.constraints, data.constraints)):
            self.integrator.fused_stages(idata, self.kinematics_for_costs)
        return values, derivatives

    def calc_constraints(self, data, xs, us, with_derivatives, refresh=True):
        """Evaluate the constraint residuals (values, and Jacobians when asked).  The
        values are those of (xs, us): the placements (and world Jacobians) the
        constraints read are refreshed first, as :meth:`calc_costs` does for the costs
        (``refresh=False`` skips that, right after :meth:`calc_costs` or :meth:`calc`
        at the same (xs, us): a line search's trial).
        With derivatives, call it after :meth:`calc_diff` at the same (xs, us): the
        Jacobians also read what calc_diff computed."""
        if refresh and not with_derivatives:
            self._refresh_kinematics(data, xs, self.kinematics_for_constraints)
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
        self.costs = _term_list(costs, "costs")
        self.constraints = _term_list(constraints, "constraints")
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
                         kinematics, [(self, 0, K)])

    def _needs_kinematics(self):
        return self.multibody and any(t.residual.needs_kinematics
                                      for t in self.costs + self.constraints)

    def build_fused(self, data):
        """The terminal knot's :class:`~.fused.FusedPhase` (its kinematics pass, then the
        costs), or None (see :meth:`StageModel.build_fused`)."""
        out = outputs_tuple(data.outputs)
        if not self.multibody or out is None:
            return None
        data.no_controls = np.zeros((data.K, 0))
        steps = []
        if self._needs_kinematics():
            steps.append(kinematics_step(self.state.model.arrays, data.kinematics, JACOBIANS))
        terms = cost_steps(self.costs, data.costs, data.kinematics, self.state, 1.0, False)
        if terms is None:
            return None
        return FusedPhase(steps + terms, out, len(steps), self.state.model.arrays)

    def _kinematics(self, data, xs):
        if self._needs_kinematics():
            k = data.kinematics
            _compute_joint_jacobians(self.state.model.arrays,
                                     np.ascontiguousarray(xs[:, :self.state.nq]), k.liR, k.lip,
                                     k.oR, k.op, k.J)

    def calc(self, data, xs, us=None):
        phase = fused_phase(self, data)
        if phase is not None:
            return phase(_contiguous(xs), data.no_controls, CALC)
        self._kinematics(data, xs)
        data.outputs.clear(False)
        for cost, cdata in zip(self.costs, data.costs):
            cost.add(cdata, data.kinematics, xs, None, 1.0, data.outputs, False)

    def calc_diff(self, data, xs, us=None):
        phase = fused_phase(self, data)
        if phase is not None:
            return phase(_contiguous(xs), data.no_controls, DIFF)
        self._kinematics(data, xs)
        data.outputs.clear(True)
        for cost, cdata in zip(self.costs, data.costs):
            cost.add(cdata, data.kinematics, xs, None, 1.0, data.outputs, True)

    def calc_constraints(self, data, xs, us, with_derivatives, refresh=True):
        if refresh:
            self._kinematics(data, xs)
        return [c.calc(cd, data.kinematics, xs, None, with_derivatives)
                for c, cd in zip(self.constraints, data.constraints)]
