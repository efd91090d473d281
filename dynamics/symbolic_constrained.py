"""The CasADi twin of the constrained and impulse dynamics (:mod:`.constrained_dynamics`).

SX expressions of, for a :class:`~.constraints.ConstraintSet` and the
proximal settings (mu, max_iterations, accuracy),

    constraint_dynamics(q, v, tau) -> (ddq (nv,), lambda (nc,))
    impulse_dynamics(q, v)         -> (v_after (nv,), impulse (nc,))

with the conventions of :mod:`.constraints` (Pinocchio 4.1's).  The
``casadi.Function`` objects and their AD derivatives are made by
:class:`.symbolic.SymbolicFunctions`; this module holds the mathematics.

Written again, in the joint and constraint frames (Featherstone 2008), not
in the world frame of the Numba kernels:

- body motions: the forward pass of RNEA (Table 5.1) in the joint frames,
  gravity excluded, ``v_i = iXp v_p + S_i v_i``, ``a_i = iXp a_p + v_i x
  S_i v_i + S_i a_i``; the frame c of a constraint sees them as ``cXi v_i``;
- the constraint acceleration ``c(q, v, a)`` in c1's frame: with c1Mc2 =
  (R, p), ``X = Ad(c1Mc2)`` and the body motions v1, a1 of c1 and v2, a2 of
  c2 (each in its own frame),

      3D:  e = ap_1 - R ap_2 - Kp p + Kd (v1.lin - R v2.lin),
           ap_i = a_i.lin + v_i.ang x v_i.lin (classical acceleration of c_i's
           origin), c = e (LOCAL) or oR_c1 e (LOCAL_WORLD_ALIGNED);
      6D LOCAL:  c = a1 - X a2 + (v1 - X v2) x (X v2) + Kd (v1 - X v2) - Kp log6(c1Mc2);
      6D LWA:    c = oR_c1 [a1 - X a2 + Kd (v1 - X v2) - Kp log6(c1Mc2)]
                 (both halves rotated by oR_c1);

  the drift ``gamma = c(q, v, 0)``, and ``Jc = d(w)/dv`` of the constraint
  velocity w (the same expressions with a and the gains dropped: Jc v is the
  velocity whose derivative c is);
- the KKT solve of :mod:`.constrained_dynamics`: M from CRBA (Table 6.2),
  b = RNEA(q, v, 0), M = L^T L by the LTL factorization that keeps the
  branch-induced sparsity (Table 6.3), Y = L^-T Jc^T, the Delassus matrix
  G = Y^T Y (+ mu I) by a dense Cholesky factorization, then
  ``lambda = G^-1 (-gamma - Y^T L^-T (tau - b) + mu lambda_prev)`` for the
  proximal iterations (Kudruss, Manns & Kirches 2019 for the KKT system;
  Pinocchio's ProximalSettings) and ``ddq = L^-1 (L^-T (tau - b) + Y lambda)``.

The proximal iterations stop as Numba's do (``delta <= accuracy`` or ``mu
delta <= accuracy``, delta the largest change of lambda): the SX graph runs
all ``max_iterations`` and freezes lambda with ``if_else`` once converged,
so values and AD derivatives follow the same number of iterations.  With mu
= 0 one solve is exact and further iterations repeat it: the graph has one.
"""
import casadi as ca
import numpy as np

from .constraints import CONTACT_3D
from .kinematics import LOCAL
from .symbolic import (_constant, _crba, _inv_act_motion, _joint_blocks, _log6,
                       _motion_cross, _placements, _rnea)


# --- Frames and motions ----------------------------------------------------------

def _act_motion(R, p, m):
    """aMb m for a motion m given in b: [R v + p x R w; R w]."""
    Rw = R @ m[3:]
    return ca.vertcat(R @ m[:3] + ca.cross(p, Rw), Rw)


def _body_motions(m, liM, v, a):
    """Spatial velocity and acceleration (gravity excluded) of every joint in its
    frame: the forward pass of RNEA, Featherstone 2008 Table 5.1."""
    vel = [ca.SX(6, 1)] * m.njoints
    acc = [ca.SX(6, 1)] * m.njoints
    for i, par, _, _, sv, S in _joint_blocks(m):
        vJ = S @ v[sv]
        vel[i] = _inv_act_motion(*liM[i], vel[par]) + vJ
        acc[i] = _inv_act_motion(*liM[i], acc[par]) + _motion_cross(vel[i], vJ)
        if a is not None:
            acc[i] = acc[i] + S @ a[sv]
    return vel, acc


def _constraint_frames(cs, oM):
    """Per constraint: (oR_c1, op_c1, (R1, p1), (R, p) = c1Mc2, (R2, p2))."""
    arrays = cs.arrays
    frames = []
    for k in range(arrays.n):
        j1, j2 = int(arrays.joint1[k]), int(arrays.joint2[k])
        R1, p1 = _constant(arrays.R1[k]), _constant(arrays.p1[k])
        R2, p2 = _constant(arrays.R2[k]), _constant(arrays.p2[k])
        oR1, op1 = oM[j1][0] @ R1, oM[j1][1] + oM[j1][0] @ p1
        oR2, op2 = oM[j2][0] @ R2, oM[j2][1] + oM[j2][0] @ p2
        frames.append((oR1, op1, (R1, p1), (oR1.T @ oR2, oR1.T @ (op2 - op1)), (R2, p2)))
    return frames


def _constraint_motions(cs, frames, vel, acc):
    """The constraint velocity w (nc,) and acceleration c (nc,) from the body motions
    (module docstring); acc None: w only."""
    arrays = cs.arrays
    w_rows, c_rows = [], []
    for k, (oR1, _, (R1, p1), (R, p), (R2, p2)) in enumerate(frames):
        j1, j2 = int(arrays.joint1[k]), int(arrays.joint2[k])
        Kp, Kd = float(arrays.Kp[k]), float(arrays.Kd[k])
        local = int(arrays.reference[k]) == LOCAL
        v1 = _inv_act_motion(R1, p1, vel[j1])       # c1's motion, in c1
        v2 = _inv_act_motion(R2, p2, vel[j2])       # c2's motion, in c2
        if int(arrays.kind[k]) == CONTACT_3D:
            # velocity of the point c1 relative to the point c2, in c1's axes
            dv = v1[:3] - R @ v2[:3]
            w_rows.append(dv if local else oR1 @ dv)
            if acc is None:
                continue
            a1 = _inv_act_motion(R1, p1, acc[j1])
            a2 = _inv_act_motion(R2, p2, acc[j2])
            e = (a1[:3] + ca.cross(v1[3:], v1[:3]) - R @ (a2[:3] + ca.cross(v2[3:], v2[:3]))
                 + Kd * dv)
            if Kp != 0.0:
                e = e - Kp * p
            c_rows.append(e if local else oR1 @ e)
            continue
        v2 = _act_motion(R, p, v2)                  # c2's motion, in c1
        dv = v1 - v2
        w_rows.append(dv if local else ca.vertcat(oR1 @ dv[:3], oR1 @ dv[3:]))
        if acc is None:
            continue
        a1 = _inv_act_motion(R1, p1, acc[j1])
        e = a1 - _act_motion(R, p, _inv_act_motion(R2, p2, acc[j2])) + Kd * dv
        if local:
            e = e + _motion_cross(dv, v2)
        if Kp != 0.0:
            e = e - Kp * _log6(R, p)
        c_rows.append(e if local else ca.vertcat(oR1 @ e[:3], oR1 @ e[3:]))
    return ca.vertcat(*w_rows), (ca.vertcat(*c_rows) if acc is not None else None)


def constraint_terms(m, cs, q, v, drift=True):
    """(liM, Jc (nc, nv), w = Jc v (nc,), gamma (nc,) or None) at (q, v); ``v`` any SX
    expression (Jc is the Jacobian of the constraint velocity w in a velocity symbol,
    which is then replaced by ``v``)."""
    liM, oM = _placements(m, q)
    frames = _constraint_frames(cs, oM)
    symbol = v if v.is_valid_input() else ca.SX.sym("v", m.nv)
    vel, acc = _body_motions(m, liM, symbol, None)
    w, gamma = _constraint_motions(cs, frames, vel, acc if drift else None)
    Jc = ca.jacobian(w, symbol)
    if symbol is not v:
        outputs = [Jc, w] + ([gamma] if drift else [])
        Jc, w, *rest = ca.substitute(outputs, [symbol], [v])
        gamma = rest[0] if drift else None
    return liM, Jc, w, gamma


# --- Factorizations on SX scalars ----------------------------------------------------

def _ancestors(m, k):
    """The dofs supporting dof k, nearest first (Featherstone's lambda chain)."""
    out, i = [], int(m.dof_parent[k])
    while i >= 0:
        out.append(i)
        i = int(m.dof_parent[i])
    return out


def ltl_factor(m, M):
    """L (list of rows of SX scalars, None off the sparsity) with M = L^T L: the LTL
    factorization of Featherstone 2008, Table 6.3, which keeps M's branch sparsity."""
    nv = m.nv
    L = [[M[r, c] if c == r or c in _ancestors(m, r) else None for c in range(nv)]
         for r in range(nv)]
    for k in range(nv - 1, -1, -1):
        L[k][k] = ca.sqrt(L[k][k])
        chain = _ancestors(m, k)
        for i in chain:
            L[k][i] = L[k][i] / L[k][k]
        for n, i in enumerate(chain):
            for j in chain[n:]:
                L[i][j] = L[i][j] - L[k][i] * L[k][j]
    return L


def ltl_solve_transpose(m, L, X):
    """L^-T X for X a list of nv rows (SX (1, n)); returns a new list."""
    X = list(X)
    for k in range(m.nv - 1, -1, -1):
        X[k] = X[k] / L[k][k]
        for i in _ancestors(m, k):
            X[i] = X[i] - L[k][i] * X[k]
    return X


def ltl_solve(m, L, X):
    """L^-1 X for X a list of nv rows (SX (1, n)); returns a new list."""
    X = list(X)
    for k in range(m.nv):
        for i in _ancestors(m, k):
            X[k] = X[k] - L[k][i] * X[i]
        X[k] = X[k] / L[k][k]
    return X


def cholesky_factor(G):
    """Lower C with G = C C^T (dense, SX scalars)."""
    n = G.shape[0]
    C = [[None] * n for _ in range(n)]
    for j in range(n):
        C[j][j] = ca.sqrt(G[j, j] - sum((C[j][k] ** 2 for k in range(j)), ca.SX(0)))
        for i in range(j + 1, n):
            C[i][j] = (G[i, j] - sum((C[i][k] * C[j][k] for k in range(j)), ca.SX(0))) / C[j][j]
    return C


def cholesky_solve(C, b):
    """(C C^T)^-1 b for b (n,)."""
    n = len(C)
    y = [None] * n
    for i in range(n):
        y[i] = (b[i] - sum((C[i][k] * y[k] for k in range(i)), ca.SX(0))) / C[i][i]
    for i in range(n - 1, -1, -1):
        y[i] = (y[i] - sum((C[k][i] * y[k] for k in range(i + 1, n)), ca.SX(0))) / C[i][i]
    return ca.vertcat(*y)


# --- The KKT solve ----------------------------------------------------------------

def _rows(x):
    return [x[r, :] for r in range(x.shape[0])]


def kkt_solve(m, L, Jc, gamma, z, settings):
    """(ddq, lambda) of [[M, Jc^T], [Jc, 0]] [ddq; -lambda] = [z; -gamma] with M = L^T L,
    through the proximal iterations of ``settings`` = (mu, max_iterations, accuracy)."""
    mu, max_iterations, accuracy = settings
    nc = Jc.shape[0]
    Y = ca.vertcat(*ltl_solve_transpose(m, L, _rows(Jc.T)))         # L^-T Jc^T (nv, nc)
    zt = ca.vertcat(*ltl_solve_transpose(m, L, _rows(z)))           # L^-T z
    C = cholesky_factor(Y.T @ Y + mu * ca.SX.eye(nc))
    rhs = -gamma - Y.T @ zt
    lam = cholesky_solve(C, rhs)
    if mu > 0.0:
        # Numba's stop: after iteration it, max |lam_it - lam_(it-1)| * min(1, mu) <= accuracy
        done = ca.mmax(ca.fabs(lam)) * min(1.0, mu) <= accuracy
        for _ in range(1, max_iterations):
            new = cholesky_solve(C, rhs + mu * lam)
            converged = ca.mmax(ca.fabs(new - lam)) * min(1.0, mu) <= accuracy
            lam = ca.if_else(done, lam, new)
            done = ca.logic_or(done, converged)
    ddq = ca.vertcat(*ltl_solve(m, L, _rows(zt + Y @ lam)))
    return ddq, lam


def constraint_dynamics(m, cs, settings, q, v, tau):
    """vertcat(ddq, lambda) of the constrained forward dynamics."""
    liM, Jc, _, gamma = constraint_terms(m, cs, q, v)
    b = _rnea(m, q, v, ca.SX(m.nv, 1), liM)
    L = ltl_factor(m, _crba(m, q, liM))
    ddq, lam = kkt_solve(m, L, Jc, gamma, tau - b, settings)
    return ca.vertcat(ddq, lam)


def impulse_dynamics(m, cs, restitution, settings, q, v):
    """vertcat(v_after, impulse): M (v+ - v) = Jc^T impulse, Jc v+ = -e Jc v."""
    liM, Jc, w, _ = constraint_terms(m, cs, q, v, drift=False)
    L = ltl_factor(m, _crba(m, q, liM))
    dv, impulse = kkt_solve(m, L, Jc, (1.0 + restitution) * w, ca.SX(m.nv, 1), settings)
    return ca.vertcat(v + dv, impulse)


def content_key(cs):
    """Bytes that identify a ConstraintSet by content (two equal sets share Functions)."""
    return b"".join(np.ascontiguousarray(x).tobytes() for x in cs.arrays
                    if isinstance(x, np.ndarray))

