"""Continuous-time stage dynamics: the tangent velocity field f(x, u) and its Jacobians.

A dynamics object maps a phase of K knots to ``f (K, ndx)`` (the time
derivative of x, in the tangent space at x) and, in ``calc_diff``, to
``f_x (K, ndx, ndx)`` and ``f_u (K, ndx, nu)``.  Integrators
(:mod:`.integrators`) turn it into discrete dynamics.

- :class:`Actuation`: tau = B u (full, floating base, any selection matrix).
- :class:`FreeDynamics`: a multibody without contacts, ddq = ABA(q, v, B u -
  damping * v) with the model's armature (optionally replaced);
  f = (v, ddq), derivatives from ``aba_derivatives`` (Carpentier & Mansard
  2018, eq. 24): f_x = [[0, I], [dddq_dq, dddq_dv - M^-1 D]],
  f_u = [[0], [M^-1 B]].  One parallel kernel call per phase; it also leaves
  the placements and world Jacobians of every knot in ``data.dynamics``,
  which the kinematic residuals read.
- :class:`CustomDynamics`: user-supplied batched functions (see
  :mod:`.custom_dynamics` for the unicycle and the quadrotor).
"""
import numba
import numpy as np

from ..dynamics.aba import _aba, _aba_parallel
from ..dynamics.aba_derivatives import _aba_derivatives, _aba_derivatives_parallel
from ..dynamics.model_ref import model_ref
from ..dynamics.config import num_threads
from ..dynamics.derivative_lanes import aba_tiles, aba_tiles_workspace
from ..dynamics.native import callee_address
from ..dynamics.model import FREE_FLYER
from ..dynamics.validation import as_float_array, as_vector, check_model
from .state import StateMultibody, StateVector
from .step import SCHEME_CODES, step_workspace
from .trial import NO_PROGRESS, no_kinematics, no_points, rollout_free, rollout_python


class Actuation:
    """tau = B u with B (nv, nu)."""

    def __init__(self, B):
        self.B = np.ascontiguousarray(as_float_array(B, "actuation matrix B"))
        if self.B.ndim != 2:
            raise ValueError(f"actuation matrix must be 2-D (nv, nu), got {self.B.shape}")
        if not np.all(np.isfinite(self.B)):
            raise ValueError("actuation matrix B: contains NaN or inf")
        self.nv, self.nu = self.B.shape

    def structure_key(self):
        return (type(self), self.B.shape, self.B.tobytes())

    @classmethod
    def full(cls, model):
        """Every dof actuated: B = I, nu = nv."""
        check_model(model)
        return cls(np.eye(model.nv))

    @classmethod
    def floating_base(cls, model):
        """The 6 coordinates of a free-flyer root unactuated, the rest actuated."""
        if model.njoints < 2 or model.arrays.jtype[1] != FREE_FLYER:
            raise ValueError(f"model {model.name!r} has no free-flyer root joint")
        return cls(np.eye(model.nv)[:, 6:])

    @classmethod
    def selection(cls, model, dofs):
        """Only the velocity indices ``dofs`` actuated (in that order)."""
        dofs = np.asarray(dofs, dtype=int)
        if np.any(dofs < 0) or np.any(dofs >= model.nv):
            raise ValueError(f"actuated dofs must lie in [0, {model.nv}), got {dofs}")
        return cls(np.eye(model.nv)[:, dofs])


class DynamicsData:
    """Batched outputs of a dynamics object for K knots (and its model Data)."""

    def __init__(self, K, ndx, nu, model=None):
        self.K = K
        self.f = np.zeros((K, ndx))
        self.f_x = np.zeros((K, ndx, ndx))
        self.f_u = np.zeros((K, ndx, nu))
        self.dynamics = None if model is None else model.create_data()
        if model is not None:
            self.dynamics.resize(K)
            self.f_ext = np.zeros((K, model.njoints, 6))
            self.tau = np.zeros((K, model.nv))


def _threads():
    return num_threads()


def _serial_or_parallel(serial, parallel, dynamics, *args):
    """``serial(model, *args)`` on one Numba thread (ShootingProblem's default) or for
    one state (``args[0]``, the configurations, holds one row), else
    ``parallel(model, *args, threads)``: the same per-state kernel either way, so the
    results are the same bits, and the parallel kernel (about 20 s to compile,
    against 6 s for the serial one) is compiled only for those who use threads.
    ``model`` is the ModelRef of ``dynamics.arrays`` for the serial kernel (as the
    public functions pass it: one compiled specialization serves both), the tuple
    for the parallel one (a prange loop cannot take the tuple built from a ModelRef)."""
    threads = _threads()
    if threads == 1 or args[0].shape[0] < 2:      # one state: nothing to split
        serial(model_ref(dynamics), *args)
    else:
        parallel(dynamics.arrays, *args, threads)


def setup_multibody(dynamics, model, actuation, armature, damping):
    """The attributes every multibody dynamics shares: model, state, actuation, nu,
    arrays (the model's, with the armature replaced when given), damping."""
    check_model(model)
    dynamics.model = model
    dynamics.state = StateMultibody(model)
    dynamics.actuation = actuation
    if actuation.nv != model.nv:
        raise ValueError(f"actuation has {actuation.nv} rows, the model nv = {model.nv}")
    dynamics.nu = actuation.nu
    dynamics.arrays = model.arrays
    if armature is not None:
        armature = as_vector(armature, model.nv, "armature", nonnegative=True)
        dynamics.arrays = model.with_changes(armature=armature).arrays
    dynamics.damping = (np.zeros(model.nv) if damping is None
                        else as_vector(damping, model.nv, "damping"))
    dynamics.multibody = True


class FreeDynamics:
    """Forward dynamics of a multibody without contacts: ddq = ABA(q, v, B u - D v).

    Parameters
    ----------
    model : dynamics Model.
    actuation : :class:`Actuation` (default: fully actuated).
    armature : (nv,) rotor inertias added to M's diagonal (default: the model's).
    damping : (nv,) viscous joint damping D (default: none).
    """

    def __init__(self, model, actuation=None, armature=None, damping=None):
        setup_multibody(self, model, Actuation.full(model) if actuation is None else actuation,
                        armature, damping)

    def create_data(self, K):
        return DynamicsData(K, self.state.ndx, self.nu, self.model)

    def _torques(self, data, xs, us):
        nq = self.model.nq
        np.matmul(us, self.actuation.B.T, out=data.tau)
        data.tau -= self.damping * xs[:, nq:]
        return np.ascontiguousarray(xs[:, :nq]), np.ascontiguousarray(xs[:, nq:])

    def calc(self, data, xs, us):
        """f = (v, ddq) for every knot; fills data.f (K, ndx) and the kinematics."""
        qs, vs = self._torques(data, xs, us)
        d = data.dynamics
        _serial_or_parallel(_aba, _aba_parallel, self, qs, vs, data.tau, data.f_ext,
                            d.liR, d.lip, d.oR, d.op, d.J, d.IA, d.v, d.a, d.pA, d.U, d.Dinv,
                            d.u, d.ddq)
        nv = self.model.nv
        data.f[:, :nv] = vs
        data.f[:, nv:] = d.ddq[:data.K]
        return data.f

    def calc_diff(self, data, xs, us):
        """f, f_x, f_u for every knot (one kernel for ABA and its derivatives)."""
        qs, vs = self._torques(data, xs, us)
        d = data.dynamics
        _serial_or_parallel(
            _aba_derivatives, _aba_derivatives_parallel, self, qs, vs, data.tau,
            data.f_ext, d.liR, d.lip, d.oR, d.op, d.J, d.Ycrb, d.v, d.a, d.pA, d.U, d.Dinv, d.u,
            d.ddq, d.Minv, d.f, d.tau, d.dtau_dq, d.dtau_dv, d.ddq_dq, d.ddq_dv)
        nv, K = self.model.nv, data.K
        data.f[:, :nv] = vs
        data.f[:, nv:] = d.ddq[:K]
        idx = np.arange(nv)
        data.f_x[:, idx, nv + idx] = 1.0
        data.f_x[:, nv:, :nv] = d.ddq_dq[:K]
        data.f_x[:, nv:, nv:] = d.ddq_dv[:K]
        if np.any(self.damping):
            data.f_x[:, nv:, nv:] -= d.Minv[:K] * self.damping[None, None, :]
        np.matmul(d.Minv[:K], self.actuation.B, out=data.f_u[:, nv:, :])
        return data.f, data.f_x, data.f_u

    def fused_step(self, data, level):
        """The step of a phase function (:mod:`.fused`) that evaluates this dynamics on
        ``data`` (a DynamicsData); in the line search's COSTS mode it refreshes the
        knots' kinematics to ``level`` (:data:`~.residuals.PLACEMENTS` or
        :data:`~.residuals.JACOBIANS`)."""
        from .fused import CALC, COSTS, DIFF, Step, _free_field, _free_kinematics
        d, K, nq, nv = data.dynamics, data.K, self.model.nq, self.model.nv
        buffers = (np.zeros((K, nq)), np.zeros((K, nv)), data.tau, data.f_ext,
                   np.zeros((K, nv)))
        arrays = (d.liR, d.lip, d.oR, d.op, d.J, d.IA, d.Ycrb, d.v, d.a, d.pA, d.U, d.Dinv, d.u,
                  d.ddq, d.Minv, d.f, d.tau, d.dtau_dq, d.dtau_dv, d.M, d.ddq_dq, d.ddq_dv)
        work, oR, op, J, Minv, ddq_dq, ddq_dv = (
            aba_tiles_workspace(self.arrays), d.oR.reshape(K, -1), d.op.reshape(K, -1),
            d.J.reshape(K, -1), d.Minv.reshape(K, -1), d.ddq_dq.reshape(K, -1),
            d.ddq_dv.reshape(K, -1))
        # aba_tiles by (address, key) (for the types _free_field passes it): linked into
        # _free_field, its code was optimized again there
        tiles = (self.arrays, buffers[0], buffers[1], data.tau, True, work, d.ddq, ddq_dq,
                 ddq_dv, Minv, oR, op, J)
        callee = np.array(callee_address(aba_tiles, tuple(numba.typeof(a) for a in tiles)),
                          dtype=np.int64)
        lanes = (work, oR, op, J, Minv, ddq_dq, ddq_dv, callee)
        return Step((self.actuation.B, np.ascontiguousarray(self.damping), int(level), buffers,
                     arrays, (data.f, data.f_x, data.f_u), lanes), _free_field,
                    model=self.arrays, separate=True,
                    by_mode={CALC: _free_field, DIFF: _free_field, COSTS: _free_kinematics})

    # -- the solvers' trial step (see :mod:`.trial`) ---------------------------
    def trial_workspace(self, integrator, kinematics=None, points=None):
        """Scratch of :meth:`rollout_trial`; ``kinematics`` (level, liR, lip, oR, op, J):
        where the rollout stores the kinematics of its knots' stages, ``points``
        (stages * K, nx) their stage points (see :func:`.trial.rollout_free`; None:
        not stored)."""
        return step_workspace(self.arrays, self.state.nx), (kinematics or no_kinematics()) + (
            no_points() if points is None else points,)

    def stores_trial_kinematics(self, integrator):
        """Whether the trial rollout can store the placements and world Jacobians of its
        steps' stages (and their stage points): every scheme of the jitted step."""
        return integrator.scheme in SCHEME_CODES

    def rollout_trial(self, integrator, inputs, x_start, outputs, workspace):
        """The line-search trial of a phase: one kernel (:func:`.trial.rollout_free`)."""
        return rollout_free(self.arrays, self.actuation.B, self.damping,
                            SCHEME_CODES[integrator.scheme], integrator.dt, inputs, x_start,
                            outputs, workspace[0], workspace[1], NO_PROGRESS, -1)


class CustomDynamics:
    """Dynamics from user functions on a Euclidean state x in R^nx.

    ``calc(xs, us, params, f)`` fills f (K, nx) and ``calc_diff(xs, us, params,
    f, f_x, f_u)`` fills f, f_x (K, nx, nx), f_u (K, nx, nu): each is called once
    per phase with every knot (write them as Numba kernels looping over K,
    compiled with ``cache=True``).  ``nq`` marks the first nq coordinates as
    positions whose velocities are the last nx - nq (for semi-implicit Euler).
    Check the derivatives with :func:`geppetto.ocp.check_dynamics`.

    ``symbolic(ops, x, u, params) -> f (nx,)``: optional, the same field written
    with the operations of ``ops`` (the casadi module, handed in by the NLP's
    ``derivatives="casadi"`` mode: ``ops.cos``, ``ops.vertcat``, ``ops.DM`` ...)
    on symbolic x (nx,) and u (nu,); without it that mode refuses the stage.
    """

    def __init__(self, nx, nu, calc, calc_diff, params=None, nq=None, name="custom",
                 symbolic=None):
        self.state = StateVector(nx, nq)
        self.nu = int(nu)
        self._calc, self._calc_diff = calc, calc_diff
        self.params = np.zeros(0) if params is None else np.asarray(params, dtype=float)
        self.name = name
        self.symbolic = symbolic
        self.multibody = False
        self.model = None

    def create_data(self, K):
        return DynamicsData(K, self.state.ndx, self.nu)

    def calc(self, data, xs, us):
        self._calc(xs, us, self.params, data.f)
        return data.f

    def calc_diff(self, data, xs, us):
        self._calc_diff(xs, us, self.params, data.f, data.f_x, data.f_u)
        return data.f, data.f_x, data.f_u

    def trial_workspace(self, integrator):
        return integrator.create_data(1)

    def rollout_trial(self, integrator, inputs, x_start, outputs, workspace):
        """The line-search trial of a phase, knot by knot (:func:`.trial.rollout_python`)."""
        return rollout_python(integrator, inputs, x_start, outputs, workspace)
