"""One state from Python in one compiled call.

A public function called with one state, ``rnea(model, data, q, v, a)`` with
``q`` (nq,) and ``v``, ``a`` (nv,) float64 vectors, used to cross into compiled
code two or three times (the validity check of the inputs, the kernel, the
finiteness of ddq for ``aba``), each time unboxing every array it passes (the
12 to 25 Data arrays of the kernel, after a fingerprint of their types and the
views with the batch axis).  Here it is one compiled call per public function (a
*trampoline*: ``_rnea_one``) of few objects: the model's
:class:`~.model_ref.ModelRef`, the Data's arrays as one :class:`DataRef` (a Numba
structure made once per Data and size), the input vectors and q's unit blocks.
The trampoline checks the inputs (sizes, finite, unit quaternions), calls the
kernel, and returns True; False when an input is not valid (or ``aba``'s M(q) is
singular): the public function then takes its full path, which raises the message
that names the argument.  The public function returns a copy of the result from
``data`` as before; the Data's arrays hold the same values, bit for bit.

The trampoline does not link the kernel into its own code (that compiled the
kernel a second time: 5 s for rnea, 20 s for aba_derivatives on ur5, measured at
load 7): it calls the kernel's compiled specialization by its address
(:func:`~.native.call_checked`, Numba's own calling convention; an exception raised
in the kernel propagates), looked up once per process and kernel by
:func:`native_callee` for the exact argument types the trampoline passes,
declared beside it in :data:`ONE_STATE_ARGUMENTS`; the call raises TypeError when
those are not the types the trampoline passes.  A trampoline compiles in
about a second; the cache keeps it.  Assigning a new array to a Data field is not
seen by the DataRef (write into ``data.M[...]`` instead); ``Data.resize`` drops
it.
"""
import numba
import numpy as np
from numba.core import types
from numba.experimental import structref

from .config import kernel
from .model_ref import model_arrays, model_ref
from .native import PASS_TABLE_TYPE, call_checked, callee_address
from .validation import (all_finite, UNIT_NORM_TOLERANCE, _VECTORS, _border, _compiled_entry,
                         _states_are_valid, compute_fingerprint, native_floats)

# The Data's arrays (data.py's fields) and the zero external forces of one state.
DATA_FIELDS = (
    "liR", "lip", "oR", "op", "v", "a", "a_gf", "f", "oRf", "opf", "Ycrb", "IA", "pA", "U",
    "Dinv", "u", "Fcrb", "J", "tau", "ddq", "M", "Minv", "com", "mass", "Jcom", "vcom", "acom",
    "dtau_dq", "dtau_dv", "ddq_dq", "ddq_dv", "kinetic_energy", "potential_energy", "ov", "oa",
    "oa_gf", "of", "oYcrb", "dJ", "dVdq", "dAdq", "dAdv", "no_forces")


_STACK = types.Array(types.float64, 2, "C")


@structref.register
class DataRefType(types.StructRef):
    """Numba type of :class:`DataRef`: one field per Data array."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class DataRef(structref.StructRefProxy):
    """A Data's arrays (same names, the same arrays) in one Numba structure."""


structref.define_proxy(DataRef, DataRefType, list(DATA_FIELDS))


@kernel
def _data_ref(liR, lip, oR, op, v, a, a_gf, f, oRf, opf, Ycrb, IA, pA, U, Dinv, u, Fcrb, J, tau,
              ddq, M, Minv, com, mass, Jcom, vcom, acom, dtau_dq, dtau_dv, ddq_dq, ddq_dv,
              kinetic_energy, potential_energy, ov, oa, oa_gf, of, oYcrb, dJ, dVdq, dAdq, dAdv,
              no_forces):
    return DataRef(liR, lip, oR, op, v, a, a_gf, f, oRf, opf, Ycrb, IA, pA, U, Dinv, u, Fcrb, J,
                   tau, ddq, M, Minv, com, mass, Jcom, vcom, acom, dtau_dq, dtau_dv, ddq_dq,
                   ddq_dv, kinetic_energy, potential_energy, ov, oa, oa_gf, of, oYcrb, dJ, dVdq,
                   dAdq, dAdv, no_forces)


def native_callee(kernel_function, trampoline, model_type, data_type):
    """(address, key) of ``kernel_function``'s native code for the arguments
    ``trampoline`` passes it (:data:`ONE_STATE_ARGUMENTS`; ``model_type`` the type of
    its model argument, a ModelRef's or the ModelArrays tuple's), compiled (or loaded
    from the cache) when missing (:func:`~.native.callee_address`).  Raises TypeError
    when that specialization returns a value (the trampolines call for None)."""
    _, inputs, arguments = ONE_STATE_ARGUMENTS[trampoline]
    signature = ((model_type,) + (_STACK,) * inputs
                 + tuple(data_type.field_dict[a] if isinstance(a, str) else a
                         for a in arguments))
    return callee_address(kernel_function, signature)


@kernel
def _rnea_one(address, key, model, data, q, v, a, starts, lengths):
    """rnea of one state into ``data``; False when an input is not valid."""
    if not _are_valid(model, q, v, a, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model, q[None], v[None], a[None], d.no_forces, d.liR, d.lip, d.oR,
                                d.op, d.v, d.a_gf, d.f, d.tau))
    return True


@kernel
def _aba_one(address, key, model, data, q, v, tau, starts, lengths):
    """aba of one state into ``data``; False when an input is not valid or M(q) is
    singular (ddq not finite)."""
    if not _are_valid(model, q, v, tau, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model, q[None], v[None], tau[None], d.no_forces, d.liR, d.lip,
                                d.oR, d.op, d.J, d.IA, d.ov, d.oa_gf, d.pA, d.U, d.Dinv, d.u,
                                d.ddq))
    return all_finite(d.ddq[0])


@kernel
def _crba_one(address, key, model, data, q, passes, starts, lengths):
    """crba of one state into ``data`` (``passes`` the model's table of
    :func:`.crba.crba_passes`); False when q is not valid."""
    if not _is_valid(model, q, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model, q[None], d.oR, d.op, d.M, passes))
    return True


@kernel
def _compute_minverse_one(address, key, model, data, q, starts, lengths):
    """compute_minverse of one state into ``data``; False when q is not valid or M(q)
    is singular (D^-1 not finite)."""
    if not _is_valid(model, q, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model, q[None], d.oR, d.op, d.U, d.Dinv, d.Minv))
    return all_finite(d.Dinv[0].reshape(-1))


@kernel
def _rnea_derivatives_one(address, key, model, data, q, v, a, out, starts, lengths):
    """rnea_derivatives of one state into ``data``, and dtau_dq, dtau_dv, M copied into
    ``out`` (3, nv, nv); False when an input is not valid."""
    if not _are_valid(model, q, v, a, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model, q[None], v[None], a[None], d.no_forces, d.liR, d.lip, d.oR,
                                d.op, d.J, d.oYcrb, d.ov, d.oa_gf, d.of, d.tau, d.dtau_dq,
                                d.dtau_dv, d.M, d.v, d.a, d.oa))
    _copy_results(d.dtau_dq, d.dtau_dv, d.M, out)
    return True


@kernel
def _aba_derivatives_one(address, key, model, data, q, v, tau, out, starts, lengths):
    """aba_derivatives of one state into ``data``, and ddq_dq, ddq_dv, Minv copied into
    ``out`` (3, nv, nv); False when an input is not valid or M(q) is singular (D^-1 not
    finite, as :func:`_compute_minverse_one`: nv numbers, not M^-1's nv^2)."""
    if not _are_valid(model, q, v, tau, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model, q[None], v[None], tau[None], d.no_forces, d.liR, d.lip,
                                d.oR, d.op, d.J, d.oYcrb, d.ov, d.oa_gf, d.pA, d.U, d.Dinv, d.u,
                                d.ddq, d.Minv, d.of, d.tau, d.dtau_dq, d.dtau_dv, d.ddq_dq,
                                d.ddq_dv))
    _copy_results(d.ddq_dq, d.ddq_dv, d.Minv, out)
    return all_finite(d.Dinv[0].reshape(-1))


@kernel
def _copy_results(x, y, z, out):
    """out[0], out[1], out[2] = x[0], y[0], z[0]: the three (n, n) results of the first
    state, into one new array that the public function returns as three views.  Three
    copies of the Data's arrays from Python cost 4.5 us on talos (38 x 38, load 4),
    mostly allocating and calling; Pinocchio's bindings return references into its
    Data instead, which the next call overwrites."""
    n = x.shape[1]
    for r in range(n):
        for c in range(n):
            out[0, r, c] = x[0, r, c]
    for r in range(n):
        for c in range(n):
            out[1, r, c] = y[0, r, c]
    for r in range(n):
        for c in range(n):
            out[2, r, c] = z[0, r, c]


@kernel
def _forward_kinematics_one(address, key, model, data, q, v, a, order, starts, lengths):
    """forward_kinematics of one state into ``data`` (``order`` 0: placements, 1: and
    velocities, 2: and accelerations; v, a zeros when not given); False when an input
    is not valid."""
    if not _are_valid(model, q, v, a, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model_arrays(model), q[None], v[None], a[None], order, d.liR,
                                d.lip, d.oR, d.op, d.v, d.a))
    return True


@kernel
def _frame_jacobian_one(address, key, model, data, q, frame, reference, out, starts, lengths):
    """frame_jacobian of one state into ``out`` (6, nv) and ``data`` (``frame`` and
    ``reference`` checked by the caller); False when q is not valid."""
    if not _is_valid(model, q, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model_arrays(model), q[None], frame, reference, d.liR, d.lip, d.oR,
                                d.op, d.oRf, d.opf, d.J, out[None]))
    return True


@kernel
def _center_of_mass_one(address, key, model, data, q, with_jacobian, starts, lengths):
    """center_of_mass (with_jacobian: and its Jacobian) of one state into ``data``;
    False when q is not valid."""
    if not _is_valid(model, q, starts, lengths):
        return False
    d = data
    call_checked(address, key, (model_arrays(model), q[None], with_jacobian, d.liR, d.lip, d.oR,
                                d.op, d.J, d.mass, d.com, d.Jcom))
    return True


@kernel
def _integrate_one(address, key, model, q, v, out, starts, lengths):
    """integrate of one state into ``out`` (nq,); False when an input is not valid."""
    if not _are_valid(model, q, v, v, starts, lengths):
        return False
    call_checked(address, key, (model_arrays(model), q[None], v[None], out[None], np.empty(4),
                                np.empty(4), np.empty(3)))
    return True


# The kernel's arguments as each trampoline passes them: its model (the ModelRef, or
# the ModelArrays tuple for a kernel not marked ``model_kernel``), the number of input
# vectors (q, or q, v and a or tau: stacks of one), then DataRef fields (by name) and
# other arguments (by type).  The kernel's compiled specialization for these types is
# the one the trampoline calls.
_FORCES_AND_PLACEMENTS = ("no_forces", "liR", "lip", "oR", "op")
ONE_STATE_ARGUMENTS = {
    _rnea_one: ("ref", 3, _FORCES_AND_PLACEMENTS + ("v", "a_gf", "f", "tau")),
    _aba_one: ("ref", 3, _FORCES_AND_PLACEMENTS + ("J", "IA", "ov", "oa_gf", "pA", "U", "Dinv",
                                                   "u", "ddq")),
    _crba_one: ("ref", 1, ("oR", "op", "M", PASS_TABLE_TYPE)),
    _compute_minverse_one: ("ref", 1, ("oR", "op", "U", "Dinv", "Minv")),
    _rnea_derivatives_one: ("ref", 3, _FORCES_AND_PLACEMENTS + (
        "J", "oYcrb", "ov", "oa_gf", "of", "tau", "dtau_dq", "dtau_dv", "M", "v", "a", "oa")),
    _aba_derivatives_one: ("ref", 3, _FORCES_AND_PLACEMENTS + (
        "J", "oYcrb", "ov", "oa_gf", "pA", "U", "Dinv", "u", "ddq", "Minv", "of", "tau",
        "dtau_dq", "dtau_dv", "ddq_dq", "ddq_dv")),
    _forward_kinematics_one: ("arrays", 3, (types.int64, "liR", "lip", "oR", "op", "v", "a")),
    _frame_jacobian_one: ("arrays", 1, (types.int64, types.int64, "liR", "lip", "oR", "op",
                                        "oRf", "opf", "J", types.Array(types.float64, 3, "C"))),
    _center_of_mass_one: ("arrays", 1, (types.boolean, "liR", "lip", "oR", "op", "J", "mass",
                                        "com", "Jcom")),
    _integrate_one: ("arrays", 2, (_STACK,) + (types.Array(types.float64, 1, "C"),) * 3),
}


@kernel
def _are_valid(model, q, v, u, starts, lengths):
    """True when q (nq,), v and u (nv,) have the model's sizes and are finite, and
    q's unit blocks have unit norms."""
    if q.shape[0] != model.nq or v.shape[0] != model.nv or u.shape[0] != model.nv:
        return False
    return _states_are_valid(q[None], v[None], u[None], starts, lengths, UNIT_NORM_TOLERANCE)


@kernel
def _is_valid(model, q, starts, lengths):
    """True when q (nq,) has the model's size, is finite and its unit blocks have unit
    norms."""
    if q.shape[0] != model.nq:
        return False
    no_states = np.empty((0, 0))
    return _states_are_valid(q[None], no_states, no_states, starts, lengths,
                             UNIT_NORM_TOLERANCE)


def one_state(trampoline, kernel_function, model, data, q, v=None, u=None, extra=()):
    """True when ``trampoline`` computed the state (q, or q, v, u) into ``data``: the
    inputs are float64 vectors of the model's sizes, valid, and ``data`` was made for
    the model's structure (its bookkeeping then kept as ``check_data`` does); ``extra``
    the trampoline's arguments after the inputs (checked by the caller).  False
    for any other call: the caller then takes its full path, which says what is
    wrong or computes the stack."""
    kept = getattr(data, "_one_state", None)
    if (kept is None or kept.data_ref is None or kept.arrays is not model.arrays
            or kept.batch_size != data.batch_size):
        kept = _OneState.of_data(model, data)
        if kept is None:
            return False
    try:
        fingerprint = compute_fingerprint((q,) if v is None else (q, v, u))
    except Exception:  # a value Numba cannot type: the full path says what is wrong
        return False
    if fingerprint != _VECTORS[1 if v is None else 3] or not native_floats(q, v, u):
        return False
    entry = kept.entries.get(trampoline)
    if entry is None:
        entry = _entry(trampoline, kernel_function, model, kept.model_ref, kept.data_ref, extra)
        if entry is None:
            return False
        kept.entries[trampoline] = entry
    call, address, key = entry
    if v is None:
        done = call(address, key, kept.model_ref, kept.data_ref, q, *extra, kept.starts,
                    kept.lengths)
    else:
        done = call(address, key, kept.model_ref, kept.data_ref, q, v, u, *extra,
                    kept.starts, kept.lengths)
    if done:
        data._last_K, data._last_single, data._has_placements = 1, True, True
    return done


def model_one_state(trampoline, kernel_function, model, q, v, out):
    """True when ``trampoline`` computed the state (q, v) into ``out`` (a function of
    no Data: ``integrate``): q and v are float64 vectors of the model's sizes and
    valid; False for any other call (the caller then takes its full path)."""
    kept = model.__dict__.get("_one_state")
    if kept is None or kept.arrays is not model.arrays:
        kept = _OneState.of_model(model)
    try:
        fingerprint = compute_fingerprint((q, v))
    except Exception:  # a value Numba cannot type: the full path says what is wrong
        return False
    if fingerprint != _VECTORS[2] or not native_floats(q, v):
        return False
    entry = kept.entries.get(trampoline)
    if entry is None:
        entry = _entry(trampoline, kernel_function, model, kept.model_ref, None, (out,))
        if entry is None:
            return False
        kept.entries[trampoline] = entry
    call, address, key = entry
    return call(address, key, kept.model_ref, q, v, out, kept.starts, kept.lengths)


class _OneState:
    """What :func:`one_state` passes for a Data and the model arrays it was last
    called with: their ModelRef and DataRef, q's unit blocks, and the trampolines'
    entry points; kept on the Data (a pickled or copied Data carries none)."""

    __slots__ = ("arrays", "batch_size", "model_ref", "data_ref", "starts", "lengths",
                 "entries")

    def __init__(self, model):
        border = _border(model)
        self.arrays, self.model_ref, self.entries = model.arrays, model_ref(model), {}
        self.starts, self.lengths = border.starts, border.lengths
        self.batch_size = self.data_ref = None

    @classmethod
    def of_data(cls, model, data):
        """The Data's new _OneState for ``model``, or None when ``data`` is no Data
        made for the model's structure (or holds no state)."""
        border = _border(model)
        if (getattr(data, "_data_fingerprint", None) != border.fingerprint
                or data.batch_size < 1):
            return None
        kept = cls(model)
        kept.batch_size = data.batch_size
        arrays = [getattr(data, name) for name in DATA_FIELDS[:-1]] + [border.no_forces]
        kept.data_ref = _data_ref(*arrays)
        data._one_state = kept
        return kept

    @classmethod
    def of_model(cls, model):
        """The model's new _OneState (no DataRef: for the functions of no Data)."""
        kept = model._one_state = cls(model)
        return kept

    def __reduce__(self):
        return _none, ()


def _none():
    return None


def _entry(trampoline, kernel_function, model, ref, data, extra):
    """(the trampoline's compiled entry point, the kernel's (address, key):
    :func:`native_callee`) for the types of ``ref`` and ``data`` (the model's
    ModelRef, a DataRef) and ``extra``, shared by all models and Data of the same
    types; None when ``kernel_function`` is no Numba dispatcher (a benchmark's
    recorder in its place)."""
    if not hasattr(kernel_function, "overloads"):
        return None
    takes, inputs, _ = ONE_STATE_ARGUMENTS[trampoline]
    model_type = numba.typeof(ref if takes == "ref" else model.arrays)
    data_type = None if data is None else numba.typeof(data)
    types_key = (trampoline, model_type, data_type)
    entry = _ENTRIES.get(types_key)
    if entry is None:
        callee = native_callee(kernel_function, trampoline, model_type, data_type)
        no_blocks = np.empty(0, dtype=np.int64)
        references = (ref,) if data is None else (ref, data)
        arguments = (callee + references + (np.empty(1),) * inputs + tuple(extra)
                     + (no_blocks, no_blocks))
        trampoline.compile(tuple(numba.typeof(x) for x in arguments))
        entry = _ENTRIES[types_key] = (_compiled_entry(trampoline, arguments),) + callee
    return entry


# {(trampoline, ModelRef type, DataRef type): (entry point, kernel address, its key)}
_ENTRIES = {}
