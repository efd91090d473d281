"""Checks at the API border: nothing reaches a kernel that could index out of bounds.

Kernels are compiled without bounds checks, so every public wrapper turns its
inputs into C-contiguous float64 stacks of the right shape here, raising a
``ValueError`` that says what was expected.

The one-state call is the common case from Python, and its checks used to
cost several times the kernel (a NumPy call per check, about 1 us each).  An
argument that already is a C-contiguous, writable float64 array of the right
shape is taken as it is (a view with the batch axis added), and finiteness and
unit norms of all the arguments are checked by one compiled call
(:func:`_states_are_valid`); only when that call says no are the arguments
checked again one by one, to raise the message that names the culprit.  What
the fast path needs of the model (sizes, unit blocks, fingerprint) is read once
per model (:func:`_border`).  :func:`call_kernel` calls a kernel without Numba's
dispatcher, whose type resolution of the ``ModelArrays`` tuple costs more than a
small kernel, and gives the public functions' kernels the model as one
:class:`~.model_ref.ModelRef` (unboxing the tuple's 19 arrays on every call cost
about as much as the fast path's checks); :func:`call_compiled` does the same for
kernels of arrays and scalars.
"""
import hashlib
import numbers
import sys

import numpy as np
from numba._dispatcher import compute_fingerprint

from .config import inline_kernel, kernel
from .model import FREE_FLYER, PLANAR, REVOLUTE_UNBOUNDED, SPHERICAL
from .model_ref import model_ref

UNIT_NORM_TOLERANCE = 1e-6
_FLOAT64 = np.dtype(np.float64)


def _as_float_array(x, name):
    if isinstance(x, np.ndarray) and x.dtype == np.float64:
        return x
    try:
        arr = np.asarray(x)
    except Exception as error:  # ragged lists and the like
        raise ValueError(f"{name}: cannot be read as an array ({error})") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating)
                                   or np.issubdtype(arr.dtype, np.integer)
                                   or arr.dtype == np.bool_):
        raise ValueError(f"{name}: expected real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64)


def as_float_array(x, name):
    """``x`` as a float64 array of any shape: real numbers only (a complex, string
    or object array raises ValueError naming ``name``, never a ComplexWarning)."""
    return _as_float_array(x, name)


def check_model(model, name="model"):
    """ValueError naming ``name`` unless ``model`` is a dynamics Model (or a model
    that reads as one: its arrays, sizes and joints): not an AttributeError later."""
    if not all(hasattr(model, a) for a in ("arrays", "nq", "nv", "njoints")):
        raise ValueError(f"{name}: expected a dynamics Model, got {type(model).__name__}")


def as_vector(x, size, name, nonnegative=False):
    """``x`` as a C-contiguous, writable float64 vector of shape (size,) with finite
    entries (>= 0 when ``nonnegative``): the check of a model-sized parameter (damping,
    a state, a control) where it enters; ValueError naming ``name`` otherwise (a
    (1, size) array, a complex or object array, NaN are refused, not reshaped or
    cast)."""
    arr = _as_float_array(x, name)
    if arr.shape != (size,):
        raise ValueError(f"{name}: expected shape ({size},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf")
    if nonnegative and np.any(arr < 0.0):
        raise ValueError(f"{name}: expected values >= 0, got {arr}")
    return _kernel_input(arr)


def as_real(value, name, low=-np.inf, low_open=False):
    """``value`` (a Python or NumPy real number, not a bool) as a finite float >= low
    (> low when ``low_open``); ValueError naming ``name`` otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected a real number, got {value!r} of type "
                         f"{type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or value < low or (low_open and value == low):
        bound = f"> {low}" if low_open else f">= {low}"
        raise ValueError(f"{name}: expected a finite number {bound}, got {value!r}")
    return value


def as_count(value, name, low=0):
    """``value`` (a Python or NumPy integer, not a bool) as an int >= low; ValueError
    naming ``name`` otherwise (2.5 or "3" are refused, not truncated or parsed)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer, got {value!r} of type "
                         f"{type(value).__name__}")
    if value < low:
        raise ValueError(f"{name}: expected an integer >= {low}, got {value}")
    return int(value)


def as_bounds(lower, upper, n, name):
    """(lower, upper) as two float64 arrays of shape (n,) from scalars or (n,)
    vectors: no NaN (+-inf means unbounded), lower <= upper.  ValueError names
    ``name`` and the bound at fault."""
    out = []
    for value, which in ((lower, "lower"), (upper, "upper")):
        arr = _as_float_array(value, f"{name} ({which})")
        if arr.shape not in ((), (1,), (n,)):
            raise ValueError(f"{name} ({which}): expected a number or shape ({n},), "
                             f"got shape {arr.shape}")
        if np.any(np.isnan(arr)):
            raise ValueError(f"{name} ({which}): contains NaN (use +-inf for no bound)")
        out.append(np.broadcast_to(arr.reshape(-1) if arr.ndim else arr, (n,)).copy())
    if np.any(out[0] == np.inf) or np.any(out[1] == -np.inf):
        raise ValueError(f"{name}: a lower bound of +inf or an upper bound of -inf "
                         "leaves no value")
    if np.any(out[0] > out[1]):
        i = int(np.argmax(out[0] > out[1]))
        raise ValueError(f"{name}: lower bound above upper bound at row {i} "
                         f"({out[0][i]!r} > {out[1][i]!r})")
    return out[0], out[1]


def _kernel_input(arr):
    """``arr`` C-contiguous and writable: Numba types a read-only array (a frozen
    model array, a broadcast view) apart from a writable one and would compile
    every kernel a second time for it; a read-only input is copied instead."""
    arr = np.ascontiguousarray(arr)
    return arr if arr.flags.writeable else arr.copy()


def as_stack(x, size, name, batch=None):
    """``x`` as a C-contiguous (K, size) float64 array, and whether it was single.

    ``batch`` = (K, single) of the first argument: then ``x`` must have the same
    form (a stack of the same K, or one vector when the first was one).
    """
    given = _as_given(x, size, None if batch is None else batch[0])
    if (given is not None and (batch is None or given[1] == batch[1])
            and _are_valid(_NO_STATES, given[0], _NO_STATES, _NO_BLOCKS, _NO_BLOCKS, 0.0)):
        return given
    arr = _as_float_array(x, name)
    if arr.ndim == 1 and arr.shape[0] == size:
        single, arr = True, arr.reshape(1, size)
    elif arr.ndim == 2 and arr.shape[1] == size:
        single = False
    else:
        expected = f"({size},) or (K, {size})"
        raise ValueError(f"{name}: expected shape {expected}, got {arr.shape}")
    if batch is not None:
        K, first_single = batch
        if single and not first_single and K > 0:
            arr = np.broadcast_to(arr, (K, size))
        elif arr.shape[0] != K:
            raise ValueError(f"{name}: expected a stack of {K} vectors like the "
                             f"configuration, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or inf")
    return _kernel_input(arr), single


def unit_blocks(model):
    """(start, length) of every quaternion or (cos, sin) pair in q."""
    blocks = getattr(model, "_unit_blocks", None)
    if blocks is None:
        blocks = []
        a = model.arrays
        for i in range(1, a.njoints):
            t, iq = a.jtype[i], a.idx_q[i]
            if t == FREE_FLYER:
                blocks.append((iq + 3, 4, model.names[i]))
            elif t == SPHERICAL:
                blocks.append((iq, 4, model.names[i]))
            elif t == REVOLUTE_UNBOUNDED:
                blocks.append((iq, 2, model.names[i]))
            elif t == PLANAR:
                blocks.append((iq + 2, 2, model.names[i]))
        model._unit_blocks = blocks
    return blocks


@kernel
def _states_are_valid(q, v, u, starts, lengths, tolerance):
    """True when q (K, nq), v and u (K, n) are finite and every block
    q[k, starts[b]:starts[b] + lengths[b]] has a unit norm within ``tolerance``."""
    for x in (v, u):
        for k in range(x.shape[0]):
            for c in range(x.shape[1]):
                if not np.isfinite(x[k, c]):
                    return False
    for k in range(q.shape[0]):
        for c in range(q.shape[1]):
            if not np.isfinite(q[k, c]):
                return False
        for b in range(starts.shape[0]):
            norm2 = 0.0
            for c in range(starts[b], starts[b] + lengths[b]):
                norm2 += q[k, c] * q[k, c]
            if not abs(np.sqrt(norm2) - 1.0) <= tolerance:
                return False
    return True


def _as_given(x, size, K=None):
    """``x`` itself as a (K, size) stack (a view, no copy) when it already is a
    C-contiguous writable float64 array of shape (size,) or (K, size), else None
    (the caller then takes the checking path).  With K, a single vector is taken
    only when K is None or 1, a stack only when it has K rows."""
    if type(x) is not np.ndarray or x.dtype is not _FLOAT64:
        return None
    flags = x.flags
    if not (flags.c_contiguous and flags.writeable):
        return None
    shape = x.shape
    if len(shape) == 1 and shape[0] == size and (K is None or K == 1):
        return x.reshape(1, size), True
    if len(shape) == 2 and shape[1] == size and (K is None or shape[0] == K):
        return x, False
    return None


_NO_STATES = np.empty((0, 0))
_NO_BLOCKS = np.empty(0, dtype=np.int64)


class _Border:
    """What the fast path reads of a model, gathered once (:func:`_border`):
    the shapes of one state, the unit blocks of q, the structure's fingerprint
    and the zero external forces of one state (no kernel writes ``f_ext``)."""

    __slots__ = ("q_shape", "v_shape", "starts", "lengths", "fingerprint", "no_forces")

    def __init__(self, model):
        blocks = unit_blocks(model)
        self.q_shape, self.v_shape = (model.nq,), (model.nv,)
        self.starts = np.array([b[0] for b in blocks], dtype=np.int64)
        self.lengths = np.array([b[1] for b in blocks], dtype=np.int64)
        self.fingerprint = model_fingerprint(model)
        self.no_forces = np.zeros((1, model.njoints, 6))


def _border(model):
    """The model's :class:`_Border`, made on first use (a copy made by
    ``with_changes`` shares it: it has the same structure)."""
    border = model.__dict__.get("_border")
    if border is None:
        border = model._border = _Border(model)
    return border


# Numba's type fingerprints of (q,) and (q, v, u) as C-contiguous writable float64
# vectors or stacks: one C call tells whether all the arguments are in kernel form.
_VECTORS = {count: compute_fingerprint((np.empty(1),) * count) for count in (1, 2, 3)}
_STACKS = {count: compute_fingerprint((np.empty((1, 1)),) * count) for count in (1, 3)}


def _are_valid(qs, vs, us, starts, lengths, tolerance):
    """:func:`_states_are_valid` of arguments in kernel form (C-contiguous writable
    float64 stacks, int64 blocks: the callers checked their types), through its
    compiled entry point: the dispatcher's typing of the six arguments costs more
    than the check of one state."""
    global _VALIDITY_ENTRY
    entry = _VALIDITY_ENTRY
    if entry is None:
        arguments = (qs, vs, us, starts, lengths, tolerance)
        valid = _states_are_valid(*arguments)
        _VALIDITY_ENTRY = _compiled_entry(_states_are_valid, arguments)
        return valid
    return entry(qs, vs, us, starts, lengths, tolerance)


_VALIDITY_ENTRY = None


def _given_states(model, q, v=None, u=None):
    """(qs, vs, us, single) from arguments that need no conversion and pass
    :func:`_states_are_valid`, else None (the caller takes the checking path).

    The common case, one state as (nq,) and (nv,) float64 vectors, costs a type
    fingerprint, three shape comparisons, the views and one compiled call."""
    border = model.__dict__.get("_border") or _border(model)
    try:
        fingerprint = compute_fingerprint((q,) if v is None else (q, v, u))
    except Exception:  # a value Numba cannot type: the checking path says what is wrong
        return None
    if v is None:
        if fingerprint == _VECTORS[1]:
            if q.shape != border.q_shape:
                return None
            single, qs = True, q[None]
        elif fingerprint == _STACKS[1] and q.shape[1] == border.q_shape[0]:
            single, qs = False, q
        else:
            return None
        vs = us = _NO_STATES
    elif fingerprint == _VECTORS[3]:
        v_shape = border.v_shape
        if q.shape != border.q_shape or v.shape != v_shape or u.shape != v_shape:
            return None
        single, qs, vs, us = True, q[None], v[None], u[None]
    elif fingerprint == _STACKS[3]:
        K = q.shape[0]
        if (q.shape[1] != border.q_shape[0] or v.shape != (K,) + border.v_shape
                or u.shape != v.shape):
            return None
        single, qs, vs, us = False, q, v, u
    else:
        return None
    if not native_floats(q, v, u):
        return None
    if not _are_valid(qs, vs, us, border.starts, border.lengths, UNIT_NORM_TOLERANCE):
        return None
    return qs, vs, us, single


def native_floats(q, v=None, u=None):
    """Whether q (and v, u unless None) are of the native float64 dtype.  Numba's type
    fingerprint does not encode byte order: a big-endian float64 array shares the native
    one's, and a kernel reached through its entry point (the fast paths keyed by the
    fingerprint) would read its bytes as native (rev34: rnea 1e-60 instead of 9.1); such
    an array takes the checking path, which converts it.  An identity test per array
    (numpy's native float64 dtype is one object)."""
    return q.dtype is _NATIVE_FLOAT64 and (v is None or (
        v.dtype is _NATIVE_FLOAT64 and (u is None or u.dtype is _NATIVE_FLOAT64)))


_NATIVE_FLOAT64 = np.dtype(np.float64)


def as_configurations(model, q, name="q", batch=None):
    """Validate configurations: shape (nq,) or (K, nq), finite, unit quaternions."""
    if batch is None:
        given = _given_states(model, q)
        if given is not None:
            return given[0], given[3]
    arr, single = as_stack(q, model.nq, name, batch)
    for start, length, joint in unit_blocks(model):
        norms = np.sqrt(np.sum(arr[:, start:start + length] ** 2, axis=1))
        bad = np.abs(norms - 1.0) > UNIT_NORM_TOLERANCE
        if np.any(bad):
            k = int(np.argmax(bad))
            raise ValueError(
                f"{name}: the {'quaternion' if length == 4 else '(cos, sin) pair'} of joint "
                f"{joint!r} (q[{start}:{start + length}]) has norm {norms[k]:.9g}, "
                f"expected 1 (use geppetto.dynamics.normalize)")
    return arr, single


def as_external_forces(model, f_ext, K, single):
    """f_ext: None, (njoints, 6) or (K, njoints, 6) -> (K, njoints, 6) float64."""
    nj = model.njoints
    if f_ext is None:
        zeros = model.__dict__.get("_zero_forces")
        if zeros is None or zeros.shape[0] != K:
            # shared by the calls with K states: no kernel writes f_ext
            zeros = model._zero_forces = np.zeros((K, nj, 6))
        return zeros
    if isinstance(f_ext, (list, tuple)):
        try:
            f_ext = np.array([np.asarray(getattr(f, "vector", f)) for f in f_ext])
        except (ValueError, TypeError) as error:
            raise ValueError(f"f_ext: cannot be read as ({nj}, 6) spatial forces "
                             f"({error})") from None
    arr = _as_float_array(f_ext, "f_ext")
    if arr.shape == (nj, 6):
        arr = np.broadcast_to(arr, (K, nj, 6))
    elif arr.shape != (K, nj, 6):
        raise ValueError(f"f_ext: expected shape ({nj}, 6) (one spatial force per joint, "
                         f"universe included) or ({K}, {nj}, 6), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("f_ext: contains NaN or inf")
    return _kernel_input(arr)


def model_fingerprint(model):
    """A digest of ``model``'s kinematic structure, computed once per model.

    Two models with the same sizes, tree, joint placements and axes, and
    frames (the same robot loaded twice, or a copy with other inertias or
    gravity) share it: a Data made by one is laid out and filled alike for
    the other.  Data and constraints keep the fingerprint of the model that
    made them; the public functions compare it (one attribute read and a
    bytes comparison, ~0.1 us) before any kernel reads their arrays."""
    fingerprint = getattr(model, "_fingerprint", None)
    if fingerprint is None:
        a = model.arrays
        digest = hashlib.blake2b(digest_size=16)
        digest.update(np.array([a.njoints, a.nq, a.nv, len(model.frames)],
                               dtype=np.int64).tobytes())
        for array in (a.parents, a.jtype, a.idx_q, a.idx_v, a.axis, a.jR, a.jp,
                      a.frame_joint, a.frame_R, a.frame_p):
            digest.update(np.ascontiguousarray(array).tobytes())
        fingerprint = model._fingerprint = digest.digest()
    return fingerprint


def check_model_of(model, obj, name="data", attribute="_data_fingerprint"):
    """Raise ValueError naming ``name`` unless ``obj`` (a Data, or with ``attribute``
    "_constraint_fingerprint" a constraint) was made for ``model``'s structure."""
    if getattr(obj, attribute, None) != model_fingerprint(model):
        owner = getattr(obj, "model_name", None)
        made = "" if owner is None else f" (it was made for model {owner!r})"
        advice = "; use model.create_data()" if name == "data" else ""
        raise ValueError(f"{name}: does not belong to model {model.name!r}{made}{advice}")


def check_data(model, data, K, single):
    """Make sure ``data`` belongs to ``model`` and has room for K states.

    Records K and whether the call was for a single state, for the helpers
    that read the last results (``frame_placement``), and that the joint
    placements of those K states are now in ``data`` (every caller computes
    them)."""
    if getattr(data, "_data_fingerprint", None) != model_fingerprint(model):
        check_model_of(model, data)
    if data.batch_size < K:
        data.resize(K)
    data._last_K, data._last_single = K, single
    data._has_placements = True


def check_placements(model, data, function):
    """``data`` belongs to ``model`` and holds joint placements (from any
    algorithm that takes q); returns (K, single) of that call."""
    check_model_of(model, data)
    if not data._has_placements:
        raise RuntimeError(f"{function}: data holds no joint placements yet; call "
                           "forward_kinematics(model, data, q) first (or pass q)")
    return data._last_K, data._last_single


def as_dynamics_arguments(model, data, q, v, u, f_ext, name_u):
    """The arguments of rnea / aba and their derivatives, checked in this order:
    (qs, vs, us, fs, K, single) with q (K, nq), v and u (K, nv) (u the acceleration
    or the torque, called ``name_u`` in messages), f_ext (K, njoints, 6); ``data``
    checked and sized for the K states."""
    given = _given_states(model, q, v, u)
    if given is not None:
        qs, vs, us, single = given
        K = qs.shape[0]
        border = model._border
        if f_ext is None and K == 1:
            fs = border.no_forces
        else:
            fs = as_external_forces(model, f_ext, K, single)
        if getattr(data, "_data_fingerprint", None) != border.fingerprint or data.batch_size < K:
            check_data(model, data, K, single)
        else:  # check_data's bookkeeping, without its calls
            data._last_K, data._last_single, data._has_placements = K, single, True
        return qs, vs, us, fs, K, single
    qs, single = as_configurations(model, q)
    K = qs.shape[0]
    vs, _ = as_stack(v, model.nv, "v", (K, single))
    us, _ = as_stack(u, model.nv, name_u, (K, single))
    fs = as_external_forces(model, f_ext, K, single)
    check_data(model, data, K, single)
    return qs, vs, us, fs, K, single


def _index(value, size, what, name):
    """An int index in [0, size) from an integer (Python or NumPy), checked."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected a {what} id (an integer) or name (a str), "
                         f"got {value!r} of type {type(value).__name__}")
    value = int(value)
    if not 0 <= value < size:
        raise ValueError(f"{name}: {what} id {value} out of range [0, {size})")
    return value


def check_frame(model, frame, name="frame"):
    """Frame id from an int or a name, checked (1.5, None, NaN or True are refused)."""
    if isinstance(frame, str):
        return model.frame_id(frame)
    return _index(frame, model.nframes, "frame", name)


def check_joint(model, joint, name="joint"):
    """Joint id from an int or a name, checked."""
    if isinstance(joint, str):
        return model.joint_id(joint)
    return _index(joint, model.njoints, "joint", name)


def _refcounts(arrays):
    return [sys.getrefcount(a) for a in arrays]


# The reference count of an array that only a pool's list holds, as _refcounts sees it.
_POOLED_ONLY = _refcounts([np.empty(0)])[0]


def output_arrays(data, key, shapes):
    """New float64 arrays of ``shapes`` for a function's results, or the ones that
    its last call on ``data`` (under ``key``) returned when nothing holds them any
    more: the caller dropped them (as a loop over stacks does), so the same pages
    serve again.  Fresh arrays of a stack's derivatives are 13 MB for 1000 solo12
    states, and writing them costs page faults: 5.5 of the 33 us per state of
    ``constraint_dynamics_derivatives`` (measured).  An array the caller still
    holds, or a view of it, is never reused; the contents are not initialized."""
    pool = data.__dict__.setdefault("_output_pool", {})
    arrays = pool.get(key)
    if (arrays is None or [a.shape for a in arrays] != shapes
            or _refcounts(arrays) != [_POOLED_ONLY] * len(arrays)):
        arrays = pool[key] = [np.empty(shape) for shape in shapes]
    return arrays


def result(array, K, single):
    """The first K entries of a batched array; without the batch axis when single."""
    return array[0] if single else array[:K]


def call_kernel(kernel, model, *args):
    """``kernel(model.arrays, *args)``, through the entry point Numba compiled for
    these argument types.

    Numba's dispatcher resolves the type of a tuple of arrays (``ModelArrays``,
    22 fields) anew on every call, 3-10 us: more than a one-state kernel.  The
    compiled specialization is found once per argument types, keyed by Numba's
    own type fingerprint of the arguments, and called directly; a new type goes
    through the dispatcher, which compiles or loads it.  A kernel marked
    :func:`~.config.model_kernel` gets the model's :class:`~.model_ref.ModelRef`
    instead of the tuple (one object to unbox instead of 22)."""
    cached = model.__dict__.get("_entry_points")
    if cached is None or cached[0] is not model.arrays:
        cached = _model_entry_points(model)
    key = (kernel, compute_fingerprint(args))
    entry = cached[3].get(key)
    if entry is None:
        return _first_call(kernel, cached, key, args)
    return entry[0](entry[1], *args)


def _model_entry_points(model):
    """(arrays, their ModelRef, fingerprint of their types, {(kernel, fingerprint of
    the other arguments): (entry point, model argument)}), kept on the model and
    remade when its arrays change (``with_changes`` gives a copy new arrays)."""
    arrays = model.arrays
    cached = model._entry_points = (arrays, model_ref(model), compute_fingerprint(arrays), {})
    return cached


def _first_call(kernel, cached, key, args):
    """``kernel(model, *args)`` through the dispatcher (compiling or loading the
    specialization), its entry point remembered in ``cached`` under ``key`` and in
    :data:`_ENTRY_POINTS` for the models of the same types."""
    arrays, ref, arrays_type, entries = cached
    first = ref if getattr(kernel, "takes_model_ref", False) else arrays
    shared = (kernel, arrays_type, key[1])
    entry = _ENTRY_POINTS.get(shared)
    if entry is not None:
        entries[key] = (entry, first)
        return entry(first, *args)
    out = kernel(first, *args)
    entry = _ENTRY_POINTS[shared] = _compiled_entry(kernel, (first,) + args)
    entries[key] = (entry, first)
    return out


def _compiled_entry(kernel, args):
    """The entry point of ``kernel``'s specialization for the types of ``args``
    (compiled or loaded by a call through the dispatcher before); the kernel
    itself when it is no dispatcher (a ThreadedKernel).

    Remembered under Numba's type fingerprint of ``args`` (as :func:`call_kernel`):
    typing the arguments through the dispatcher costs 2-5 us each, which a caller that
    looks its entry up once per solve (the DDP solvers' backward pass, 25 arguments)
    paid on every solve."""
    if not hasattr(kernel, "overloads"):
        return kernel
    try:
        key = (kernel, compute_fingerprint(args))
    except NotImplementedError:     # no fingerprint (a ModelRef): typed, not remembered
        key = None
    entry = _ENTRY_BY_FINGERPRINT.get(key)
    if entry is None:
        entry = kernel.overloads[tuple(kernel.typeof_pyval(x) for x in args)].entry_point
        if key is not None:
            _ENTRY_BY_FINGERPRINT[key] = entry
    return entry


# {(kernel, fingerprint of the argument types): compiled entry point} of _compiled_entry
_ENTRY_BY_FINGERPRINT = {}


# {(kernel, fingerprint of the ModelArrays type, fingerprint of the other arguments):
# compiled entry point}, shared by the models of the same types
_ENTRY_POINTS = {}


def call_compiled(kernel, *args):
    """``kernel(*args)`` for a kernel of arrays and scalars, through its compiled entry
    point (keyed by the arguments' type fingerprint, as :func:`call_kernel`): the
    dispatcher's typing of a few arrays costs about as much as a small check."""
    key = (kernel, compute_fingerprint(args))
    entry = _COMPILED.get(key)
    if entry is None:
        out = kernel(*args)
        _COMPILED[key] = _compiled_entry(kernel, args)
        return out
    return entry(*args)


_COMPILED = {}


@kernel
def _rows_are_finite(x, K):
    """True when the first K rows of x (rows, n) are finite."""
    for k in range(K):
        for c in range(x.shape[1]):
            if not np.isfinite(x[k, c]):
                return False
    return True


def check_invertible(model, output, K, function):
    """Raise ValueError when the articulated-body pass met a joint without inertia
    along its motion (D = S^T IA S = 0: M(q) singular, e.g. links without mass in a
    URDF), instead of returning inf or NaN; ``output`` the (K, ...) result (ddq or
    M^-1: the inputs were checked finite, so only a singular M makes it not so)."""
    if not call_compiled(_rows_are_finite, output.reshape(output.shape[0], -1), K):
        raise ValueError(f"{function}: the joint-space inertia matrix of model "
                         f"{model.name!r} is singular at this configuration (a joint moves "
                         "links without mass or inertia along its motion); give those links "
                         "an <inertial> or add armature (model.with_changes(armature=...))")


@inline_kernel
def all_finite(x):
    """True when every entry of the vector ``x`` is finite (no NaN, no inf); inlined
    into the compiled checks that call it (one-state wrappers, line-search trials)."""
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return False
    return True
