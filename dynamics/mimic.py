"""Mimic joints, as Pinocchio 4 models them: a joint whose coordinate follows
another's, ``q_j = ratio * q_k + offset``.

A :class:`MimicModel` keeps the full kinematic tree of independent joints
(``model.full``, a :class:`~geppetto.dynamics.model.Model`) and the constant
linear map between the two configuration spaces.  The reduced coordinates are
those of Pinocchio's ``buildModelFromUrdf(path, mimic=True)``: the full q and
v with the coordinates of every mimicking joint removed (the mimicking joint
keeps its place in ``names``, with nq = nv = 0 and the mimicked joint's
``idx_q``/``idx_v``).  With ``G`` (nv_full, nv) the map of velocities and
``b`` the offsets,

    q_full = expand(q) = E q + b,   v_full = G v,   a_full = G a

(every mimic and mimicked joint is revolute or prismatic, so E = G on those
coordinates and the identity elsewhere).  The dynamics of the reduced system
follow from the full one by the principle of virtual work (Featherstone,
RBDA 2008, Sec. 8.1, "Kinematic loops" with a constant loop Jacobian):

    tau = G^T tau_full(q_full, G v, G a)          (inverse dynamics)
    M   = G^T M_full G                            (joint-space inertia)
    ddq = M^-1 (tau - G^T b_full(q_full, G v))    (forward dynamics)

and, G being constant, the partial derivatives by the chain rule:
``dtau_dq = G^T dtau_dq_full G`` (same for v), ``dtau_da = M``, and
``dddq_dx = -M^-1 dtau_dx`` at a = ddq (Carpentier & Mansard, RSS 2018,
eq. 24).  The per-joint kernels are untouched: each function here calls the
full-model algorithm once per batch and maps its result.

The functions ``rnea``, ``aba``, ``crba``, ``compute_minverse``,
``rnea_derivatives``, ``aba_derivatives``, ``neutral`` and
``random_configuration`` of :mod:`geppetto.dynamics` accept a MimicModel and
come here; any other function refuses it with a TypeError that says so (use
``model.full`` with :meth:`MimicModel.expand_configuration`).
"""
import numpy as np

from .model import PRISMATIC, REVOLUTE, freeze_arrays

_ONE_DOF = (REVOLUTE, PRISMATIC)


class MimicModel:
    """A model whose mimicking joints follow their mimicked joints.

    Parameters
    ----------
    full : Model
        The tree with every joint independent.
    mimics : sequence of (mimicking, mimicked, ratio, offset)
        Joint indices in ``full`` (the mimicked joint comes first, both are
        revolute or prismatic) and ``q_mimicking = ratio * q_mimicked + offset``.

    Attributes
    ----------
    full : Model
    G : (full.nv, nv) array, v_full = G v
    mimicking_joints, mimicked_joints : lists of joint indices (Pinocchio's names)
    nq, nv, njoints, names, frames, idx_qs, idx_vs, nqs, nvs, limits and
    reference_configurations in the reduced coordinates.
    """

    def __setstate__(self, state):
        # G, E, b stay read-only in a pickled or deep copy (see Model.__setstate__)
        self.__dict__.update(state)
        freeze_arrays((self.G, self.E, self.b))

    def __init__(self, full, mimics):
        arrays = full.arrays
        self.full = full
        self.mimicking_joints = [int(j) for j, _, _, _ in mimics]
        self.mimicked_joints = [int(k) for _, k, _, _ in mimics]
        for j, k in zip(self.mimicking_joints, self.mimicked_joints):
            if not 0 < k < j < arrays.njoints:
                raise ValueError(f"joint {full.names[j]!r} cannot mimic joint {k}: the "
                                 "mimicked joint must be a joint that comes before it")
            if arrays.jtype[j] not in _ONE_DOF or arrays.jtype[k] not in _ONE_DOF:
                raise ValueError(f"joint {full.names[j]!r} mimics {full.names[k]!r}: only "
                                 "revolute and prismatic joints can mimic or be mimicked")
            if k in self.mimicking_joints:
                raise ValueError(f"joint {full.names[k]!r} is mimicked and mimics another")
        mimicking = set(self.mimicking_joints)
        kept_v = [d for d in range(full.nv) if arrays.dof_joint[d] not in mimicking]
        kept_q = [c for i in range(1, arrays.njoints) if i not in mimicking
                  for c in range(arrays.idx_q[i], arrays.idx_q[i] + arrays.nqs[i])]
        reduced_v = {d: r for r, d in enumerate(kept_v)}
        self.G = np.zeros((full.nv, len(kept_v)))
        self.G[kept_v, np.arange(len(kept_v))] = 1.0
        self.E = np.zeros((full.nq, len(kept_q)))
        self.E[kept_q, np.arange(len(kept_q))] = 1.0
        self.b = np.zeros(full.nq)
        for j, k, ratio, offset in mimics:
            self.G[arrays.idx_v[j], reduced_v[arrays.idx_v[k]]] = ratio
            self.E[arrays.idx_q[j], kept_q.index(arrays.idx_q[k])] = ratio
            self.b[arrays.idx_q[j]] = offset
        freeze_arrays((self.G, self.E, self.b))
        self._kept_q, self._kept_v = np.array(kept_q), np.array(kept_v)
        self._layout(arrays, mimicking, [(j, k) for j, k, _, _ in mimics])
        self.lower_position_limit = full.lower_position_limit[self._kept_q]
        self.upper_position_limit = full.upper_position_limit[self._kept_q]
        self.velocity_limit = full.velocity_limit[self._kept_v]
        self.effort_limit = full.effort_limit[self._kept_v]
        self.reference_configurations = {
            name: self.reduce_configuration(q) for name, q in
            full.reference_configurations.items()}

    def _layout(self, arrays, mimicking, pairs):
        """Pinocchio's idx_qs/nqs/idx_vs/nvs: a mimicking joint has nq = nv = 0
        and the mimicked joint's indices."""
        nqs = np.where(np.isin(np.arange(arrays.njoints), list(mimicking)), 0, arrays.nqs)
        nvs = np.where(np.isin(np.arange(arrays.njoints), list(mimicking)), 0, arrays.nvs)
        idx_qs = np.concatenate([[0], np.cumsum(nqs)[:-1]])
        idx_vs = np.concatenate([[0], np.cumsum(nvs)[:-1]])
        for j, k in pairs:
            idx_qs[j], idx_vs[j] = idx_qs[k], idx_vs[k]
        self.nqs, self.nvs = nqs.astype(np.int64), nvs.astype(np.int64)
        self.idx_qs, self.idx_vs = idx_qs.astype(np.int64), idx_vs.astype(np.int64)

    nq = property(lambda self: self.E.shape[1])
    nv = property(lambda self: self.G.shape[1])
    njoints = property(lambda self: self.full.njoints)
    nframes = property(lambda self: self.full.nframes)
    name = property(lambda self: self.full.name)
    names = property(lambda self: self.full.names)
    frames = property(lambda self: self.full.frames)
    parents = property(lambda self: self.full.parents)
    gravity = property(lambda self: self.full.gravity)
    inertias = property(lambda self: self.full.inertias)
    joint_types = property(lambda self: self.full.joint_types)

    @property
    def arrays(self):
        raise TypeError(
            "this function does not take a model with mimic joints; rnea, aba, crba, "
            "compute_minverse, rnea_derivatives, aba_derivatives, neutral and "
            "random_configuration do. For others, use model.full (every joint "
            "independent) with model.expand_configuration(q) and model.expand_velocity(v)")

    def frame_id(self, name):
        return self.full.frame_id(name)

    def joint_id(self, name):
        return self.full.joint_id(name)

    def has_frame(self, name):
        return self.full.has_frame(name)

    def total_mass(self):
        return self.full.total_mass()

    def create_data(self):
        """A Data workspace of the full model (the algorithms run on it)."""
        return self.full.create_data()

    def expand_configuration(self, q):
        """q_full (..., full.nq) of reduced q (..., nq)."""
        return _check(q, self.nq, "q") @ self.E.T + self.b

    def expand_velocity(self, v):
        """v_full = G v (..., full.nv) of reduced v (..., nv); also accelerations."""
        return _check(v, self.nv, "v") @ self.G.T

    def reduce_configuration(self, q_full):
        """The independent coordinates (..., nq) of a full configuration."""
        return _check(q_full, self.full.nq, "q_full")[..., self._kept_q]

    def __repr__(self):
        return (f"MimicModel({self.name!r}, nq={self.nq}, nv={self.nv}, njoints="
                f"{self.njoints}, mimicking={[self.names[j] for j in self.mimicking_joints]})")


def _check(x, size, what):
    x = np.asarray(x, dtype=float)
    if x.ndim not in (1, 2) or x.shape[-1] != size:
        raise ValueError(f"{what}: expected shape ({size},) or (K, {size}), got {x.shape}")
    return x


def _project(model, matrix):
    """G^T X G for X (nv_full, nv_full) or a stack (K, nv_full, nv_full)."""
    return model.G.T @ matrix @ model.G


def _f_ext_arguments(f_ext):
    return () if f_ext is None else (f_ext,)


def rnea(model, data, q, v, a, f_ext=None):
    """tau = G^T RNEA_full(expand(q), G v, G a): see the module docstring."""
    from .rnea import rnea as rnea_full
    tau = rnea_full(model.full, data, model.expand_configuration(q), model.expand_velocity(v),
                    model.expand_velocity(a), *_f_ext_arguments(f_ext))
    return tau @ model.G


def crba(model, data, q):
    """M = G^T M_full G."""
    from .crba import crba as crba_full
    return _project(model, crba_full(model.full, data, model.expand_configuration(q)))


def compute_minverse(model, data, q):
    """(G^T M_full G)^-1."""
    return np.linalg.inv(crba(model, data, q))


def aba(model, data, q, v, tau, f_ext=None):
    """ddq = M^-1 (tau - G^T b_full), M = G^T M_full G."""
    M = crba(model, data, q)
    bias = rnea(model, data, q, v, np.zeros_like(np.asarray(v, dtype=float)), f_ext)
    return np.linalg.solve(M, (np.asarray(tau, dtype=float) - bias)[..., None])[..., 0]


def rnea_derivatives(model, data, q, v, a, f_ext=None):
    """(dtau_dq, dtau_dv, dtau_da) = G^T (full partials) G."""
    from .rnea_derivatives import rnea_derivatives as rnea_derivatives_full
    partials = rnea_derivatives_full(model.full, data, model.expand_configuration(q),
                                     model.expand_velocity(v), model.expand_velocity(a),
                                     *_f_ext_arguments(f_ext))
    return tuple(_project(model, partial) for partial in partials)


def aba_derivatives(model, data, q, v, tau, f_ext=None):
    """(dddq_dq, dddq_dv, dddq_dtau) = (-M^-1 dtau_dq, -M^-1 dtau_dv, M^-1) at a = ddq."""
    ddq = aba(model, data, q, v, tau, f_ext)
    dtau_dq, dtau_dv, M = rnea_derivatives(model, data, q, v, ddq, f_ext)
    Minv = np.linalg.inv(M)
    return -Minv @ dtau_dq, -Minv @ dtau_dv, Minv


def neutral(model):
    """The reduced neutral configuration (nq,)."""
    from .liegroups import neutral as neutral_full
    return model.reduce_configuration(neutral_full(model.full))


def random_configuration(model, rng=None, size=None, lower=None, upper=None):
    """Random reduced configuration(s) within the reduced limits."""
    from .liegroups import random_configuration as random_full
    lower_full = upper_full = None
    if lower is not None or upper is not None:
        lower_full = model.full.lower_position_limit.copy()
        upper_full = model.full.upper_position_limit.copy()
        if lower is not None:
            lower_full[model._kept_q] = _check(lower, model.nq, "lower")
        if upper is not None:
            upper_full[model._kept_q] = _check(upper, model.nq, "upper")
    return model.reduce_configuration(random_full(model.full, rng, size, lower_full,
                                                  upper_full))
