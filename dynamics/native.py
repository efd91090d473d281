"""Compiled kernels called by address from other compiled code.

A kernel that calls another kernel as a Numba function links the callee's code into
its own and LLVM optimizes it again (measured on the ur5 MPC horizon: a kernel calling
the lanes' dynamics block and the term interpreter took 31.9 s of CPU to compile,
where its callees were cached).  :func:`~.one_state.call_native` calls instead the
callee's specialization already compiled (or loaded from the cache) by its address,
which :func:`compiled_address` looks up once per process and signature: the caller
compiles in about a second.

The address says nothing of the types its code expects: a caller that passes other
types (another array layout, another tuple) than those the callee was compiled for
would run it on misread arguments.  Where the caller's Python side works the types
out itself (:mod:`geppetto.ocp.horizon`), :func:`callee_address` returns the
address with the key of the callee's signature (:func:`signature_key`), and the
caller calls through :func:`~.one_state.call_checked`, which compares it with the
key of the types it passes (a constant of its compiled code) and raises TypeError
on a mismatch, before the call.
"""
import hashlib

from numba.core import types


def compiled_address(function, argument_types, returns=types.none):
    """The address of the native code of ``function`` (a Numba dispatcher) for exactly
    ``argument_types`` (a tuple of Numba types), compiled (or loaded from the cache)
    when missing.  Raises TypeError when that specialization returns another type than
    ``returns`` (:func:`~.one_state.call_native` calls for None,
    :func:`~.one_state.call_native_int` for int64)."""
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
    of that specialization, for :func:`~.one_state.call_checked`."""
    address = compiled_address(function, argument_types, returns)
    return address, signature_key(function.overloads[tuple(argument_types)].signature.args)
