"""The model's arrays as one Numba object, for the one-state calls from Python.

A compiled function called from Python unboxes each argument: a
:data:`~.model.ModelArrays` tuple costs one unboxing per field (19 arrays and
three integers; each array a new Numba reference to the NumPy array).  A
:class:`ModelRef` holds the same fields in a Numba structure made once per model
(:func:`model_ref`); unboxing it is one reference count.  Measured on ur5 (load
10, CPU time): rnea's compiled entry point called with its 12 other arrays
2.68 us with the tuple, 2.15-2.26 us with a ModelRef, of which the kernel 1.2.

A kernel that takes ``model`` as a ``ModelArrays`` tuple *or* a ``ModelRef``
(the public functions' top-level kernels, marked with
:func:`~.config.model_kernel`) starts with ``m = model_arrays(model)``: for a
``ModelRef`` that builds the tuple from the structure's fields once per call (a
few loads, no copy), so the rest of the kernel and every pass it calls are
compiled for the tuple as before, with the array layouts LLVM knows.
"""
from numba.core import types
from numba.core.extending import overload
from numba.experimental import structref

from .config import kernel
from .model import ModelArrays


@structref.register
class ModelRefType(types.StructRef):
    """Numba type of :class:`ModelRef`: one field per ``ModelArrays`` field."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class ModelRef(structref.StructRefProxy):
    """The fields of a ``ModelArrays`` (same names) in one Numba structure."""


structref.define_proxy(ModelRef, ModelRefType, list(ModelArrays._fields))


@kernel
def _model_ref(m):
    """A ModelRef holding the fields of the ModelArrays ``m`` (the same arrays)."""
    return ModelRef(m.njoints, m.nq, m.nv, m.parents, m.jtype, m.idx_q, m.idx_v, m.nqs,
                    m.nvs, m.subtree_end, m.axis, m.jR, m.jp, m.inertia, m.S, m.gravity,
                    m.armature, m.dof_parent, m.dof_joint, m.frame_joint, m.frame_R,
                    m.frame_p)


class _Kept:
    """The ModelRef made for ``arrays``, kept on its owner.  A ModelRef holds Numba
    memory that cannot be pickled or copied: a pickled or copied owner (a Model sent
    to a Dask worker, a deep copy) carries an empty one, made again at its first
    call."""

    __slots__ = ("arrays", "ref")

    def __init__(self, arrays=None, ref=None):
        self.arrays, self.ref = arrays, ref

    def __reduce__(self):
        return _Kept, ()


def model_ref(owner):
    """The :class:`ModelRef` of ``owner.arrays`` (a Model, or a stage dynamics that
    holds a model's arrays), made once and kept on ``owner`` until its ``arrays``
    change; it keeps the arrays alive."""
    arrays = owner.arrays
    kept = owner.__dict__.get("_model_ref")
    if kept is None or kept.arrays is not arrays:
        kept = owner._model_ref = _Kept(arrays, _model_ref(arrays))
    return kept.ref


def model_arrays(model):
    """``model`` as a ModelArrays tuple: a ModelRef's fields, or the tuple itself."""
    return model


@overload(model_arrays)
def _model_arrays(model):
    if isinstance(model, ModelRefType):
        def from_ref(model):
            m = model
            return ModelArrays(m.njoints, m.nq, m.nv, m.parents, m.jtype, m.idx_q, m.idx_v,
                               m.nqs, m.nvs, m.subtree_end, m.axis, m.jR, m.jp, m.inertia,
                               m.S, m.gravity, m.armature, m.dof_parent, m.dof_joint,
                               m.frame_joint, m.frame_R, m.frame_p)
        return from_ref
    return lambda model: model
