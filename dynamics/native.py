"""Compiled kernels called by address from other compiled code.

A kernel that calls another kernel as a Numba function links the callee's code into
its own and LLVM optimizes it again (measured on the ur5 MPC horizon: a kernel calling
the lanes' dynamics block and the term interpreter took 31.9 s of CPU to compile,
where its callees were cached).  :func:`~.one_state.call_native` calls instead the
callee's specialization already compiled (or loaded from the cache) by its address,
which :func:`compiled_address` looks up once per process and signature: the caller
compiles in about a second.
"""
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
