"""The multiple-shooting NLP of :mod:`.nlp` built symbolically from the CasADi twin.

Every stage model becomes one SX function of a knot,

    knot(z_k, dx_{k+1}, xbar_k, xbar_{k+1}, refs_k) -> (l_k, c_k, d_k),

from the CasADi twin of the dynamics (:mod:`geppetto.dynamics.symbolic`: ABA,
integrate, difference, frame placements, forward kinematics, RNEA) and
symbolic rewrites of the integrators, residuals and activations of
:mod:`geppetto.ocp`; it is mapped over the knots of its phase
(``Function.map``) in one MX graph with the same variables and constraint
order as the analytical transcription.  Derivatives, exact Hessian included,
are CasADi's AD of that graph.  The references of every residual at every
knot are parameters of the NLP, read from the problem at each solve, so
``ShootingProblem.set_reference`` is honoured without a rebuild.

Symbolic twins exist for: FreeDynamics; the explicit_euler, euler (symplectic),
rk2, rk3 and rk4 integrators (with the RK cost quadrature); StateResidual,
ControlResidual, FrameTranslationResidual (and its ``axes`` selection),
CenterOfMassResidual, JointTorqueResidual; every activation.  Anything else raises
NotImplementedError at construction.
"""
import casadi as ca
import numpy as np

from ..dynamics.symbolic import _aba, symbolic_functions as twin
from ..ocp.costs import BARRIER, QUADRATIC, SMOOTH1, SMOOTH2, WEIGHTED
from ..ocp.dynamics import FreeDynamics
from ..ocp.integrators import RK_TABLEAUS
from ..ocp.residuals import (CenterOfMassResidual, ControlResidual, FrameTranslationResidual,
                             JointTorqueResidual, StateResidual)
from ..ocp.state import StateMultibody


# --- state, dynamics, integrators ------------------------------------------------------

class _SymbolicState:
    """integrate / difference of a state on SX vectors."""

    def __init__(self, state):
        self.state = state
        self.multibody = isinstance(state, StateMultibody)
        if self.multibody:
            self.nq, self.nv = state.nq, state.nv
            self.functions = twin(state.model)

    def integrate(self, x, dx):
        if not self.multibody:
            return x + dx
        nq, nv = self.nq, self.nv
        return ca.vertcat(self.functions.integrate(x[:nq], dx[:nv]), x[nq:] + dx[nv:])

    def difference(self, x0, x1):
        if not self.multibody:
            return x1 - x0
        nq = self.nq
        return ca.vertcat(self.functions.difference(x0[:nq], x1[:nq]), x1[nq:] - x0[nq:])


def _tangent_field(dynamics, x, u):
    """f(x, u) = (v, ABA(q, v, B u - D v)) with the stage's arrays (armature included)."""
    if not isinstance(dynamics, FreeDynamics):
        raise NotImplementedError(
            f"{type(dynamics).__name__} has no CasADi twin: use derivatives='analytical'")
    nq = dynamics.model.nq
    q, v = x[:nq], x[nq:]
    tau = ca.DM(dynamics.actuation.B) @ u - ca.DM(dynamics.damping) * v
    return ca.vertcat(v, _aba(dynamics.arrays, q, v, tau))


def _stage_points(model, sx_state, x, u):
    """(y_j, the stage points of the stage's integrator (y_0 = x), the increment w) with
    x' = x (+) w (formulas of ocp.integrators)."""
    dynamics, dt, scheme = model.dynamics, model.dt, model.integrator.scheme
    f = _tangent_field(dynamics, x, u)
    if scheme == "explicit_euler":
        return [x], dt * f
    if scheme == "euler":             # symplectic (Crocoddyl's IntegratedActionModelEuler)
        nv = model.state.nv
        a = dt * f[nv:]
        return [x], ca.vertcat(dt * f[:nv] + dt * a, a)
    if scheme not in RK_TABLEAUS:
        raise NotImplementedError(f"integrator {scheme!r} has no symbolic twin")
    points, ks = [x], [f]
    for c in RK_TABLEAUS[scheme][0]:
        points.append(sx_state.integrate(x, c * dt * ks[-1]))
        ks.append(_tangent_field(dynamics, points[-1], u))
    if scheme == "rk2":
        return points, dt * ks[1]
    if scheme == "rk3":
        return points, dt / 4.0 * (ks[0] + 3.0 * ks[2])
    return points, dt / 6.0 * (ks[0] + 2.0 * ks[1] + 2.0 * ks[2] + ks[3])


# --- residuals and activations ---------------------------------------------------------

def _center_of_mass(model, q):
    """c(q): sum_i (m_i op_i + oR_i (m c)_i) / m, from the twin's forward kinematics."""
    oR, op = twin(model).forward_kinematics(q)
    Y = model.arrays.inertia
    h = ca.SX.zeros(3, 1)
    for i in range(1, model.njoints):
        mc = ca.DM([Y[i, 5, 1], Y[i, 3, 2], Y[i, 4, 0]])
        h += Y[i, 0, 0] * op[i, :].T + oR[3 * i:3 * i + 3, :] @ mc
    return h / model.total_mass()


def _residual(residual, sx_state, x, u, ref):
    """r(x, u) of ``residual`` with the reference ``ref`` (its reference, flattened)."""
    if isinstance(residual, StateResidual):
        return sx_state.difference(ref, x)
    if isinstance(residual, ControlResidual):
        return u - ref
    if isinstance(residual, FrameTranslationResidual):
        _, p = twin(residual.model).frame_placement(residual.frame)(x[:residual.model.nq])
        r = p - ref
        axes = getattr(residual, "axes", None)
        return r if axes is None else ca.vertcat(*[r[int(a)] for a in axes])
    if isinstance(residual, CenterOfMassResidual):
        return _center_of_mass(residual.model, x[:residual.model.nq]) - ref
    if isinstance(residual, JointTorqueResidual):
        nq = residual.model.nq
        return twin(residual.model).rnea(x[:nq], x[nq:], u) - ref
    raise NotImplementedError(
        f"{type(residual).__name__} has no symbolic twin for derivatives='casadi' "
        "(StateResidual, ControlResidual, FrameTranslationResidual, CenterOfMassResidual "
        "and JointTorqueResidual have one): use derivatives='analytical'")


def _activation(code, params, r):
    """a(r) for the activation ``code`` with its (3, nr) parameters (ocp.costs)."""
    if code == QUADRATIC:
        return 0.5 * ca.sumsqr(r)
    if code == WEIGHTED:
        return 0.5 * ca.dot(ca.DM(params[0]), r * r)
    if code == BARRIER:
        below = ca.fmin(r - ca.DM(params[1]), 0.0)
        above = ca.fmax(r - ca.DM(params[2]), 0.0)
        return 0.5 * (ca.sumsqr(below) + ca.sumsqr(above))
    if code == SMOOTH1:
        return ca.sum1(ca.sqrt(r * r + ca.DM(params[0])))
    if code == SMOOTH2:
        return ca.sqrt(ca.sumsqr(r) + params[0, 0])
    raise NotImplementedError(f"activation code {code} has no symbolic twin")


def _reference_size(residual):
    if isinstance(residual, (StateResidual, ControlResidual, FrameTranslationResidual,
                             CenterOfMassResidual, JointTorqueResidual)):
        return int(np.prod(residual.reference_shape()))
    return 0


# --- knots ------------------------------------------------------------------------------

def _stage_terms(model, data):
    """[(term, residual data, cost data or None)] of a stage: costs then constraints."""
    terms = [(cost, cdata.residual, cdata) for cost, cdata in zip(model.costs, data.costs)]
    terms += [(c, cd, None) for c, cd in zip(model.constraints, data.constraints)]
    return terms


class _Knot:
    """The SX expressions of one knot of a stage and their derivatives by CasADi AD.

    Inputs: z = (dx, u) (dx alone for the terminal stage), dx_next, xbar, xbar_next
    (running stages only) and the references; ``l`` the stage cost, ``c_terms`` the
    Constraint residuals, ``g`` = [c; d] the knot's rows of the NLP's g.
    """

    def __init__(self, model, data, transcription):
        t, state = transcription, model.state
        sx_state = _SymbolicState(state)
        self.terminal = model.terminal
        self.z = ca.SX.sym("z", t.ndx if self.terminal else t.nz)
        xbar = ca.SX.sym("xbar", state.nx)
        u = ca.SX(0, 1) if self.terminal else self.z[t.ndx:]
        x = sx_state.integrate(xbar, self.z[:t.ndx])
        terms = _stage_terms(model, data)
        refs = [ca.SX.sym(f"ref{i}", _reference_size(term.residual))
                for i, (term, _, _) in enumerate(terms)]
        if any(cdata is not None and np.ptp(cdata.weights) != 0.0 for _, _, cdata in terms):
            raise NotImplementedError("knots grouped with different cost weights have no "
                                      "symbolic twin")
        # the running cost dt sum_j b_j l(y_j, u) over the cost points (ocp.stage)
        points, w = ([x], None) if self.terminal else _stage_points(model, sx_state, x, u)
        cost_points = [(0, 1.0)] if self.terminal else model.cost_points
        self.l, self.c_terms = ca.SX(0), []
        for (term, _, cdata), ref in zip(terms, refs):
            if cdata is None:
                self.c_terms.append(_residual(term.residual, sx_state, x, u, ref))
                continue
            for j, b in cost_points:
                r = _residual(term.residual, sx_state, points[j], u, ref)
                self.l += b * model.dt * cdata.weights[0] * _activation(
                    term.activation.code, cdata.params, r)
        c = ca.vertcat(ca.SX(0, 1), *self.c_terms)
        ref = ca.vertcat(ca.SX(0, 1), *refs)
        if self.terminal:
            self.inputs, self.variables, self.g = [self.z, xbar, ref], self.z, c
            return
        self.dx_next = ca.SX.sym("dx_next", t.ndx)
        xbar_next = ca.SX.sym("xbar_next", state.nx)
        self.d = sx_state.difference(sx_state.integrate(xbar_next, self.dx_next),
                                     sx_state.integrate(x, w))
        self.inputs = [self.z, self.dx_next, xbar, xbar_next, ref]
        self.variables = ca.vertcat(self.z, self.dx_next)
        self.g = ca.vertcat(c, self.d)

    def value(self):
        return ca.Function("knot", self.inputs, [ca.densify(self.l), ca.densify(self.g)])

    def gradient(self):
        return ca.Function("knot_grad", self.inputs, [ca.densify(ca.gradient(self.l, self.z))])

    def jacobian(self, term_columns, tangent_pattern):
        """Outputs in the order of :meth:`Transcription.jacobian_structure`, each block
        row-major: dd/dz, dd/ddx_next on the tangent pattern (running), then dc/dz on
        each term's columns."""
        outputs = []
        if not self.terminal:
            outputs.append(ca.vec(ca.jacobian(self.d, self.z).T))
            J = ca.jacobian(self.d, self.dx_next)
            outputs.append(ca.vertcat(*[J[int(i), int(j)]
                                        for i, j in zip(*np.nonzero(tangent_pattern))]))
        for r, columns in zip(self.c_terms, term_columns):
            outputs.append(ca.vec(ca.jacobian(r, self.z)[:, columns.tolist()].T))
        return ca.Function("knot_jac", self.inputs, [ca.densify(o) for o in outputs])

    def hessian(self):
        """(Function (inputs, lam_f, lam) -> nonzeros of triu(d2 L/dv2), rows, cols): the
        Hessian of L = lam_f l + lam' g in v = (z, dx_next), its structure in v's indices."""
        lam_f = ca.SX.sym("lam_f")
        lam = ca.SX.sym("lam", self.g.numel())
        lagrangian = lam_f * self.l + (ca.dot(lam, self.g) if self.g.numel() else 0)
        H = ca.triu(ca.hessian(lagrangian, self.variables)[0])
        rows, cols = H.sparsity().get_triplet()
        values = ca.vertcat(ca.SX(0, 1), *H.nonzeros())
        return (ca.Function("knot_hess", self.inputs + [lam_f, lam], [values]),
                np.array(rows, dtype=int), np.array(cols, dtype=int))


def _stage_references(model, data):
    """(K, nref): the references of every term of the stage at its knots."""
    refs = []
    for term, rdata, _ in _stage_terms(model, data):
        if _reference_size(term.residual):
            refs.append(np.asarray(rdata.reference, dtype=float).reshape(data.K, -1))
    return np.concatenate(refs, axis=1) if refs else np.zeros((data.K, 0))


def parameters(transcription, xbar):
    """p = [xbar (N+1, nx) by knots; each stage's references (K, nref) by knots]."""
    parts = [np.ascontiguousarray(xbar, dtype=float).ravel()]
    for model, _, _, data in transcription.stages:
        parts.append(_stage_references(model, data).ravel())
    return np.concatenate(parts)


def symbolic_functions(transcription, hessian):
    """{"nlp", "grad_f", "jac_g", "hess_lag"} of the transcription (see :mod:`.nlp`): one
    SX function per stage and its derivatives by CasADi AD, mapped over the knots of the
    stage; the Jacobian with the analytical mode's sparsity, the Hessian summed over
    the knots' overlapping blocks."""
    t = transcription
    N, nx, ndx, nz = t.N, t.nx, t.ndx, t.nz
    sizes = [(N + 1) * nx] + [_stage_references(m, d).size for m, _, _, d in t.stages]
    w, p = ca.MX.sym("x", t.nw), ca.MX.sym("p", int(sum(sizes)))
    lam_f, lam_g = ca.MX.sym("lam_f"), ca.MX.sym("lam_g", t.ng)
    Z = ca.reshape(w[:N * nz], nz, N)
    DX = ca.horzcat(Z[:ndx, :], w[N * nz:])
    XB = ca.reshape(p[:(N + 1) * nx], nx, N + 1)
    parts = {key: [] for key in ("f", "g", "grad", "A", "B", "C", "H", "H_rows", "H_cols")}
    offset = sizes[0]
    for index, ((model, start, stop, data), size) in enumerate(zip(t.stages, sizes[1:])):
        K = stop - start
        REF = ca.reshape(p[offset:offset + size], size // K, K) if size else ca.MX(0, K)
        offset += size
        if model.terminal:
            args = [DX[:, N], XB[:, N], REF]
        else:
            args = [Z[:, start:stop], DX[:, start + 1:stop + 1], XB[:, start:stop],
                    XB[:, start + 1:stop + 1], REF]
        lam = ca.reshape(lam_g[int(t.offset[start]):int(t.offset[stop])], -1, K)
        columns = [cols for i, _, _, cols in t.terms if i == index]
        _add_stage(parts, _Knot(model, data, t), args, lam_f, lam, columns, t, start, K,
                   hessian == "exact")
    nlp = ca.Function("nlp", [w, p], [ca.sum1(ca.vertcat(*parts["f"])), ca.vertcat(*parts["g"])],
                      ["x", "p"], ["f", "g"])
    f, g = nlp(w, p)
    rows, cols = t.jacobian_structure()
    sparsity, order = _mx_sparsity(rows, cols, (t.ng, t.nw))
    J = ca.sparsity_cast(ca.vertcat(*(parts["A"] + parts["B"] + parts["C"]))[order.tolist()],
                         sparsity)
    functions = {
        "nlp": nlp,
        "grad_f": ca.Function("grad_f", [w, p], [f, ca.vertcat(*parts["grad"])], ["x", "p"],
                              ["f", "grad_f_x"]),
        "jac_g": ca.Function("jac_g", [w, p], [g, J], ["x", "p"], ["g", "jac_g_x"])}
    if hessian == "exact":
        rows, cols = np.concatenate(parts["H_rows"]), np.concatenate(parts["H_cols"])
        scatter, sparsity = _summation(rows, cols, t.nw)
        H = ca.sparsity_cast(ca.mtimes(scatter, ca.vertcat(*parts["H"])), sparsity)
        functions["hess_lag"] = ca.Function("hess_lag", [w, p, lam_f, lam_g], [H],
                                            ["x", "p", "lam_f", "lam_g"],
                                            ["triu_hess_gamma_x_x"])
    return functions


def _add_stage(parts, knot, args, lam_f, lam, columns, t, start, K, with_hessian):
    """Map the knot's functions over the K knots of a stage and file their outputs."""
    def mapped(function):
        return function if knot.terminal else function.map(K)

    l, g = mapped(knot.value()).call(args)
    parts["f"].append(ca.sum2(l))
    parts["g"].append(ca.vec(g))
    parts["grad"].append(ca.vec(mapped(knot.gradient()).call(args)[0]))
    blocks = [ca.vec(b) for b in mapped(knot.jacobian(columns, t.tangent_pattern)).call(args)]
    if not knot.terminal:
        parts["A"].append(blocks.pop(0))
        parts["B"].append(blocks.pop(0))
    parts["C"] += blocks
    if with_hessian:
        function, rows, cols = knot.hessian()
        parts["H"].append(ca.vec(mapped(function).call(args + [lam_f, lam])[0]))
        # local index i of v = (z_k, dx_{k+1}) is the global index (start + k) nz + i
        first = (start + np.arange(K))[:, None] * t.nz
        parts["H_rows"].append((first + rows).ravel())
        parts["H_cols"].append((first + cols).ravel())


def _mx_sparsity(rows, cols, shape):
    from .nlp import compressed_columns
    colind, row, order = compressed_columns(rows, cols, shape)
    return ca.Sparsity(shape[0], shape[1], colind.tolist(), row.tolist()), order


def _summation(rows, cols, n):
    """(S, sparsity): entries listed at (rows, cols), duplicates included, summed into
    the CCS nonzeros of ``sparsity`` (n, n) by the constant 0/1 matrix S (nnz, entries)."""
    keys = cols.astype(np.int64) * n + rows
    unique, position = np.unique(keys, return_inverse=True)
    u_rows, u_cols = unique % n, unique // n
    colind = np.searchsorted(u_cols, np.arange(n + 1))
    sparsity = ca.Sparsity(n, n, colind.tolist(), u_rows.tolist())
    S = ca.DM(ca.Sparsity.triplet(len(unique), len(keys), position.tolist(),
                                  list(range(len(keys)))), 1.0)
    return S, sparsity
