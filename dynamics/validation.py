"""Checks at the API border: nothing reaches a kernel that could index out of bounds.

Kernels are compiled without bounds checks, so every public wrapper turns its
inputs into C-contiguous float64 stacks of the right shape here, raising a
``ValueError`` that says what was expected.
"""
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


def check_data(model, data, K, single):
    """Make sure ``data`` belongs to ``model`` and has room for K states.

    Records K and whether the call was for a single state, for the helpers
    that read the last results (``frame_placement``)."""
    if getattr(data, "_dims", None) != (model.njoints, model.nv, model.nframes):
        raise ValueError(f"data was not created by model {model.name!r} "
                         "(use model.create_data())")
    if data.batch_size < K:
        data.resize(K)
    data._last_K, data._last_single = K, single


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


def check_frame(model, frame):
    """Frame id from an int or a name, checked."""
    if isinstance(frame, str):
        return model.frame_id(frame)
    frame = int(frame)
    if not 0 <= frame < model.nframes:
        raise ValueError(f"frame id {frame} out of range [0, {model.nframes})")
    return frame


def check_joint(model, joint):
    """Joint id from an int or a name, checked."""
    if isinstance(joint, str):
        return model.joint_id(joint)
    joint = int(joint)
    if not 0 <= joint < model.njoints:
        raise ValueError(f"joint id {joint} out of range [0, {model.njoints})")
    return joint


def result(array, K, single):
    """The first K entries of a batched array; without the batch axis when single."""
    return array[0] if single else array[:K]
