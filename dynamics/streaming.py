"""Stores that bypass the cache, for a kernel's large output stack.

A kernel that computes each state's result in scratch that stays in cache and then
copies it to a stack much larger than the cache (CRBA on talos: 1000 states of
11.5 kB, 11.5 MB) pays for every line of the stack twice: the store first reads the
line from memory (read for ownership), the write-back later writes it, and the
stream evicts the scratch and the model from the caches as it goes.  A
non-temporal store writes a whole 64-byte line straight to memory: no read, no
eviction.  LLVM emits one (``vmovntpd``/``vmovntps`` on x86-64) for a store that
carries ``!nontemporal`` metadata; :func:`stream_copy` writes the aligned whole
lines of its destination so, the partial lines at both ends with plain stores.

Where the stack would have stayed in cache (a few MB: solo12's 2.6 MB, talos's
3.5 MB for 300 states), non-temporal stores only add the memory writes (1.05x the
time, engineer's run), so the caller decides by the stack's size
(:data:`STREAM_BYTES`).  A kernel that streamed calls :func:`store_fence` before it
returns: non-temporal stores are weakly ordered, and the fence makes them visible
to every thread before any later store.
"""
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array
import numpy as np

from .config import inline_kernel

# Output stacks larger than this are written with non-temporal stores: about a quarter
# of the machine's 32 MB L3, shared by two cores and their neighbours (CRBA on talos:
# streaming 11.5 MB took 0.78x the time of plain stores, 3.5 MB 1.06x; 1000 and 300
# states, engineer's runs, load 5-6).
STREAM_BYTES = 8 << 20

_LINE = np.uint64(64)
_DOUBLES_PER_LINE = np.uint64(8)


@intrinsic
def data_address(typingctx, array):
    """The address of ``array``'s first element, as an unsigned integer."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, arguments):
        data = make_array(signature.args[0])(context, builder, arguments[0]).data
        return builder.ptrtoint(data, ir.IntType(64))

    return types.uint64(array), codegen


@intrinsic
def stream_line(typingctx, dst, d, src, s):
    """dst[d:d + 8] = src[s:s + 8] (float64, C-contiguous, no bounds check): one
    64-byte non-temporal store, dst + 8 d aligned to 64 bytes (the caller's duty)."""
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array)
            and dst.dtype == types.float64 and src.dtype == types.float64):
        return None

    def codegen(context, builder, signature, arguments):
        line = ir.VectorType(ir.DoubleType(), 8)
        dst_data = make_array(signature.args[0])(context, builder, arguments[0]).data
        src_data = make_array(signature.args[2])(context, builder, arguments[2]).data
        source = builder.bitcast(builder.gep(src_data, [arguments[3]]), line.as_pointer())
        target = builder.bitcast(builder.gep(dst_data, [arguments[1]]), line.as_pointer())
        store = builder.store(builder.load(source, align=8), target, align=64)
        store.set_metadata("nontemporal",
                           builder.module.add_metadata([ir.IntType(32)(1)]))
        return context.get_dummy_value()

    return types.none(dst, types.uint64, src, types.uint64), codegen


@intrinsic
def store_fence(typingctx):
    """A sequentially consistent fence (``mfence`` on x86-64): every store before it,
    non-temporal ones included, is visible before any store after it."""
    def codegen(context, builder, signature, arguments):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.none(), codegen


@inline_kernel
def stream_copy(src, dst, start):
    """dst[start:start + n] = src for flat float64 arrays (src of n entries): plain
    stores up to the first 64-byte boundary of dst, non-temporal stores of whole lines
    (:func:`stream_line`), plain stores for the rest.  The caller calls
    :func:`store_fence` once after its last stream_copy."""
    n = np.uint64(src.shape[0])
    b = np.uint64(start)
    offset = (data_address(dst) + b * np.uint64(8)) % _LINE
    head = n
    if offset % np.uint64(8) == 0:  # float64 arrays are 8-byte aligned: always
        head = min(n, ((_LINE - offset) % _LINE) // np.uint64(8))
    for j in range(head):
        dst[b + j] = src[j]
    j = head
    while j + _DOUBLES_PER_LINE <= n:
        stream_line(dst, b + j, src, j)
        j += _DOUBLES_PER_LINE
    while j < n:
        dst[b + j] = src[j]
        j += np.uint64(1)
