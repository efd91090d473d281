"""Compiled kernels called by address from other compiled code.

A kernel that calls another kernel as a Numba function links the callee's code into
its own and LLVM optimizes it again (measured on the ur5 MPC horizon: a kernel calling
the lanes' dynamics block and the term interpreter took 31.9 s of CPU to compile,
where its callees were cached).  :func:`call_checked` calls instead the callee's
specialization already compiled (or loaded from the cache) by its address, which
:func:`callee_address` looks up once per process and signature: the caller compiles in
about a second.

The address says nothing of the types its code expects: a caller that passes other
types (another array layout, another tuple) than those the callee was compiled for
would run it on misread arguments.  So every call by address goes through
:func:`call_checked` (:func:`call_checked_int` for a callee returning an int64), on
the (address, key) pair of :func:`callee_address`: the key names the callee's
argument types (:func:`signature_key`), the call compares it with the key of the
types it passes (a constant of its compiled code) and raises TypeError on a mismatch,
before the call.  The callers: the one-state trampolines
(:mod:`~geppetto.dynamics.one_state`), the lanes' ABA block of a fused phase and a
user residual's knot loop (:mod:`geppetto.ocp.fused`), the one-call horizon
(:mod:`geppetto.ocp.horizon`).  The check costs one compare of two integers.
"""
import hashlib

import numpy as np
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload


def compiled_address(function, argument_types, returns=types.none):
    """The address of the native code of ``function`` (a Numba dispatcher) for exactly
    ``argument_types`` (a tuple of Numba types), compiled (or loaded from the cache)
    when missing.  Raises TypeError when that specialization returns another type than
    ``returns`` (:func:`call_checked` calls for None, :func:`call_checked_int` for
    int64)."""
    signature = tuple(argument_types)
    overload = function.overloads.get(signature)
    if overload is None:
        function.compile(signature)
        overload = function.overloads[signature]
    if overload.signature.return_type != returns:
        raise TypeError(f"{function.__name__} returns {overload.signature.return_type}, "
                        f"expected {returns}")
    return overload.library.get_pointer_to_function(overload.fndesc.llvm_func_name)


def signature_key(argument_types):
    """An int64 naming the tuple of Numba types ``argument_types`` (a hash of their
    names, which Numba's types are equal by), the same in every process."""
    name = str(types.Tuple(tuple(argument_types))).encode()
    return int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "little",
                          signed=True)


def callee_address(function, argument_types, returns=types.none):
    """(address, key) of ``function``'s specialization for ``argument_types``
    (:func:`compiled_address`) and the :func:`signature_key` of the argument types
    of that specialization, for :func:`call_checked`."""
    address = compiled_address(function, argument_types, returns)
    return address, signature_key(function.overloads[tuple(argument_types)].signature.args)


def _checked_call(return_type):
    """The typer of a call, by (address, key), of a compiled function returning
    ``return_type``, for the argument types of the tuple it is given: the codegen
    raises TypeError when ``key`` is not the :func:`signature_key` of those types,
    else calls the function in Numba's calling convention (its exception, if any,
    propagates)."""

    def typer(typingctx, address, key, arguments):
        if not (isinstance(address, types.Integer) and isinstance(key, types.Integer)
                and isinstance(arguments, types.BaseTuple)):
            return None
        argument_types = tuple(arguments.types)
        expected = signature_key(argument_types)

        def codegen(context, builder, signature, llargs):
            given = context.cast(builder, llargs[1], signature.args[1], types.int64)
            differs = builder.icmp_signed("!=", given,
                                          context.get_constant(types.int64, expected))
            with cgutils.if_unlikely(builder, differs):
                context.call_conv.return_user_exc(builder, TypeError, (
                    "call by address: the callee was compiled for other argument types "
                    f"than this call passes, {types.Tuple(argument_types)}",))
            function_type = context.call_conv.get_function_type(return_type, argument_types)
            function = builder.inttoptr(llargs[0], function_type.as_pointer())
            packed = llargs[2]
            values = [builder.extract_value(packed, i) for i in range(len(argument_types))]
            status, value = context.call_conv.call_function(builder, function, return_type,
                                                            argument_types, values)
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            if return_type == types.none:
                return context.get_dummy_value()
            return value

        return return_type(address, key, arguments), codegen

    return typer


@intrinsic
def call_checked(typingctx, address, key, arguments):
    """``f(*arguments)`` for the compiled function ``f`` of (address, key) from
    :func:`callee_address` (returning None); raises TypeError, without calling, when
    ``f`` was compiled for other types than those of ``arguments``."""
    return _checked_call(types.none)(typingctx, address, key, arguments)


@intrinsic
def call_checked_int(typingctx, address, key, arguments):
    """:func:`call_checked` for a function returning an int64 (a rollout's failed knot:
    :func:`callee_address` with ``returns=types.int64``)."""
    return _checked_call(types.int64)(typingctx, address, key, arguments)


def call_pass(function, passes, slot, arguments):
    """``function(*arguments)``, from compiled code: a compiled call (``function``
    linked into the caller's code) when ``passes`` is None, else the call by address of
    the entry ``passes[slot]`` = (address, key) of a :class:`PassTable`.

    For the passes of a kernel that most models never run (a free flyer, a joint of
    several dofs): linked into the caller, each is compiled with it, on the first call
    of every model, although an arm never runs it (CRBA: about 3 of its 11 s on ur5).
    Reached by address, it is compiled (or loaded from the cache) by
    :meth:`PassTable.table` only for a model that has such a joint.  A model that
    needs a pass its table lacks (address 0, key 0) raises TypeError, never calls.
    Both calls pass the arguments :func:`writable`, so that the linked call and the call
    by address reach the same compiled specialization (compiled once per process)."""


@overload(call_pass, inline="always")
def _call_pass(function, passes, slot, arguments):
    if isinstance(passes, types.NoneType):
        def linked(function, passes, slot, arguments):
            function(*writable(arguments))
        return linked

    def by_address(function, passes, slot, arguments):
        call_checked(passes[slot, 0], passes[slot, 1], writable(arguments))
    return by_address


def writable_type(numba_type):
    """``numba_type`` with its arrays writable (a read-only array's memory layout and
    calling convention are those of the writable one): the types a pass of a
    :class:`PassTable` is compiled for, whatever a caller's arrays are."""
    numba_type = types.unliteral(numba_type)
    if isinstance(numba_type, types.Array) and not numba_type.mutable:
        return numba_type.copy(readonly=False)
    return numba_type


@intrinsic
def writable(typingctx, arguments):
    """The tuple ``arguments`` typed with its arrays writable (:func:`writable_type`):
    the same values, so that a pass compiled once serves callers that pass a model's
    read-only arrays or writable ones."""
    if not isinstance(arguments, types.BaseTuple):
        return None
    result = types.Tuple(tuple(writable_type(t) for t in arguments.types))

    def codegen(context, builder, signature, llargs):
        return impl_ret_borrowed(context, builder, signature.return_type, llargs[0])

    return result(arguments), codegen


class PassTable:
    """The (address, key) entries that a kernel's :func:`call_pass` calls reach, one
    slot per pass: ``slots`` a sequence of (dispatcher, argument types).  ``table(needed)``
    returns the (len(slots), 2) int64 array a kernel takes, the passes of the slots
    where ``needed`` is true compiled (or loaded from the cache) at their first use in
    the process, the others (0, 0)."""

    def __init__(self, *slots):
        self.slots = slots
        self._tables = {}

    def table(self, needed):
        needed = tuple(bool(n) for n in needed)
        table = self._tables.get(needed)
        if table is None:
            table = np.zeros((len(self.slots), 2), dtype=np.int64)
            for slot, ((function, argument_types), wanted) in enumerate(zip(self.slots,
                                                                            needed)):
                if wanted:
                    table[slot] = callee_address(
                        function, tuple(writable_type(t) for t in argument_types))
            table.flags.writeable = False
            self._tables[needed] = table
        return table


# The Numba type of a PassTable's table (read-only)
PASS_TABLE_TYPE = types.Array(types.int64, 2, "C", readonly=True)
