"""CasADi twins of the stage terms of :mod:`geppetto.ocp`: dynamics, integrators,
residuals and activations as SX expressions of one knot.

The NLP's casadi mode (:mod:`.nlp_symbolic`) builds every knot from these;
the tests compare each twin with its Numba term (value, Rx, Ru).  Notation
of :mod:`geppetto.ocp`: x = (q, v), u the stage's controls, r a residual, Rx
(nr, ndx) and Ru (nr, nu) its Jacobians (x derivatives in the tangent space,
through ``x (+) dx`` at dx = 0).

A twin is looked up by the exact class of the term (a subclass may change
``calc`` and so has none); a :class:`~geppetto.ocp.CustomDynamics` has one when
it was given its field as ``symbolic(ops, x, u, params)``: :data:`RESIDUALS`, :data:`DYNAMICS`,
:data:`ACTIVATIONS`, :data:`INTEGRATORS`.  :func:`missing_twins` lists the
terms of a problem without one, named with their stage, so that the NLP says
so at construction.

What a knot computes once and its terms share (:class:`KnotPoint`): the
placements of the joints (twin of forward kinematics), the joint-frame body
velocities, and the outputs (field, contact forces or impulses) of each
contact dynamics at (x, u).  Contact-force residuals read the forces of their
:class:`~geppetto.ocp.ContactDynamics` (or :class:`~geppetto.ocp.ImpulseDynamics`)
at the knot, as the Numba residuals do.
"""
import casadi as ca
import numpy as np

from ..dynamics import symbolic_constrained as sc
from ..dynamics.kinematics import LOCAL
from ..dynamics.symbolic import _aba, _constant, _inv_act_motion, _log3, _log6, _placements, \
    _rnea, symbolic_functions
from ..ocp.contacts import (CenterOfPressureResidual, ContactDynamics, ContactForceResidual,
                            FrictionConeResidual, ImpulseDynamics, SmoothFrictionConeResidual)
from ..ocp.costs import BARRIER, QUADRATIC, SMOOTH1, SMOOTH2, WEIGHTED
from ..ocp.dynamics import CustomDynamics, FreeDynamics
from ..ocp.integrators import RK_TABLEAUS
from ..ocp.residuals import (FRAME_LOCAL, FRAME_LOCAL_WORLD_ALIGNED, FRAME_WORLD,
                             CenterOfMassResidual, ControlResidual, FramePlacementResidual,
                             FrameRotationResidual, FrameTranslationResidual,
                             FrameVelocityResidual, JointTorqueResidual, StateResidual)
from ..ocp.state import StateMultibody


class MissingTwinError(NotImplementedError):
    """A term of the problem has no CasADi twin (the message names it and its stage)."""


# --- state ----------------------------------------------------------------------------

class SymbolicState:
    """integrate / difference of a state (multibody or vector) on SX vectors."""

    def __init__(self, state):
        self.state = state
        self.multibody = isinstance(state, StateMultibody)
        self.nx, self.ndx = state.nx, state.ndx
        if self.multibody:
            self.nq, self.nv = state.nq, state.nv
            self.functions = symbolic_functions(state.model)

    def integrate(self, x, dx):
        if not self.multibody:
            return x + dx
        nq, nv = self.nq, self.nv
        return ca.vertcat(self.functions.integrate(x[:nq], dx[:nv]), x[nq:] + dx[nv:])

    def difference(self, x0, x1):
        if not self.multibody:
            return x1 - x0
        nq = self.nq
        return ca.vertcat(self.functions.difference(x0[:nq], x1[:nq]), x1[nq:] - x0[nq:])


# --- the quantities of a knot ------------------------------------------------------------

class KnotPoint:
    """x, u of a knot and what its terms share, built on first use: ``placements(m)``
    (liM, oM of the model arrays m), ``velocities(m)`` (joint-frame body velocities) and
    ``contact(dynamics)`` ((f, lam): the field and the forces / impulses at (x, u))."""

    def __init__(self, sx_state, x, u):
        self.sx_state, self.x, self.u = sx_state, x, u
        self.q = x[:sx_state.nq] if sx_state.multibody else None
        self.v = x[sx_state.nq:] if sx_state.multibody else None
        self._cache = {}

    def _get(self, kind, owner, build):
        """build() once per (kind, owner); the owner is kept, so its id stays unique."""
        key = (kind, id(owner))
        if key not in self._cache:
            self._cache[key] = (owner, build())
        return self._cache[key][1]

    def placements(self, m):
        return self._get("placements", m, lambda: _placements(m, self.q))

    def velocities(self, m):
        return self._get("velocities", m,
                         lambda: sc._body_motions(m, self.placements(m)[0], self.v, None)[0])

    def frame(self, model, frame):
        """(R, p) = oMf of frame ``frame`` of ``model``."""
        m = model.arrays
        oR, op = self.placements(m)[1][int(m.frame_joint[frame])]
        return oR @ _constant(m.frame_R[frame]), op + oR @ _constant(m.frame_p[frame])

    def contact(self, dynamics):
        return self._get("contact", dynamics,
                         lambda: _contact_outputs(dynamics, self.q, self.v, self.u))


# --- dynamics: the tangent field f(x, u) ----------------------------------------------------

def _torques(dynamics, v, u):
    return ca.DM(dynamics.actuation.B) @ u - ca.DM(dynamics.damping) * v


def _contact_outputs(dynamics, q, v, u):
    """(f, lam) of a ContactDynamics (forces) or an ImpulseDynamics (impulses)."""
    nv = dynamics.model.nv
    settings = (dynamics.mu, dynamics.max_iterations, dynamics.accuracy)
    if isinstance(dynamics, ImpulseDynamics):
        y = sc.impulse_dynamics(dynamics.arrays, dynamics.constraints, dynamics.restitution,
                                settings, q, v)
        return ca.vertcat(ca.SX(nv, 1), y[:nv] - v), y[nv:]
    y = sc.constraint_dynamics(dynamics.arrays, dynamics.constraints, settings, q, v,
                               _torques(dynamics, v, u))
    return ca.vertcat(v, y[:nv]), y[nv:]


def _free_field(dynamics, point):
    return ca.vertcat(point.v, _aba(dynamics.arrays, point.q, point.v,
                                    _torques(dynamics, point.v, point.u)))


def _contact_field(dynamics, point):
    return point.contact(dynamics)[0]


def _custom_field(dynamics, point):
    """CustomDynamics: its ``symbolic(ops, x, u, params)``, ops the casadi module."""
    return ca.vertcat(dynamics.symbolic(ca, point.x, point.u, dynamics.params))


DYNAMICS = {FreeDynamics: _free_field, ContactDynamics: _contact_field,
            ImpulseDynamics: _contact_field, CustomDynamics: _custom_field}


def has_twin(dynamics):
    """Whether ``dynamics`` has a twin (a CustomDynamics only with its ``symbolic``)."""
    if type(dynamics) not in DYNAMICS:
        return False
    return not isinstance(dynamics, CustomDynamics) or dynamics.symbolic is not None


def field(dynamics, point):
    """f(x, u) (ndx,) of ``dynamics`` at the knot point."""
    return DYNAMICS[type(dynamics)](dynamics, point)


# --- integrators: x' = x (+) w ---------------------------------------------------------------

def stage_points(stage, point):
    """([y_j], w): the stage points of the stage's integrator as KnotPoints (y_0 = the
    knot, then the RK points x (+) c_j dt k_{j-1}) and the increment w with
    x' = x (+) w (the formulas of ocp.integrators; "euler" is Crocoddyl's symplectic
    Euler, "explicit_euler" the explicit one)."""
    dynamics, sx_state, dt = stage.dynamics, point.sx_state, stage.dt
    scheme = stage.integrator.scheme
    f = field(dynamics, point)
    if scheme == "explicit_euler":
        return [point], dt * f
    if scheme == "euler":
        nv = stage.state.nv
        a = dt * f[nv:]
        return [point], ca.vertcat(dt * f[:nv] + dt * a, a)
    nodes, weights = RK_TABLEAUS[scheme]
    points, ks = [point], [f]
    for c in nodes:
        points.append(KnotPoint(sx_state, sx_state.integrate(point.x, c * dt * ks[-1]),
                                point.u))
        ks.append(field(dynamics, points[-1]))
    return points, dt * sum(b * k for b, k in zip(weights, ks))


INTEGRATORS = ("explicit_euler", "euler") + tuple(RK_TABLEAUS)


def next_state(stage, point):
    """F(x, u) = x (+) w of a running stage."""
    return point.sx_state.integrate(point.x, stage_points(stage, point)[1])


# --- residuals ----------------------------------------------------------------------------

def _matrix(flat):
    """A (3, 3) SX matrix from 9 values in row-major order (NumPy's)."""
    return ca.reshape(flat, 3, 3).T


def _state(residual, point, ref):
    return point.sx_state.difference(ref, point.x)


def _control(residual, point, ref):
    return point.u - ref


def _translation(residual, point, ref):
    r = point.frame(residual.model, residual.frame)[1] - ref
    return r if residual.axes is None else ca.vertcat(*[r[int(a)] for a in residual.axes])


def _rotation(residual, point, ref):
    R = point.frame(residual.model, residual.frame)[0]
    return _log3(_matrix(ref).T @ R)


def _placement(residual, point, ref):
    R, p = point.frame(residual.model, residual.frame)
    Rref, pref = _matrix(ref[:9]), ref[9:]
    return _log6(Rref.T @ R, Rref.T @ (p - pref))


def _velocity(residual, point, ref):
    """v_f = fMj v_j (LOCAL), its world axes (LOCAL_WORLD_ALIGNED), at the world origin
    (WORLD), v_j the joint-frame body velocity of the RNEA forward pass."""
    m = residual.model.arrays
    v = _inv_act_motion(_constant(residual.fR), _constant(residual.fp),
                        point.velocities(m)[residual.joint])
    if residual.reference_frame == FRAME_LOCAL:
        return v - ref
    R, p = point.frame(residual.model, residual.frame)
    linear, angular = R @ v[:3], R @ v[3:]
    if residual.reference_frame == FRAME_WORLD:
        linear = linear + ca.cross(p, angular)
    return ca.vertcat(linear, angular) - ref


def _center_of_mass(residual, point, ref):
    """c(q) = sum_i (m_i op_i + oR_i (m c)_i) / m."""
    m = residual.model.arrays
    oM = point.placements(m)[1]
    Y = m.inertia
    h = ca.SX.zeros(3, 1)
    for i in range(1, m.njoints):
        mc = ca.DM([Y[i, 5, 1], Y[i, 3, 2], Y[i, 4, 0]])
        h += Y[i, 0, 0] * oM[i][1] + oM[i][0] @ mc
    return h / residual.model.total_mass() - ref


def _joint_torque(residual, point, ref):
    m = residual.model.arrays
    return _rnea(m, point.q, point.v, point.u, point.placements(m)[0]) - ref


def _force(residual, point, world):
    """The constraint's force blocks of 3 in world axes (``world``) or in the contact
    frame's axes, as ``_ContactResidual._force_in``."""
    lam = point.contact(residual.dynamics)[1][residual.rows]
    if world == (residual.constraint.reference != LOCAL):
        return lam
    m = residual.dynamics.model.arrays
    oR = point.placements(m)[1][int(residual.constraint.joint1)][0]
    R = oR @ _constant(residual.constraint.R1)
    R = R if world else R.T
    return ca.vertcat(*[R @ lam[b:b + 3] for b in range(0, lam.numel(), 3)])


def _contact_force(residual, point, ref):
    return point.contact(residual.dynamics)[1][residual.rows] - ref


def _friction_cone(residual, point, ref):
    return ca.DM(residual.A) @ _force(residual, point, True)[:3]


def _smooth_friction_cone(residual, point, ref):
    f = _force(residual, point, True)[:3]
    ft = ca.DM(residual.T) @ f
    return residual.mu * ca.dot(ca.DM(residual.normal), f) - ca.sqrt(ca.sumsqr(ft)
                                                                     + residual.eps ** 2)


def _center_of_pressure(residual, point, ref):
    return ca.DM(residual.A) @ _force(residual, point, False)


RESIDUALS = {StateResidual: _state, ControlResidual: _control,
             FrameTranslationResidual: _translation, FrameRotationResidual: _rotation,
             FramePlacementResidual: _placement, FrameVelocityResidual: _velocity,
             CenterOfMassResidual: _center_of_mass, JointTorqueResidual: _joint_torque,
             ContactForceResidual: _contact_force, FrictionConeResidual: _friction_cone,
             SmoothFrictionConeResidual: _smooth_friction_cone,
             CenterOfPressureResidual: _center_of_pressure}


def residual(term_residual, point, ref):
    """r(x, u) of a residual at the knot point, with its reference ``ref`` (flat SX)."""
    return RESIDUALS[type(term_residual)](term_residual, point, ref)


def reference_size(term_residual):
    """Values of the residual's reference at one knot (the NLP's parameters)."""
    if isinstance(term_residual, FramePlacementResidual):
        return 12
    return int(np.prod(term_residual.reference_shape()))


def flat_references(term_residual, rdata, K):
    """(K, reference_size): the residual's references at the K knots, row-major."""
    if isinstance(term_residual, FramePlacementResidual):
        R, p = rdata.reference
        return np.hstack([np.reshape(R, (K, 9)), np.reshape(p, (K, 3))])
    return np.asarray(rdata.reference, dtype=float).reshape(K, -1)


# --- activations ----------------------------------------------------------------------------

def _quadratic(params, r):
    return 0.5 * ca.sumsqr(r)


def _weighted(params, r):
    return 0.5 * ca.dot(ca.DM(params[0]), r * r)


def _barrier(params, r):
    below = ca.fmin(r - ca.DM(params[1]), 0.0)
    above = ca.fmax(r - ca.DM(params[2]), 0.0)
    return 0.5 * (ca.sumsqr(below) + ca.sumsqr(above))


def _smooth1(params, r):
    return ca.sum1(ca.sqrt(r * r + ca.DM(params[0])))


def _smooth2(params, r):
    return ca.sqrt(ca.sumsqr(r) + params[0, 0])


ACTIVATIONS = {QUADRATIC: _quadratic, WEIGHTED: _weighted, BARRIER: _barrier,
               SMOOTH1: _smooth1, SMOOTH2: _smooth2}


def activation(code, params, r):
    """a(r) of the activation ``code`` with its (3, nr) parameters (ocp.costs)."""
    return ACTIVATIONS[code](params, r)


# --- what has no twin -----------------------------------------------------------------------

def missing_twins(stages):
    """Messages naming each term, dynamics or integrator of ``stages`` [(model, start,
    stop, data)] that has no CasADi twin; empty when the whole problem has one."""
    missing = []
    for model, start, stop, _ in stages:
        where = f"stage {model.name!r} (knots {start}..{stop - 1})"
        if not model.terminal:
            if not has_twin(model.dynamics):
                missing.append(f"{where}: dynamics {type(model.dynamics).__name__}"
                               + (" without symbolic=" if isinstance(model.dynamics,
                                                                    CustomDynamics) else ""))
            if model.integrator.scheme not in INTEGRATORS:
                missing.append(f"{where}: integrator {model.integrator.scheme!r}")
        for kind, terms in (("cost", model.costs), ("constraint", model.constraints)):
            for term in terms:
                name = f"{where}: {kind} {term.name!r} ({type(term.residual).__name__})"
                if type(term.residual) not in RESIDUALS:
                    missing.append(name)
                elif kind == "cost" and term.activation.code not in ACTIVATIONS:
                    missing.append(f"{name}, activation {type(term.activation).__name__}")
    return missing


def check_twins(stages):
    """Raise :class:`MissingTwinError` naming every term of ``stages`` without a twin."""
    missing = missing_twins(stages)
    if missing:
        raise MissingTwinError(
            "derivatives='casadi' builds the NLP from CasADi twins; no CasADi twin for:\n  "
            + "\n  ".join(missing) + f"\n(twins exist for the dynamics "
            f"{sorted(t.__name__ for t in DYNAMICS)} (CustomDynamics with its symbolic=), "
            f"the integrators {sorted(INTEGRATORS)}, "
            f"the residuals {sorted(t.__name__ for t in RESIDUALS)} and every activation of "
            "geppetto.ocp): use derivatives='analytical'")


# --- a residual as a Function (tests, checks) -----------------------------------------------

def residual_function(term_residual, state, nu):
    """Function (x (nx,), u (nu,), ref) -> (r, Rx (nr, ndx), Ru (nr, nu)) of the twin of
    ``term_residual`` on ``state``; Rx in the tangent space, through x (+) dx at dx = 0."""
    sx_state = SymbolicState(state)
    x, u = ca.SX.sym("x", state.nx), ca.SX.sym("u", nu)
    dx = ca.SX.sym("dx", state.ndx)
    ref = ca.SX.sym("ref", reference_size(term_residual))
    r = residual(term_residual, KnotPoint(sx_state, sx_state.integrate(x, dx), u), ref)
    Rx = ca.substitute(ca.jacobian(r, dx), dx, ca.SX.zeros(state.ndx))
    r0 = ca.substitute(r, dx, ca.SX.zeros(state.ndx))
    Ru = ca.jacobian(r0, u)
    return ca.Function(f"{type(term_residual).__name__}_twin", [x, u, ref],
                       [ca.densify(r0), ca.densify(Rx), ca.densify(Ru)],
                       ["x", "u", "ref"], ["r", "Rx", "Ru"])
