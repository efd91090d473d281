"""Tiles of states laid out across SIMD lanes: the layout, the joint placements
and the spatial algebra of :mod:`.batch_lanes`'s RNEA, ABA and CRBA.

A stack is cut into *tiles* of ``T = TILE`` consecutive states; every workspace
array of a tile is flat, with the lane (state) axis last and contiguous, so
that entry (j, r) of lane s sits at ``(j * width + r) * T + s``:

- ``qt (nq x T)``, ``vt, ut (nv x T)``: the tile's inputs, row r at ``r * T``;
- ``liR (njoints x 9 x T)``, ``lip (njoints x 3 x T)``: liMi (R row-major);
- ``vel, acc, f, c, pA (njoints x 6 x T)``: spatial vectors of each body;
- ``Ya (njoints x 36 x T)``: articulated inertias; ``Ic (njoints x 10 x T)``:
  CRBA's composite inertias in the world frame, compact (mass, m c, rotational
  inertia about the origin);
  ``U, Dinv (nv x 6 x T)`` (column c of U and row c of D^-1 at ``c * 6 * T``),
  ``u (nv x T)``; ``Mt (slots x T)``: the tile's mass matrices, one row per entry
  of the upper triangle that can be nonzero (:func:`.batch_lanes._mass_matrix_slots`).

Each helper runs one step of the per-joint algorithm (a placement, a spatial
transform, a cross product, an inertia product) in a loop ``for s in
range(UT)`` innermost, reading its inputs into locals before any store: the
same arithmetic in every lane, stride-1 loads and stores, no branch, so LLVM
emits packed double instructions across states (benchmarks/lanes.py counts
them in the compiled assembly).  Three things matter, each measured by the
packed instructions it made appear:

- flat arrays and a compile-time ``TILE``: with Numba's N-d arrays the
  distance between two rows is a run-time stride, LLVM cannot prove that the
  stores of one lane loop do not overlap its loads and leaves it scalar;
- unsigned offsets (``UT = np.uint64(TILE)``, ``UT1 = T`` ... ``UT9 = 9 T``):
  Numba puts a negative-index wraparound select on every signed index, which
  hides the constant distances from the vectorizer;
- six rows (or more) per lane loop: LLVM unrolls a 64-iteration loop of one
  product completely before it vectorizes, and the unrolled copy stays scalar.

Joint-type dispatch happens outside the lane loops: revolute joints (any
axis, bounded or not) and the free flyer have vectorized placements; the
other types take the one-state :func:`~geppetto.dynamics.joints.joint_transform`
lane by lane.  The motion subspace S of every type is constant, so the rest
is shared.  The sine and cosine of revolute angles come from
:func:`sincos_lanes`, a branch-free Cody-Waite reduction and the minimax
polynomials of Cephes (Moshier 1989), within about 1 ulp of libm for
|q| < 1e5 and replaced by ``math.sin``/``math.cos`` beyond (libm's calls do
not vectorize).

The outputs: in the (size, K) layout a tile's row is a run of T doubles (512
bytes, 8 cache lines) in each of the output's rows, K entries apart; an output
larger than the caches (:data:`STREAM_DOUBLES`: talos's (nv, nv) matrices of
1000 states, 11.5 MB) is written with non-temporal stores, whole lines that
are not read first (:func:`_stream_rows`; the public functions allocate it
64-byte aligned, :func:`aligned_empty`).  With plain stores each run waited
for its lines to come from memory, and that store alone took 2.3 us per talos
state and matrix, more than CRBA's arithmetic.  The (K, size) layout is
written by 8 x 8 blocks (8 states, 8 entries) transposed in registers
(:data:`store_transposed_8x8`, :func:`store_tile_rows`), whole lines
streamed when the output is larger than the caches.
"""
import math

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array
import numpy as np

from .config import inline_kernel, kernel
from .joints import SINCOS_RANGE, coordinate_axis, joint_transform, sincos_values
from .model import FREE_FLYER, REVOLUTE, REVOLUTE_UNBOUNDED
from .streaming import STREAM_BYTES, data_address, store_fence, stream_copy

TILE = 64  # states per tile (measured: 64 beats 32 by 5-25%; lane loops of 8 AVX-512 registers)
T6, T9, T10, T36 = 6 * TILE, 9 * TILE, 10 * TILE, 36 * TILE  # widths of tile rows
# Unsigned lane count and row offsets, for the lane loops (see the docstring).
UT = np.uint64(TILE)
UT1, UT2, UT3, UT4 = (np.uint64(k * TILE) for k in (1, 2, 3, 4))
UT5, UT6, UT7, UT8, UT9 = (np.uint64(k * TILE) for k in (5, 6, 7, 8, 9))
# The lane loops of a tile that holds n < TILE states run over its first active_width(n)
# lanes: n rounded up to LANE_BLOCK (the doubles of an AVX-512 register), so the loops
# keep whole vectors; the stride of the rows stays TILE (the layout does not change).
LANE_BLOCK = 8
# Outputs of more doubles than this are stored with non-temporal stores (:func:`store_tile`;
# :data:`.streaming.STREAM_BYTES`: larger than the caches keep)
STREAM_DOUBLES = STREAM_BYTES // 8


def _mask(indices):
    """A constant <n x i32> shuffle mask."""
    return ir.Constant(ir.VectorType(ir.IntType(32), len(indices)), list(indices))


def _transpose_8x8(builder, rows):
    """The 8 x 8 transpose of eight <8 x double> vectors, in three rounds of two-source
    shuffles (pairs of rows at distance 1, 2, 4: 24 shuffles, unpck/vperm on x86-64)."""
    for half in (1, 2, 4):
        out = list(rows)
        for i in range(8):
            if i & half:
                continue
            j = i + half
            # entry a of the pair's first output: row i's where bit `half` of a is clear,
            # else row j's entry a - half; the second output: row i's a + half, else j's a
            low = [8 + a - half if a & half else a for a in range(8)]
            high = [8 + a if a & half else a + half for a in range(8)]
            out[i] = builder.shuffle_vector(rows[i], rows[j], _mask(low))
            out[j] = builder.shuffle_vector(rows[i], rows[j], _mask(high))
        rows = out
    return rows


def _transposed_store(nontemporal, parity=None):
    """The intrinsic that stores an 8 x 8 block transposed (see store_transposed_8x8
    below): plain stores, or non-temporal stores of whole lines (nontemporal); all eight
    states, or only the even (parity 0) or odd (parity 1) ones."""
    def store(typingctx, t, source, j, s, x, o, stride):
        if not (isinstance(t, types.Array) and isinstance(x, types.Array)
                and t.dtype == types.float64 and x.dtype == types.float64
                and isinstance(source, types.Array) and source.dtype == types.int64):
            return None

        def codegen(context, builder, signature, arguments):
            t_arg, source_arg, j_arg, s_arg, x_arg, o_arg, stride_arg = arguments
            i64 = ir.IntType(64)
            vector = ir.VectorType(ir.DoubleType(), 8)
            t_data = make_array(signature.args[0])(context, builder, t_arg).data
            source_data = make_array(signature.args[1])(context, builder, source_arg).data
            x_data = make_array(signature.args[4])(context, builder, x_arg).data
            j_value = context.cast(builder, j_arg, signature.args[2], types.int64)
            s_value = context.cast(builder, s_arg, signature.args[3], types.int64)
            o_value = context.cast(builder, o_arg, signature.args[5], types.int64)
            stride = context.cast(builder, stride_arg, signature.args[6], types.int64)
            zero = ir.Constant(vector, None)
            rows = []
            for i in range(8):
                row = builder.load(builder.gep(source_data, [builder.add(j_value, i64(i))]))
                missing = builder.icmp_signed("<", row, i64(0))
                start = builder.add(builder.mul(row, i64(TILE)), s_value)
                start = builder.select(missing, i64(0), start)  # a valid address, discarded
                loaded = builder.load(
                    builder.bitcast(builder.gep(t_data, [start]), vector.as_pointer()),
                    align=8)
                rows.append(builder.select(missing, zero, loaded))
            for e, column in enumerate(_transpose_8x8(builder, rows)):
                target = builder.add(o_value, builder.mul(stride, i64(e)))
                if parity is not None and e % 2 != parity:
                    continue
                address = builder.bitcast(builder.gep(x_data, [target]), vector.as_pointer())
                if not nontemporal:
                    builder.store(column, address, align=8)
                    continue
                stored = builder.store(column, address, align=64)
                stored.set_metadata("nontemporal",
                                    builder.module.add_metadata([ir.IntType(32)(1)]))
            return context.get_dummy_value()

        return types.none(t, source, j, s, x, o, stride), codegen

    return intrinsic(store)


# x[o + e stride + i] = t[source[j + i] T + s + e] for i, e in 0 .. 7 (zero where
# source[j + i] < 0): lanes s .. s + 7 of eight rows of a tile, each loaded as one
# vector, transposed in registers (_transpose_8x8) and stored as eight runs of eight
# doubles, one per state, into the (K, size) layout (x flat, C order).  No bounds check:
# the caller keeps every index in range.  The stream_ forms write the even or the odd
# states only, each run a whole line with a non-temporal store: their x + 8 (o + e
# stride) must be multiples of 64 bytes (the caller's duty: an unaligned non-temporal
# store faults).
store_transposed_8x8 = _transposed_store(False)
stream_even_8x8 = _transposed_store(True, 0)
stream_odd_8x8 = _transposed_store(True, 1)


@inline_kernel
def load_six_lanes(x, X, s):
    """The six rows of the spatial vector at x[X] (rows T apart) in lane s."""
    return (x[X + s], x[X + UT1 + s], x[X + UT2 + s], x[X + UT3 + s], x[X + UT4 + s],
            x[X + UT5 + s])


@inline_kernel
def store_six_sum_lanes(out, O, s, y, x, X, add):
    """out[O] = y (add: y + x[X]) for the six rows of a spatial vector in lane s: the
    tail of the lane loops that make one (the six values loaded before any store, so
    LLVM sees no dependence between the rows and vectorizes the loop)."""
    y0, y1, y2, y3, y4, y5 = y
    if add:
        y0 += x[X + s]
        y1 += x[X + UT1 + s]
        y2 += x[X + UT2 + s]
        y3 += x[X + UT3 + s]
        y4 += x[X + UT4 + s]
        y5 += x[X + UT5 + s]
    out[O + s] = y0
    out[O + UT1 + s] = y1
    out[O + UT2 + s] = y2
    out[O + UT3 + s] = y3
    out[O + UT4 + s] = y4
    out[O + UT5 + s] = y5


@inline_kernel
def store_six_lanes(out, O, s, y, add):
    """out[O] = y (add: out[O] += y) for the six rows of a spatial vector in lane s."""
    store_six_sum_lanes(out, O, s, y, out, O, add)


@inline_kernel
def sincos_lanes(qt, bq, cs):
    """cs[s], cs[T + s] = cos, sin of qt[bq + s] for every lane s
    (:func:`.joints.sincos_values`, libm beyond SINCOS_RANGE)."""
    b = np.uint64(bq)
    far = 0
    for s in range(UT):
        x = qt[b + s]
        c, sn = sincos_values(x)
        cs[s] = c
        cs[UT1 + s] = sn
        far += 1 if abs(x) > SINCOS_RANGE else 0
    if far > 0:
        for s in range(UT):
            if abs(qt[b + s]) > SINCOS_RANGE:
                cs[s] = math.cos(qt[b + s])
                cs[UT1 + s] = math.sin(qt[b + s])


@inline_kernel
def axis_placement_lanes(jR, jp, i, k, cs, liR, lip):
    """liMi = jointPlacement * rotation about the coordinate axis k by (cos, sin) = cs."""
    a = (k + 1) % 3
    b = (k + 2) % 3
    for r in range(3):
        ja, jb, jk, pr = jR[i, r, a], jR[i, r, b], jR[i, r, k], jp[i, r]
        oa = np.uint64(i * T9 + (3 * r + a) * TILE)
        ob = np.uint64(i * T9 + (3 * r + b) * TILE)
        ok = np.uint64(i * T9 + (3 * r + k) * TILE)
        op = np.uint64((3 * i + r) * TILE)
        for s in range(UT):
            c, sn = cs[s], cs[UT1 + s]
            liR[oa + s] = c * ja + sn * jb
            liR[ob + s] = c * jb - sn * ja
            liR[ok + s] = jk
            lip[op + s] = pr


@inline_kernel
def rodrigues_lanes(axes, i, cs, XR, Xp):
    """XJ = rotation about the unit axis axes[i] by (cos, sin) = cs, no translation."""
    x, y, z = axes[i, 0], axes[i, 1], axes[i, 2]
    for s in range(UT):
        c, sn = cs[s], cs[UT1 + s]
        t = 1.0 - c
        XR[s] = c + t * x * x
        XR[UT1 + s] = t * x * y - sn * z
        XR[UT2 + s] = t * x * z + sn * y
        XR[UT3 + s] = t * x * y + sn * z
        XR[UT4 + s] = c + t * y * y
        XR[UT5 + s] = t * y * z - sn * x
        XR[UT6 + s] = t * x * z - sn * y
        XR[UT7 + s] = t * y * z + sn * x
        XR[UT8 + s] = c + t * z * z
        Xp[s] = 0.0
        Xp[UT1 + s] = 0.0
        Xp[UT2 + s] = 0.0


@inline_kernel
def free_flyer_lanes(qt, bq, XR, Xp):
    """XJ of a free flyer: translation rows bq.., then the unit quaternion (x, y, z, w)."""
    b = np.uint64(bq)
    for s in range(UT):
        x, y, z, w = qt[b + UT3 + s], qt[b + UT4 + s], qt[b + UT5 + s], qt[b + UT6 + s]
        XR[s] = 1.0 - 2.0 * (y * y + z * z)
        XR[UT1 + s] = 2.0 * (x * y - z * w)
        XR[UT2 + s] = 2.0 * (x * z + y * w)
        XR[UT3 + s] = 2.0 * (x * y + z * w)
        XR[UT4 + s] = 1.0 - 2.0 * (x * x + z * z)
        XR[UT5 + s] = 2.0 * (y * z - x * w)
        XR[UT6 + s] = 2.0 * (x * z - y * w)
        XR[UT7 + s] = 2.0 * (y * z + x * w)
        XR[UT8 + s] = 1.0 - 2.0 * (x * x + y * y)
        Xp[s] = qt[b + s]
        Xp[UT1 + s] = qt[b + UT1 + s]
        Xp[UT2 + s] = qt[b + UT2 + s]


@inline_kernel
def compose_lanes(jR, jp, i, XR, Xp, liR, lip):
    """liMi = jointPlacement_i * XJ: (jR XR, jR Xp + jp) in every lane."""
    for r in range(3):
        a0, a1, a2, t = jR[i, r, 0], jR[i, r, 1], jR[i, r, 2], jp[i, r]
        o = np.uint64(i * T9 + 3 * r * TILE)
        op = np.uint64((3 * i + r) * TILE)
        for s in range(UT):
            lip[op + s] = t + a0 * Xp[s] + a1 * Xp[UT1 + s] + a2 * Xp[UT2 + s]
            liR[o + s] = a0 * XR[s] + a1 * XR[UT3 + s] + a2 * XR[UT6 + s]
            liR[o + UT1 + s] = a0 * XR[UT1 + s] + a1 * XR[UT4 + s] + a2 * XR[UT7 + s]
            liR[o + UT2 + s] = a0 * XR[UT2 + s] + a1 * XR[UT5 + s] + a2 * XR[UT8 + s]


@kernel
def placement_lanes(m, i, qt, ws):
    """liMi of joint i in every lane of the tile (into ws's liR, lip)."""
    liR, lip, cs, XR, Xp, R1, p1, ql = ws[0], ws[1], ws[6], ws[7], ws[8], ws[9], ws[10], ws[11]
    t, bq = m.jtype[i], m.idx_q[i] * TILE
    if t == REVOLUTE or t == REVOLUTE_UNBOUNDED:
        if t == REVOLUTE:
            sincos_lanes(qt, bq, cs)
        else:
            for s in range(TILE):
                cs[s] = qt[bq + s]
                cs[TILE + s] = qt[bq + TILE + s]
        k = coordinate_axis(m.axis, i)
        if k >= 0:
            axis_placement_lanes(m.jR, m.jp, i, k, cs, liR, lip)
            return
        rodrigues_lanes(m.axis, i, cs, XR, Xp)
    elif t == FREE_FLYER:
        free_flyer_lanes(qt, bq, XR, Xp)
    else:
        for s in range(TILE):
            for r in range(m.nq):
                ql[r] = qt[r * TILE + s]
            joint_transform(t, m.axis, i, ql, m.idx_q[i], R1, p1)
            for r in range(3):
                Xp[r * TILE + s] = p1[0, r]
                for c in range(3):
                    XR[(3 * r + c) * TILE + s] = R1[0, r, c]
    compose_lanes(m.jR, m.jp, i, XR, Xp, liR, lip)


@inline_kernel
def inv_act_motion_lanes(liR, lip, i, x, bx, out, bo):
    """out[bo] = liMi^-1 x[bx] = [R^T (v - p x w); R^T w] in every lane."""
    R, P = np.uint64(i * T9), np.uint64(3 * i * TILE)
    X, O = np.uint64(bx), np.uint64(bo)
    for s in range(UT):
        r00, r01, r02 = liR[R + s], liR[R + UT1 + s], liR[R + UT2 + s]
        r10, r11, r12 = liR[R + UT3 + s], liR[R + UT4 + s], liR[R + UT5 + s]
        r20, r21, r22 = liR[R + UT6 + s], liR[R + UT7 + s], liR[R + UT8 + s]
        p0, p1, p2 = lip[P + s], lip[P + UT1 + s], lip[P + UT2 + s]
        v0, v1, v2 = x[X + s], x[X + UT1 + s], x[X + UT2 + s]
        w0, w1, w2 = x[X + UT3 + s], x[X + UT4 + s], x[X + UT5 + s]
        t0 = v0 - (p1 * w2 - p2 * w1)
        t1 = v1 - (p2 * w0 - p0 * w2)
        t2 = v2 - (p0 * w1 - p1 * w0)
        out[O + s] = r00 * t0 + r10 * t1 + r20 * t2
        out[O + UT1 + s] = r01 * t0 + r11 * t1 + r21 * t2
        out[O + UT2 + s] = r02 * t0 + r12 * t1 + r22 * t2
        out[O + UT3 + s] = r00 * w0 + r10 * w1 + r20 * w2
        out[O + UT4 + s] = r01 * w0 + r11 * w1 + r21 * w2
        out[O + UT5 + s] = r02 * w0 + r12 * w1 + r22 * w2


@inline_kernel
def force_to_parent(liR, lip, R, P, s, x):
    """liMi x = [R g; R n + p x R g] in lane s for the force x = (g, n) (six values);
    liMi at the unsigned offsets R (rotation) and P (translation)."""
    g0, g1, g2, n0, n1, n2 = x
    r00, r01, r02 = liR[R + s], liR[R + UT1 + s], liR[R + UT2 + s]
    r10, r11, r12 = liR[R + UT3 + s], liR[R + UT4 + s], liR[R + UT5 + s]
    r20, r21, r22 = liR[R + UT6 + s], liR[R + UT7 + s], liR[R + UT8 + s]
    p0, p1, p2 = lip[P + s], lip[P + UT1 + s], lip[P + UT2 + s]
    f0 = r00 * g0 + r01 * g1 + r02 * g2
    f1 = r10 * g0 + r11 * g1 + r12 * g2
    f2 = r20 * g0 + r21 * g1 + r22 * g2
    return (f0, f1, f2,
            r00 * n0 + r01 * n1 + r02 * n2 + p1 * f2 - p2 * f1,
            r10 * n0 + r11 * n1 + r12 * n2 + p2 * f0 - p0 * f2,
            r20 * n0 + r21 * n1 + r22 * n2 + p0 * f1 - p1 * f0)


@inline_kernel
def act_force_lanes(liR, lip, i, x, bx, out, bo, add):
    """out[bo] (+)= liMi x[bx] in every lane (a body force handed to the parent; x and
    out distinct arrays: LLVM does not vectorize the update of one row of an array
    from another row of it)."""
    R, P = np.uint64(i * T9), np.uint64(3 * i * TILE)
    X, O = np.uint64(bx), np.uint64(bo)
    for s in range(UT):
        store_six_lanes(out, O, s, force_to_parent(liR, lip, R, P, s, load_six_lanes(x, X, s)),
                        add)


@inline_kernel
def joint_motion_lanes(S, iv, nvi, x, out, bo, add):
    """out[bo] (+)= S_i x[iv:iv+nvi] (the joint's motion for the rates x) in every lane.

    Every lane loop below does six rows at once: LLVM unrolls a 32-iteration loop
    of one product completely, and the unrolled copy is not vectorized."""
    O = np.uint64(bo)
    for c in range(iv, iv + nvi):
        s0, s1, s2, s3, s4, s5 = S[0, c], S[1, c], S[2, c], S[3, c], S[4, c], S[5, c]
        X = np.uint64(c * TILE)
        keep = add or c > iv
        for s in range(UT):
            xc = x[X + s]
            store_six_lanes(out, O, s, (s0 * xc, s1 * xc, s2 * xc, s3 * xc, s4 * xc, s5 * xc),
                            keep)


@inline_kernel
def motion_cross_lanes(x, bx, y, by, out, bo):
    """out[bo] = x[bx] x y[by] = [w1 x v2 + v1 x w2; w1 x w2] in every lane."""
    motion_cross_first_lanes(x, bx, y, by, out, bo, UT)


@inline_kernel
def motion_cross_first_lanes(x, bx, y, by, out, bo, width):
    """:func:`motion_cross_lanes` in the first ``width`` lanes (:func:`active_width`)."""
    X, Y, O = np.uint64(bx), np.uint64(by), np.uint64(bo)
    for s in range(width):
        a0, a1, a2 = x[X + s], x[X + UT1 + s], x[X + UT2 + s]
        b0, b1, b2 = x[X + UT3 + s], x[X + UT4 + s], x[X + UT5 + s]
        c0, c1, c2 = y[Y + s], y[Y + UT1 + s], y[Y + UT2 + s]
        d0, d1, d2 = y[Y + UT3 + s], y[Y + UT4 + s], y[Y + UT5 + s]
        out[O + s] = b1 * c2 - b2 * c1 + a1 * d2 - a2 * d1
        out[O + UT1 + s] = b2 * c0 - b0 * c2 + a2 * d0 - a0 * d2
        out[O + UT2 + s] = b0 * c1 - b1 * c0 + a0 * d1 - a1 * d0
        out[O + UT3 + s] = b1 * d2 - b2 * d1
        out[O + UT4 + s] = b2 * d0 - b0 * d2
        out[O + UT5 + s] = b0 * d1 - b1 * d0


@inline_kernel
def add_lanes(x, bx, y, by, out, bo):
    """out[bo] = x[bx] + y[by] in every lane."""
    add_first_lanes(x, bx, y, by, out, bo, UT)


@inline_kernel
def add_first_lanes(x, bx, y, by, out, bo, width):
    """:func:`add_lanes` in the first ``width`` lanes (:func:`active_width`)."""
    X, Y, O = np.uint64(bx), np.uint64(by), np.uint64(bo)
    for s in range(width):
        out[O + s] = x[X + s] + y[Y + s]
        out[O + UT1 + s] = x[X + UT1 + s] + y[Y + UT1 + s]
        out[O + UT2 + s] = x[X + UT2 + s] + y[Y + UT2 + s]
        out[O + UT3 + s] = x[X + UT3 + s] + y[Y + UT3 + s]
        out[O + UT4 + s] = x[X + UT4 + s] + y[Y + UT4 + s]
        out[O + UT5 + s] = x[X + UT5 + s] + y[Y + UT5 + s]


@inline_kernel
def inertia_times_lanes(Yi, i, x, bx, out, bo):
    """out[bo] = Y_i x[bx] in every lane; Y_i (6, 6) constant."""
    X = np.uint64(bx)
    for r in range(6):
        y0, y1, y2 = Yi[i, r, 0], Yi[i, r, 1], Yi[i, r, 2]
        y3, y4, y5 = Yi[i, r, 3], Yi[i, r, 4], Yi[i, r, 5]
        O = np.uint64(bo + r * TILE)
        for s in range(UT):
            out[O + s] = (y0 * x[X + s] + y1 * x[X + UT1 + s] + y2 * x[X + UT2 + s]
                          + y3 * x[X + UT3 + s] + y4 * x[X + UT4 + s] + y5 * x[X + UT5 + s])


@inline_kernel
def force_cross_lanes(x, bx, h, bh, out, bo):
    """out[bo] += x[bx] x* h[bh] = [w x f; w x n + v x f] in every lane."""
    force_cross_first_lanes(x, bx, h, bh, out, bo, UT)


@inline_kernel
def force_cross_first_lanes(x, bx, h, bh, out, bo, width):
    """:func:`force_cross_lanes` in the first ``width`` lanes (:func:`active_width`)."""
    X, H, O = np.uint64(bx), np.uint64(bh), np.uint64(bo)
    for s in range(width):
        m0, m1, m2 = x[X + s], x[X + UT1 + s], x[X + UT2 + s]
        m3, m4, m5 = x[X + UT3 + s], x[X + UT4 + s], x[X + UT5 + s]
        h0, h1, h2 = h[H + s], h[H + UT1 + s], h[H + UT2 + s]
        h3, h4, h5 = h[H + UT3 + s], h[H + UT4 + s], h[H + UT5 + s]
        store_six_lanes(out, O, s, (m4 * h2 - m5 * h1, m5 * h0 - m3 * h2, m3 * h1 - m4 * h0,
                                    m4 * h5 - m5 * h4 + m1 * h2 - m2 * h1,
                                    m5 * h3 - m3 * h5 + m2 * h0 - m0 * h2,
                                    m3 * h4 - m4 * h3 + m0 * h1 - m1 * h0), True)


@inline_kernel
def fill_lanes(out, bo, rows, value):
    """rows x T entries of out from bo on = value."""
    fill_first_lanes(out, bo, rows, value, UT)


@inline_kernel
def fill_first_lanes(out, bo, rows, value, width):
    """:func:`fill_lanes` in the first ``width`` lanes of each row (:func:`active_width`)."""
    for r in range(rows):
        O = np.uint64(bo + r * TILE)
        for s in range(width):
            out[O + s] = value


@inline_kernel
def active_width(n):
    """The lanes a tile of n states computes (uint64, for the lane loops): n rounded up
    to LANE_BLOCK, at most TILE.  The lanes from n on repeat the last state
    (:func:`load_tile`), so every lane computed is valid; the lanes past the width keep
    whatever an earlier tile left there and are read by no lane loop of that width (each
    lane's arithmetic reads only its own lane) nor stored (:func:`store_tile` takes the
    first n)."""
    return np.uint64(min(TILE, (n + LANE_BLOCK - 1) // LANE_BLOCK * LANE_BLOCK))


@inline_kernel
def dinv_times_lanes(Dinv, iv, nvi, e, out):
    """:func:`dinv_times_first_lanes` in every lane."""
    dinv_times_first_lanes(Dinv, iv, nvi, e, out, UT)


@inline_kernel
def dinv_times_first_lanes(Dinv, iv, nvi, e, out, width):
    """out rows iv .. iv + nvi - 1 = D_i^-1 e for a joint i of nvi dofs (ABA's
    ddq_i = D_i^-1 (u_i - U_i^T a_i), Featherstone 2008, Table 7.1), the first ``width`` lanes:
    D_i^-1 entry (a, b) at (iv + a) T6 + b T (as ABA's lanes store it), e row b at b T."""
    for a in range(nvi):
        Q = np.uint64((iv + a) * TILE)
        fill_first_lanes(out, (iv + a) * TILE, 1, 0.0, width)
        for b in range(nvi):
            Do, E = np.uint64((iv + a) * T6 + b * TILE), np.uint64(b * TILE)
            for s in range(width):
                out[Q + s] += Dinv[Do + s] * e[E + s]


@kernel
def load_tile(x, b, n, lanes_major, out):
    """out (size x T) = states b .. b+n-1 of x ((size, K) when lanes_major, else
    (K, size)); the padding lanes repeat the last state, so every lane is valid.
    Each layout is read along its contiguous axis."""
    if lanes_major:
        for r in range(x.shape[0]):
            for s in range(TILE):
                out[r * TILE + s] = x[r, b + min(s, n - 1)]
    else:
        for s in range(TILE):
            k = b + min(s, n - 1)
            for r in range(x.shape[1]):
                out[r * TILE + s] = x[k, r]


@inline_kernel
def load_state_tiles(q, v, u, b, n, lanes_major, qt, vt, ut):
    """The tiles of states b .. b+n-1 of a state (q, v) and a third input u (a, tau):
    :func:`load_tile` of each (the start of every kernel's tile loop)."""
    load_tile(q, b, n, lanes_major, qt)
    load_tile(v, b, n, lanes_major, vt)
    load_tile(u, b, n, lanes_major, ut)


@kernel
def store_tile(t, b, n, lanes_major, x):
    """States b .. b+n-1 of x = the first n lanes of the tile t (size x T), written
    along x's contiguous axis (:func:`store_tile_rows`, row r of t to entry r)."""
    size = x.shape[0] if lanes_major else x.shape[1]
    store_tile_rows(t, np.arange(size), b, n, lanes_major, x)


@kernel
def _stream_rows(t, x, b, n, source, zero):
    """x[r, b:b+n] = the first n lanes of row source[r] of the tile t (zero when
    source[r] < 0) for every row r of x (size, K), with non-temporal stores
    (:func:`.streaming.stream_copy`): each row's n lanes are whole cache lines of x
    (when x is 64-byte aligned and K a multiple of 8), written without reading them
    first, where plain stores wait for 512-byte runs T rows apart to come from memory
    (talos, a 1444-row output: 2.3 -> 0.45 us per state, and the outputs leave the
    tile's workspace in the caches)."""
    flat, K = x.reshape(x.size), x.shape[1]
    for r in range(x.shape[0]):
        k = source[r]
        # one stream_copy for both cases: with one per branch of an if, LLVM's code
        # was 6x slower (2.8 against 0.45 us per talos state, no streaming left)
        row = zero[:n] if k < 0 else t[k * TILE:k * TILE + n]
        stream_copy(row, flat, r * K + b)
    store_fence()


@kernel
def store_symmetric_tile(t, slot, b, n, lanes_major, x):
    """States b .. b+n-1 of x (nv * nv entries per state, layouts as :func:`store_tile`)
    = the symmetric matrices held compactly by the tile t: entry (r, c) in the row
    slot[r, c] of t (T lanes; slot[r, c] = slot[c, r]), zero where slot[r, c] < 0."""
    store_tile_rows(t, slot.reshape(slot.size), b, n, lanes_major, x)


@kernel
def store_tile_rows(t, source, b, n, lanes_major, x):
    """States b .. b+n-1 of x = the first n lanes of the tile t, entry r of a state from
    the row source[r] of t (zero where source[r] < 0): x (size, K) when lanes_major,
    else (K, size), written along its contiguous axis."""
    size = source.shape[0]
    if lanes_major:
        if x.size > STREAM_DOUBLES:
            _stream_rows(t, x, b, n, source, np.zeros(TILE))
            return
        for r in range(size):
            k = source[r]
            if k < 0:
                for s in range(n):
                    x[r, b + s] = 0.0
            else:
                for s in range(n):
                    x[r, b + s] = t[k * TILE + s]
        return
    # (K, size): blocks of 8 states and 8 consecutive entries of their rows, each
    # transposed in registers and stored as 8 runs of 8 doubles (store_transposed_8x8):
    # one vector store per 8 entries of a state where the scalar transpose stored one
    # entry at a time (talos: 1444 entries per state; its store alone 0.39 -> 0.24 us per
    # state with the output in cache).  The zeros of M (dofs on different branches) come
    # with their block: no separate zeroing pass.  An output larger than the caches
    # (talos, 1000 states: 11.5 MB) is written by non-temporal stores of whole lines,
    # not read first: a state's row is 1444 doubles, so when the output is 64-byte
    # aligned the lines of even states start at entries 0, 8, ... and those of odd
    # states at 4, 12, ...: the even states' runs, then the odd states' (each block
    # loaded and transposed twice), the partial lines at the ends with plain stores
    # (crba_batch on talos 0.79x the time of the 16-lane scalar store with prefetch).
    flat = x.reshape(x.size)
    # the even states' lines aligned needs b size on a line boundary too (every caller's b
    # is a multiple of TILE; an odd b with size % 8 == 4 would stream into mid-line)
    stream = (x.size > STREAM_DOUBLES and size % 4 == 0 and (b * size) % 8 == 0
              and data_address(x) % 64 == 0)
    shift = (8 - size % 8) % 8  # where the odd states' lines start in their rows
    s0 = 0
    while s0 + 8 <= n:
        o = (b + s0) * size
        if stream:
            z = _transposed_runs(stream_even_8x8, t, source, s0, flat, o, size, 0)
            for e in range(0, 8, 2):
                _store_entries(t, source, s0 + e, flat, o + e * size, z, size)
            z = _transposed_runs(stream_odd_8x8, t, source, s0, flat, o, size, shift)
            for e in range(1, 8, 2):
                _store_entries(t, source, s0 + e, flat, o + e * size, 0, shift)
                _store_entries(t, source, s0 + e, flat, o + e * size, z, size)
        else:
            z = _transposed_runs(store_transposed_8x8, t, source, s0, flat, o, size, 0)
            for e in range(8):
                _store_entries(t, source, s0 + e, flat, o + e * size, z, size)
        s0 += 8
    for s in range(s0, n):
        _store_entries(t, source, s, flat, (b + s) * size, 0, size)
    if stream:
        store_fence()


@inline_kernel
def _transposed_runs(store, t, source, s0, flat, o, size, z):
    """store (an 8 x 8 transposed store) of lanes s0 .. s0 + 7 for the entries z, z + 8,
    ... of their rows while 8 fit; returns the first entry not stored."""
    while z + 8 <= size:
        store(t, source, z, s0, flat, o + z, size)
        z += 8
    return z


@kernel
def _store_entries(t, source, s, flat, o, start, stop):
    """flat[o + r] = lane s of the tile's row source[r] (zero where source[r] < 0) for r
    in start .. stop - 1: one state's entries, one at a time (compiled once, not
    inlined: its five calls inlined cost 0.2 CPU s of compile)."""
    for r in range(start, stop):
        k = source[r]
        flat[o + r] = 0.0 if k < 0 else t[k * TILE + s]


def aligned_empty(shape):
    """np.empty(shape) (float64, C order); when it is large enough for the
    non-temporal stores of :func:`store_tile` (:data:`STREAM_DOUBLES`), its data start
    on a 64-byte boundary, so that they write whole cache lines (NumPy's allocations
    are 16-byte aligned).  Smaller outputs are plain np.empty: the alignment costs
    about 1 us per call (``ndarray.ctypes`` took 6 us: ur5's rnea_derivatives_lanes
    1.05x)."""
    size = 1
    for n in shape:
        size *= n
    if size <= STREAM_DOUBLES:
        return np.empty(shape)
    return aligned_block([shape])[0]


def aligned_block(shapes):
    """Uninitialized float64 arrays of these shapes (C order), views of one
    allocation, each starting on a 64-byte boundary (whole cache lines)."""
    sizes = []
    for shape in shapes:
        size = 1
        for n in shape:
            size *= n
        sizes.append(size)
    raw = np.empty(sum(-(-size // 8) * 8 for size in sizes) + 8)
    start = (-raw.__array_interface__["data"][0] % 64) // 8
    out = []
    for shape, size in zip(shapes, sizes):
        out.append(raw[start:start + size].reshape(shape))
        start += -(-size // 8) * 8
    return out


@kernel
def tile_workspace(m):
    """The tile arrays shared by RNEA and ABA (see the module docstring) and the
    placement scratch: liR, lip, vel, acc, f, w (3 x 6 x T), cs, XR, Xp, R1, p1, ql."""
    nj = m.njoints
    return (np.zeros(nj * T9), np.zeros(nj * 3 * TILE), np.zeros(nj * T6),
            np.zeros(nj * T6), np.zeros(nj * T6), np.zeros(3 * T6),
            np.zeros(2 * TILE), np.zeros(T9), np.zeros(3 * TILE),
            np.zeros((1, 3, 3)), np.zeros((1, 3)), np.zeros(m.nq))
