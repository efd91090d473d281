"""The multiple-shooting NLP of :mod:`.nlp` built symbolically from the CasADi twin.

Every stage model becomes one SX function of a knot,

    knot(z_k, dx_{k+1}, xbar_k, xbar_{k+1}, refs_k) -> (l_k, c_k, d_k),

from the CasADi twins of :mod:`.symbolic_terms` (the dynamics of
:mod:`geppetto.dynamics.symbolic`: ABA, the constrained and impulse dynamics,
integrate, difference, placements, RNEA; the integrators, residuals and
activations of :mod:`geppetto.ocp`); it is mapped over the knots of its phase
(``Function.map``) in one MX graph with the same variables and constraint
order as the analytical transcription.  Derivatives, exact Hessian included,
are CasADi's AD of that graph.  The references of every residual at every
knot are parameters of the NLP, read from the problem at each solve, so
``ShootingProblem.set_reference`` is honoured without a rebuild.

Twins exist for FreeDynamics, ContactDynamics and ImpulseDynamics, for a
CustomDynamics given its ``symbolic=`` field (the unicycle and the quadrotor
have one), for every integrator, every residual and activation of
:mod:`geppetto.ocp`.  A CustomDynamics without it and user residual classes
have none: the NLP raises :class:`~.symbolic_terms.MissingTwinError` at
construction, naming each such term and its stage.
"""
import casadi as ca
import numpy as np

from . import symbolic_terms as twins


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
        sx_state = twins.SymbolicState(state)
        self.terminal = model.terminal
        # z = (dx, u) padded to the widest knot (ocp.problem): the knot's controls are
        # u = z[ndx:ndx + nu], the padding appears in no expression (fixed at 0 by its bounds)
        self.z = ca.SX.sym("z", t.ndx if self.terminal else t.nz)
        xbar = ca.SX.sym("xbar", state.nx)
        u = ca.SX(0, 1) if self.terminal else self.z[t.ndx:t.ndx + model.nu]
        point = twins.KnotPoint(sx_state, sx_state.integrate(xbar, self.z[:t.ndx]), u)
        terms = _stage_terms(model, data)
        # each term's parameters: its reference, then a cost's weight at the knot (the
        # knots of a phase built from one object per knot may weigh a term differently)
        refs = [ca.SX.sym(f"ref{i}", _parameter_size(term, cdata))
                for i, (term, _, cdata) in enumerate(terms)]
        # the running cost dt sum_j b_j l(y_j, u) over the cost points (ocp.stage)
        points = [point] if self.terminal else twins.stage_points(model, point)[0]
        cost_points = [(0, 1.0)] if self.terminal else model.cost_points
        self.l, self.c_terms = ca.SX(0), []
        for (term, _, cdata), ref in zip(terms, refs):
            if cdata is None:
                self.c_terms.append(twins.residual(term.residual, point, ref))
                continue
            weight = ref[-1]
            for j, b in cost_points:
                r = twins.residual(term.residual, points[j], ref[:-1])
                self.l += b * model.dt * weight * twins.activation(term.activation.code,
                                                                   cdata.params, r)
        c = ca.vertcat(ca.SX(0, 1), *self.c_terms)
        ref = ca.vertcat(ca.SX(0, 1), *refs)
        if self.terminal:
            self.inputs, self.variables, self.g = [self.z, xbar, ref], self.z, c
            return
        self.dx_next = ca.SX.sym("dx_next", t.ndx)
        xbar_next = ca.SX.sym("xbar_next", state.nx)
        self.d = sx_state.difference(sx_state.integrate(xbar_next, self.dx_next),
                                     twins.next_state(model, point))
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


def _parameter_size(term, cdata):
    """Parameters of a term at a knot: its reference, and a cost's weight."""
    return twins.reference_size(term.residual) + (cdata is not None)


def _stage_references(model, data):
    """(K, nref): the parameters of every term of the stage at its knots (references,
    then each cost's weight)."""
    refs = []
    for term, rdata, cdata in _stage_terms(model, data):
        if twins.reference_size(term.residual):
            refs.append(twins.flat_references(term.residual, rdata, data.K))
        if cdata is not None:
            refs.append(np.reshape(cdata.weights, (data.K, 1)))
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
    twins.check_twins(t.stages)
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
    check_against_kernels(t, functions["nlp"])
    return functions


def check_against_kernels(transcription, nlp, tolerance=1e-8):
    """Compare f and g of the symbolic NLP with the problem's Numba kernels near the
    default warm start (x0 at every knot, quasi-static controls, both moved by a
    seeded 1e-2 so that velocities and accelerations are not zero): a twin out of
    step with its term (a changed formula, an integrator renamed) raises RuntimeError
    naming the stages whose rows differ by more than ``tolerance`` (relative)."""
    from .nlp import AnalyticalOracle
    t, problem = transcription, transcription.problem
    xbar = np.repeat(problem.x0[None], t.N + 1, axis=0)
    w = t.pack(np.zeros((t.N + 1, t.ndx)), problem.quasi_static(xbar))
    w += 1e-2 * np.random.default_rng(0).standard_normal(w.size)
    oracle = AnalyticalOracle(t)
    oracle.evaluate(w, xbar.ravel(), 1)
    f, g = (np.asarray(value).ravel() for value in nlp(w, parameters(t, xbar)))
    problems = []
    with np.errstate(invalid="ignore"):
        if abs(f[0] - oracle.f) > tolerance * max(1.0, abs(oracle.f)):
            problems.append(f"the cost: {f[0]!r} (twins) against {oracle.f!r} (kernels)")
        wrong = np.abs(g - oracle.g) > tolerance * np.maximum(1.0, np.abs(oracle.g))
    knots = np.searchsorted(t.offset, np.flatnonzero(wrong), side="right") - 1
    for model, start, stop, _ in t.stages:
        rows = np.flatnonzero(wrong)[(knots >= start) & (knots < stop)]
        if rows.size:
            error = np.max(np.abs(g[rows] - oracle.g[rows]))
            problems.append(f"stage {model.name!r} (knots {start}..{stop - 1}): {rows.size} "
                            f"rows of g (defects or constraints) differ by up to {error:.3g}")
    if problems:
        raise RuntimeError("the CasADi twin of the problem disagrees with its Numba kernels "
                           "near the initial guess (x0, quasi-static controls), in\n  "
                           + "\n  ".join(problems) + "\nuse derivatives='analytical'")


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
