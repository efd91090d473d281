"""Contact stages: dynamics under rigid contacts and residuals on the contact forces.

Notation: K knots of a phase, x = (q, v), u (nu,) the actuated torques
(tau = B u - D v), nc the rows of the constraint set (3 per point contact,
6 per frame contact), lambda (K, nc) the contact forces in the constraints'
frames (:mod:`geppetto.dynamics.constraints`: LOCAL, the contact frame's
axes; LOCAL_WORLD_ALIGNED, the world axes at its origin).

- :class:`ContactDynamics`: ddq, lambda = constraint_dynamics(q, v, B u - D v)
  (Pinocchio's ``constraintDynamics``: the KKT system of the contacts, with
  Baumgarte stabilization), f = (v, ddq), and from
  ``constraint_dynamics_derivatives`` (Kudruss et al. 2019, Prop. 3)

      f_x = [[0, I], [ddq_dq, ddq_dv - ddq_dtau D]],   f_u = [[0], [ddq_dtau B]],
      lambda_x = [dlambda_dq, dlambda_dv - dlambda_dtau D],
      lambda_u = dlambda_dtau B.

  On one thread a stage evaluates it in its fused phase (:func:`.fused.
  _contact_field`, a compiled block on scratch made at build, :meth:`fused_step`);
  on several, one parallel kernel call per phase (chunks of knots on Numba's
  threads).  Like :class:`~.dynamics.FreeDynamics` it leaves the placements (oR, op) and
  the world Jacobians J of every knot in ``data.dynamics``, which the
  kinematic residuals read.
- :class:`ImpulseDynamics`: a touchdown as a stage (Pinocchio's
  ``impulseDynamics``): x' = (q, v+) with v+, Lambda = impulse_dynamics(q, v),
  written as the field f = (0, v+ - v) of a StageModel with ``dt=1`` and the
  explicit Euler scheme (x' = x (+) f exactly; the stage's default);
  f_x = [[0, 0], [dv+_dq, dv+_dv - I]]; no controls (nu = 0, as in Crocoddyl).
  Its ``lam`` is the impulse Lambda (N s), which the force residuals read alike.
- :func:`gait_stages`: the running stages of a multi-phase problem from a gait
  description (which feet touch the ground for how many knots), with an impulse
  stage at every touchdown.
- :class:`ContactForceResidual`: r = lambda_c - lambda_ref (one constraint's
  rows).
- :class:`FrictionConeResidual`: the linearized (pyramidal) Coulomb cone of
  one contact's linear force f in the world, rows that are >= 0 inside the
  cone (use ``Cost(r, QuadraticBarrier(*r.bounds))`` or ``Constraint(r,
  *r.bounds)``).
- :class:`SmoothFrictionConeResidual`: the second-order Coulomb cone of one
  contact as one smooth row mu f_n - sqrt(|f_t|^2 + eps^2) >= 0.
- :class:`CenterOfPressureResidual`: the centre of pressure of a 6D contact
  inside a rectangular sole, 4 rows >= 0 inside (same use).

How the force residuals meet the forces of their knots: the stage hands every
residual its kinematics, the model Data of the dynamics' first evaluation
(``data.dynamics`` of the knots themselves).  :class:`ContactDynamics` hangs
its outputs on that Data (``kinematics.contact``, a
:class:`ContactDynamicsData`), stamped with the (xs, us) they were computed
at.  A residual uses them when the stamp matches its own (xs, us); otherwise
(a finite-difference check with a fresh kinematics Data) it evaluates the
contact dynamics itself in a scratch Data kept beside the kinematics, shared by
the residuals of the stage.  The line search's trial rollout
(:func:`.trial.rollout_contact`) stores each knot's kinematics and forces, and
the stamp, from its step's solve: the trial's costs read them.  The fused phase's
residual steps read the forces of the Data directly (the stage's own).
"""
import numpy as np

from ..dynamics.constrained_dynamics import (_impulse_dynamics, _impulse_dynamics_derivatives,
                                             _settings, constrained_workspace,
                                             constraint_dynamics_derivatives_parallel,
                                             constraint_dynamics_parallel, derivatives_workspace,
                                             impulse_derivatives_workspace)
from ..dynamics.config import kernel, num_threads
from ..dynamics.constraints import as_constraint_set, constraint_jacobian, contact_3d, contact_6d
from ..dynamics.kinematics import LOCAL, LOCAL_WORLD_ALIGNED
from ..dynamics.model import FREE_FLYER, freeze_arrays
from ..dynamics.rnea import generalized_gravity
from .contact_step import (CONTACT_SCHEMES, DERIVATIVES, EMPTY, VALUES, _contact_jacobians,
                           contact_step_workspace, solved_store)
from .dynamics import Actuation, DynamicsData, FreeDynamics, setup_multibody
from .held import Held, held
from .residuals import Residual
from .stage import StageModel
from .trial import IMPULSE, NO_PROGRESS, no_kinematics, rollout_contact, rollout_python


class ContactDynamicsData(DynamicsData):
    """Outputs of :class:`ContactDynamics` for K knots.

    Besides f (K, ndx), f_x (K, ndx, ndx), f_u (K, ndx, nu) and the model Data
    ``dynamics`` (placements, J, M, ddq of every knot): ``lam`` (K, nc),
    ``lam_x`` (K, nc, ndx), ``lam_u`` (K, nc, nu), the raw partials
    ``ddq_dtau`` (K, nv, nv), ``dlam_dq``, ``dlam_dv``, ``dlam_dtau`` (K, nc, nv)
    (with ``dynamics.ddq_dq``, ``dynamics.ddq_dv``: filled by :meth:`ContactDynamics.
    calc_diff`, not by the fused phase when the actuation selects dofs without damping,
    which writes f_x, f_u, lam_x, lam_u from its KKT pass in u directly),
    and the stamp: ``xs``, ``us`` and ``evaluated`` (EMPTY, VALUES or
    DERIVATIVES; ``holding`` (1,) stores it, for the phase kernels).
    ``dynamics.contact`` points back to this object.
    """

    def __init__(self, owner, K):
        model, nv, nc = owner.model, owner.model.nv, owner.constraints.size
        ndx, nu = owner.state.ndx, owner.nu
        super().__init__(K, ndx, nu, model)
        self.owner = owner
        self.lam = np.zeros((K, nc))
        self.lam_x = np.zeros((K, nc, ndx))
        self.lam_u = np.zeros((K, nc, nu))
        self.ddq_dtau = np.zeros((K, nv, nv))
        self.dlam_dq = np.zeros((K, nc, nv))
        self.dlam_dv = np.zeros((K, nc, nv))
        self.dlam_dtau = np.zeros((K, nc, nv))
        self.iterations = np.zeros(K, dtype=np.int64)
        self.regular = np.ones(K, dtype=np.bool_)
        self.xs = np.full((K, owner.state.nx), np.nan)
        self.us = np.full((K, nu), np.nan)
        # what the stamp holds, in an array that the fused phase's kernel writes too
        self.holding = np.full(1, EMPTY, dtype=np.int64)
        self.dynamics.contact = self
        # each knot's solve of the last trial rollout (none for impacts), which calc_diff
        # at the accepted trial reuses (contact_step.solved_store)
        self.solved = solved_store(owner, K if owner.keeps_trial_solve else 0)

    @property
    def evaluated(self):
        return int(self.holding[0])

    @evaluated.setter
    def evaluated(self, value):
        self.holding[0] = value

    def stamp(self, xs, us, evaluated):
        self.xs[:] = xs
        self.us[:] = us
        self.evaluated = evaluated

    def holds(self, owner, xs, us, evaluated):
        """Whether this data holds ``owner``'s outputs at (xs, us), derivatives included
        when ``evaluated`` is DERIVATIVES."""
        return (self.owner is owner and self.evaluated >= evaluated
                and self.xs.shape == xs.shape and self.us.shape == us.shape
                and np.array_equal(self.xs, xs) and np.array_equal(self.us, us))


class ContactDynamics:
    """Forward dynamics of a multibody under rigid contacts (and loop closures).

    Parameters
    ----------
    model : dynamics Model.
    constraints : a :class:`~geppetto.dynamics.constraints.ConstraintSet` or a
        list of constraints (``contact_3d``, ``contact_6d``, ``loop_closure``):
        the contacts active in this phase.
    actuation : :class:`~.dynamics.Actuation` (default: floating base when the
        root joint is a free-flyer, else fully actuated).
    mu, max_iterations, accuracy : the proximal settings of
        ``constraint_dynamics`` (mu = 0: the exact KKT solve; mu > 0 and a few
        iterations for redundant constraints).
    armature : (nv,) rotor inertias (default: the model's).
    damping : (nv,) viscous joint damping D (default: none).

    ``calc`` and ``calc_diff`` raise FloatingPointError when the contacts are
    degenerate at a knot (J M^-1 J^T + mu I singular): the solvers end such a
    step with a status.
    """

    # the data keeps each knot's solve of the trial rollout for calc_diff (solved_store)
    keeps_trial_solve = True

    def __init__(self, model, constraints, actuation=None, mu=0.0, max_iterations=1,
                 accuracy=1e-12, armature=None, damping=None):
        self.model = model
        self.constraints = as_constraint_set(model, constraints)
        self.mu, self.max_iterations, self.accuracy = _settings(mu, max_iterations, accuracy)
        if actuation is None:
            free_flyer = model.njoints > 1 and model.arrays.jtype[1] == FREE_FLYER
            actuation = Actuation.floating_base(model) if free_flyer else Actuation.full(model)
        setup_multibody(self, model, actuation, armature, damping)
        self.nc = self.constraints.size

    def create_data(self, K):
        return ContactDynamicsData(self, K)

    def constraint_index(self, constraint):
        """Index of a constraint of the set, by index or by name."""
        names = self.constraints.names
        if isinstance(constraint, str):
            if constraint not in names:
                raise KeyError(f"no constraint named {constraint!r}; the contacts are {names}")
            return names.index(constraint)
        index = int(constraint)
        if not 0 <= index < len(names):
            raise ValueError(f"constraint index {constraint!r}: expected 0 <= index < "
                             f"{len(names)}")
        return index

    def _torques(self, data, xs, us):
        nq = self.model.nq
        np.matmul(us, self.actuation.B.T, out=data.tau)
        data.tau -= self.damping * xs[:, nq:]
        return np.ascontiguousarray(xs[:, :nq]), np.ascontiguousarray(xs[:, nq:])

    def _check_regular(self, data):
        if not np.all(data.regular):
            knots = np.flatnonzero(~data.regular).tolist()
            raise FloatingPointError(
                f"contacts {self.constraints.names} are degenerate at knots {knots}: "
                f"J M^-1 J^T + mu I is singular (mu = {self.mu})")

    def calc(self, data, xs, us):
        """f = (v, ddq) for every knot; fills data.f (K, ndx), data.lam (K, nc)
        and the kinematics of the knots (data.dynamics: oR, op, J)."""
        qs, vs = self._torques(data, xs, us)
        d = data.dynamics
        constraint_dynamics_parallel(
            self.arrays, self.constraints.arrays, qs, vs, data.tau, self.mu,
            self.max_iterations, self.accuracy, d.liR, d.lip, d.oR, d.op, d.J, d.Ycrb, d.M,
            d.ddq, data.lam, data.iterations, data.regular, num_threads())
        self._check_regular(data)
        nv = self.model.nv
        data.f[:, :nv] = vs
        data.f[:, nv:] = d.ddq
        data.stamp(xs, us, VALUES)
        return data.f

    def calc_diff(self, data, xs, us):
        """f, f_x, f_u for every knot; also lam, lam_x (K, nc, ndx), lam_u (K, nc, nu)."""
        qs, vs = self._torques(data, xs, us)
        d = data.dynamics
        constraint_dynamics_derivatives_parallel(
            self.arrays, self.constraints.arrays, qs, vs, data.tau, self.mu,
            self.max_iterations, self.accuracy, d.liR, d.lip, d.oR, d.op, d.J, d.Ycrb, d.M,
            d.ddq, data.lam, data.iterations, data.regular, d.ddq_dq, d.ddq_dv, data.ddq_dtau,
            data.dlam_dq, data.dlam_dv, data.dlam_dtau, num_threads())
        self._check_regular(data)
        _contact_jacobians(vs, d.ddq, d.ddq_dq, d.ddq_dv, data.ddq_dtau, data.dlam_dq,
                           data.dlam_dv, data.dlam_dtau, self.actuation.B, self.damping, data.f,
                           data.f_x, data.f_u, data.lam_x, data.lam_u)
        data.stamp(xs, us, DERIVATIVES)
        return data.f, data.f_x, data.f_u

    def fused_step(self, data, level):
        """The :func:`.fused._contact_field` step of a phase function on ``data`` (a
        ContactDynamicsData; its solve leaves the placements and world Jacobians, whatever
        ``level``)."""
        from .fused import CALC, COSTS, DIFF, Step, _contact_field, _contact_field_diff
        d, K, nq, nv = data.dynamics, data.K, self.model.nq, self.model.nv
        ca = self.constraints.arrays
        buffers = (np.zeros((K, nq)), np.zeros((K, nv)), data.tau)
        arrays = (d.liR, d.lip, d.oR, d.op, d.J, d.Ycrb, d.M, d.ddq)
        out = (data.f, data.f_x, data.f_u, data.lam, data.lam_x, data.lam_u, d.ddq_dq,
               d.ddq_dv, data.ddq_dtau, data.dlam_dq, data.dlam_dv, data.dlam_dtau,
               data.iterations, data.regular)
        columns = self._actuated_dofs()
        direct = columns is not None
        if not direct:
            columns = np.arange(nv)
        arguments = (ca, np.ascontiguousarray(self.actuation.B),
                     np.ascontiguousarray(self.damping), self._fused_settings(), buffers,
                     arrays, out, (data.xs, data.us, data.holding),
                     constrained_workspace(self.arrays, ca),
                     derivatives_workspace(self.arrays, ca, columns), data.solved, direct)
        return Step(held((self.arrays, arguments)), _contact_field, separate=True,
                    failed=lambda: self._check_regular(data),
                    by_mode={CALC: _contact_field, DIFF: _contact_field_diff,
                             COSTS: _contact_field})

    def _actuated_dofs(self):
        """The dofs that the actuation B selects (B[:, c] the unit vector of dof
        columns[c]), or None when B is not such a selection or the joints are damped: then
        the fused calc_diff forms d/du = d/dtau B (:func:`.fused._contact_field_diff`)."""
        B = np.asarray(self.actuation.B)
        if np.any(np.asarray(self.damping) != 0.0) or not np.all((B == 0.0) | (B == 1.0)):
            return None
        if not np.all(np.count_nonzero(B, axis=0) == 1):
            return None
        columns = np.argmax(B, axis=0).astype(np.int64)
        return columns if len(set(columns.tolist())) == len(columns) else None

    def _fused_settings(self):
        return float(self.mu), int(self.max_iterations), float(self.accuracy)

    # -- the solvers' trial step (see :mod:`.trial`) ---------------------------
    def _trial_stage(self, integrator):
        """The ``stage`` tuple of :func:`.trial.rollout_contact`, or None where the
        scheme has no jitted step (Runge-Kutta: stepped in Python)."""
        if integrator.scheme not in CONTACT_SCHEMES:
            return None
        return (np.ascontiguousarray(self.actuation.B), np.ascontiguousarray(self.damping),
                self._fused_settings(), CONTACT_SCHEMES[integrator.scheme],
                float(integrator.dt), 0.0)

    def stores_trial_kinematics(self, integrator):
        """Whether the trial rollout can store the knots' placements, world Jacobians and
        forces (the schemes of :func:`.trial.rollout_contact`: its step solves the
        contacts at the knot)."""
        return self._trial_stage(integrator) is not None

    def trial_workspace(self, integrator, kinematics=None, forces=None):
        """Scratch of :meth:`rollout_trial`; ``kinematics`` (level, liR, lip, oR, op, J)
        and ``forces`` (the phase's ContactDynamicsData): where the rollout stores its
        knots' kinematics (level > 0) and forces lam (see :func:`.trial.rollout_contact`)."""
        if self._trial_stage(integrator) is None:
            return integrator.create_data(1)
        if forces is None:
            store = (np.zeros((0, self.nc)), np.zeros((0, self.state.nx)),
                     np.zeros((0, self.nu)), np.zeros(1, dtype=np.int64),
                     solved_store(self, 0))
        else:
            store = (forces.lam, forces.xs, forces.us, forces.holding, forces.solved)
        ca = self.constraints.arrays
        return held((self.arrays, ca, self._trial_stage(integrator),
                     contact_step_workspace(self.arrays, ca, self.state.nx),
                     (kinematics or no_kinematics(),) + store))

    def rollout_trial(self, integrator, inputs, x_start, outputs, workspace):
        """The line-search trial of a phase: one kernel (:func:`.trial.rollout_contact`)."""
        if isinstance(workspace, Held):     # held by trial_workspace: a jitted step
            return rollout_contact(workspace, inputs, x_start, outputs, NO_PROGRESS, -1)
        return rollout_python(integrator, inputs, x_start, outputs, workspace)

    def quasi_static(self, xs):
        """Controls us (K, nu) that hold each state still at v = 0 with the contacts
        carrying the rest of the weight: the least-norm (u, lambda) of
        B u + Jc^T lambda = g(q), as a warm start (exact when B and Jc^T span g)."""
        xs = np.atleast_2d(np.asarray(xs, dtype=float))
        qs = np.ascontiguousarray(xs[:, :self.model.nq])
        data = self.model.create_data()
        g = generalized_gravity(self.model, data, qs)
        Jc = constraint_jacobian(self.model, data, qs, self.constraints)
        us = np.empty((xs.shape[0], self.nu))
        for k in range(xs.shape[0]):
            A = np.hstack([self.actuation.B, Jc[k].T])
            us[k] = np.linalg.lstsq(A, g[k], rcond=None)[0][:self.nu]
        return us

    def __repr__(self):
        return (f"ContactDynamics({self.model.name!r}, {self.constraints.names}, "
                f"nu={self.nu})")


class ImpulseDynamics(ContactDynamics):
    """Impact of the contacts ``constraints`` (a touchdown), as a stage field.

    Use it as ``StageModel(ImpulseDynamics(...), costs, dt=1.0)`` (explicit Euler,
    ``required_integrator``; symplectic Euler would move q by v+): the stage maps
    x = (q, v-) to (q, v+), with M (v+ - v-) = Jc^T Lambda and Jc v+ = -e Jc v-
    (``restitution`` e, 0 for a plastic impact).  It has no controls (nu = 0, as
    Crocoddyl's impulse models): in a problem whose other knots are actuated its
    controls are padding (see :class:`~.problem.ShootingProblem`), with no cost of
    their own.  Stage costs are not scaled (dt = 1), as Crocoddyl's impulse models.
    ``data.lam`` holds Lambda (K, nc), ``data.dynamics.ddq`` holds v+.
    """

    required_integrator = "explicit_euler"
    keeps_trial_solve = False

    def __init__(self, model, constraints, restitution=0.0, mu=0.0, max_iterations=1,
                 accuracy=1e-12, armature=None):
        super().__init__(model, constraints, Actuation(np.zeros((model.nv, 0))), mu,
                         max_iterations, accuracy, armature)
        restitution = float(restitution)
        if not 0.0 <= restitution <= 1.0:
            raise ValueError(f"restitution = {restitution!r}: expected a number in [0, 1]")
        self.restitution = restitution
        gravity = np.zeros(6)
        gravity.setflags(write=False)
        self.arrays_without_gravity = self.arrays._replace(gravity=gravity)
        gains = np.zeros(self.constraints.arrays.n)
        gains.setflags(write=False)
        self.constraints_without_gains = self.constraints.arrays._replace(Kp=gains, Kd=gains)

    def __setstate__(self, state):
        # the kernels' read-only arrays stay read-only in a pickled or deep copy (see
        # Model.__setstate__); the model and the constraint set freeze their own
        self.__dict__.update(state)
        freeze_arrays(self.arrays_without_gravity)
        freeze_arrays(self.constraints_without_gains)

    def _states(self, xs):
        nq = self.model.nq
        return np.ascontiguousarray(xs[:, :nq]), np.ascontiguousarray(xs[:, nq:])

    def _field(self, data, vs):
        nv = self.model.nv
        data.f[:, :nv] = 0.0
        np.subtract(data.dynamics.ddq, vs, out=data.f[:, nv:])

    def calc(self, data, xs, us):
        """f = (0, v+ - v-) for every knot; data.lam the impulses."""
        qs, vs = self._states(xs)
        d = data.dynamics
        regular = _impulse_dynamics(
            self.arrays, self.constraints.arrays, qs, vs, self.restitution, self.mu,
            self.max_iterations, self.accuracy, d.liR, d.lip, d.oR, d.op, d.J, d.Ycrb, d.M,
            d.ddq, data.lam, data.iterations)
        data.regular[:] = regular
        self._check_regular(data)
        self._field(data, vs)
        data.stamp(xs, us, VALUES)
        return data.f

    def calc_diff(self, data, xs, us):
        """f, f_x, f_u (zero) for every knot; lam, lam_x, lam_u (zero)."""
        qs, vs = self._states(xs)
        d = data.dynamics
        regular = _impulse_dynamics_derivatives(
            self.arrays, self.arrays_without_gravity, self.constraints.arrays,
            self.constraints_without_gains, qs, vs, self.restitution, self.mu,
            self.max_iterations, self.accuracy, d.liR, d.lip, d.oR, d.op, d.J, d.Ycrb, d.M,
            d.ddq, data.lam, data.iterations, d.ddq_dq, d.ddq_dv, data.dlam_dq, data.dlam_dv)
        data.regular[:] = regular
        self._check_regular(data)
        self._field(data, vs)
        nv = self.model.nv
        data.f_x[:, :nv, :] = 0.0
        data.f_x[:, nv:, :nv] = d.ddq_dq
        data.f_x[:, nv:, nv:] = d.ddq_dv
        idx = np.arange(nv)
        data.f_x[:, nv + idx, nv + idx] -= 1.0
        data.f_u[:] = 0.0
        data.lam_x[:, :, :nv] = data.dlam_dq
        data.lam_x[:, :, nv:] = data.dlam_dv
        data.lam_u[:] = 0.0
        data.stamp(xs, us, DERIVATIVES)
        return data.f, data.f_x, data.f_u

    def fused_step(self, data, level):
        """The :func:`.fused._impulse_field` step of a phase function on ``data``."""
        from .fused import CALC, COSTS, DIFF, Step, _impulse_field, _impulse_field_diff
        d, K, nq, nv = data.dynamics, data.K, self.model.nq, self.model.nv
        ca = self.constraints.arrays
        arrays = (d.liR, d.lip, d.oR, d.op, d.J, d.Ycrb, d.M, d.ddq)
        out = (data.f, data.f_x, data.f_u, data.lam, data.lam_x, data.lam_u, d.ddq_dq,
               d.ddq_dv, data.dlam_dq, data.dlam_dv, data.iterations, data.regular)
        arguments = (self.arrays_without_gravity, ca, self.constraints_without_gains,
                     float(self.restitution), self._fused_settings(),
                     (np.zeros((K, nq)), np.zeros((K, nv))), arrays, out,
                     (data.xs, data.us, data.holding),
                     *impulse_derivatives_workspace(self.arrays, ca))
        return Step(held((self.arrays, arguments)), _impulse_field, separate=True,
                    failed=lambda: self._check_regular(data),
                    by_mode={CALC: _impulse_field, DIFF: _impulse_field_diff,
                             COSTS: _impulse_field})

    def _trial_stage(self, integrator):
        if integrator.scheme != "explicit_euler" or integrator.dt != 1.0:
            return None
        return (np.ascontiguousarray(self.actuation.B), np.ascontiguousarray(self.damping),
                self._fused_settings(), IMPULSE, 1.0, float(self.restitution))

    def quasi_static(self, xs):
        """Zero controls (K, nu): an impact does not depend on them."""
        return np.zeros((np.atleast_2d(xs).shape[0], self.nu))

    def __repr__(self):
        return (f"ImpulseDynamics({self.model.name!r}, {self.constraints.names}, "
                f"restitution={self.restitution})")


# --- gaits -------------------------------------------------------------------------------

class GaitPhase:
    """What :func:`gait_stages` tells the ``costs`` function about a stage: ``index``
    of the gait entry, ``feet`` in contact (tuple of frame names), ``dynamics``,
    ``start`` (its first knot in the problem), ``knots`` (its number of knots),
    ``impulse`` (True for a touchdown stage, one knot) and ``touchdown`` (the
    feet that touch the ground at the start of this gait entry, empty when none)."""

    __slots__ = ("index", "feet", "dynamics", "start", "knots", "impulse", "touchdown")

    def __init__(self, index, feet, dynamics, start, knots, impulse, touchdown=()):
        self.index, self.feet, self.dynamics = index, feet, dynamics
        self.start, self.knots, self.impulse = start, knots, impulse
        self.touchdown = touchdown

    def __repr__(self):
        kind = "impulse" if self.impulse else "phase"
        return f"GaitPhase({kind} {self.index}, feet={self.feet}, knots={self.start}+{self.knots})"


IMPULSE_FEET = ("all", "touchdown")


def gait_stages(model, gait, costs, dt, size=3, reference=LOCAL_WORLD_ALIGNED, Kp=0.0,
                Kd=0.0, actuation=None, impulses=True, integrator="euler",
                impulse_feet="all"):
    """Running stages of a multi-phase legged problem from a gait description.

    Parameters
    ----------
    model : dynamics Model with a free-flyer root.
    gait : sequence of ``(feet, knots)``: the frames in contact (names; empty for
        a flight phase) during ``knots`` knots.  Consecutive entries are phases.
        The last entry may have 0 knots: the problem then ends with its touchdown
        impulse (the terminal state is the one after the impact, as in
        Crocoddyl's ``SimpleQuadrupedalGaitProblem``).
    costs : ``costs(phase) -> list of Cost`` for a :class:`GaitPhase` (build the
        force, friction-cone and swing-foot terms there; per-knot references can
        use ``phase.start`` and ``phase.knots``).
    dt : step of the phases.  size : 3 (point feet) or 6 (soles).
    reference, Kp, Kd : the contacts' frame and Baumgarte gains.
    actuation : default floating base.
    impulses : insert an :class:`ImpulseDynamics` stage (dt = 1, no controls: its
        ``costs`` must not use them) before every phase in which a foot touches down.
    integrator : scheme of the phases; default "euler", symplectic Euler (Crocoddyl's
        ``IntegratedActionModelEuler``: v' = v + dt a, q' = q (+) dt v').
        "explicit_euler" (q' = q (+) dt v) also works but makes FDDP's Gauss-Newton model
        poor near touchdowns: on the solo12 trot the curvature it omits along
        the step (costates of ~1e4 times the second derivatives of the last
        swing knots' dynamics) was twice the curvature it models, and FDDP
        crept for 100 iterations where symplectic Euler converges in 20.
    impulse_feet : the contacts of an impulse stage: "all" the feet of the phase
        that follows (the feet already on the ground take part in the impact), or
        "touchdown" only the feet that land (Crocoddyl's ``createImpulseModel``).

    Returns
    -------
    (stages, phases): the N running :class:`~.stage.StageModel` (one object per
    phase, repeated: each phase is evaluated in one kernel call) and the list of
    :class:`GaitPhase`.  Pass the stages to ``ShootingProblem(x0, stages,
    terminal)``.
    """
    if size not in (3, 6):
        raise ValueError(f"contact size {size!r}: expected 3 (point) or 6 (sole)")
    if impulse_feet not in IMPULSE_FEET:
        raise ValueError(f"impulse_feet = {impulse_feet!r}: expected one of {IMPULSE_FEET}")
    make_contact = contact_3d if size == 3 else contact_6d
    actuation = Actuation.floating_base(model) if actuation is None else actuation
    gait = [(tuple(feet), int(knots)) for feet, knots in gait]

    def contacts(names):
        return [make_contact(model, foot, reference=reference, Kp=Kp, Kd=Kd) for foot in names]

    stages, phases, previous, start = [], [], (), 0
    for index, (feet, knots) in enumerate(gait):
        landing = tuple(f for f in feet if f not in previous) if index > 0 else ()
        last_impulse = knots == 0 and index == len(gait) - 1 and impulses and landing
        if knots < 1 and not last_impulse:
            raise ValueError(f"gait entry {index}: expected at least one knot, got {knots} "
                             "(0 only for a last entry that touches down)")
        if impulses and landing:
            impulse = ImpulseDynamics(model, contacts(feet if impulse_feet == "all" else landing))
            phase = GaitPhase(index, feet, impulse, start, 1, True, landing)
            stages.append(StageModel(impulse, costs(phase), dt=1.0, name=f"impulse {index}"))
            phases.append(phase)
            start += 1
        if knots == 0:
            break
        if feet:
            dynamics = ContactDynamics(model, contacts(feet), actuation)
        else:
            dynamics = FreeDynamics(model, actuation)
        phase = GaitPhase(index, feet, dynamics, start, knots, False, landing)
        stage = StageModel(dynamics, costs(phase), dt=dt, integrator=integrator,
                           name=f"phase {index}")
        stages.extend([stage] * knots)
        phases.append(phase)
        start += knots
        previous = feet
    return stages, phases


# --- residuals on the contact forces ------------------------------------------------------

def contact_outputs(dynamics, kinematics, xs, us, evaluated):
    """The :class:`ContactDynamicsData` of ``dynamics`` at (xs, us): the one the stage's
    dynamics left on ``kinematics`` when its stamp matches, else a scratch kept on
    ``kinematics`` (shared by the residuals of the stage), evaluated now."""
    xs = np.ascontiguousarray(xs)
    us = np.ascontiguousarray(us)
    data = getattr(kinematics, "contact", None)
    if data is not None and data.holds(dynamics, xs, us, evaluated):
        return data
    scratch = getattr(kinematics, "contact_scratch", None)
    if scratch is None or scratch.owner is not dynamics or scratch.K != xs.shape[0]:
        scratch = dynamics.create_data(xs.shape[0])
        if kinematics is not None:
            kinematics.contact_scratch = scratch
    if not scratch.holds(dynamics, xs, us, evaluated):
        if evaluated == DERIVATIVES:
            dynamics.calc_diff(scratch, xs, us)
        else:
            dynamics.calc(scratch, xs, us)
    return scratch


class _ContactResidual(Residual):
    """Base: a residual of one constraint's force lambda_c (rows ``self.rows``)."""

    uses_control = True

    def __init__(self, contact_dynamics, constraint):
        if not isinstance(contact_dynamics, ContactDynamics):
            raise ValueError("a contact residual needs the ContactDynamics of its stage, got "
                             f"{type(contact_dynamics).__name__}")
        self.dynamics = contact_dynamics
        self.index = contact_dynamics.constraint_index(constraint)
        self.constraint = contact_dynamics.constraints.constraints[self.index]
        self.rows = contact_dynamics.constraints.rows(self.index)
        self.dofs = _supporting_dofs(contact_dynamics.model, self.constraint.joint1)

    def create_data(self, K, ndx, nu):
        if ndx != self.dynamics.state.ndx or nu != self.dynamics.nu:
            raise ValueError(f"{type(self).__name__}: the stage (ndx={ndx}, nu={nu}) is not "
                             f"that of its ContactDynamics (ndx={self.dynamics.state.ndx}, "
                             f"nu={self.dynamics.nu})")
        return super().create_data(K, ndx, nu)

    def _outputs(self, kinematics, xs, us, evaluated):
        if us is None:
            raise ValueError(f"{type(self).__name__} needs the controls (a running stage)")
        return contact_outputs(self.dynamics, kinematics, xs, us, evaluated)

    reads_dynamics = True       # its values need the stage's dynamics at the point
    world = True                # the axes of :meth:`_force_in`'s force (True: world)

    def _map(self):
        """A (nr, n): r = A w[:n] (- reference) of the force w of :meth:`_force_in`; None
        when r is not linear in w (no fused step)."""
        return None

    def fused_step(self, data, kinematics, state):
        """The :func:`.fused._contact_wrench` step, reading the forces the stage's
        dynamics left in ``kinematics.contact`` (None when they are another object's)."""
        from .fused import Step, _contact_wrench
        contact = getattr(kinematics, "contact", None)
        A = self._map()
        if A is None or contact is None or contact.owner is not self.dynamics:
            return None
        rotate = 0
        if self.world is not None and self.world != (self.constraint.reference != LOCAL):
            rotate = 1 if self.world else 2
        K, ndx, nu = data.Rx.shape[0], data.Rx.shape[2], data.Ru.shape[2]
        size = self.rows.stop - self.rows.start
        reference = data.reference if data.reference.shape[1] == self.nr else np.zeros((K, 0))
        return Step((contact.lam, contact.lam_x, contact.lam_u, kinematics.oR, kinematics.J,
                     int(self.constraint.joint1), np.array(self.constraint.R1),
                     int(self.rows.start), self.dofs, np.ascontiguousarray(A), reference,
                     rotate, data.r, data.Rx, data.Ru, np.zeros((K, size)),
                     np.zeros((K, size, ndx)), np.zeros((K, size, nu)), np.zeros((3, 3))),
                    _contact_wrench)

    def _rotation(self, out):
        """R (K, 3, 3): the contact frame's axes in the world at every knot."""
        return out.dynamics.oR[:, self.constraint.joint1] @ self.constraint.R1

    def _force_in(self, out, world, with_derivatives):
        """The constraint's force (and torque) blocks of 3 in world axes (``world``) or
        in the contact frame's axes: (w (K, size), w_x (K, size, ndx), w_u (K, size,
        nu)), the Jacobians None without derivatives.  With dtheta = J_w dq the world
        angular displacement of the contact frame and dR = [dtheta]x R, a block
        lambda_b expressed in the other axes moves as

            d(R l) = R dl - [R l]x J_w dq,     d(R^T l) = R^T dl + R^T [l]x J_w dq.
        """
        lam = out.lam[:, self.rows]
        lam_x = out.lam_x[:, self.rows] if with_derivatives else None
        lam_u = out.lam_u[:, self.rows] if with_derivatives else None
        if world == (self.constraint.reference != LOCAL):
            return lam, lam_x, lam_u
        R = self._rotation(out)
        Rt = R if world else np.swapaxes(R, 1, 2)
        w = np.empty_like(lam)
        w_x = np.empty_like(lam_x) if with_derivatives else None
        w_u = np.empty_like(lam_u) if with_derivatives else None
        J_w = out.dynamics.J[:, 3:, :][:, :, self.dofs] if with_derivatives else None
        for b in range(0, lam.shape[1], 3):
            block = slice(b, b + 3)
            w[:, block] = np.einsum("kab,kb->ka", Rt, lam[:, block])
            if not with_derivatives:
                continue
            w_x[:, block] = Rt @ lam_x[:, block]
            w_u[:, block] = Rt @ lam_u[:, block]
            if world:
                w_x[:, block, self.dofs] -= np.cross(w[:, block, None], J_w, axis=1)
            else:
                w_x[:, block, self.dofs] += Rt @ np.cross(lam[:, block, None], J_w, axis=1)
        return w, w_x, w_u


class ContactForceResidual(_ContactResidual):
    """r = lambda_c - reference (3 for a point contact, 6 for a frame contact).

    The force is that of :mod:`geppetto.dynamics.constraints`: what the
    environment exerts on the contact frame, in the constraint's frame (LOCAL:
    the frame's axes; LOCAL_WORLD_ALIGNED: world axes), linear part first.
    ``constraint``: its index in the ContactDynamics' set or its name.
    Rx = lambda_x, Ru = lambda_u (from the dynamics' derivatives).
    """

    def __init__(self, contact_dynamics, constraint, reference=None):
        super().__init__(contact_dynamics, constraint)
        self.nr = self.constraint.size
        self.reference = np.zeros(self.nr) if reference is None else np.asarray(reference,
                                                                                 float)

    world = None                # the force as the constraint gives it

    def _map(self):
        return np.eye(self.nr)

    def calc(self, data, kinematics, xs, us):
        out = self._outputs(kinematics, xs, us, VALUES)
        np.subtract(out.lam[:, self.rows], data.reference, out=data.r)

    def calc_diff(self, data, kinematics, xs, us):
        out = self._outputs(kinematics, xs, us, DERIVATIVES)
        np.subtract(out.lam[:, self.rows], data.reference, out=data.r)
        data.Rx[:] = out.lam_x[:, self.rows]
        data.Ru[:] = out.lam_u[:, self.rows]


def _supporting_dofs(model, joint):
    """Velocity indices of the joints from the root to ``joint``."""
    m = model.arrays
    dofs = []
    j = joint
    while j > 0:
        dofs.extend(range(m.idx_v[j], m.idx_v[j] + m.nvs[j]))
        j = m.parents[j]
    return np.array(sorted(dofs), dtype=np.int64)


def _friction_coefficient(mu):
    mu = float(mu)
    if not (np.isfinite(mu) and mu > 0.0):
        raise ValueError(f"friction coefficient mu = {mu!r}: expected a finite number > 0")
    return mu


def _surface_basis(normal):
    """(n, t1, t2): the unit normal and two tangents, a right-handed orthonormal basis."""
    n = np.asarray(normal, dtype=float).reshape(3)
    if not (np.all(np.isfinite(n)) and np.linalg.norm(n) > 0.0):
        raise ValueError(f"normal {normal!r}: expected a non-zero finite 3-vector")
    n = n / np.linalg.norm(n)
    helper = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = helper - n.dot(helper) * n
    t1 /= np.linalg.norm(t1)
    return n, t1, np.cross(n, t1)


class _LinearForceResidual(_ContactResidual):
    """Base: r = A w[:n] (``self.A`` (nr, n), no reference) of the force w of
    :meth:`_force_in` in the axes of ``world``."""

    def reference_shape(self):
        return (0,)

    def _map(self):
        return self.A

    def calc(self, data, kinematics, xs, us):
        out = self._outputs(kinematics, xs, us, VALUES)
        w = self._force_in(out, self.world, False)[0]
        np.matmul(w[:, :self.A.shape[1]], self.A.T, out=data.r)

    def group_key(self):
        """Residuals of equal keys are evaluated together by :class:`LinearForceRows`
        (their rows need no rotation: the force's axes are those of ``world``); None
        for one that rotates its force."""
        if self.world != (self.constraint.reference != LOCAL):
            return None
        return (id(self.dynamics), self.A.shape)

    @staticmethod
    def group(members, K, ndx, nu):
        """The :class:`LinearForceRows` of ``members`` (equal :meth:`group_key`)."""
        return LinearForceRows(members, K, ndx, nu)

    def calc_diff(self, data, kinematics, xs, us):
        out = self._outputs(kinematics, xs, us, DERIVATIVES)
        w, w_x, w_u = self._force_in(out, self.world, True)
        n = self.A.shape[1]
        np.matmul(w[:, :n], self.A.T, out=data.r)
        np.matmul(self.A, w_x[:, :n], out=data.Rx)
        np.matmul(self.A, w_u[:, :n], out=data.Ru)


@kernel
def _linear_force_rows(lam, lam_x, lam_u, A, starts, with_derivatives, r, Rx, Ru):
    """The rows of M linear force residuals of one contact dynamics' forces, in world
    axes without rotation (:meth:`_LinearForceResidual.group_key`): member m's row i,
    column m nr + i of r (K, M nr), is sum_j A[m, i, j] lam[:, starts[m] + j] (and its
    Jacobians Rx, Ru from lam_x, lam_u the same way), the products along the Jacobian
    rows (contiguous).  One call for a stage's feet, where each foot's stamp check and
    three numpy matmuls cost 48 us per DIFF (go1 "cones", 40 knots, in the solve)."""
    M, nr, n = A.shape
    ndx, nu = Rx.shape[2], Ru.shape[2]
    for k in range(r.shape[0]):
        for m in range(M):
            s0 = starts[m]
            for i in range(nr):
                row = m * nr + i
                v = 0.0
                for j in range(n):
                    v += A[m, i, j] * lam[k, s0 + j]
                r[k, row] = v
                if not with_derivatives:
                    continue
                for a in range(ndx):
                    Rx[k, row, a] = 0.0
                for a in range(nu):
                    Ru[k, row, a] = 0.0
                for j in range(n):
                    c = A[m, i, j]
                    for a in range(ndx):
                        Rx[k, row, a] += c * lam_x[k, s0 + j, a]
                    for a in range(nu):
                        Ru[k, row, a] += c * lam_u[k, s0 + j, a]


class LinearForceRows:
    """The linear force residuals (:class:`_LinearForceResidual`: friction pyramids,
    unilateral rows) of one stage on one contact dynamics, evaluated together: one stamp
    check (:func:`contact_outputs`) and one kernel call (:func:`_linear_force_rows`) for
    every member, their rows side by side in ``r`` (K, M nr), ``Rx``, ``Ru`` (member m:
    columns m nr .. m nr + nr, :meth:`rows`).  ``members``: residuals with the same
    :meth:`_LinearForceResidual.group_key`."""

    def __init__(self, members, K, ndx, nu):
        self.dynamics = members[0].dynamics
        self.A = np.ascontiguousarray(np.stack([m.A for m in members]))
        self.starts = np.array([m.rows.start for m in members], dtype=np.int64)
        M, nr = self.A.shape[:2]
        self.nr = nr
        self.r = np.zeros((K, M * nr))
        self.Rx = np.zeros((K, M * nr, ndx))
        self.Ru = np.zeros((K, M * nr, nu))

    def rows(self, m):
        """Member m's columns of r (int64)."""
        return np.arange(m * self.nr, (m + 1) * self.nr, dtype=np.int64)

    def evaluate(self, kinematics, xs, us, with_derivatives):
        """The members' rows at (xs, us) (with their Jacobians), reading the forces the
        stage's dynamics left on ``kinematics`` (or evaluating them, as each member's
        ``calc`` does)."""
        out = contact_outputs(self.dynamics, kinematics, xs, us,
                              DERIVATIVES if with_derivatives else VALUES)
        _linear_force_rows(out.lam, out.lam_x, out.lam_u, self.A, self.starts,
                           with_derivatives, self.r, self.Rx, self.Ru)


class FrictionConeResidual(_LinearForceResidual):
    """Linearized Coulomb cone of one contact: 5 rows, each >= 0 inside the cone.

    With f the linear contact force in the world (lambda_c[:3], rotated by the
    contact frame's orientation when the constraint is LOCAL), n the surface
    normal (world, unit), t1, t2 tangents completing (t1, t2, n) to a right-handed
    orthonormal basis, and mu' = mu / sqrt(2) (``inner=True``, the pyramid
    inscribed in the cone) or mu:

        r = (mu' n.f - t1.f,  mu' n.f + t1.f,  mu' n.f - t2.f,  mu' n.f + t2.f,  n.f)

    ``bounds`` = (0, inf) row-wise, with the last lower bound ``min_force`` on
    the normal force.  Use ``Cost(r, QuadraticBarrier(*r.bounds))`` or
    ``Constraint(r, *r.bounds)``.  For LOCAL constraints,
    d(R lambda) = R dlambda + dtheta x (R lambda), dtheta = J_w dq the world
    angular displacement of the contact frame.
    """

    nr = 5

    def __init__(self, contact_dynamics, constraint, mu, normal=(0.0, 0.0, 1.0), inner=True,
                 min_force=0.0):
        super().__init__(contact_dynamics, constraint)
        mu = _friction_coefficient(mu)
        n, t1, t2 = _surface_basis(normal)
        mu_eff = mu / np.sqrt(2.0) if inner else mu
        self.mu, self.normal = mu, n
        self.A = np.array([mu_eff * n - t1, mu_eff * n + t1, mu_eff * n - t2, mu_eff * n + t2,
                           n])
        self.reference = np.zeros(0)
        lower = np.zeros(self.nr)
        lower[-1] = float(min_force)
        self.bounds = (lower, np.full(self.nr, np.inf))


class SmoothFrictionConeResidual(_ContactResidual):
    """Coulomb's (second-order) cone of one contact as one smooth row, >= 0 inside:

        r = mu f_n - sqrt(|f_t|^2 + eps^2),   f_n = n.f,  f_t = (t1.f, t2.f),

    f the contact's linear force in the world (as :class:`FrictionConeResidual`).
    r >= 0 is |f_t| <= mu f_n, the exact cone, except that eps (N) rounds its
    apex: the norm is not differentiable at f_t = 0, where a standing foot's
    force lies, and with eps > 0 the row is smooth everywhere, its gradient
    bounded, and r >= 0 asks f_n >= eps / mu (a pushing foot).  The row is a
    force, like the pyramid's rows, so the same barrier weights serve; mu^2
    f_n^2 - |f_t|^2 would be smooth too, but also >= 0 on the negative cone
    (a pulling foot) and in N^2.  Exact derivatives:

        dr/df = mu n - (f_t1 t1 + f_t2 t2) / sqrt(|f_t|^2 + eps^2),
        Rx = dr/df f_x,  Ru = dr/df f_u.

    ``bounds`` = (0, inf): use ``Cost(r, QuadraticBarrier(*r.bounds))`` or
    ``Constraint(r, *r.bounds)``.  A Gauss-Newton solver (FDDP) does not model
    the cone's curvature in f_t: where the contacts are redundant (four feet
    down) and only a small control regularization weighs their internal forces,
    its steps along them are long and poorly predicted.  Measured on the solo12
    trot of ``examples/solo12_trot.py`` (all running weights Crocoddyl's): not
    converged after 100 FDDP iterations with this cone (steps of 1/64, eps from
    1e-3 to 1 N), 20 iterations with the pyramids; a standing problem (tests)
    converges with either.
    """

    nr = 1

    def __init__(self, contact_dynamics, constraint, mu, normal=(0.0, 0.0, 1.0), eps=1e-3):
        super().__init__(contact_dynamics, constraint)
        self.mu = _friction_coefficient(mu)
        eps = float(eps)
        if not (np.isfinite(eps) and eps > 0.0):
            raise ValueError(f"eps = {eps!r}: expected a finite number > 0 (N)")
        self.eps = eps
        self.normal, t1, t2 = _surface_basis(normal)
        self.T = np.array([t1, t2])
        self.reference = np.zeros(0)
        self.bounds = (np.zeros(1), np.full(1, np.inf))

    def reference_shape(self):
        return (0,)

    def _row(self, f):
        """r (K,) and dr/df (K, 3) for world forces f (K, 3)."""
        ft = f @ self.T.T
        s = np.sqrt(np.einsum("ka,ka->k", ft, ft) + self.eps ** 2)
        dr_df = self.mu * self.normal - (ft / s[:, None]) @ self.T
        return self.mu * (f @ self.normal) - s, dr_df

    def calc(self, data, kinematics, xs, us):
        out = self._outputs(kinematics, xs, us, VALUES)
        data.r[:, 0] = self._row(self._force_in(out, True, False)[0][:, :3])[0]

    def calc_diff(self, data, kinematics, xs, us):
        out = self._outputs(kinematics, xs, us, DERIVATIVES)
        f, f_x, f_u = self._force_in(out, True, True)
        r, dr_df = self._row(f[:, :3])
        data.r[:, 0] = r
        np.einsum("ka,kac->kc", dr_df, f_x[:, :3], out=data.Rx[:, 0])
        np.einsum("ka,kac->kc", dr_df, f_u[:, :3], out=data.Ru[:, 0])


class CenterOfPressureResidual(_LinearForceResidual):
    """Centre of pressure of a 6D contact inside a rectangle of the contact frame:
    4 rows, each >= 0 when the CoP lies inside (for a positive normal force).

    With (f, tau) the contact wrench at the frame's origin in its axes (z the
    surface normal), the CoP is p = (-tau_y / f_z, tau_x / f_z); |p_x| <= X/2,
    |p_y| <= Y/2 for a sole of length X (along x) and width Y centred at the origin:

        r = (X/2 f_z + tau_y,  X/2 f_z - tau_y,  Y/2 f_z - tau_x,  Y/2 f_z + tau_x).

    ``bounds`` = (0, inf); use ``Cost(r, QuadraticBarrier(*r.bounds))`` or
    ``Constraint(r, *r.bounds)``.  LOCAL_WORLD_ALIGNED wrenches are rotated
    into the contact frame (with the derivative of the rotation).
    """

    nr = 4

    def __init__(self, contact_dynamics, constraint, length, width):
        super().__init__(contact_dynamics, constraint)
        if self.constraint.size != 6:
            raise ValueError(f"constraint {self.constraint.name!r} is a point contact: the "
                             "centre of pressure needs a 6D contact")
        length, width = float(length), float(width)
        if not (length > 0.0 and width > 0.0 and np.isfinite(length * width)):
            raise ValueError(f"sole {length!r} x {width!r}: expected positive sizes")
        self.length, self.width = length, width
        hx, hy = 0.5 * length, 0.5 * width
        self.A = np.array([[0.0, 0.0, hx, 0.0, 1.0, 0.0],
                           [0.0, 0.0, hx, 0.0, -1.0, 0.0],
                           [0.0, 0.0, hy, -1.0, 0.0, 0.0],
                           [0.0, 0.0, hy, 1.0, 0.0, 0.0]])
        self.reference = np.zeros(0)
        self.bounds = (np.zeros(self.nr), np.full(self.nr, np.inf))

    world = False
