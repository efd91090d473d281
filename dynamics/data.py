"""Data: the preallocated workspace of the dynamics algorithms.

Every array carries a leading batch axis of length ``batch_size`` (K): a
stack of K states is evaluated in one kernel call, each state in its own
slice.  The arrays are reallocated only when a call brings a different K, so a
loop that keeps K fixed allocates nothing.  After a call the arrays hold the
results of every state of the batch (``data.oR[k, i]`` is the rotation of
joint i in the world for state k), but for the fields that a function's
docstring says a stack leaves as they were (``crba``'s M; the intermediates of
``rnea``, ``rnea_derivatives`` and ``aba_derivatives``, which a stack keeps in
scratch: written per state, they cost memory traffic that nobody read).

Names (Pinocchio's), one frame per field whichever function fills it:
``liR, lip`` = liMi, ``oR, op`` = oMi; in the joint frame, ``v, a, f`` the
spatial velocity, acceleration (gravity included in ``a_gf``) and force of
each body; in the world, ``ov, oa, oa_gf, of`` the same quantities and
``oYcrb`` the composite rigid-body inertias, ``IA, pA`` the articulated
inertias and bias forces, ``J`` the joint Jacobian; ``oRf, opf`` = oMf;
``U, Dinv, u`` ABA's intermediates; ``tau, ddq, M, Minv, com, Jcom``.
``Ycrb`` (composite inertias in the joint frame) is not filled by the
dynamics functions, which all work in the world frame.
"""
import numpy as np

from .validation import model_fingerprint

_FIELDS = {
    # name: shape after the batch axis, from (nj, nv, nf)
    "liR": lambda nj, nv, nf: (nj, 3, 3), "lip": lambda nj, nv, nf: (nj, 3),
    "oR": lambda nj, nv, nf: (nj, 3, 3), "op": lambda nj, nv, nf: (nj, 3),
    "v": lambda nj, nv, nf: (nj, 6), "a": lambda nj, nv, nf: (nj, 6),
    "a_gf": lambda nj, nv, nf: (nj, 6), "f": lambda nj, nv, nf: (nj, 6),
    "oRf": lambda nj, nv, nf: (nf, 3, 3), "opf": lambda nj, nv, nf: (nf, 3),
    "Ycrb": lambda nj, nv, nf: (nj, 6, 6), "IA": lambda nj, nv, nf: (nj, 6, 6),
    "pA": lambda nj, nv, nf: (nj, 6), "U": lambda nj, nv, nf: (6, nv),
    "Dinv": lambda nj, nv, nf: (nv, 6), "u": lambda nj, nv, nf: (nv,),
    "Fcrb": lambda nj, nv, nf: (6, nv),
    "J": lambda nj, nv, nf: (6, nv), "tau": lambda nj, nv, nf: (nv,),
    "ddq": lambda nj, nv, nf: (nv,), "M": lambda nj, nv, nf: (nv, nv),
    "Minv": lambda nj, nv, nf: (nv, nv), "com": lambda nj, nv, nf: (nj, 3),
    "mass": lambda nj, nv, nf: (nj,), "Jcom": lambda nj, nv, nf: (3, nv),
    "vcom": lambda nj, nv, nf: (nj, 3), "acom": lambda nj, nv, nf: (nj, 3),
    "dtau_dq": lambda nj, nv, nf: (nv, nv), "dtau_dv": lambda nj, nv, nf: (nv, nv),
    "ddq_dq": lambda nj, nv, nf: (nv, nv), "ddq_dv": lambda nj, nv, nf: (nv, nv),
    "kinetic_energy": lambda nj, nv, nf: (), "potential_energy": lambda nj, nv, nf: (),
    # kinematics derivatives: world-frame motions and the columns of
    # kinematics_derivatives.py (dJ = dJ/dt, dVdq, dAdq, dAdv)
    "ov": lambda nj, nv, nf: (nj, 6), "oa": lambda nj, nv, nf: (nj, 6),
    "oa_gf": lambda nj, nv, nf: (nj, 6), "of": lambda nj, nv, nf: (nj, 6),
    "oYcrb": lambda nj, nv, nf: (nj, 6, 6),
    "dJ": lambda nj, nv, nf: (6, nv), "dVdq": lambda nj, nv, nf: (6, nv),
    "dAdq": lambda nj, nv, nf: (6, nv), "dAdv": lambda nj, nv, nf: (6, nv),
}


class Data:
    """Workspace for one :class:`~geppetto.dynamics.model.Model`.

    Create it with ``model.create_data()``.  Its arrays are reused across
    calls; read the results of the last call from them or from the values
    the algorithms return.
    """

    def __init__(self, model, batch_size=1):
        self.model_name = model.name
        self._data_fingerprint = model_fingerprint(model)
        self._dims = (model.njoints, model.nv, model.nframes)
        self._nq = model.nq
        self.batch_size = 0
        self.resize(batch_size)

    def resize(self, batch_size):
        """Make room for ``batch_size`` states (no-op when already that size)."""
        if batch_size == self.batch_size:
            return
        nj, nv, nf = self._dims
        for name, shape in _FIELDS.items():
            setattr(self, name, np.zeros((batch_size,) + shape(nj, nv, nf)))
        # oMi of the universe is the identity for every state.
        self.oR[:, 0] = np.eye(3)
        self.liR[:, 0] = np.eye(3)
        self.batch_size = batch_size
        # What the arrays hold: nothing computed yet (the readers that take no
        # q, frame_placement and the kinematics-derivative getters, check it).
        self._last_K, self._last_single = 1, True
        self._has_placements = False
        self._kinematics_derivatives_batch = None
        # the one-call path's DataRef holds the arrays replaced here (dynamics/one_state.py)
        self.__dict__.pop("_one_state", None)

    def __repr__(self):
        return f"Data(model={self.model_name!r}, batch_size={self.batch_size})"
