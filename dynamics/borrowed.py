"""Borrowed array views: no reference counting inside a kernel's loop over states.

Numba counts references to every array a variable holds: each array argument of
an inlined helper, each field taken from the model tuple and each slice
``q[k]`` is an atomic increment, and a decrement when the variable dies.  Its
LLVM pass prunes the pairs within one basic block, not those that a loop over
joints separates, so the passes that a kernel inlines once per state kept 60
atomic increments and decrements per state in ``_crba`` (ur5: 26 NRT_incref and
34 NRT_decref call sites in its assembly, most of them once per state).

:func:`borrowed` returns the same array (data, shape, strides) with no memory
owner (a null meminfo, as ``numba.carray`` makes): Numba's reference counting
of it and of every view taken from it is a null test, no atomic operation.  The
caller keeps the owner alive: a kernel's arguments live for the whole call,
and a scratch array allocated in the kernel must be used again after the last
use of its borrowed view (:func:`keep_alive`).
"""
from numba.core import cgutils, types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from .config import inline_kernel
from .model import ModelArrays


@intrinsic
def borrowed(typingctx, array):
    """``array`` without its memory owner (see the module's docstring)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, arguments):
        source = make_array(array)(context, builder, arguments[0])
        view = make_array(array)(context, builder)
        populate_array(view, data=source.data, shape=source.shape, strides=source.strides,
                       itemsize=source.itemsize, meminfo=None, parent=None)
        return view._getvalue()

    return array(array), codegen


def borrow_value(context, builder, typ, value):
    """Code generation: ``value`` of type ``typ`` with every array in it (nested tuples
    included) without its memory owner; other members reference-counted as a read
    would (an increment, which the caller's decrement at their end balances)."""
    if isinstance(typ, types.Array):
        source = make_array(typ)(context, builder, value)
        view = make_array(typ)(context, builder)
        populate_array(view, data=source.data, shape=source.shape, strides=source.strides,
                       itemsize=source.itemsize, meminfo=None, parent=None)
        return view._getvalue()
    if isinstance(typ, types.BaseTuple):
        members = [borrow_value(context, builder, t, builder.extract_value(value, i))
                   for i, t in enumerate(typ)]
        return context.make_tuple(builder, typ, members)
    context.nrt.incref(builder, typ, value)
    return value


@intrinsic
def borrowed_all(typingctx, value):
    """``value`` (an array or a tuple of arrays, nested tuples and scalars, a
    ModelArrays) with every array :func:`borrowed`: one statement for a kernel's
    argument tuples, whose owners the caller keeps alive for the whole call."""
    if not isinstance(value, (types.Array, types.BaseTuple)):
        return None

    def codegen(context, builder, signature, arguments):
        return borrow_value(context, builder, value, arguments[0])

    return value(value), codegen


@intrinsic
def keep_alive(typingctx, owners):
    """A use of the arrays in the tuple ``owners`` that does nothing: after it,
    Numba releases them, so their borrowed views stay valid until here."""
    def codegen(context, builder, signature, arguments):
        return cgutils.get_null_value(context.get_value_type(types.none))

    return types.none(owners), codegen


@inline_kernel
def borrowed_model(m):
    """The ModelArrays tuple ``m`` with every array :func:`borrowed`."""
    return ModelArrays(m.njoints, m.nq, m.nv, borrowed(m.parents), borrowed(m.jtype),
                       borrowed(m.idx_q), borrowed(m.idx_v), borrowed(m.nqs), borrowed(m.nvs),
                       borrowed(m.subtree_end), borrowed(m.axis), borrowed(m.jR),
                       borrowed(m.jp), borrowed(m.inertia), borrowed(m.S),
                       borrowed(m.gravity), borrowed(m.armature), borrowed(m.dof_parent),
                       borrowed(m.dof_joint), borrowed(m.frame_joint), borrowed(m.frame_R),
                       borrowed(m.frame_p))


def _literal_dims(dims):
    """The ints of ``dims`` (an integer literal or a tuple of them), or None."""
    if isinstance(dims, types.IntegerLiteral):
        return (dims.literal_value,)
    if isinstance(dims, types.BaseTuple) and len(dims) > 0 and all(
            isinstance(t, types.IntegerLiteral) for t in dims.types):
        return tuple(t.literal_value for t in dims.types)
    return None


def _frame_array(dtype):
    """An intrinsic: the C-contiguous ``dtype`` array of a literal shape in the calling
    function's stack frame (see :func:`frame_empty`)."""

    def typer(typingctx, dims):
        shape = _literal_dims(dims)
        if shape is None or any(n <= 0 for n in shape):
            return None    # (retyped with literals; a non-literal shape does not type)
        array = types.Array(dtype, len(shape), "C")

        def codegen(context, builder, signature, arguments):
            element = context.get_data_type(dtype)
            itemsize = context.get_abi_sizeof(element)
            size = 1
            for n in shape:
                size *= n
            # in the function's entry block: one slot per call, not one per loop trip
            data = cgutils.alloca_once(builder, element, size=size)
            strides, stride = [], itemsize
            for n in reversed(shape):
                strides.insert(0, stride)
                stride *= n
            intp = context.get_value_type(types.intp)
            view = make_array(array)(context, builder)
            populate_array(view, data=data,
                           shape=[intp(n) for n in shape], strides=[intp(s) for s in strides],
                           itemsize=context.get_constant(types.intp, itemsize),
                           meminfo=None, parent=None)
            return view._getvalue()

        return array(dims), codegen

    return intrinsic(prefer_literal=True)(typer)


frame_empty = _frame_array(types.float64)
frame_empty.__doc__ = """``np.empty(shape)`` (float64) for a kernel's scratch of a literal
shape (an int or a tuple of ints written in the source), in the calling function's stack
frame: no NRT allocation, no free, no memory owner (a null meminfo, as :func:`borrowed`).
Valid until the calling function returns: it must not be returned or stored.  Uninitialized
as np.empty.  A kernel's small fixed scratch (placements, 6x6 blocks) allocated with
np.empty cost an NRT allocation and free per call (per chunk of knots in loops), the fixed
cost of a small problem's compiled horizon evaluation (issue 16)."""
frame_empty_int = _frame_array(types.int64)
frame_empty_int.__doc__ = """:func:`frame_empty` of int64."""
