"""Checks at the API border: nothing reaches a kernel that could index out of bounds.

Kernels are compiled without bounds checks, so every public wrapper turns its
inputs into C-contiguous float64 stacks of the right shape here, raising a
``ValueError`` that says what was expected.
"""
import hashlib
import numbers

import numpy as np

from .model import FREE_FLYER, PLANAR, REVOLUTE_UNBOUNDED, SPHERICAL

UNIT_NORM_TOLERANCE = 1e-6


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


def as_configurations(model, q, name="q", batch=None):
    """Validate configurations: shape (nq,) or (K, nq), finite, unit quaternions."""
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
        return np.zeros((K, nj, 6))
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


def result(array, K, single):
    """The first K entries of a batched array; without the batch axis when single."""
    return array[0] if single else array[:K]


def check_invertible(model, output, K, function):
    """Raise ValueError when the articulated-body pass met a joint without inertia
    along its motion (D = S^T IA S = 0: M(q) singular, e.g. links without mass in a
    URDF), instead of returning inf or NaN; ``output`` the (K, ...) result (ddq or
    M^-1: the inputs were checked finite, so only a singular M makes it not so)."""
    if not np.all(np.isfinite(output[:K])):
        raise ValueError(f"{function}: the joint-space inertia matrix of model "
                         f"{model.name!r} is singular at this configuration (a joint moves "
                         "links without mass or inertia along its motion); give those links "
                         "an <inertial> or add armature (model.with_changes(armature=...))")

