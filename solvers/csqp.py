"""CSQP: a stagewise SQP whose QP subproblem is solved on Riccati sweeps by a primal-dual
active-set method, with ADMM as its fallback.

Jordana, Kleff, Meduri, Carpentier, Mansard & Righetti, "Stagewise Implementations
of Sequential Quadratic Programming for Model-Predictive Control" (2023; mim_solvers'
``SolverCSQP``), with OSQP's ADMM (Stellato, Banjac, Goulart, Bemporad & Boyd,
"OSQP: an operator splitting solver for quadratic programs", Math. Prog. Comp. 2020,
Algorithm 1, Sec. 5.2 for the step size rho, Sec. 4.3 for polishing) and the
primal-dual active-set method (Hintermueller, Ito & Kunisch, "The primal-dual active
set strategy as a semismooth Newton method", SIAM J. Optim. 13(3), 2002; its Newton
view of a proximal QP as in ProxQP, Bambade, El-Kazdadi, Taylor & Carpentier, RSS 2022).

Notation (Crocoddyl's, as :mod:`.riccati`): at the iterate (xs, us) with the gaps f_t
(f_0 = x0 (-) x_0, f_{t+1} = F(x_t, u_t) (-) x_{t+1}), the Gauss-Newton LQ
approximation in w = (dx, du) is

    min  sum_t 1/2 [dx; du]^T [Lxx Lxu; Lxu^T Luu]_t [dx; du] + Lx_t dx_t + Lu_t du_t
    s.t. dx_0 = f_0,   dx_{t+1} = Fx_t dx_t + Fu_t du_t + f_{t+1},
         l <= v = r + R w <= h   (each constraint row, R = (Rx, Ru) its Jacobian row),

the rows being the problem's stage and terminal ``Constraint`` rows, its control bounds
(v = u + du) and its state bounds (v = x_i + dx_i, where x (+) dx adds).  ADMM splits
v = z with z in [l, h] (OSQP's form, y the rows' multipliers, sigma the proximal weight
on w, alpha the relaxation):

    w~ = argmin LQ + sigma/2 |w - w^k|^2 + sum rho_i/2 (v_i(w) - z_i + y_i / rho_i)^2
         s.t. the dynamics                                     (one Riccati solve)
    w^{k+1} = alpha w~ + (1 - alpha) w^k,   v^ = alpha v(w~) + (1 - alpha) z^k,
    z^{k+1} = clip(v^ + y^k / rho, l, h),   y^{k+1} = y^k + rho (v^ - z^{k+1}).

The Riccati factorization (Quu's Cholesky factor, K, Vxx and Vxx f of :func:`.riccati.
backward_range_kept` on the Hessian with rho R^T R and sigma added) depends on rho only: an
ADMM iteration is a sweep of the linear terms (:func:`_linear_sweep`: k, Vx) and a
rollout of the linear dynamics (:func:`_rollout`), O(N ndx^2) instead of the
factorization's O(N ndx^3); the factorization is redone only when rho changes (OSQP's
rule: rho <- rho sqrt(primal / dual residual, each relative to its scale), applied when
it moves rho by more than 5x).  Equality rows (l = h) get 1e3 rho (OSQP).

The QP is first solved by the primal-dual active-set method (:meth:`CSQP._polish`): from
the last QP's active set (at the first QP: the rows at or past a bound at the iterate,
and the equalities), the equality-constrained LQ on the active rows is solved by the
method of multipliers with a large penalty ``big`` and a small proximal weight
``polish_sigma`` (one Riccati factorization, a few sweeps); then the inactive rows the
step pushes past a bound become active, the active rows whose multiplier has the wrong
sign inactive (HIK's update: for a bound row, the semismooth Newton step on
min(y, c (h - v))), and again, until the active set holds (the step is the QP's exact
solution) or ``active_set_rounds`` solves, or more than :data:`CONTRADICTED_ROUNDS` rounds without
progress whose active rows contradict each other (a sign that the QP has no solution,
which ADMM then certifies).  The signs are tested exactly at every QP (a tolerance on
them at infeasible iterates, cq33, changed the steps the restoration starts from: kinova
torque-limited "infeasible" after 15 iterations ran to max_iter 500; taken out, cq33c).
A round refactorizes only the knots up to its
last changed row (the recursion above is unchanged:
:func:`.riccati.backward_range_kept`).  Near a solution the active set holds at the first
solve.  Where the rounds reach an active set they already solved (a cycle: the guarantee
of HIK needs an M-matrix), they go on damped: a backtracking line search on the natural
residual of the KKT conditions between the iterate and each solve (:func:`_damped_round`,
the damped semismooth Newton method; ur5 "barely" from the guess, 135 -> 91
factorizations and no ADMM iteration instead of 250; cq32).  When the rounds run out or
the damped line search fails, ADMM runs as in the first version, with polishing (OSQP
Sec. 4.3: the same method from ADMM's active set, ``polish_rounds`` solves, and one more
while each round changes fewer rows than the one before, up to ``active_set_rounds``) at
every rho check, ADMM's factorization kept across a polish that fails (copied back, not
recomputed).  Either way each SQP step is the exact QP solution once the active set is
found, where ADMM alone reaches its tolerance only (mim_solvers' stall at KKT 5e-6, issue
19).

A QP with no solution (the linearized rows contradict each other or the linearized
dynamics) makes the active-set method cycle and ADMM's multipliers diverge: at each rho
check ADMM tests OSQP's primal-infeasibility certificate (Sec. 3.4) on dy = y^k - y^{k-1},
the dynamics' multipliers of the certificate from an adjoint sweep
(:meth:`CSQP._certified_infeasible` derives it), and a QP certified infeasible ends ADMM
at once, without polishing (ur5 "infeasible": 25-50 ADMM iterations per QP where the
1000 of ``max_qp_iter`` and ~41 polishes ran before).  Two SQP iterations in a row whose
QP is certified infeasible (:data:`CERTIFIED_AFTER`) end the solve with status
"infeasible"; a line search that refuses every trial after a certified QP too.  Before
the first iteration, rows at knot 0 without a control term that x0 violates (state
bounds; state-only residual rows where the start has x_0 = x0) end the solve at once
"infeasible": x0 alone fixes them (:func:`_fixed_row_violation`).

The SQP step is taken in multiple-shooting form, x (+) a dx, u + a du, with a
backtracking line search on the l1 merit cost + nu (|f|_1 + |violation|_1) (Nocedal &
Wright, "Numerical Optimization", 2nd ed., eq. 18.27 and Theorem 18.2: nu above the
multipliers' largest magnitude, costates and rows, makes the SQP step a descent
direction; the costates are the QP's own, Vx + Vxx (dx - f) of its last sweep,
:func:`_costates_max`).  Converged: the largest gap <= th_gaps, violation <=
th_constraint and the stationarity of the Lagrangian in the controls (the costates of
an adjoint sweep at the iterate with the QP's row multipliers) <= th_stop; or, after the
QP at such a feasible iterate, the active-set QP step's predicted decrease of the cost
(FDDP's expected improvement), in magnitude, at most th_decrease max(1, |cost|), status
:data:`SETTLED` (:meth:`CSQP._settled`: where the Gauss-Newton Hessian leaves out a large
lam^T F'' (light wrists: kinova, talos_arm) the SQP converges linearly and the
stationarity, read through an adjoint sweep that amplifies the iterate's error backwards,
stalls above th_stop with the cost converged to 12 digits; gn19).

Where the merit refuses every trial of a step that solves the QP (the active-set
method's, or ADMM's to its tolerance), a filter (Waechter & Biegler, Math. Prog. 106,
2006, Sec. 2.3: a trial is acceptable where it is not dominated by a stored pair
(theta, cost), theta the l1 infeasibility, and decreases theta or the cost by a margin;
:class:`_Filter`) judges the same trials, and the largest it accepts is taken (option
``filter_fallback``): IPOPT's order, whose restoration phase starts only where the filter
refuses every trial.  The merit's nu, above the multipliers' largest magnitude, weighs
the gaps' second-order growth along a long step against a linear decrease: on kinova
"pose" from the guess (benchmarks/constrained.py untuned3: a QP step of 850 N m on the
last knot's light wrist) every trial was refused, the restoration ran 37 ProxDDP
iterations to violation 0.05 and the SQP then took 27 steps of 1/64 (the merit's
second-order term, nu times the gaps' growth, ~300 step^2 against its linear decrease
8.4 step): 94 iterations in all.  The filter
accepts the full step (the cost falls, the gaps grow to 231, as IPOPT's do to 21.8), and
the next full steps close the gaps quadratically: 8 iterations, no restoration, the
same optimum (glob29).  The filter alone as the line search (every trial) was measured
and not kept: the stiff tasks' Gauss-Newton steps near the solution then cycle between
gaps and cost (panda "stiff" 46 -> 204 iterations; panda "torque" from the guess ends at
a higher optimum).  Where the merit accepts a step, it is taken as before: the other
runs of benchmarks/constrained.py keep their iterates to the bit.

The restoration (:meth:`CSQP._restore`, option ``restoration``, default "proxddp"): the
QP insists on the rows' linearization however far outside its validity that takes the
step.  Where the SQP would stop without a solution at an infeasible iterate (its QP
certified infeasible :data:`CERTIFIED_AFTER` times in a row or left unsolved
``infeasible_after`` times, or a line search that refuses every trial) or crawls (the
line search's smallest step accepted :data:`RESTORE_CRAWL` times in a row: the
linearization valid on 1/512 of the step, the trust-region ratio test's verdict), an
augmented-Lagrangian DDP (:class:`.proxddp.ProxDDP`, or :class:`.alddp.ALDDP`), which
needs no feasible linearization, solves the problem from the iterate, as a filter
SQP's restoration phase (Fletcher & Leyffer, Math. Prog. 91, 2002; IPOPT's, Waechter &
Biegler 2006 Sec. 3.3) leaves the SQP's model until a point is acceptable; where it
ends feasible the SQP goes on from its point with its multipliers (a fresh merit weight
and active set), and so where it ends unconverged but less infeasible (largest gap or
violation) than the iterate, unless a QP was certified infeasible (after a stalled line
search or a crawl: kinova's tool to a pose under velocity limits from the guess, 100
knots, "no step accepted" after 1 iteration before, converged now, the restoration
ending at violation 0.05); otherwise the solve ends with the status that
triggered it ("infeasible" stays "infeasible": the restoration's own test, the BCL
penalty grown ``infeasible_ratio`` times without halving the violation, agrees on the
four infeasible test problems).  The restoration stops paying when its own line search
crawls as the SQP's did (its smallest step :data:`RESTORE_CRAWL` times in a row, status
"crawling"): anywhere where a less infeasible point may go back, after a certificate
only while its infeasibility is above :data:`RESTORE_PROGRESS` times the iterate's
(before any progress; a certified restoration that crawls later, as the swing-up's,
goes on to its own end).  kinova "pose" (benchmarks/constrained.py untuned3) from
FDDP's optimum, where the SQP crawled five iterations and recovered by itself: 19
restoration iterations instead of 498 (ProxDDP fails on this task), 78 ms instead of
877 (the SQP alone 88 ms).  Once per solve; ``result.restoration_iterations`` its
iterations, counted in ``result.iterations`` too (``max_iter`` bounds both together; no
restoration runs when none is left), :attr:`CSQP.restored` its result.  panda
"obstacle" from the guess
(benchmarks/constrained.py untuned3: every knot linearizes the sphere's exterior as the
same half-space, steps of 2^-9 for 143 iterations, "no step accepted"): 2 crawling SQP
iterations, 23 ProxDDP iterations, 1 SQP iteration, converged at ALDDP's and ProxDDP's
optimum 0.0678908492 in 50 ms, IPOPT 0.0678908562 in 928 ms; the swing-up of the
double pendulum from rest ("infeasible" after 2 certified QPs: the linearization at rest
cannot reach the upright state under the torque bounds): converged at 0.4040068086
(ALDDP's; IPOPT "acceptable" at 0.4040070) in 298 ms, IPOPT 206 ms, ALDDP 346 ms
(benchmarks/constrained_notes.md, section glob25).  Checked to the bit (iterates, cost,
status, iterations) against ``restoration=None``: the 33 runs of
``benchmarks/constrained.py`` that converge without a restoration (ur5 and panda
plane / stiff / vbound / torque, untuned2's kinova box, z1 joints, ur10 orient,
talos_arm effort, go1 cones, untuned3's ur5_limited limits, ur3 start_bound, ur5 barely
from the guess, obstacle and swing-up from FDDP's optimum; each from the guess and from
FDDP's optimum unless named; no trigger fires on them; section glob27).  Not in
general: a run that converged before may meet a trigger and end at another point of
the same optimum (kinova "pose" from FDDP's optimum: the SQP crawled and recovered by
itself; 0.9684349203 against 0.9684349194).

What the options and the structure rest on (measured; the figures, the traces and the
variants tried and not kept are in ``benchmarks/constrained_notes.md``, section "CSQP"):
the active-set method before ADMM (ADMM alone stalls at its tolerance; the 16 runs of
``benchmarks/constrained.py --solvers CSQP``: 2.0 s against 6.1 s ADMM first);
``polish_sigma`` 1e-8 (at ADMM's 1e-6, equal to a task's Luu, the method of multipliers
crawls); ``big`` 1e5 (fewer sweeps; the equality LQ within 7e-12 of the dense KKT
solution); ``polish_iter`` 50 and ``active_set_rounds`` 30 (the first QPs of ur5 and panda
need 37 sweeps and 28 solves), max(30, N) since an arc peeled or grown one knot per
solve needs up to ~N (ext18, z1 "joints" before its joint position rows entered one knot
per run: 74 solves at its first QP on 100 knots, where 30 fell back on ADMM for 1000
iterations and 206 more factorizations, 129 against 34 ms); a round's loose pass
(:data:`POLISH_LOOSE_EPS`), its
partial refactorization (from its last changed knot down, the Hessian rewritten
at its changed knots only) and its factorization that
is also its first sweep (``swept``); the sparse entry of state-only residual rows
(:data:`SPARSE_KINDS`, :func:`_polish_rows`'s ``fresh``), an arc's ends entering with
its run's most violated knot (:func:`_polish_fix`; z1 "joints" 24 -> 20 factorizations from
the guess, an arc filled by bisection before); after the first QP, a row without
a multiplier starting inactive even at its bound (:func:`_polish_rows`; kinova "box": a
weakly inactive row entered and left at every QP, 2 -> 1 factorizations per QP); the
final solve's inexact tolerance (:data:`POLISH_EPS_CAP`, :data:`POLISH_NEAR`); nu from the
QP's own costates (:func:`_costates_max`) and multipliers; the start projected onto the box bounds
(:meth:`CSQP._project_start`: panda "torque" reaches 0.1342558 instead of 0.2271809);
a warm line search (:meth:`CSQP._first_trial`; the stiff tasks' iterations on panda
112 / 115 -> 47 / 64, trials per iteration 3.8 -> 1.8);
the trial point written in place by one kernel (:func:`_trial_point`, the same bits);
the factorization's Cholesky factors and gap terms kept from its backward pass
(:func:`.riccati.backward_range_kept`: 25 us less per factorization on panda); the
method of multipliers' update reading the active rows' values only (:func:`_rows_values`),
the rollout's sums four rows at a time (:func:`_rows_dot`: the same bits,
a single row's sum waits on each addition), a row's rho R^T R on 0-based slices where
its columns are one range (:func:`.alddp._add_row_range`), and a contact stage's
friction pyramids evaluated as one group (:class:`.ocp.contacts.LinearForceRows`):
go1 "cones" 0.90x per SQP iteration, bitwise equal elsewhere (qp22); rounds that stall
(:data:`STALL_ROUNDS`: HIK's method, whose convergence needs an M-matrix, cycling or
wandering) switched to peeling arcs from their ends (:meth:`CSQP._polish`,
:func:`_polish_fix`'s ``peel``: bolt under friction pyramids from the guess, 30 rounds
over 30 distinct active sets and ADMM at QP 4 before, 175 -> 98 factorizations, 0.52x
per SQP iteration, the other runs bitwise equal; qp24).
Tried and not kept (figures in the notes): a nonmonotone merit reference, a
second-order correction on the same factorization, skipping the trials the merit's
quadratic model predicts refused, a Levenberg-Marquardt term on the QP's Hessian; an
inexact active-set method (a cap on the rounds), the bound arcs predicted by a clamped
rollout of the round's law, and three other starting active sets (qp14, qp15); a QP's
rounds in one kernel call (qp17: 1-4 % less time per SQP iteration, but the fused kernel
optimizes its callees' code again, csqp's first-solve compile 16.9 -> 25.7 s); a
per-knot SR1 term for the curvature Gauss-Newton leaves out (gn19: kinova "box" 9 -> 91
iterations, talos_arm "effort" 33 -> 76); the signs' forcing term in every round rather
than only to end a QP (cq33: panda "torque" from the guess 127 -> 542 factorizations, from
FDDP's optimum 28 -> 103 iterations) and at feasible iterates too (the second stopping
test then waits for an exact step: kinova "box" 9 -> 20 iterations).
Changes must keep the 16 runs' iterations and costs (1e-8 relative), or say which runs
stop earlier and by how much their costs moved (gn19: the second stopping test, the
eight panda runs 1-13 iterations fewer, costs within 6.2e-10 relative), and be measured
as new / old per SQP iteration and per solve, interleaved in one process.
"""
import math
import time

import numpy as np

from ..dynamics.borrowed import borrowed, borrowed_all, keep_alive
from ..dynamics.config import inline_kernel, kernel
from ..dynamics.linalg import cholesky_solve
from ..dynamics.liegroups import integrate_state
from ..dynamics.model_ref import model_arrays, model_ref
from ..ocp.constraints import HorizonConstraints
from ..ocp.fused import CALC, DIFF
from ..ocp.held import held, typed_list
from ..ocp.state import StateMultibody
# NOT_FINITE: a NaN or inf in a constraint row's value or Jacobian or in the cost's
# derivatives (the QP cannot be formed; without the test the solve ended at the first QP
# as "the QP's Hessian is not positive definite", a status that points at the costs'
# curvature, not at the residual; rob34), the status ALDDP and ProxDDP share (rs35)
from .alddp import (NOT_FINITE, ALDDP, ConstrainedResult, _add_rows, _Block,
                    _bound_residuals, constraint_blocks, derivatives_finite,
                    record_iteration)
from .callbacks import CallbackVerbose
from .forward import KERNEL_ERRORS, ForwardPass
from .options import _integer, _number, check_alphas, check_solve_arguments
from .proxddp import ProxDDP
from .riccati import backward_range_kept

# polishing: the method of multipliers' target residual (OSQP's test, eps_abs and
# eps_rel), then the test of the active rows' residual, the inactive rows' violation
# and the multipliers' wrong sign
POLISH_EPS, POLISH_TOLERANCE = np.array([1e-12, 0.0]), 1e-9
# an inexact SQP step (Dembo, Eisenstat & Steihaug, SIAM J. Numer. Anal. 19(2), 1982:
# the inner residual below a forcing term times the outer one): the final solve of a QP
# runs its method of multipliers to max(POLISH_EPS, min(POLISH_EPS_CAP, POLISH_FORCING
# KKT)), KKT = max(stationarity, gap, violation) at the iterate: 1e-10 far from a
# solution (with th_stop 1e-6 that cap holds at nearly every iteration).  Within
# POLISH_NEAR th_stop of the stopping test the final solve runs to 1e-12 as before: the
# multipliers move by up to big x the residual per sweep (1e5 x 1e-10 = 1e-5, ten times
# th_stop), and they are the ones the next stopping test reads
POLISH_EPS_CAP, POLISH_FORCING, POLISH_NEAR = 1e-10, 1e-3, 10.0
# a round of the active-set method whose active set then changes needs only the
# multipliers' signs: its method of multipliers first runs to this residual
POLISH_LOOSE_EPS = np.array([1e-5, 0.0])
# the active-set method's rounds: after more than this many rounds in a row that change
# no fewer rows than the fewest so far, an active row leaves only at an end of its arc
# (:meth:`CSQP._polish`; as in Judice & Pires' block principal pivoting, Comput. Oper.
# Res. 21(5), 1994, a safeguard after rounds without progress).  bolt from the guess:
# 98 factorizations at 10, 93 at 6 (175 without)
STALL_ROUNDS = 10
# the active-set method gives the QP to ADMM (and its infeasibility certificate) after
# more than this many rounds without progress (no fewer rows changed than the fewest so
# far) whose active rows contradict each other: their method of multipliers ran its
# polish_iter iterations without meeting POLISH_LOOSE_EPS (the equality-constrained LQ
# on those rows has no solution).  A QP with a solution may pass through such active
# sets while its rounds converge (tests/test_csqp.py's LQ between guesses: 5 in a row,
# changing 15, 8, 4, 1, 1 rows); in the 40 runs of benchmarks/constrained.py only
# rounds that ended without a solution had any.  The swing-up from rest's first QP has
# none: its rounds ran all their max(30, N) = 100 solves before ADMM certified it, now
# 10 (11 factorizations, the same iterate; qp29)
CONTRADICTED_ROUNDS = 2
# the damped rounds after a cycle (:func:`_damped_round`): Armijo's constant on the
# merit 1/2 |Phi|^2 and the smallest step
DAMPED_C1, DAMPED_SMALLEST = 1e-4, 2.0 ** -20
# a step to the first kink goes this far past it (relative), so that the row changes
KINK_PAST = 1e-9
# the row kinds (0 residual rows, 1 control bounds, 2 state bounds) whose rows enter the
# active set one knot per run of violated knots (:func:`_polish_fix`; residual rows
# only where they have no control term): a hand position touches its bound at isolated
# knots, a velocity or torque bound or a friction cone saturates over arcs (module
# docstring).  The fourth entry (CSQP._sparse: a multibody state's) marks the state bounds
# on configuration coordinates (dx index < ndx / 2) so too, and leaves them out of the
# first QP's starting active set where their multiplier is zero (:func:`_polish_rows`),
# as the residual rows without a control term: a joint position bound entered whole
# over its violated run and was peeled one knot per solve from each end of the too long
# arc (ext18: z1 "joints", first QP 74 solves from the guess, 36 from FDDP's optimum;
# entered one knot per run, 5 and 8)
SPARSE_KINDS = np.array([True, False, False, True])

# the warm line search (:meth:`CSQP._first_trial`): after an accepted step at most
# CRAWL the next search starts a step above it; a full step accepted right after an
# accepted step at most CRAWL_RESUME resumes the crawl at that step
CRAWL = 0.125
CRAWL_RESUME = 0.25

# "infeasible": the QP's primal residual at least this fraction of the violation
INFEASIBLE_RATIO = 0.1
# "infeasible" at once when this many SQP iterations in a row end with their QP certified
# infeasible by ADMM (:meth:`CSQP._certified_infeasible`)
CERTIFIED_AFTER = 2

# the restoration (:meth:`CSQP._restore`): it runs, once per solve, from an infeasible
# iterate where the SQP would stop without a solution (QP certified infeasible
# CERTIFIED_AFTER times in a row or left unsolved, a line search that refuses every
# trial) or where the line search accepted its smallest step RESTORE_CRAWL times in a
# row (the linearization valid on 1/512 of the QP's step or less)
RESTORE_CRAWL = 2
# the restoration stops when its own line search crawls (RESTORE_CRAWL smallest steps in a
# row): anywhere where it may hand back a less infeasible point, and after a certificate
# while its infeasibility is above RESTORE_PROGRESS times the iterate's (IPOPT's
# required_infeasibility_reduction, the reduction its restoration phase must reach:
# Waechter & Biegler 2006, Sec. 3.3)
RESTORE_PROGRESS = 0.9
# after a certificate (only a feasible point goes back) the restoration also stops, as
# "stalled", once its least infeasibility so far has not fallen below RESTORE_STALL_RATIO
# times what it was RESTORE_STALL iterations before (ALDDP's ``stall_window``): an
# unreachable target's restoration (ur5 "unreachable") otherwise ran to max_iter at a
# violation that fell 1e-3 relative in its last 300 iterations (rs35)
RESTORE_STALL = 50
RESTORE_STALL_RATIO = 0.99
# its solvers, by the ``restoration`` option's value
RESTORATIONS = {"proxddp": ProxDDP, "alddp": ALDDP}

# the filter that judges a solved QP's step where the l1 merit refuses every trial
# (``filter_fallback``; Waechter & Biegler, "On the implementation of an interior-point
# filter line-search algorithm for large-scale nonlinear programming", Math. Prog. 106,
# 2006, Sec. 2.3, with IPOPT's constants): the margins gamma_theta, gamma_phi of the
# filter's envelope, the switching condition's delta, s_theta, s_phi (their eq. 19: an
# f-type step, where the cost's predicted decrease dominates the infeasibility), and
# theta_min, theta_max relative to max(1, theta_0) (Armijo on the cost only below
# theta_min; no trial above theta_max)
FILTER_GAMMA_THETA, FILTER_GAMMA_PHI = 1e-5, 1e-8
FILTER_DELTA, FILTER_S_THETA, FILTER_S_PHI = 1.0, 1.1, 2.3
FILTER_THETA_MIN, FILTER_THETA_MAX = 1e-4, 1e4


class _Filter:
    """Waechter & Biegler's filter (Math. Prog. 106, 2006, Sec. 2.3, their Algorithm A
    without the second-order correction) on the pair (theta, phi): theta the l1
    infeasibility (gaps and rows, the merit's), phi the cost; CSQP asks it only about the
    trials the l1 merit refused (``filter_fallback``).  A trial is acceptable where
    theta_t <= theta_max, it lies outside every stored envelope (theta_j, phi_j) (theta_t
    < theta_j or phi_t < phi_j), and it decreases the infeasibility or the cost enough
    with respect to the iterate (eq. 18: theta_t <= (1 - gamma_theta) theta or phi_t <=
    phi - gamma_phi theta); where the switching condition holds (the QP step's cost slope
    g^T w < 0 and step (-g^T w)^s_phi > delta theta^s_theta) and theta <= theta_min, it
    asks Armijo on the cost instead (an f-type step), and only the other (h-type) steps
    add the iterate's envelope to the filter.  Unlike the l1 merit's penalty nu (the
    multipliers' largest magnitude), it lets the infeasibility grow where the cost falls,
    up to theta_max, as IPOPT does (kinova "pose" from the guess: IPOPT's gaps grow to
    21.8 in its first three full steps, then close quadratically)."""

    def __init__(self, theta):
        scale = max(1.0, theta)
        self.theta_min, self.theta_max = FILTER_THETA_MIN * scale, FILTER_THETA_MAX * scale
        self.entries = []

    def accepts(self, cost, theta, cost_slope, step, trial_cost, trial_theta, c1):
        """None (refused), "f" (Armijo on the cost) or "h" (filter and sufficient
        decrease of theta or phi)."""
        if not (math.isfinite(trial_cost) and math.isfinite(trial_theta)) or \
                trial_theta > self.theta_max:
            return None
        for theta_j, phi_j in self.entries:
            if trial_theta >= theta_j and trial_cost >= phi_j:
                return None
        switching = cost_slope < 0.0 and \
            step * (-cost_slope) ** FILTER_S_PHI > FILTER_DELTA * theta ** FILTER_S_THETA
        if switching and theta <= self.theta_min:
            return "f" if trial_cost <= cost + c1 * step * cost_slope else None
        if trial_theta <= (1.0 - FILTER_GAMMA_THETA) * theta or \
                trial_cost <= cost - FILTER_GAMMA_PHI * theta:
            return "h"
        return None

    def add(self, cost, theta):
        """The iterate's envelope after an h-type step (eq. 20)."""
        self.entries.append(((1.0 - FILTER_GAMMA_THETA) * theta,
                             cost - FILTER_GAMMA_PHI * theta))


def _checked_restoration(restoration):
    """``restoration`` (None or a key of :data:`RESTORATIONS`), or a ValueError."""
    if restoration is not None and restoration not in RESTORATIONS:
        raise ValueError(f"restoration must be None or one of {sorted(RESTORATIONS)}, "
                         f"got {restoration!r}")
    return restoration

# the status of a solve stopped by :meth:`CSQP._settled` (the second stopping test)
SETTLED = "converged: the step's predicted decrease below th_decrease"

_HISTORY_KEYS = ("cost", "merit", "stop", "grad", "preg", "step", "gaps", "violation",
                 "qp_iterations", "qp_primal", "polished", "qp_factorizations", "qp_sweeps",
                 "rho", "dV_exp", "dV", "time")


# -- the line search's trial point --------------------------------------------------------
@kernel
def _trial_point(model, xs, us, dx, du, step, x_try, u_try, w, scratch):
    """x_try = xs (+) step dx, u_try = us + step du for x = (q, v) into the trial buffers,
    ``model`` a ModelRef: the products and sums of ``state.integrate(xs, step * dx)``
    and ``us + step * du`` in the same order (the same bits) in one call, where those
    cost 23 us of a trial's Python and allocations (panda).  The body of
    :func:`.ocp.step.state_integrate` is written out around the Lie-group kernel (as in
    :func:`.ocp.trial.rollout_free`): a compiled call per knot that passes the model
    tuple on cost ~250 ns per knot: 35 -> 11.6 us per trial point on ur5_limited (101
    knots).  Its arrays and the model's are borrowed
    (:func:`~geppetto.dynamics.borrowed.borrowed_all`; the caller owns them for the
    call): the views per knot and the Lie-group call that takes them counted atomic
    references, 12.0 -> 6.8 us on ur5_limited, 12.7 -> 7.7 us on panda (cq29, same
    bits)."""
    m = borrowed_all(model_arrays(model))     # the ModelRef (the caller's) owns them
    xs, us, dx, du, x_try, u_try, w, scratch = borrowed_all((xs, us, dx, du, x_try, u_try,
                                                             w, scratch))
    s4, t4, s3 = scratch
    nq, nv = m.nq, m.nv
    for t in range(xs.shape[0]):
        for i in range(w.shape[0]):
            w[i] = step * dx[t, i]
        x, out = xs[t], x_try[t]
        integrate_state(m, x[:nq], w[:nv], out[:nq], s4, t4, s3)
        for i in range(nv):
            out[nq + i] = x[nq + i] + w[nv + i]
    for t in range(us.shape[0]):
        for i in range(us.shape[1]):
            u_try[t, i] = us[t, i] + step * du[t, i]


# -- constraint rows ---------------------------------------------------------------------
@kernel
def _block_values(kind, start, r, Rx, Ru, index, dx_index, dx, du, out):
    """out (K, nr) = v = r + R w of every row of a block (one call per block: the
    per-row calls that passed the block's tuple cost 2x the ADMM iteration)."""
    _rows_values(kind, start, r, Rx, Ru, index, dx_index, dx, du, out, out[:0])


@kernel
def _rows_values(kind, start, r, Rx, Ru, index, dx_index, dx, du, out, rho):
    """:func:`_block_values` on the rows whose rho[k, i] is not zero (``rho`` empty: every
    row), out left as it is at the others: the method of multipliers' update reads the
    active rows only (go1 "cones": 91 of 923 rows of 48 columns)."""
    every = rho.shape[0] == 0
    ndx, nu = Rx.shape[2], Ru.shape[2]
    for k in range(out.shape[0]):
        n = start + k
        for i in range(out.shape[1]):
            if not every and rho[k, i] == 0.0:
                continue
            if kind == 1:
                out[k, i] = r[k, i] + du[n, i]
            elif kind == 2:
                out[k, i] = r[k, i] + dx[n, dx_index[i]]
            else:
                j = index[i]
                s = r[k, j]
                for a in range(ndx):
                    s += Rx[k, j, a] * dx[n, a]
                for a in range(nu):
                    s += Ru[k, j, a] * du[n, a]
                out[k, i] = s


@kernel
def _block_gradient(kind, start, Rx, Ru, index, dx_index, h, gx, gu):
    """gx[n] += sum_i h_i Rx_i, gu[n] += sum_i h_i Ru_i over the rows of a block."""
    for k in range(h.shape[0]):
        n = start + k
        for i in range(h.shape[1]):
            if h[k, i] == 0.0:
                continue
            if kind == 1:
                gu[n, i] += h[k, i]
            elif kind == 2:
                gx[n, dx_index[i]] += h[k, i]
            else:
                j = index[i]
                for a in range(Rx.shape[2]):
                    gx[n, a] += h[k, i] * Rx[k, j, a]
                for a in range(Ru.shape[2]):
                    gu[n, a] += h[k, i] * Ru[k, j, a]


@kernel
def _residuals(blocks, xs, us):
    """The bound rows' values (control and state bounds: r = u_i, x_i) written, and
    (largest violation, sum of violations) of all rows at the residuals evaluated."""
    largest, total = 0.0, 0.0
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = blocks[b]
        _bound_residuals(kind, start, r, index, xs, us)
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                value = r[k, index[i]] if kind == 0 else r[k, i]
                v = max(lower[i] - value, value - upper[i], 0.0)
                if not np.isfinite(value):
                    # +inf beside an infinite upper bound gave max(-inf, nan, 0) = 0:
                    # a row that is not finite is infinitely violated (rev34)
                    v = np.inf
                largest = max(largest, v)
                total += v
    return largest, total


@kernel
def _hessian(blocks, L, H, t_end, knots):
    """H = L's Hessian (Lxx, Luu, Lxu) + sum_i rho_i R_i^T R_i over the rows, at the
    knots below t_end (t_end = N: the terminal knot too), those a factorization of
    :meth:`CSQP._factorize` reads, and of those only the knots marked in ``knots``
    (N+1 bools): an active-set round rewrites the knots whose rows it changed, H at the
    others is the last factorization's (the same L and rows: the same bits)."""
    Lxx, Luu, Lxu = L
    Hxx, Huu, Hxu, gx, gu = H
    N = Huu.shape[0]
    top = N + 1 if t_end >= N else t_end
    every = True
    for t in range(top):
        every = every and knots[t]
    if every:
        Hxx[:top] = Lxx[:top]
        Huu[:t_end] = Luu[:t_end]
        Hxu[:t_end] = Lxu[:t_end]
    else:
        for t in range(top):
            if knots[t]:
                Hxx[t] = Lxx[t]
                if t < N:
                    Huu[t] = Luu[t]
                    Hxu[t] = Lxu[t]
    cx = np.empty(Hxx.shape[1], dtype=np.int64)
    cu = np.empty(Huu.shape[1], dtype=np.int64)
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = blocks[b]
        if start >= top:
            continue
        weights = rho
        if not every or start + rho.shape[0] > top:
            # the rows of knots from t_end on, or not marked, left out
            weights = rho.copy()
            for k in range(rho.shape[0]):
                if start + k >= top or not knots[start + k]:
                    weights[k] = 0.0
        # the gradient g is rewritten by _gradient: no linear terms here
        _add_rows(kind, start, Rx, Ru, index, dx_index, np.zeros(rho.shape), weights, cx,
                  cu, gx, gu, Hxx, Huu, Hxu)


@kernel
def _gradient(blocks, Lx, Lu, sigma, dx, du, gx, gu):
    """The linear terms of the ADMM subproblem: g = L's gradient - sigma w^k + sum_i
    R_i^T (rho_i (r_i - z_i) + y_i)."""
    gx[:] = Lx
    gu[:] = Lu
    for t in range(gx.shape[0]):
        for a in range(gx.shape[1]):
            gx[t, a] -= sigma * dx[t, a]
    for t in range(gu.shape[0]):
        for a in range(gu.shape[1]):
            gu[t, a] -= sigma * du[t, a]
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = blocks[b]
        h = np.empty(y.shape)
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                j = index[i] if kind == 0 else i
                h[k, i] = rho[k, i] * (r[k, j] - z[k, i]) + y[k, i]
        _block_gradient(kind, start, Rx, Ru, index, dx_index, h, gx, gu)


# -- the LQ solve -------------------------------------------------------------------------
@kernel
def _linear_sweep(F, nus, factor, gx, gu, Vx, k, t_stop):
    """The backward sweep of the linear terms on a kept factorization (Vxx, K, Lq, Vf
    of :func:`.riccati.backward_range_kept` with the same Hessian): Vx_N =
    gx_N + Vxx_N f_N, then k_t = Quu^-1 (gu_t + Fu^T Vx_{t+1}), Vx_t = gx_t + Fx^T
    Vx_{t+1} - K_t^T Quu k_t + Vxx_t f_t (as :func:`.riccati._value_function`).  The
    products run along the rows of Fx, Fu, K (contiguous) and Vxx f comes from the
    factorization: an ADMM or multiplier sweep 105 -> 72 us (panda, 100 knots).  The
    knots N-1 down to ``t_stop`` (0: all).  Its arrays are borrowed (no atomic reference
    counts for Lq[t] and the call that solves with it; 0.94-0.99x of the time, cq29)."""
    F, nus, factor, gx, gu, Vx, k = borrowed_all((F, nus, factor, gx, gu, Vx, k))
    Fx, Fu = F
    Vxx, K, Lq, Vf = factor
    N, ndx, nu = Fu.shape
    qu_owner = np.empty((nu, 1))
    qu = borrowed(qu_owner)
    for i in range(ndx):
        Vx[N, i] = gx[N, i] + Vf[N, i]
    for t in range(N - 1, t_stop - 1, -1):
        n = nus[t]
        for i in range(nu):
            qu[i, 0] = gu[t, i]
        for i in range(ndx):
            Vx[t, i] = gx[t, i] + Vf[t, i]
        for p in range(ndx):
            v = Vx[t + 1, p]
            for i in range(nu):
                qu[i, 0] += Fu[t, p, i] * v
            for i in range(ndx):
                Vx[t, i] += Fx[t, p, i] * v
        for p in range(n):
            q = qu[p, 0]
            for i in range(ndx):
                Vx[t, i] -= K[t, p, i] * q
        cholesky_solve(Lq[t], n, qu)
        for i in range(nu):
            k[t, i] = qu[i, 0] if i < n else 0.0
    keep_alive((qu_owner,))


@inline_kernel
def _rows_dot(A, x, out):
    """out[i] += sum_j A[i, j] x[j] for each row i of A, the terms of a row added one by
    one in the order of j (the bits of the plain row loop), four rows at a time: four
    independent sums, where a single row's sum waits on each addition (no reassociation
    without fastmath; go1's rollout, 36 x 48 per knot: 43 -> 22 us).  Inlined:
    :func:`_rollout` calls it three times per knot."""
    m, n = A.shape
    i = 0
    while i + 4 <= m:
        s0, s1, s2, s3 = out[i], out[i + 1], out[i + 2], out[i + 3]
        for j in range(n):
            v = x[j]
            s0 += A[i, j] * v
            s1 += A[i + 1, j] * v
            s2 += A[i + 2, j] * v
            s3 += A[i + 3, j] * v
        out[i], out[i + 1], out[i + 2], out[i + 3] = s0, s1, s2, s3
        i += 4
    for i in range(i, m):
        s = out[i]
        for j in range(n):
            s += A[i, j] * x[j]
        out[i] = s


@kernel
def _rollout(F, gaps, k, K, dx, du):
    """dx_0 = f_0, du_t = -k_t - K_t dx_t, dx_{t+1} = Fx dx_t + Fu du_t + f_{t+1} (each
    entry's sum in the order of its terms: :func:`_rows_dot`).  du_t as -(k_t + K_t dx_t):
    round-to-nearest is symmetric in the sign, so (-a) - b = -(a + b) at every step, the
    bits of -k_t - K_t dx_t summed in that order.  Its arrays are borrowed and
    :func:`_rows_dot` inlined: the views K[t], dx[t], Fx[t] ... and three calls per knot
    counted atomic references, 13.7 -> 7.8 us on ur5_limited, 20.4 -> 15.4 us on panda
    (cq29, same bits)."""
    F, gaps, k, K, dx, du = borrowed_all((F, gaps, k, K, dx, du))
    Fx, Fu = F
    N, ndx, nu = Fu.shape
    dx[0] = gaps[0]
    for t in range(N):
        for i in range(nu):
            du[t, i] = k[t, i]
        _rows_dot(K[t], dx[t], du[t])
        for i in range(nu):
            du[t, i] = -du[t, i]
        for i in range(ndx):
            dx[t + 1, i] = gaps[t + 1, i]
        _rows_dot(Fx[t], dx[t], dx[t + 1])
        _rows_dot(Fu[t], du[t], dx[t + 1])


@kernel
def _max_abs(a):
    """max |a| over a 2-D array: np.abs(a).max() (NaN if any entry is) without the
    temporary."""
    largest = 0.0
    for t in range(a.shape[0]):
        for i in range(a.shape[1]):
            if np.isnan(a[t, i]):
                return np.nan
            largest = max(largest, abs(a[t, i]))
    return largest


@kernel
def _admm(blocks, problem, work, sigma, alpha, project, iterations, eps, swept):
    """Up to ``iterations`` ADMM iterations (module docstring) on the kept factorization
    (``project`` False: the method of multipliers of polishing, z fixed at the active
    rows' bounds).  ``work``: (gx, gu, Vx, k, dx~, du~, dx, du, dual_x, dual_u).
    ``swept``: the first iteration's linear terms (Vx, k) are those the factorization
    computed with this gradient (:meth:`CSQP._factorize`'s ``swept``), no sweep.
    Returns (iterations done, primal residual, dual residual, primal scale, dual
    scale); stops at the first iteration whose residuals are below eps[0] + eps[1]
    scale (OSQP's test).  The arrays of ``problem`` and ``work`` are borrowed (the
    caller's): the kernels each iteration calls take them without atomic reference
    counts (10 iterations 0.82-0.90x of the time on ur5_limited, panda, ur5 "barely",
    cq29; ``blocks`` is a typed list, whose items are read once per block)."""
    problem, work, eps = borrowed_all((problem, work, eps))
    F, gaps, nus, factor, Lx, Lu = problem
    gx, gu, Vx, k, tx, tu, dx, du, dual_x, dual_u = work
    K = factor[1]
    prim, dual, prim_scale = np.inf, np.inf, 0.0
    dual_scale = max(_max_abs(Lx), _max_abs(Lu))
    done = 0
    for it in range(iterations):
        done = it + 1
        if it > 0 or not swept:
            _gradient(blocks, Lx, Lu, sigma, dx, du, gx, gu)
            _linear_sweep(F, nus, factor, gx, gu, Vx, k, 0)
        _rollout(F, gaps, k, K, tx, tu)
        dual_x[:] = 0.0
        dual_u[:] = 0.0
        prim, prim_scale = _update(blocks, tx, tu, dx, du, alpha, project, dual_x, dual_u)
        for t in range(dx.shape[0]):
            for a in range(dx.shape[1]):
                change = alpha * (tx[t, a] - dx[t, a])
                dual_x[t, a] += sigma * change
                dx[t, a] += change
        for t in range(du.shape[0]):
            for a in range(du.shape[1]):
                change = alpha * (tu[t, a] - du[t, a])
                dual_u[t, a] += sigma * change
                du[t, a] += change
        dual = max(_max_abs(dual_x), _max_abs(dual_u))
        if prim <= eps[0] + eps[1] * prim_scale and dual <= eps[0] + eps[1] * dual_scale:
            break
    return done, prim, dual, prim_scale, dual_scale


@kernel
def _update(blocks, tx, tu, dx, du, alpha, project, dual_x, dual_u):
    """z and y of every row after the Riccati solve w~ = (tx, tu) from w^k = (dx, du);
    dual_x, dual_u accumulate R^T rho (z^{k+1} - z^k).  Returns (the primal residual
    max |v(w^{k+1}) - z^{k+1}|, its scale max(|v|, |z|)).  The method of multipliers
    (``project`` False, alpha 1, z fixed): v(w^k) drops out (0 v_old adds an exact
    zero) and z does not move, so neither is computed (the same bits)."""
    prim, scale = 0.0, 0.0
    plain = not project and alpha == 1.0
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = blocks[b]
        v_new = np.empty(y.shape)
        if plain:       # the active rows' values only: the others are not read
            _rows_values(kind, start, r, Rx, Ru, index, dx_index, tx, tu, v_new, rho)
        else:
            _block_values(kind, start, r, Rx, Ru, index, dx_index, tx, tu, v_new)
        if plain:
            for k in range(y.shape[0]):
                for i in range(y.shape[1]):
                    if rho[k, i] != 0.0:
                        y[k, i] += rho[k, i] * (v_new[k, i] - z[k, i])
                        prim = max(prim, abs(v_new[k, i] - z[k, i]))
                        scale = max(scale, abs(v_new[k, i]), abs(z[k, i]))
            continue
        v_old = np.empty(y.shape)
        _block_values(kind, start, r, Rx, Ru, index, dx_index, dx, du, v_old)
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                if rho[k, i] == 0.0:
                    v_old[k, i] = 0.0           # the change of z, reused below
                    continue
                v_hat = alpha * v_new[k, i] + (1.0 - alpha) * (z[k, i] if project
                                                               else v_old[k, i])
                z_old = z[k, i]
                if project:
                    z[k, i] = min(max(v_hat + y[k, i] / rho[k, i], lower[i]), upper[i])
                y[k, i] += rho[k, i] * (v_hat - z[k, i])
                v = alpha * v_new[k, i] + (1.0 - alpha) * v_old[k, i]
                prim = max(prim, abs(v - z[k, i]))
                scale = max(scale, abs(v), abs(z[k, i]))
                v_old[k, i] = rho[k, i] * (z[k, i] - z_old)
        _block_gradient(kind, start, Rx, Ru, index, dx_index, v_old, dual_x, dual_u)
    return prim, scale


@kernel
def _certificate_rows(blocks):
    """The rows' part of OSQP's primal-infeasibility test (Sec. 3.4) on dy = y^k - y^{k-1},
    held in the y slots of ``blocks``: dy projected in place onto the polar cone of the
    recession cone of [l, h] (a row without an upper bound keeps dy_i <= 0, one without a
    lower bound dy_i >= 0: the other sign would make its support term +inf; OSQP's
    projection), and
    returns (max |dy|, the support sum_i (h_i - r_i) max(dy_i, 0) + (l_i - r_i)
    min(dy_i, 0) of the QP's row set l - r <= R w <= h - r, r the rows' values at the
    iterate)."""
    largest, support = 0.0, 0.0
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, dy, z, rho, lower, upper, index, dx_index = blocks[b]
        for k in range(dy.shape[0]):
            for i in range(dy.shape[1]):
                d = dy[k, i]
                if upper[i] == np.inf:
                    d = min(d, 0.0)
                if lower[i] == -np.inf:
                    d = max(d, 0.0)
                dy[k, i] = d
                value = r[k, index[i]] if kind == 0 else r[k, i]
                if d > 0.0:
                    support += (upper[i] - value) * d
                elif d < 0.0:
                    support += (lower[i] - value) * d
                largest = max(largest, abs(d))
    return largest, support


@kernel
def _fixed_row_violation(blocks, f0):
    """The largest violation at x0 of the rows at knot 0 without a control term: with
    x_0 = x0 fixed nothing can change them.  The state bounds (x (+) dx adds there) at
    x_0 (+) f_0 = x0 exactly; the residual rows whose Ru row is zero at their values r,
    x0's only where the gap f_0 at knot 0 is zero (else left out)."""
    largest = 0.0
    at_x0 = True
    for a in range(f0.shape[0]):
        at_x0 = at_x0 and f0[a] == 0.0
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = blocks[b]
        if start != 0 or kind == 1 or y.shape[0] == 0 or (kind == 0 and not at_x0):
            continue
        for i in range(y.shape[1]):
            if kind == 0 and not _state_row(Ru, 0, index[i]):
                continue
            value = r[0, index[i]] if kind == 0 else r[0, i] + f0[dx_index[i]]
            largest = max(largest, lower[i] - value, value - upper[i])
    return largest


@kernel
def _stationarity(blocks, F, L, dx, du, lam, ax, au, with_step):
    """The costates lam (N+1, ndx) of the LQ at w = (dx, du) with the rows' multipliers
    y (adjoint sweep: lam_N = Lx_N + Lxx_N dx_N + Rx^T y, lam_t = Lx + Lxx dx + Lxu du
    + Fx^T lam_{t+1} + Rx^T y) and the largest entry of the control gradient of its
    Lagrangian, Lu + Lxu^T dx + Luu du + Fu^T lam_{t+1} + Ru^T y.  Returns (that
    stationarity, max |lam|, max |y|).  The rows' terms one block at a time
    (:func:`_block_gradient`), the products along the rows of Fx, Fu, Lxu (contiguous),
    each entry's terms summed in the same order as a per-entry dot product (the same
    bits).  ``with_step`` False: w = 0 (the stopping test at the iterate), the products
    with (dx, du) left out (they add exact zeros: the same bits, 60% fewer products)."""
    Fx, Fu = F
    Lx, Lu, Lxx, Luu, Lxu = L
    N, ndx, nu = Fu.shape
    ax[:] = 0.0
    au[:] = 0.0
    largest_y = 0.0
    for b in range(len(blocks)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = blocks[b]
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                largest_y = max(largest_y, abs(y[k, i]))
        _block_gradient(kind, start, Rx, Ru, index, dx_index, y, ax, au)
    largest_lam, stationarity = 0.0, 0.0
    gu = np.empty(nu)
    for t in range(N, -1, -1):
        for i in range(ndx):
            s = Lx[t, i] + ax[t, i]
            if with_step:
                for j in range(ndx):
                    s += Lxx[t, i, j] * dx[t, j]
                if t < N:
                    for j in range(nu):
                        s += Lxu[t, i, j] * du[t, j]
            lam[t, i] = s
        if t < N:
            for p in range(ndx):
                v = lam[t + 1, p]
                for i in range(ndx):
                    lam[t, i] += Fx[t, p, i] * v
        for i in range(ndx):
            largest_lam = max(largest_lam, abs(lam[t, i]))
        if t == N:
            continue
        for i in range(nu):
            gu[i] = Lu[t, i] + au[t, i]
        if with_step:
            for j in range(ndx):
                v = dx[t, j]
                for i in range(nu):
                    gu[i] += Lxu[t, j, i] * v
            for i in range(nu):
                s = gu[i]
                for j in range(nu):
                    s += Luu[t, i, j] * du[t, j]
                gu[i] = s
        for p in range(ndx):
            v = lam[t + 1, p]
            for i in range(nu):
                gu[i] += Fu[t, p, i] * v
        for i in range(nu):
            stationarity = max(stationarity, abs(gu[i]))
    return stationarity, largest_lam, largest_y


@inline_kernel
def _state_row(Ru, k, j):
    """Whether residual row j at block knot k has no control term (Ru row zero)."""
    for a in range(Ru.shape[2]):
        if Ru[k, j, a] != 0.0:
            return False
    return True


@kernel
def _polish_rows(blocks, polished, big, tolerance, fresh, sparse, ndx):
    """The polishing rows from ADMM's (z, y): a row whose z is at a bound, with y of the
    bound's sign (or |y| > tolerance), or an equality, becomes an equality at that
    bound with penalty ``big`` and multiplier y; the others rho 0, y 0.  With ``fresh``
    (the first QP of a solve: z the iterate's values clipped, y the start multipliers)
    a residual row without a control term and without a multiplier starts inactive:
    the first solve's step tells which rows it pushes past a bound (:func:`_polish_fix`).
    Without ``fresh`` (z, y those of the last QP's solution or of ADMM's iterate) an
    inequality row whose multiplier is exactly zero was inactive there and starts
    inactive, even where its value z lies within ``tolerance`` of a bound: such a row
    (a weakly inactive one, its value at the bound with no force needed) entered the
    active set at every QP, got a multiplier of the wrong sign and left again, one
    factorization and sweep more per SQP iteration (kinova "box": the tool's z >= 0.35
    at knot 65, QPs 2-18 of 2 factorizations each, now 1).  Returns the number of
    active rows."""
    active = 0
    for b in range(len(blocks)):
        kind, Ru, index, dx_index = blocks[b][0], blocks[b][4], blocks[b][10], blocks[b][11]
        z, y, lower, upper = blocks[b][6], blocks[b][5], blocks[b][8], blocks[b][9]
        py, pz, prho = polished[b][5], polished[b][6], polished[b][7]
        for k in range(z.shape[0]):
            for i in range(z.shape[1]):
                at_lower = z[k, i] - lower[i] <= tolerance and y[k, i] <= 0.0
                at_upper = upper[i] - z[k, i] <= tolerance and y[k, i] >= 0.0
                if y[k, i] == 0.0 and (not fresh or (
                        (kind == 0 and _state_row(Ru, k, index[i])) or
                        (kind == 2 and sparse[3] and dx_index[i] < ndx // 2))):
                    at_lower = at_upper = False
                if lower[i] == upper[i] or at_lower or at_upper:
                    pz[k, i] = lower[i] if (at_lower or lower[i] == upper[i]) else upper[i]
                    py[k, i] = y[k, i]
                    prho[k, i] = big
                    active += 1
                else:
                    pz[k, i] = z[k, i]
                    py[k, i] = 0.0
                    prho[k, i] = 0.0
    return active


@inline_kernel
def _activate(z, rho, value, lower, upper, big, k, i):
    """Row i at block knot k becomes active at the bound ``value`` passed (its value v in
    :func:`_polish_fix`, v + y / c in :func:`_damped_move`)."""
    z[k, i] = lower[i] if value < lower[i] else upper[i]
    rho[k, i] = big


@inline_kernel
def _violation(value, lower, upper):
    """How far ``value`` lies beyond [lower, upper] (negative inside): an inactive row
    enters where this exceeds the tolerance (:func:`_polish_fix`, :func:`_damped_target`)."""
    return max(lower - value, value - upper)


@inline_kernel
def _wrong_sign(z, y, lower, upper, tolerance):
    """Whether an active inequality row's multiplier y has the wrong sign for the bound z
    it is active at by more than ``tolerance``: the row leaves (:func:`_polish_fix`,
    :func:`_damped_target`)."""
    return (z == lower and y > tolerance) or (z == upper and y < -tolerance)


@kernel
def _polish_fix(polished, dx, du, big, tolerance, sparse, changed, peel):
    """One active-set correction after a polishing solve w = (dx, du): an inactive row
    that w pushes past a bound (by more than ``tolerance``) becomes active there, an
    active inequality row whose multiplier has the wrong sign becomes inactive.  In
    a block whose kind is marked in ``sparse`` (0 residual rows, 1 control bounds, 2
    state bounds), of a run of consecutive knots where a row is pushed past its bound
    only the knot of the largest violation becomes active, for residual rows without a
    control term (module docstring: the touch points of a position constraint), and the
    run's first (last) knot where the knot before (after) it is active in the same row:
    the arc that row is on grows into the run (z1 "joints": an arc of a joint position
    bound was filled by bisection, each round's most violated knot splitting the run,
    QP 2 from the guess 7 solves; with its ends 24 -> 20 factorizations from the guess,
    17 -> 14 from FDDP's optimum; kinova "box" 26 -> 24, 13 -> 11).  With ``peel``
    (the rounds stalled: :meth:`CSQP._polish`) an active row with a multiplier of the
    wrong sign leaves only at an end of its arc (the knot before or after it inactive
    in the same row, or the block's first or last knot): an arc is peeled from its ends,
    as it grows at its ends.  Marks the knots of the changed rows in ``changed`` (N+1
    bools, left as they are elsewhere).  Returns (the number of rows changed (0: the
    polished step is the QP's solution), the last knot with a changed row)."""
    changes, last = 0, -1
    for b in range(len(polished)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = polished[b]
        values = np.empty(y.shape)
        _block_values(kind, start, r, Rx, Ru, index, dx_index, dx, du, values)
        K = y.shape[0]
        for i in range(y.shape[1]):
            best, best_k, first = 0.0, -1, 0
            for k in range(K + 1):
                violation = 0.0
                if k < K and rho[k, i] == 0.0:
                    violation = _violation(values[k, i], lower[i], upper[i])
                    if violation <= tolerance:
                        violation = 0.0
                if violation > 0.0 and ((sparse[kind] and (kind != 0 or
                                                           _state_row(Ru, k, index[i])))
                                        or (kind == 2 and sparse[3] and
                                            dx_index[i] < dx.shape[1] // 2)):
                    if best_k < 0:
                        first = k
                    if violation > best:
                        best, best_k = violation, k
                    continue
                # the run ends here: its most violated knot, the knot next to an active
                # row of the same coordinate at either end (the arc that row is on grows
                # into the run), and knot k if it is violated (a row with a control term
                # at k) become active
                if best_k >= 0:
                    arc_before = first > 0 and rho[first - 1, i] != 0.0
                    arc_after = k < K and rho[k, i] != 0.0
                    for add in (best_k, first if arc_before else -1,
                                k - 1 if arc_after else -1):
                        if add >= 0 and rho[add, i] == 0.0:
                            _activate(z, rho, values[add, i], lower, upper, big, add, i)
                            changes += 1
                            last = max(last, start + add)
                            changed[start + add] = True
                if violation > 0.0:
                    _activate(z, rho, values[k, i], lower, upper, big, k, i)
                    changes += 1
                    last = max(last, start + k)
                    changed[start + k] = True
                best, best_k = 0.0, -1
        for k in range(K):
            for i in range(y.shape[1]):
                if rho[k, i] != 0.0 and lower[i] < upper[i] and \
                        _wrong_sign(z[k, i], y[k, i], lower[i], upper[i], tolerance):
                    if peel and 0 < k < y.shape[0] - 1 and rho[k - 1, i] != 0.0 and \
                            rho[k + 1, i] != 0.0:
                        continue
                    rho[k, i] = 0.0
                    y[k, i] = 0.0
                    changes += 1
                    last = max(last, start + k)
                    changed[start + k] = True
    return changes, last


@inline_kernel
def _natural_residual(v, trial, lower, upper):
    """v - clip(trial, l, h), trial = v + y / c (c > 0: the row's curvature,
    :func:`_row_curvatures`; :func:`_row_trial`): zero exactly where v in [l, h] and y in
    the normal cone of [l, h] at v (y >= 0 at h, y <= 0 at l, 0 inside) -- the
    complementarity of a bound row as one equation (the natural residual of the QP's
    variational inequality; HIK's semismooth function min(y, c (h - v)) is the same up to
    scaling)."""
    return v - min(max(trial, lower), upper)


@kernel
def _row_curvatures(polished, Lxx, Luu, Lxu, sigma, out):
    """out (flat, the rows block after block in C order) = each row's curvature in the
    LQ's stage cost, R_i [Lxx Lxu; Lxu^T Luu] R_i^T + sigma |R_i|^2 at its knot (a control
    bound's Luu_ii, a state bound's Lxx_jj): the diagonal scaling of the natural residual
    (:func:`_damped_round`; for a box-constrained QP min 1/2 w^T A w + g^T w the residual
    w - clip(w - D^-1 (A w + g)) with D = diag(A), as a scaled projected gradient step,
    Bertsekas, SIAM J. Control Optim. 20(2), 1982), invariant to the rows' and the cost's
    units; 1 where that is not positive."""
    N = Luu.shape[0]
    n = 0
    for b in range(len(polished)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = polished[b]
        for k in range(y.shape[0]):
            t = start + k
            for i in range(y.shape[1]):
                if kind == 1:
                    c = Luu[t, i, i] + sigma
                elif kind == 2:
                    c = Lxx[t, dx_index[i], dx_index[i]] + sigma
                else:
                    j = index[i]
                    c = 0.0
                    for a in range(Rx.shape[2]):
                        ra = Rx[k, j, a]
                        c += sigma * ra * ra
                        for e in range(Rx.shape[2]):
                            c += ra * Lxx[t, a, e] * Rx[k, j, e]
                    if t < N:
                        for a in range(Ru.shape[2]):
                            ra = Ru[k, j, a]
                            c += sigma * ra * ra
                            for e in range(Ru.shape[2]):
                                c += ra * Luu[t, a, e] * Ru[k, j, e]
                            for e in range(Rx.shape[2]):
                                c += 2.0 * Rx[k, j, e] * Lxu[t, e, a] * ra
                # a row with no curvature (a Jacobian that vanishes at this knot, no
                # proximal weight) is left unscaled: dividing by 0 would make the merit
                # NaN, which every Armijo test passes (review rev32)
                out[n] = c if c > 0.0 else 1.0
                n += 1


def _damped_round(polished, dx, du, iterate, curvature, big, tolerance, c1, smallest, changed):
    """A globalized round of the primal-dual active-set method for the rounds that cycle
    (:meth:`CSQP._polish`): HIK's rounds are a semismooth Newton method on the QP's KKT
    conditions (Hintermueller, Ito & Kunisch 2002, Sec. 2), here damped by a backtracking
    line search on the merit |Phi|^2 of its residual (the damped semismooth Newton method,
    Qi & Sun, Math. Prog. 58, 1993; Facchinei & Pang, "Finite-Dimensional Variational
    Inequalities and Complementarity Problems", 2003, Sec. 8.3).

    ``iterate`` (4, rows; the rows block after block in C order) holds the iterate (v0,
    y0) of the rows' values and multipliers in its first two rows (NaN first: none yet,
    the first round after the switch) and gets the polished step's (v1, y1) in its last
    two (:func:`_damped_target`): w1 = (dx, du) solving the equality-constrained LQ on the
    current active set, y1 the polishing rows' multipliers.  Every iterate is a convex
    combination of such solutions, each making the LQ's Lagrangian stationary, so the
    stationarity part of Phi is zero along the segment (linear in (w, y)) and Phi is the
    rows' natural residual (:func:`_merit`).  On the active set's own piece Phi(t) = (1 -
    t) Phi(0): the Newton direction; a row that crosses a kink ends the piece.

    Returns (rows changed, the last knot with a changed row, step t): (0, -1, 1.0) where
    (v1, y1) solves the QP (nothing changed); otherwise the largest t of 1, 1/2, ...,
    ``smallest`` with merit(t) <= (1 - 2 c1 t) merit(0) (t = 1 for the first iterate),
    or where it is larger a step just past the first kink (:func:`_kink_step`: up to
    it merit(t) = (1 - t)^2 merit(0), which passes the test), moves the iterate and the
    active set becomes the natural residual's there (:func:`_damped_move`), the step
    repeated from the new iterate while that set is the current one (the next solve
    would be this one); (-1, -1, 0) where no step passes (a kink at the iterate).
    Python around four kernels (a few calls per round, a few rounds per cycling QP): as a
    kernel it compiled its callees again, 6.5 s of CPU at a solve's first cycle (ur5
    "barely", the rest cached) against 2.5 s.  Measured where the ladder alone failed
    (ur5 "barely" from the guess, untuned3, in an experiment that switched its rounds
    to damped after their 6th round): a kink within 1e-6 of the iterate, merit 2219.458 at
    t = 0 and 2219.471 at t = 1e-6, every step down to 2^-20 refused, ADMM (575
    iterations) after it."""
    if _damped_target(polished, dx, du, iterate, tolerance):
        return 0, -1, 1.0
    fresh = np.isnan(iterate[0, 0])
    if fresh:
        iterate[:2] = iterate[2:]
    step = 1.0
    for attempt in range(64):
        merit0 = _merit(polished, iterate, curvature, 0.0)
        step = 1.0
        while not fresh and _merit(polished, iterate, curvature, step) > \
                (1.0 - 2.0 * c1 * step) * merit0:
            step *= 0.5
            if step < smallest:
                step = 0.0
                break
        if not fresh and step < 1.0:
            # up to the first kink the merit is (1 - t)^2 merit(0): a step just past it
            # passes Armijo's test and changes that row's activity, where a kink close to
            # the iterate (a row at its bound with a multiplier near zero) leaves every
            # step of the ladder refused
            kink = _kink_step(polished, iterate, curvature)
            if kink <= 1.0:
                step = max(step, kink)
        if step == 0.0:
            return -1, -1, step
        fresh = False
        changes, last = _damped_move(polished, iterate, curvature, step, big, changed)
        if changes > 0:
            return changes, last, step
    return -1, -1, step


@kernel
def _damped_target(polished, dx, du, iterate, tolerance):
    """(v1, y1) of the polished step w = (dx, du) into iterate[2], iterate[3] (v1 an
    active inequality row's bound, the others' values); whether it is the QP's solution:
    no inactive row past a bound by more than ``tolerance``, no active inequality row's
    multiplier of the wrong sign by more than ``tolerance`` (:func:`_polish_fix`'s test,
    :func:`_violation` and :func:`_wrong_sign`)."""
    solved = True
    n = 0
    for b in range(len(polished)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = polished[b]
        values = np.empty(y.shape)
        _block_values(kind, start, r, Rx, Ru, index, dx_index, dx, du, values)
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                # an active inequality row's value is its bound: the Newton point the
                # equality-constrained solve approximates (the method of multipliers leaves
                # v within its tolerance of z).  With the penalized v, a row whose overshoot
                # v - h exceeded |y| / c stayed active under the natural residual's rule
                # however wrong y's sign, while the test below called the QP unsolved: no
                # round changed anything and every step was refused (review rev32).  At
                # the target the rule and the test now agree: a row the test changes,
                # the move at t = 1 changes
                active = rho[k, i] != 0.0 and lower[i] < upper[i]
                iterate[2, n] = z[k, i] if active else values[k, i]
                iterate[3, n] = y[k, i]
                n += 1
                if lower[i] == upper[i]:
                    continue
                if not active:
                    if _violation(values[k, i], lower[i], upper[i]) > tolerance:
                        solved = False
                elif _wrong_sign(z[k, i], y[k, i], lower[i], upper[i], tolerance):
                    solved = False
    return solved


@inline_kernel
def _row_trial(iterate, curvature, n, step):
    """Row n's (v, y) at (v0, y0) + step (v1 - v0, y1 - y0) (``iterate``'s rows,
    :func:`_damped_round`) and its v + y / c, the point the natural residual clips: one
    expression for the move, the merit and the kink step, so that they agree to the bit."""
    v = iterate[0, n] + step * (iterate[2, n] - iterate[0, n])
    m = iterate[1, n] + step * (iterate[3, n] - iterate[1, n])
    return v, m, v + m / curvature[n]


@kernel
def _kink_step(polished, iterate, curvature):
    """The step just past the first kink along (v0, y0) + t (v1 - v0, y1 - y0)
    (``iterate``'s rows, :func:`_damped_round`): the smallest t in (0, 1] where a row's
    v + y / c crosses one of its bounds ends the current active set's piece of the merit;
    the step returned is the first of t (1 + KINK_PAST 2^j), j = 0, 1, ..., at which that
    row's v + y / c, computed as :func:`_damped_move` computes it, lies strictly beyond the
    bound (at most 1).  A step relative in t alone can round back onto the bound: a row
    within ~1e-7 |h| of its bound has a kink at t ~ 1e-12, an overshoot of 1e-9 t in value
    below half an ulp of h, and the inclusive test keeps the row as it was (review rev32).
    inf where no row crosses a bound before t = 1."""
    first, row, bound, rising = np.inf, -1, 0.0, True
    n = 0
    for b in range(len(polished)):
        lower, upper, y = polished[b][8], polished[b][9], polished[b][5]
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                c = curvature[n]
                start = iterate[0, n] + iterate[1, n] / c
                slope = (iterate[2, n] - iterate[0, n]) + (iterate[3, n] - iterate[1, n]) / c
                if lower[i] < upper[i] and slope != 0.0:
                    for edge in (lower[i], upper[i]):
                        t = (edge - start) / slope
                        if 0.0 < t <= 1.0 and t < first:
                            first, row, bound, rising = t, n, edge, slope > 0.0
                n += 1
    if row < 0 or first >= 1.0:
        return np.inf
    past = KINK_PAST
    while True:
        step = min(1.0, first * (1.0 + past))
        if step >= 1.0:
            return 1.0
        trial = _row_trial(iterate, curvature, row, step)[2]
        if (trial > bound) if rising else (trial < bound):
            return step
        past *= 2.0


@kernel
def _merit(polished, iterate, curvature, step):
    """sum over the inequality rows of the natural residual squared at (v, y) = (v0, y0)
    + step (v1 - v0, y1 - y0) (``iterate``'s rows, :func:`_damped_round`)."""
    merit = 0.0
    n = 0
    for b in range(len(polished)):
        lower, upper, y = polished[b][8], polished[b][9], polished[b][5]
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                if lower[i] < upper[i]:
                    v, m, trial = _row_trial(iterate, curvature, n, step)
                    p = _natural_residual(v, trial, lower[i], upper[i])
                    merit += p * p
                n += 1
    return merit


@kernel
def _damped_move(polished, iterate, curvature, step, big, changed):
    """The iterate moved by ``step`` towards (v1, y1), and each inequality row's
    activity the natural residual's there: v + y / c past a bound, active at that bound
    (penalty ``big``, y the iterate's as the method of multipliers' start), else
    inactive (y = 0).  Marks the knots of the changed rows in ``changed``; returns (rows
    changed, the last knot with one)."""
    changes, last = 0, -1
    n = 0
    for b in range(len(polished)):
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = polished[b]
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                v, m, trial = _row_trial(iterate, curvature, n, step)
                iterate[0, n], iterate[1, n] = v, m
                n += 1
                if lower[i] == upper[i]:
                    continue
                if lower[i] <= trial <= upper[i]:
                    if rho[k, i] != 0.0:
                        rho[k, i], y[k, i] = 0.0, 0.0
                        changes, last = changes + 1, max(last, start + k)
                        changed[start + k] = True
                    continue
                y[k, i] = m
                if rho[k, i] == 0.0 or z[k, i] != (lower[i] if trial < lower[i] else upper[i]):
                    _activate(z, rho, trial, lower, upper, big, k, i)
                    changes, last = changes + 1, max(last, start + k)
                    changed[start + k] = True
    return changes, last


@kernel
def _active_key(polished, key):
    """key = each polishing row's bound where it is active (rho != 0), inf elsewhere,
    block after block, each in C order: :meth:`CSQP._active_set`'s bytes, written by
    one call where a numpy expression per block cost 10-11 us per round (three blocks:
    ur5_limited "limits", z1 "joints")."""
    n = 0
    for b in range(len(polished)):
        z, rho = polished[b][6], polished[b][7]
        for k in range(z.shape[0]):
            for i in range(z.shape[1]):
                key[n] = z[k, i] if rho[k, i] != 0.0 else np.inf
                n += 1


@kernel
def _polish_accept(blocks, polished, dx, du):
    """The rows' (y, z) from the polished step: y polishing's, z = v clipped.  Returns
    max |y|."""
    largest = 0.0
    for b in range(len(blocks)):
        target_y, target_z = blocks[b][5], blocks[b][6]
        kind, start, r, Rx, Ru, y, z, rho, lower, upper, index, dx_index = polished[b]
        values = np.empty(y.shape)
        _block_values(kind, start, r, Rx, Ru, index, dx_index, dx, du, values)
        for k in range(y.shape[0]):
            for i in range(y.shape[1]):
                target_y[k, i] = y[k, i]
                target_z[k, i] = min(max(values[k, i], lower[i]), upper[i])
                largest = max(largest, abs(y[k, i]))
    return largest


@kernel
def _costates_max(Vx, Vxx, gaps, dx):
    """max |lam| over the QP's costates lam_t = Vx_t + Vxx_t (dx_t - f_t) at its solution
    dx of the last sweep (Vx_t there is the value function's gradient at dx_t = f_t,
    FDDP's gap term included, :func:`_linear_sweep`): the gradient of the cost-to-go, the
    dynamics' multipliers the adjoint sweep of :func:`_stationarity` computes at (dx,
    du) with the rows' multipliers of that solve (with the method of multipliers
    converged, to its tolerance and polish_sigma's proximal term), in ndx^2 products
    per knot instead of its 2 ndx^2 + 3 ndx nu + nu^2."""
    largest = 0.0
    for t in range(Vx.shape[0]):
        for i in range(Vx.shape[1]):
            s = Vx[t, i]
            for j in range(Vx.shape[1]):
                s += Vxx[t, i, j] * (dx[t, j] - gaps[t, j])
            largest = max(largest, abs(s))
    return largest


@kernel
def _block_model(g, H, v, cross, w, with_curvature, s, curvature, finite):
    """:func:`_step_model`'s sums over one block of the step, v (dx or du), carried on
    from ``s``, ``curvature``, ``finite``: s += g_t v_t, curvature += v_t^T (H_t v_t + 2
    cross_t w_t) (the cross term dx^T Lxu du on the knots ``cross`` has, none for du)."""
    for t in range(v.shape[0]):
        for a in range(v.shape[1]):
            s += g[t, a] * v[t, a]
            finite = finite and np.isfinite(v[t, a])
            if not with_curvature:
                continue
            row = 0.0
            for b in range(v.shape[1]):
                row += H[t, a, b] * v[t, b]
            if t < cross.shape[0]:
                for b in range(w.shape[1]):
                    row += 2.0 * cross[t, a, b] * w[t, b]
            curvature += v[t, a] * row
    return s, curvature, finite


@kernel
def _step_model(Lx, Lu, Lxx, Luu, Lxu, dx, du, with_curvature):
    """The cost's quadratic model along the step w = (dx, du): (g^T w = sum_t Lx_t dx_t +
    Lu_t du_t, the cost's directional derivative (the merit's slope), w^T H w = sum_t
    dx_t^T Lxx_t dx_t + du_t^T Luu_t du_t + 2 dx_t^T Lxu_t du_t (the second stopping
    test's curvature, :meth:`CSQP._settled`), whether every entry of the step is
    finite), in one pass (numpy's stacked products took 29 us on panda's 100 knots).
    ``with_curvature`` False: the curvature is left out (0.0), where the second stopping
    test cannot apply (an infeasible iterate, an ADMM step): its products are most of
    the pass (ndx^2 + 2 ndx nu + nu^2 per knot against ndx + nu)."""
    s, curvature, finite = _block_model(Lx, Lxx, dx, Lxu, du, with_curvature, 0.0, 0.0,
                                        True)
    return _block_model(Lu, Luu, du, Lxu[:0], du, with_curvature, s, curvature, finite)


# -- one active-set round in one compiled call (:meth:`CSQP._polish`) ----------------------
# The rounds' arrays, fixed for a solver's life, are passed held (:mod:`..ocp.held`): a
# typed List passed from Python is typed and unboxed again on every call (its type read
# through a Python property, its class unpickled; cq33: 3440 and 6140 such Python calls in
# 10 ur5 "vbound" solves), a Held of one tuple is one reference.  The tuple
# (:meth:`CSQP._round_tuple`): (blocks, polished, (Lxx, Luu, Lxu), H, Lx, Lu, polishing's
# work, (Fx, Fu), nus, (Vxx, K, Lq, Vf), the factor arrays of :func:`backward_range_kept`,
# gaps, the QP's arrays of :func:`_admm`, the active-set key, (dx, du)).
@kernel
def _round_factorize(rounds, t_end, knots, sigma, euler):
    """:meth:`CSQP._polish`'s factorization of a round: the Hessian with the active rows'
    rho R^T R on ``knots`` below ``t_end`` (:func:`_hessian`), the method of multipliers'
    first gradient (:func:`_gradient`), the sweep of that gradient on the kept factors of
    the knots from ``t_end`` on (:func:`_linear_sweep`) and the factorization of the knots
    below (:func:`backward_range_kept`, whose result it returns): the calls the round made
    from Python one after the other, the same kernels in the same order."""
    blocks, polished, Lh, H, Lx, Lu, work, F, nus, factor, kept, gaps, arrays, key, \
        step = rounds.item
    _hessian(polished, Lh, H, t_end, knots)
    _gradient(polished, Lx, Lu, sigma, work[6], work[7], work[0], work[1])
    if t_end < gaps.shape[0] - 1:
        _linear_sweep(F, nus, factor, work[0], work[1], kept[0], kept[4], t_end)
    Vx, Vxx, Qu, Quu, k, K, Quuk, Lq, Vf = kept
    return backward_range_kept(F[0], F[1], work[0], work[1], H[0], H[1], H[2], gaps, sigma,
                               nus, Vx, Vxx, Qu, Quu, k, K, Quuk, Lq, Vf, t_end, euler)


@kernel
def _plain_round(rounds, sigma, iterations, loose, tight, big, tolerance, sparse, changed,
                 peel):
    """The solves and the correction of one round of :meth:`CSQP._polish` outside its
    damped rounds, on the factorization :func:`_round_factorize` made: the method of
    multipliers to the ``loose`` tolerance (:func:`_admm` without projection, up to
    ``iterations`` sweeps), the active-set correction (:func:`_polish_fix`, with
    ``peel``; where that changes nothing, without); a round that changes
    nothing solves again to the ``tight`` tolerance and corrects again.  Where rows
    changed, the new active set's key (:func:`_active_key`).  Returns (changes, the last
    changed row's knot, sweeps, the last solve's iterations, primal residual, dual
    residual, primal scale, dual scale)."""
    blocks, polished, Lh, H, Lx, Lu, work, F, nus, factor, kept, gaps, arrays, key, \
        step = rounds.item
    pdx, pdu = work[6], work[7]
    sweeps, swept = 0, True
    changes, last, done = 0, -1, 0
    prim, dual, prim_scale, dual_scale = np.inf, np.inf, 0.0, 0.0
    for solve in range(2):
        eps = loose if solve == 0 else tight
        done, prim, dual, prim_scale, dual_scale = _admm(
            polished, arrays, work, sigma, 1.0, False, iterations, eps, swept)
        swept = False
        sweeps += done
        changes, last = _polish_fix(polished, pdx, pdu, big, tolerance, sparse, changed,
                                    peel)
        if changes == 0 and peel:
            changes, last = _polish_fix(polished, pdx, pdu, big, tolerance, sparse, changed,
                                        False)
        if changes > 0 or (prim <= tight[0] + tight[1] * prim_scale and
                           dual <= tight[0] + tight[1] * dual_scale):
            break
    if changes > 0:
        _active_key(polished, key)
    return changes, last, sweeps, done, prim, dual, prim_scale, dual_scale


@kernel
def _polish_start(rounds, big, tolerance, fresh, sparse, ndx):
    """:meth:`CSQP._polish`'s start: the polishing rows from the rows' (y, z)
    (:func:`_polish_rows`), their active set's key (:func:`_active_key`) and the
    polishing step from the QP's (dx, du)."""
    blocks, polished, Lh, H, Lx, Lu, work, F, nus, factor, kept, gaps, arrays, key, \
        step = rounds.item
    _polish_rows(blocks, polished, big, tolerance, fresh, sparse, ndx)
    _active_key(polished, key)
    work[6][:] = step[0]
    work[7][:] = step[1]


@kernel
def _polish_end(rounds):
    """:meth:`CSQP._polish`'s end at a kept step: the rows' (y, z) from it
    (:func:`_polish_accept`), the step into the QP's (dx, du) and the QP's costates' max
    (:func:`_costates_max`).  Returns (max |y|, max |lam|)."""
    blocks, polished, Lh, H, Lx, Lu, work, F, nus, factor, kept, gaps, arrays, key, \
        step = rounds.item
    y_max = _polish_accept(blocks, polished, work[6], work[7])
    step[0][:] = work[6]
    step[1][:] = work[7]
    return y_max, _costates_max(kept[0], kept[1], gaps, step[0])


def _l1_merit(trial, nu):
    """The l1 merit of an evaluated trial (:meth:`CSQP._evaluate`: cost, gaps' and rows'
    l1 norms at indices 2 and 4) with penalty ``nu``."""
    return trial[0] + nu * (trial[2] + trial[4])


class CSQP:
    """Stagewise SQP with an ADMM QP on Riccati sweeps (see the module docstring) on any
    ShootingProblem with stage and terminal ``Constraint``s, control and state bounds.

    Options: ``th_stop`` 1e-6 (the Lagrangian's largest control gradient at
    convergence), ``th_constraint`` 1e-8 (largest violation), ``th_gaps`` 1e-9;
    ``th_decrease`` 1e-9 (at a feasible iterate whose QP the active-set method solved:
    converged, status :data:`SETTLED`, if the full step's predicted decrease of the cost
    (in magnitude) is at most th_decrease max(1, |cost|), :meth:`_settled`);
    the QP: ``max_qp_iter`` 1000 ADMM iterations per SQP iteration, ``eps_abs`` /
    ``eps_rel`` 1e-6 / 1e-6 (OSQP's test), ``rho_init`` 0.1, ``rho_min`` / ``rho_max``
    1e-6 / 1e6, ``sigma`` 1e-6, ``alpha`` 1.6 (relaxation), ``rho_interval`` 25 (ADMM
    iterations between OSQP's rho updates), ``polish`` True (``big`` 1e5 the active
    rows' penalty, up to ``polish_iter`` 50 sweeps of the method of multipliers per
    solve, ``polish_sigma`` 1e-8 its proximal weight, ``polish_rounds`` 4 active-set
    corrections after ADMM, more while each round changes fewer rows);
    ``active_set_rounds`` max(30, N) (default None): the primal-dual active-set method's
    solves before ADMM is tried (0: ADMM first; an arc of a bound can grow or shrink by
    one knot per solve, hence N: the first QP of z1 "joints", benchmarks/constrained.py,
    from the guess needed 74 solves on 100 knots before :data:`SPARSE_KINDS`' fourth
    entry);
    the line search: ``alphas``
    1, 1/2 .. 2^-9, Armijo's ``c1`` 1e-4 on the l1 merit, ``warm_line_search`` True
    (after an accepted step <= 1/8 the search starts at twice it; after a full step that
    followed a step <= 1/4, at that step), ``filter_fallback`` True (where the merit
    refuses every trial of a solved QP's step, the largest trial that Waechter &
    Biegler's filter accepts is taken, :class:`_Filter`, before any restoration; False:
    the merit alone, as before), ``rollout_fallback`` True (where a solved QP's linear
    trials x (+) a dx, u + a du accept nothing or only the smallest step, the search is
    tried again along the QP's policy rolled out through the nonlinear dynamics, FDDP's
    trial, whose gaps are (1 - a) f exactly; after such a step also where the linear
    search would take the filter's step, or a step <= :data:`CRAWL` from an iterate with
    gaps: :meth:`_rollout_search`; False: the linear trials alone, as before; on an
    empty Numba cache its first use compiles FDDP's trial kernels where no FDDP-family
    solver or restoration compiled them: 21.7 s wall on kinova, once per install).
    ``infeasible_after`` 5:
    status "infeasible" when that many SQP iterations in a row end their QP above
    its primal tolerance with no decrease of the violation, or :data:`CERTIFIED_AFTER`
    in a row end their QP certified infeasible; ``eps_prim_inf`` 1e-4 (OSQP's default):
    the tolerance of ADMM's primal-infeasibility certificate
    (:meth:`_certified_infeasible`; 0: no certificate, the QP runs its ``max_qp_iter``).
    ``restoration`` "proxddp" (default), "alddp" or None: the augmented-Lagrangian
    solver that runs, once per solve, where the SQP would stop at an infeasible iterate
    (those "infeasible" tests, or a line search that refuses every trial) or accepts the
    smallest of ``alphas`` :data:`RESTORE_CRAWL` times in a row, for the iterations
    ``max_iter`` leaves (counted in the result's ``iterations``; none runs where no
    iteration is left: an MPC step with ``max_iter`` 1 whose QP or line search stalls
    ends as without the restoration) and the time ``time_limit`` leaves; the SQP goes on
    from its point where it ends feasible (or, without a certified QP, less infeasible
    than the iterate), the solve ends with the triggering status where it does not; the
    restoration ends early once its own line search crawls (:meth:`_restore`,
    :data:`RESTORE_PROGRESS`) or, after a certificate, its infeasibility stalls
    (:data:`RESTORE_STALL`: ur5 "unreachable" ends "infeasible" after 95 iterations, not
    500; None: the SQP alone, as before; ProxDDP's 23 / 244 iterations
    against ALDDP's 24 / 314 on the module docstring's two tasks, glob25's and rev26's
    runs).  The first restoration in a process compiles the AL solver's kernels where
    no AL solver ran before (about 3 s on an empty Numba cache): an MPC loop with a time
    budget should solve once before it starts.
    ``solve`` accepts the
    multipliers of a previous result (``result.multipliers``, one (K, nr) array per
    block in the order of :attr:`blocks`, as ALDDP's).
    """

    def __init__(self, problem, th_stop=1e-6, th_constraint=1e-8, th_gaps=1e-9,
                 max_qp_iter=1000, eps_abs=1e-6, eps_rel=1e-6, rho_init=0.1, rho_min=1e-6,
                 rho_max=1e6, sigma=1e-6, alpha=1.6, rho_interval=25, polish=True, big=1e5,
                 polish_iter=50, polish_rounds=4, c1=1e-4, alphas=None, infeasible_after=5,
                 active_set_rounds=None, polish_sigma=1e-8, warm_line_search=True,
                 th_decrease=1e-9, eps_prim_inf=1e-4, restoration="proxddp",
                 filter_fallback=True, rollout_fallback=True):
        # every numeric option through options' checkers, a ValueError naming it (rs35:
        # eps_rel, rho_min, rho_max and c1 took NaN or a string, max_qp_iter,
        # rho_interval, polish_iter and infeasible_after 0 or -1: rho_interval is the
        # length of ADMM's chunks in _solve_qp, infeasible_after 0 sent every solve to
        # the restoration at its first QP)
        th_stop, th_constraint, th_gaps, eps_abs, rho_init, sigma, big, polish_sigma, \
            th_decrease = (_number(value, name, 0.0, low_open=True) for name, value in (
                ("th_stop", th_stop), ("th_constraint", th_constraint), ("th_gaps", th_gaps),
                ("eps_abs", eps_abs), ("rho_init", rho_init), ("sigma", sigma), ("big", big),
                ("polish_sigma", polish_sigma), ("th_decrease", th_decrease)))
        eps_rel = _number(eps_rel, "eps_rel", 0.0)
        rho_min = _number(rho_min, "rho_min", 0.0, low_open=True)
        rho_max = _number(rho_max, "rho_max", rho_min)
        alpha = _number(alpha, "alpha", 0.0, low_open=True)
        if alpha >= 2.0:
            raise ValueError(f"alpha = {alpha!r}: expected a value in (0, 2)")
        # Armijo's constant, usually in (0, 1) (Nocedal & Wright, Sec. 3.1); larger values
        # refuse every step, which tests use to force the fallbacks (c1 1e3)
        c1 = _number(c1, "c1", 0.0, low_open=True)
        eps_prim_inf = _number(eps_prim_inf, "eps_prim_inf", 0.0)
        max_qp_iter = _integer(max_qp_iter, "max_qp_iter", 1)
        rho_interval = _integer(rho_interval, "rho_interval", 1)
        polish_iter = _integer(polish_iter, "polish_iter", 0)
        polish_rounds = _integer(polish_rounds, "polish_rounds", 0)
        infeasible_after = _integer(infeasible_after, "infeasible_after", 1)
        if active_set_rounds is not None:
            active_set_rounds = _integer(active_set_rounds, "active_set_rounds", 0)
        self.restoration = _checked_restoration(restoration)
        self.filter_fallback = bool(filter_fallback)
        self.rollout_fallback = bool(rollout_fallback)
        # the rollout fallback's trials and their (unused) control bounds, built at its
        # first use
        self._forward = self._no_bounds = None
        self._restorer = None       # the restoration's solver, built at its first run
        self.restored = None        # the last solve's restoration result (None: none ran)
        self.problem = problem
        self.th_stop, self.th_constraint, self.th_gaps = th_stop, th_constraint, th_gaps
        self.th_decrease = th_decrease
        self.max_qp_iter, self.eps = int(max_qp_iter), np.array([eps_abs, eps_rel])
        self.rho_init, self.rho_min, self.rho_max = rho_init, rho_min, rho_max
        self.sigma, self.alpha, self.rho_interval = sigma, alpha, int(rho_interval)
        self.polish, self.big, self.polish_iter = bool(polish), big, int(polish_iter)
        if active_set_rounds is None:
            active_set_rounds = max(30, problem.N)
        self.polish_rounds, self.active_set_rounds = int(polish_rounds), int(active_set_rounds)
        self.polish_sigma = polish_sigma
        self.c1, self.infeasible_after = c1, int(infeasible_after)
        self.eps_prim_inf = float(eps_prim_inf)
        self._certified = False     # the last QP's ADMM certified it infeasible
        self.warm_line_search = bool(warm_line_search)
        self.alphas = [2.0 ** -i for i in range(10)] if alphas is None else \
            check_alphas(alphas).tolist()
        self.multipliers = None
        self._factorizations = self._sweeps = 0     # of the QP being solved
        self._fresh = False
        self._y_max = 0.0           # max |y| of the last QP's accepted multipliers
        self._lam_max = 0.0         # max |lam| of its costates (:func:`_costates_max`)
        self._tight_eps = POLISH_EPS
        self._failed_starts = set()     # the active sets polished at this QP's rho checks
        self.blocks = constraint_blocks(problem)
        self.constraints = HorizonConstraints(problem)
        shapes = [b.shape for b in self.blocks]
        # per row: y (multipliers), z (ADMM's copy of v in [l, h]), rho; and polishing's
        self.y, self.z, self.rho = ([np.zeros(s) for s in shapes] for _ in range(3))
        self.equality = [np.broadcast_to(b.lower == b.upper, s) for b, s in
                         zip(self.blocks, shapes)]
        self.items = self._items(self.y, self.z, self.rho)
        self.typed_blocks = typed_list(self.items)
        # the rows at knot 0 x0 alone may fix (:func:`_fixed_row_violation`): state bounds
        # and residuals that do not use u (one whose Ru is zero at the start's u only, a
        # custom |u|^2 >= c at u = 0, is not fixed: review)
        fixed = [item for item, block in zip(self.items, self.blocks)
                 if block.start == 0 and not block.uses_control]
        self._fixed_blocks = typed_list(fixed) if fixed else None
        self._polished = [np.zeros(s) for s in shapes for _ in range(3)]
        # the active set's key (:meth:`_active_set`), one entry per polishing row
        self._key = np.empty(sum(int(np.prod(s)) for s in shapes))
        # the damped rounds' iterate (v, y) of every polishing row and their work rows
        # (:func:`_damped_round`)
        self._iterate = np.empty((4, self._key.size))
        self._curvature = np.empty(self._key.size)
        # the same rows (their r, R arrays) with polishing's y, z, rho (it runs only with
        # rows)
        self.typed_polished = None
        if self.blocks:
            self.typed_polished = typed_list([
                item[:5] + (y, z, rho) + item[8:] for item, y, z, rho in zip(
                    self.items, self._polished[0::3], self._polished[1::3],
                    self._polished[2::3])])
        # ADMM's last dy = y^k - y^{k-1} in the rows' tuples (:meth:`_certified_infeasible`)
        self._dy = [np.zeros(s) for s in shapes]
        self.typed_dy = None
        if self.blocks:
            self.typed_dy = typed_list([item[:5] + (dy,) + item[6:] for item, dy in
                                        zip(self.items, self._dy)])
        N, ndx, nu = problem.N, problem.ndx, problem.nu
        self._certificate_work = (np.zeros((N + 1, ndx)), np.zeros((N + 1, ndx)),
                                  np.zeros((N, nu)))
        self.gaps = np.zeros((N + 1, ndx))
        self._iterate_gaps = np.zeros((N + 1, ndx))
        self.H = (np.zeros((N + 1, ndx, ndx)), np.zeros((N, nu, nu)), np.zeros((N, ndx, nu)),
                  np.zeros((N + 1, ndx)), np.zeros((N, nu)))
        self.Vx, self.Vxx = np.zeros((N + 1, ndx)), np.zeros((N + 1, ndx, ndx))
        self.Vf = np.zeros((N + 1, ndx))
        self.Qu, self.Quu, self.Quuk = np.zeros((N, nu)), np.zeros((N, nu, nu)), np.zeros((N, nu))
        self.k, self.K, self.Lq = np.zeros((N, nu)), np.zeros((N, nu, ndx)), np.zeros((N, nu, nu))
        self.dx, self.du = np.zeros((N + 1, ndx)), np.zeros((N, nu))
        self.work = (np.zeros((N + 1, ndx)), np.zeros((N, nu)), self.Vx, self.k,
                     np.zeros((N + 1, ndx)), np.zeros((N, nu)), self.dx, self.du,
                     np.zeros((N + 1, ndx)), np.zeros((N, nu)))
        self.polish_work = self.work[:6] + (np.zeros((N + 1, ndx)), np.zeros((N, nu))) + \
            self.work[8:]
        self.lam = np.zeros((N + 1, ndx))
        # ADMM's factorization (Vxx, K, Lq, Vf) kept across a polish at its rho checks
        self._admm_factor = (np.zeros((N + 1, ndx, ndx)), np.zeros((N, nu, ndx)),
                             np.zeros((N, nu, nu)), np.zeros((N + 1, ndx)))
        self._all_knots = np.ones(N + 1, dtype=bool)
        self._changed_knots = np.zeros(N + 1, dtype=bool)
        self._factor_arrays = (self.Vx, self.Vxx, self.Qu, self.Quu, self.k, self.K,
                               self.Quuk, self.Lq, self.Vf)
        self.zeros = (np.zeros((N + 1, ndx)), np.zeros((N, nu)))
        # the line search's trial points: two buffers each, the accepted one becomes the
        # iterate and the next iteration's trials go to the other (:meth:`_trial`)
        self.x_trials = (np.zeros((N + 1, problem.nx)), np.zeros((N + 1, problem.nx)))
        self.u_trials = (np.zeros((N, nu)), np.zeros((N, nu)))
        self._abs_gaps = np.zeros((N + 1, ndx))
        self._trial_work = (np.zeros(ndx), (np.empty(4), np.empty(4), np.empty(3)))
        self._multibody = isinstance(problem.state, StateMultibody)
        self._sparse = SPARSE_KINDS.copy()
        self._sparse[3] = self._multibody      # dx = (dq, dv): the first half configuration
        # the trials evaluated without problem.calc's input checks (:meth:`_evaluate`)
        self._unchecked = bool(np.all(problem.nus == nu))
        # the active-set rounds' arrays held (:func:`_round_factorize`); None without rows
        self._rounds = held(self._round_tuple()) if self.blocks else None

    def _items(self, y, z, rho):
        """The rows' tuples (those of ALDDP's blocks, with y, z, rho in the multiplier
        slots); an empty control block stands in for none."""
        blocks = self.blocks or [_Block("u", 0, 0, np.zeros(0), np.zeros(0), "none")]
        arrays = zip(y, z, rho) if self.blocks else [(np.zeros((0, 0)),) * 3]
        return [b.item(*a, self.constraints.sources) for b, a in zip(blocks, arrays)]

    # -- the QP ------------------------------------------------------------------------
    def _factorize(self, blocks):
        """Riccati factorization of the LQ with the rows' rho R^T R and the ``sigma``
        option's sigma I at every knot, its linear terms L's gradient (ADMM's; the
        active-set rounds in :meth:`_polish`).  Whether Quu is
        positive definite at every knot."""
        problem = self.problem
        self._factorizations += 1
        _hessian(blocks, (problem.Lxx, problem.Luu, problem.Lxu), self.H, problem.N,
                 self._all_knots)
        Hxx, Huu, Hxu, _, _ = self.H
        return backward_range_kept(problem.Fx, problem.Fu, problem.Lx, problem.Lu, Hxx, Huu,
                                   Hxu, self.gaps, self.sigma, problem.nus, *self._factor_arrays,
                                   problem.N, problem.euler_structure) < 0

    def _round_tuple(self):
        """The arrays of :meth:`_polish`'s rounds, as :func:`_round_factorize` reads them
        (the problem's and this solver's: allocated once, written in place)."""
        problem = self.problem
        return (self.typed_blocks, self.typed_polished,
                (problem.Lxx, problem.Luu, problem.Lxu), self.H, problem.Lx, problem.Lu,
                self.polish_work, (problem.Fx, problem.Fu), problem.nus,
                (self.Vxx, self.K, self.Lq, self.Vf), self._factor_arrays, self.gaps,
                self._qp_arrays(), self._key, (self.dx, self.du))

    def _qp_arrays(self):
        problem = self.problem
        return ((problem.Fx, problem.Fu), self.gaps, problem.nus,
                (self.Vxx, self.K, self.Lq, self.Vf),
                problem.Lx, problem.Lu)

    def _solve_qp(self):
        """The QP from w = 0: first the primal-dual active-set method (:meth:`_polish`
        with up to ``active_set_rounds`` corrections) from the last QP's active set (at
        the first QP: the rows at or past a bound at the iterate, and the equalities);
        when it cycles or fails, ADMM with polishing.  Right after a QP certified
        infeasible (:meth:`_certified_infeasible`), ADMM after ``polish_rounds``
        active-set solves.  Returns (ADMM
        iterations, primal residual, whether it met its tolerance, polished)."""
        self.dx[:] = 0.0
        self.du[:] = 0.0
        self._handed_back = False   # K, k are this QP's from here on
        arrays, total, solved, prim = self._qp_arrays(), 0, False, np.inf
        self._failed_starts = set()
        # right after a QP certified infeasible the next one gets only polish_rounds
        # active-set solves before ADMM: the linearization moved by one step, and on a QP
        # without a solution the method runs all its active_set_rounds solves before
        # ADMM certifies it (double_pendulum "swingup", benchmarks/constrained.py
        # untuned3: 100 solves, 101 factorizations per QP; rob21); a QP that is feasible
        # again is most often solved in those few rounds, not left to ADMM from the
        # certified QP's diverging multipliers, whose second certificate would end a
        # feasible solve (rev21)
        after_certified, self._certified = self._certified, False
        rounds = self.polish_rounds if after_certified else self.active_set_rounds
        if self.polish and self.blocks and self._polish(rounds):
            return 0, 0.0, True, True
        self.dx[:] = 0.0
        self.du[:] = 0.0
        if not self._factorize(self.typed_blocks):
            return -1, np.inf, False, False
        # OSQP's infeasibility test at each rho check (rows to certify with)
        check = self.eps_prim_inf > 0.0 and bool(self.blocks)
        # without rows the QP is the LQ itself: its first iterate from w = 0 is the
        # solution (with sigma's proximal term), which the relaxation would overshoot by
        # alpha (a full SQP step then left 1 - alpha = -0.6 of each gap: linear
        # convergence on a problem FDDP solves in two iterations)
        alpha = self.alpha if self.blocks else 1.0
        while total < self.max_qp_iter:
            count = min(self.rho_interval, self.max_qp_iter - total)
            # the chunk's last iteration apart, its y^{k-1} kept (the same iterates)
            done, prim, dual, prim_scale, dual_scale = _admm(
                self.typed_blocks, arrays, self.work, self.sigma, alpha, True,
                count - 1 if check else count, self.eps, False)
            if check and done == count - 1 and not (
                    prim <= self.eps[0] + self.eps[1] * prim_scale and
                    dual <= self.eps[0] + self.eps[1] * dual_scale):     # (not converged)
                for dy, y in zip(self._dy, self.y):
                    dy[:] = y
                done, prim, dual, prim_scale, dual_scale = _admm(
                    self.typed_blocks, arrays, self.work, self.sigma, alpha, True, 1,
                    self.eps, False)
                for dy, y in zip(self._dy, self.y):
                    np.subtract(y, dy, out=dy)          # dy = y^k - y^{k-1} (review)
                done += count - 1
            total += done
            self._sweeps += done
            # solved, also where the chunk's last iteration met the tolerance (OSQP tests
            # convergence before infeasibility: a solved QP's dy is noise)
            if done < count or (prim <= self.eps[0] + self.eps[1] * prim_scale and
                                dual <= self.eps[0] + self.eps[1] * dual_scale):
                solved = True
                break
            if check and self._certified_infeasible(self.gaps):
                self._certified = True          # ADMM ends at once (no polish)
                return total, prim, False, False
            # the exact solution on ADMM's active set, tried at every rho check: once
            # the active set is right ADMM need not reach its tolerance
            if self.polish and self.blocks:
                factor = arrays[3]
                for kept, now in zip(self._admm_factor, factor):
                    kept[:] = now
                kept = self._polish(self.polish_rounds, skip_failed=True)
                if kept:
                    return total, 0.0, True, True
                # ADMM's factorization back where polishing wrote its own (None: its
                # factors untouched): copied, not recomputed (the same Hessian and rows:
                # the same bits; one factorization less per failed polish)
                if kept is not None:
                    for now, kept in zip(factor, self._admm_factor):
                        now[:] = kept
            ratio = np.sqrt((prim / max(prim_scale, 1e-12)) / max(dual / max(dual_scale, 1e-12),
                                                                  1e-300))
            rho = np.clip(self.rho_now * ratio, self.rho_min, self.rho_max)
            if not 0.2 <= rho / self.rho_now <= 5.0:
                for rho_rows in self.rho:
                    rho_rows *= rho / self.rho_now
                self.rho_now = rho
                if not self._factorize(self.typed_blocks):
                    return total, np.inf, False, False
        polished = self.polish and self.blocks and bool(self._polish(self.polish_rounds,
                                                                     skip_failed=True))
        return total, prim, solved, polished

    def _certified_infeasible(self, gaps):
        """Whether ADMM's last dy = y^k - y^{k-1} (in :attr:`typed_dy`) certifies the QP
        with the gaps ``gaps`` infeasible (OSQP, Sec. 3.4: on an infeasible QP y^k
        diverges and dy converges to a Farkas certificate).

        OSQP's QP is min 1/2 w^T P w + q^T w s.t. l <= A w <= u; its primal-infeasibility
        test asks ||A^T dy|| <= eps_prim_inf ||dy|| and u^T max(dy, 0) + l^T min(dy, 0)
        < -eps_prim_inf ||dy|| (infinity norms).  Here A stacks the dynamics rows D w = f
        (dx_0 = f_0, dx_{t+1} - Fx_t dx_t - Fu_t du_t = f_{t+1}, equalities l = u = f)
        and the constraint rows l - r <= R w <= h - r (:func:`_certificate_rows`).  The
        Riccati sweep eliminates the dynamics, so ADMM has no iterate of their
        multipliers mu: take the mu that zeroes the dx part of A^T (mu, dy) exactly.
        With lam = -mu that part reads, for t = N .. 0,

            lam_N = Rx_N^T dy_N,   lam_t = Fx_t^T lam_{t+1} + Rx_t^T dy_t,

        the adjoint sweep of :func:`_stationarity` with the cost left out (L = 0), and
        the du part left is its control gradient Fu_t^T lam_{t+1} + Ru_t^T dy_t: the
        test's ||A^T dy|| is that sweep's stationarity.  The dynamics rows' support is
        f^T mu = -sum_t f_t^T lam_t (equalities: u = l = f).  A pair (mu, dy) that meets
        both tests with eps_prim_inf = 0 is Farkas' certificate: any feasible w would
        give 0 = (A^T (mu, dy))^T w = mu^T D w + dy^T R w <= the support < 0."""
        lam, ax, au = self._certificate_work
        largest, support = _certificate_rows(self.typed_dy)
        if not largest > 0.0:
            return False
        problem = self.problem
        residual = _stationarity(self.typed_dy, (problem.Fx, problem.Fu),
                                 self.zeros + (problem.Lxx, problem.Luu, problem.Lxu),
                                 *self.zeros, lam, ax, au, False)[0]
        support -= float(np.vdot(gaps, lam))
        return support < -self.eps_prim_inf * largest and \
            residual <= self.eps_prim_inf * largest

    def _polish(self, rounds, skip_failed=False):
        """The primal-dual active-set method (Hintermueller, Ito & Kunisch, SIAM J. Optim.
        13(3) 2002; OSQP's polishing, Sec. 4.3, is its first round) on
        Riccati sweeps, from the active set of (y, z): solve the equality-constrained LQ
        on the active rows (:func:`_admm` without projection: the method of multipliers,
        one factorization and a few sweeps), then make active the inactive rows the
        step pushes past a bound and inactive the active rows whose multiplier has the
        wrong sign (:func:`_polish_fix`; their update, which for a bound row is the
        semismooth Newton step on min(y, c (h - v))), and repeat, up to ``rounds``
        solves.  A round whose active set will change needs the multipliers' signs
        only: its method of multipliers stops at the loose tolerance; the step is
        accepted after a solve to the tight one.  True when kept (the QP's solution in
        (dx, du), its multipliers in y).  With ``skip_failed`` (ADMM's rho checks) None
        at once, nothing solved, when the starting active set is one that already failed
        at a check of this QP: the
        same rows, the same rounds (an infeasible QP's ADMM keeps its active set for
        its 1000 iterations: ur5 "infeasible", 41 polishes of ~100 sweeps each, 190 ms
        per SQP iteration).  After more than :data:`STALL_ROUNDS` rounds in a row that
        change no fewer rows than the fewest so far, an active row leaves only at an
        end of its arc (:func:`_polish_fix`'s ``peel``); a round that peeling leaves
        unchanged takes the full rule (a step is kept only with every sign right).  At
        an active set this call already solved (a cycle) the rounds go on as a damped
        semismooth Newton method (:func:`_damped_round`: a line search on the natural
        residual of the KKT conditions, each row scaled by its curvature,
        :func:`_row_curvatures`); where its line search fails, False (ADMM).  A damped
        round whose active rows contradict each other takes the plain rule's round
        (:func:`_polish_fix`) and restarts the damped iterate; False where that changes
        nothing.  The multipliers' signs are tested exactly (a step is kept only with
        every sign right within POLISH_TOLERANCE)."""
        problem, work, held_rounds = self.problem, self.polish_work, self._rounds
        pdx, pdu = work[6], work[7]
        # the polishing rows, their active set's key and the polishing step from (dx, du)
        _polish_start(held_rounds, self.big, max(self.eps[0], 1e-9), self._fresh,
                      self._sparse, problem.ndx)
        self._fresh = False
        start = self._active_set(keyed=True)
        if skip_failed:
            if start in self._failed_starts:
                return None
            self._failed_starts.add(start)
        visited = {start}
        polished, sigma, N = self.typed_polished, self.polish_sigma, problem.N
        euler, arrays = problem.euler_structure, self._qp_arrays()
        t_end, knots, changed = N, self._all_knots, self._changed_knots
        # more than STALL_ROUNDS rounds in a row that change no fewer rows than the
        # fewest so far: the rounds cycle (HIK's method converges on an M-matrix only;
        # ur5 "barely" from the guess, QPs 4 and 5: cycles of 11 and 7 active sets) or
        # wander (bolt's friction pyramids: 30 distinct active sets), to the last round
        # and then ADMM.  From there on an active row leaves only at an end of its arc
        # (:func:`_polish_fix`'s ``peel``)
        peel, fewest, stalled, damped = False, 1 << 62, 0, False
        done_rounds, previous, contradicted = 0, np.inf, 0
        while done_rounds < rounds:
            done_rounds += 1
            # the factorization's linear terms are the gradient of the method of
            # multipliers' first iteration, so that its Vx and k are that iteration's
            # sweep (``swept``; the knots from t_end on swept on the kept factorization)
            self._factorizations += 1
            if _round_factorize(held_rounds, t_end, knots, sigma, euler) >= 0:
                return False
            changed[:] = False
            tight = self._tight_eps
            if not damped:
                # the round's solves and correction in one call (the Python branch below
                # is the damped rounds')
                changes, last, sweeps, done, prim, dual, prim_scale, dual_scale = \
                    _plain_round(held_rounds, sigma, self.polish_iter, POLISH_LOOSE_EPS,
                                 tight, self.big, POLISH_TOLERANCE, self._sparse, changed,
                                 peel)
                self._sweeps += sweeps
            else:
                # a damped round reads the multipliers' values, not only their signs: no
                # loose pass (the multipliers move by up to big x the residual per sweep)
                done, prim, dual, prim_scale, dual_scale = _admm(
                    polished, arrays, work, sigma, 1.0, False, self.polish_iter, tight, True)
                self._sweeps += done
                # active rows that contradict each other leave the method of multipliers
                # short of them: its penalized step still tells which rows to change
                if done >= self.polish_iter and \
                        prim > POLISH_LOOSE_EPS[0] + POLISH_LOOSE_EPS[1] * prim_scale:
                    # the damped rounds' merit needs each solve's exact multipliers.  Active
                    # rows that contradict each other (the method of multipliers short of
                    # them: redundant rows on one quantity, a residual bound and a control
                    # bound on the same u, each made active by the natural residual at its
                    # own bound) take the plain rule's round on the penalized step, which
                    # drops the row whose multiplier it turns wrong, and the damped iterate
                    # starts afresh from the next solve; ADMM only where that changes
                    # nothing (review rev32: a forced switch to damped rounds on the LQ
                    # problem with both rows went to ADMM, 217 iterations, on a feasible QP)
                    changes, last = _polish_fix(polished, pdx, pdu, self.big,
                                                POLISH_TOLERANCE, self._sparse, changed, False)
                    self._iterate[0, 0] = np.nan
                    if changes == 0:
                        return False
                else:
                    changes, last, _ = _damped_round(
                        polished, pdx, pdu, self._iterate, self._curvature, self.big,
                        POLISH_TOLERANCE, DAMPED_C1, DAMPED_SMALLEST, changed)
                    if changes < 0:
                        return False
            # active rows that contradict each other in rounds without progress (changing
            # no fewer rows than the fewest so far): the QP most likely has no solution,
            # which ADMM certifies (CONTRADICTED_ROUNDS)
            if changes >= fewest and done >= self.polish_iter and \
                    prim > POLISH_LOOSE_EPS[0] + POLISH_LOOSE_EPS[1] * prim_scale:
                contradicted += 1
                if contradicted > CONTRADICTED_ROUNDS:
                    return False
            # the rows of knots after the last change are those of this factorization,
            # and below it those of unmarked knots
            t_end, knots = min(last + 1, N), changed
            if not peel and not damped and changes > 0:
                fewest, stalled = min(fewest, changes), 0 if changes < fewest else stalled + 1
                peel = stalled > STALL_ROUNDS
            # from ADMM's active set (``skip_failed``) one round more while each round
            # changes fewer rows than the one before, up to ``active_set_rounds``: ADMM's
            # guess is near the QP's active set and the rounds converge there (bolt, the
            # QP where the pyramids become active: 38, 19, 8, 2 changes in the 4 rounds
            # of ``polish_rounds``, the fifth solves it; each failed polish restarted
            # from ADMM's next active set and did the same rounds again)
            if skip_failed and done_rounds == rounds and changes < previous and \
                    rounds < self.active_set_rounds:
                rounds += 1
            previous = changes
            if changes == 0:
                if prim > POLISH_TOLERANCE * max(1.0, prim_scale):
                    return False
                # the rows' (y, z) and (dx, du) from the step; the QP's own costates (the
                # solve loop's nu): no adjoint sweep
                self._y_max, self._lam_max = _polish_end(held_rounds)
                return True
            # an active set this call already solved: the rounds cycle (ur5 "barely",
            # untuned3, from the guess: QPs 4 and 5 went round a cycle of 11 and 8 active
            # sets until their 30 solves ran out, then ADMM; qp23 gave up at the repeat,
            # then ADMM: 225 iterations and 8 failed polishes in QP 4).  The rounds go on
            # damped (:func:`_damped_round`) from the next solve on, within ``rounds``;
            # ADMM where the damped line search fails
            if damped:
                continue
            active = self._active_set(keyed=True)
            if active in visited:
                damped = True
                self._iterate[0, 0] = np.nan
                _row_curvatures(polished, problem.Lxx, problem.Luu, problem.Lxu, sigma,
                                self._curvature)
                continue
            visited.add(active)
        return False

    def _active_set(self, keyed=False):
        """The polishing rows' active set as bytes: each active row's bound, inf on the
        inactive rows (:func:`_active_key`, one buffer for all blocks; ``keyed``: the
        buffer already written, by :func:`_polish_start` or :func:`_plain_round`)."""
        if not keyed:
            _active_key(self.typed_polished, self._key)
        return self._key.tobytes()

    # -- the SQP loop ------------------------------------------------------------------
    def _initial_guess(self, xs, us):
        problem = self.problem
        if xs is None:
            xs = np.repeat(problem.x0[None], problem.N + 1, axis=0)
        if us is None:
            us = problem.quasi_static(xs)
        xs, us = problem._validate(xs, us)
        xs, us = np.array(xs, dtype=float, order="C"), np.array(us, dtype=float, order="C")
        self._project_start(xs, us)
        return xs, us

    def _project_start(self, xs, us):
        """The start projected onto the box bounds, in place: each control onto its
        control bounds, each bounded state coordinate (where x (+) dx adds) onto its
        state bounds, as IPOPT projects its start into the variables' bounds (Waechter &
        Biegler, Math. Prog. 106, 2006, Sec. 3.6).  A box row is linear in (x, u): the
        projection reaches it exactly, where the first QP's step would reach it through
        the dynamics linearized at the unprojected start.  Measured on panda "torque"
        (the quasi-static guess at 22 N m against 12 N m bounds): that first full step
        left gaps of 3.4 and the iterates in a worse local optimum (0.2271809); from the
        projected start (gaps where the projection moved a control) CSQP ends at
        0.1342558, ALDDP's and IPOPT's (module docstring).  A start inside its bounds
        is unchanged."""
        for block in self.blocks:
            rows = slice(block.start, block.stop)
            if block.kind == "u":
                us[rows, :block.m] = np.clip(us[rows, :block.m], block.lower, block.upper)
            elif block.kind == "x":
                xs[rows, block.x_index] = np.clip(xs[rows, block.x_index], block.lower,
                                                  block.upper)

    def _start_rows(self, multipliers):
        """y from ``multipliers`` (or zeros), rho_init on the rows (1e3 rho_init on
        equalities)."""
        if multipliers is None:
            multipliers = [np.zeros(b.shape) for b in self.blocks]
        multipliers = list(multipliers)
        if len(multipliers) != len(self.blocks):
            raise ValueError(f"multipliers: expected {len(self.blocks)} arrays (one per "
                             f"constraint block), got {len(multipliers)}")
        for b, y, rho, equality, start in zip(self.blocks, self.y, self.rho, self.equality,
                                              multipliers):
            start = np.array(start, dtype=float)
            if start.shape != b.shape or not np.all(np.isfinite(start)):
                raise ValueError(f"multipliers of {b.name} (knots {b.start}:{b.stop}): expected "
                                 f"finite values of shape {b.shape}, got {start.shape}")
            y[:] = start
            rho[:] = np.where(equality, 1e3 * self.rho_init, self.rho_init)
        self.rho_now = self.rho_init

    def _start_z(self):
        """z = v clipped to [l, h] at the iterate (its rows evaluated), from the rows'
        tuples (from Python, a typed List's getitem compiles in every process)."""
        for item, z in zip(self.items, self.z):
            kind, r, lower, upper, index = item[0], item[2], item[8], item[9], item[10]
            values = r[:, index] if kind == 0 else r
            z[:] = np.clip(values, lower, upper)

    def _evaluate(self, xs, us, mode, unchecked=False, trial=None):
        """(cost, largest gap, sum |gaps|, largest violation, sum of violations) at (xs,
        us); with DIFF the derivatives and the rows' Jacobians too.  ``unchecked``: a
        CALC of this solver's own trial point (finite, no control padding) by
        ``problem.calc`` without its input checks (14 us of a 0.3 ms trial on panda).
        ``trial``: with DIFF at the line search's accepted trial point, the values of its
        CALC, the last evaluation (the gaps, the bound rows' values and the violations
        are those of the same point: ``calc_diff`` writes the same xnext and the rows the
        same values as ``calc``, to the bit): only the derivatives are evaluated."""
        problem = self.problem
        if mode == DIFF:
            cost = problem.calc_diff(xs, us, validate=False)
        else:
            cost = problem.calc(xs, us, validate=not unchecked)
        self.constraints.evaluate(xs, us, mode)
        if trial is not None:
            return (cost,) + trial[1:]
        gaps = problem.gaps(xs, self.gaps)
        largest, total = _residuals(self.typed_blocks, xs, us)
        magnitudes = np.abs(gaps, out=self._abs_gaps)
        return cost, float(magnitudes.max()), float(magnitudes.sum()), largest, total

    def _trial(self, xs, us, step, slot):
        """(x_try, u_try, their :meth:`_evaluate` values at CALC) for x_try = xs (+) step
        dx, u_try = us + step du, in the trial buffers ``slot`` (0 or 1, not those of
        (xs, us)): the values of ``problem.state.integrate`` and ``problem.calc`` to the
        bit, with fewer Python calls and no allocation (issue 19: the stiff tasks take
        2.3-2.6 trials per iteration).  The step (dx, du) finite (:meth:`solve`)."""
        problem = self.problem
        x_try, u_try = self.x_trials[slot], self.u_trials[slot]
        if self._multibody:
            w, scratch = self._trial_work
            _trial_point(model_ref(problem.state.model), xs, us, self.dx, self.du, step,
                         x_try, u_try, w, scratch)
        else:
            x_try[:] = problem.state.integrate(xs, step * self.dx)
            np.add(us, step * self.du, out=u_try)
        return x_try, u_try, self._evaluate(x_try, u_try, CALC, self._unchecked)

    def solve(self, xs=None, us=None, multipliers=None, max_iter=100, time_limit=None,
              verbose=False, callbacks=()):
        """Solve from the warm start (xs, us) (default: x0 everywhere and the quasi-static
        controls; projected onto the control and state bounds: :meth:`_project_start`),
        gaps allowed, and the rows' multipliers of a previous result.  Returns
        a :class:`~.alddp.ConstrainedResult` (its ``mu``: the last rho); never raises
        from inside a kernel.  The problem's costs and xnext hold the last point evaluated
        (the returned iterate, or, when the line search accepted no step, its last
        refused trial point); its derivatives, the returned iterate's.

        ``time_limit`` (seconds of wall clock, None: none) is read from the solve's entry
        and tested after each iteration (and the restoration's, each of its iterations):
        the solve ends "time_limit" after the iteration in which it passed, so at least
        one iteration runs and a solve may overrun by one iteration.  The clock covers
        the first call's loading or compiling of the kernels too: the first solve in a
        process (kernels from the Numba cache) took 5.7 s with ``time_limit=0.01`` on ur5
        "torque" (100 knots), ending "time_limit" after 1 iteration, the next ones 0.020 s
        (rs35); on an empty cache, minutes.  A real-time caller solves once before it
        relies on the limit."""
        problem = self.problem
        start_time = time.perf_counter()
        max_iter, time_limit = check_solve_arguments(max_iter, time_limit)
        # the option is read at each restoration: a value set after construction is
        # checked here, not as a KeyError mid-solve (review rev26)
        _checked_restoration(self.restoration)
        xs, us = self._initial_guess(xs, us)
        self._start_rows(multipliers)
        callbacks = list(callbacks) + ([CallbackVerbose()] if verbose else [])
        history = {key: [] for key in _HISTORY_KEYS}
        status, converged, iteration, nu = "max_iter", False, 0, 0.0
        stop, cost, stuck, last_violation = np.inf, np.nan, 0, np.inf
        certified = 0               # consecutive QPs certified infeasible
        F = (problem.Fx, problem.Fu)
        L = (problem.Lx, problem.Lu, problem.Lxx, problem.Luu, problem.Lxu)
        ax, au = self.polish_work[8], self.polish_work[9]
        evaluated = True            # (cost, gap, violation) those of (xs, us)
        slot = 0                    # the trial buffers the line search writes
        # the restoration's turn (:meth:`_restore`): None, "stopped" (the SQP would stop
        # at an infeasible iterate: it stops if the restoration fails) or "crawling";
        # ``beaten`` the infeasibility its point must be below to be handed back
        # unconverged (0: only a feasible one, after a QP certified infeasible)
        restore, crawled, since, beaten = None, 0, 0, 0.0
        filter_ = None              # the fallback's :class:`_Filter`, one per start
        rolling = False             # the last accepted steps: the rollout's, then crawls
        self.restored = None
        self._handed_back = False
        try:
            cost, gap, gap_sum, violation, violation_sum = self._evaluate(xs, us, DIFF)
        except KERNEL_ERRORS as error:
            return self._result(xs, us, np.nan, 0, False, "the dynamics failed at the "
                                f"start ({type(error).__name__})", np.inf, history)
        # the values only (a NaN derivative fails the first QP, which names it): the
        # derivatives' scan costs 16-61 us a call on untuned4's tasks (0.7 % of a1 "trot")
        if not (math.isfinite(cost) and math.isfinite(violation_sum)):
            return self._result(xs, us, cost, 0, False, f"{NOT_FINITE} at the start",
                                np.inf, history, (gap, violation))
        self._start_z()
        self._fresh = True
        self._certified = False     # no QP of this solve certified yet
        if self._fixed_blocks is not None and _fixed_row_violation(
                self._fixed_blocks, self.gaps[0]) > self.th_constraint:
            # x_0 = x0 violates rows it alone determines: no (xs, us) satisfies them
            return self._result(xs, us, cost, 0, False, "infeasible", np.inf, history,
                                (gap, violation))
        while True:
            out_of_time = False
            if restore is not None and (iteration >= max_iter or (
                    time_limit is not None and time.perf_counter() - start_time > time_limit)):
                # no iteration or no time left for a restoration (max_iter bounds the
                # SQP's and the restoration's iterations together): a stalled SQP stops
                # with its own status, a crawling one goes on to the stopping tests
                # (review rev26: the restoration ran one iteration past the time limit)
                if restore == "stopped":
                    break
                out_of_time = iteration < max_iter
                restore, crawled = None, 0
            if restore is not None:
                restored = self._restore(xs, us, max_iter - iteration, time_limit, start_time,
                                         beaten, max(gap, violation), verbose)
                # the restoration's iterations are the solve's too (review rev25)
                iteration += self.restored.iterations
                if restored is not None:
                    xs, us = restored
                # the problem's values and derivatives those of (xs, us) again: the
                # restoration evaluated its own points
                try:
                    cost, gap, gap_sum, violation, violation_sum = self._evaluate(xs, us, DIFF)
                except KERNEL_ERRORS as error:
                    status = f"the dynamics failed at the current iterate ({type(error).__name__})"
                    evaluated = False
                    break
                if restored is None and restore == "stopped":
                    # the certificate (or the refused line search) stands: a restoration
                    # cut short by the time limit does not replace it (review rev25)
                    break
                if restored is not None:
                    self._start_z()
                    # until the next QP the policy at (xs, us) is the restoration's
                    # (review rev26: the result's K, k were the QP's at the old iterate)
                    self._handed_back = True
                    # a new start for the merit, the infeasibility counts and the warm line
                    # search; the status that triggered the restoration is no longer the
                    # SQP's (review rev25): without a new stop, the iterations ran out
                    nu, stuck, certified, last_violation = 0.0, 0, 0, np.inf
                    filter_, rolling = None, False
                    since = len(history["step"])
                    status = "max_iter"
                # the time is up: the solve ends after the stopping tests at the
                # restoration's point (its stationarity in the result, not the old
                # iterate's; review rev25)
                out_of_time = self.restored.status == "time_limit"
                restore, crawled = None, 0
            stop = _stationarity(self.typed_blocks, F, L, *self.zeros, self.lam, ax, au,
                                False)[0]
            if stop <= self.th_stop and gap <= self.th_gaps and violation <= self.th_constraint:
                # the stationarity's max drops a NaN of a row's Jacobian (a converged NaN)
                status, converged = ("converged", True) if self._derivatives_finite() else \
                    (NOT_FINITE, False)
                break
            if out_of_time:
                status = "time_limit"
                break
            if iteration >= max_iter:
                break
            iteration += 1
            t0 = time.perf_counter()
            self._factorizations = self._sweeps = 0
            kkt = max(stop, gap, violation)        # the forcing term's measure
            self._tight_eps = POLISH_EPS if stop <= POLISH_NEAR * self.th_stop else \
                np.array([max(POLISH_EPS[0], min(POLISH_EPS_CAP, POLISH_FORCING * kkt)), 0.0])
            qp_iterations, prim, solved, polished = self._solve_qp()
            if qp_iterations < 0:
                status = "the QP's Hessian is not positive definite" if \
                    self._derivatives_finite() else NOT_FINITE
                break
            unsolvable = not (solved or polished) and prim >= INFEASIBLE_RATIO * violation
            stuck = stuck + 1 if unsolvable and violation >= 0.5 * last_violation else 0
            last_violation = min(last_violation, violation)
            certified = certified + 1 if self._certified else 0
            if stuck >= self.infeasible_after or certified >= CERTIFIED_AFTER:
                status = "infeasible"
                # an iteration of the solve (counted in ``iterations``): in the history
                # and to the callbacks as the others, without a step (review rev25)
                self._record(history, callbacks, iteration, dict(
                    cost=cost, merit=np.nan, stop=stop, grad=np.nan, preg=self.sigma,
                    step=np.nan, gaps=gap, violation=violation, qp_iterations=qp_iterations,
                    qp_primal=prim, polished=polished, qp_factorizations=self._factorizations,
                    qp_sweeps=self._sweeps, rho=self.rho_now, dV_exp=np.nan, dV=np.nan,
                    time=0.0), t0)
                if self._restorable(gap, violation):
                    restore, beaten = "stopped", 0.0
                    continue
                break
            if polished:    # the QP's own costates and multipliers: no adjoint sweep
                lam_max, y_max = self._lam_max, self._y_max
            else:
                _, lam_max, y_max = _stationarity(self.typed_blocks, F, L, self.dx, self.du,
                                                  self.lam, ax, au, True)
            nu = max(nu, 1.1 * max(lam_max, y_max))
            infeasibility = gap_sum + violation_sum
            merit = cost + nu * infeasibility
            # the curvature only where the second stopping test may end the solve
            settles = bool(polished) and gap <= self.th_gaps and \
                violation <= self.th_constraint
            cost_slope, curvature, finite = _step_model(problem.Lx, problem.Lu, problem.Lxx,
                                                        problem.Luu, problem.Lxu, self.dx,
                                                        self.du, settles)
            slope = cost_slope - nu * infeasibility
            record = dict(cost=cost, merit=merit, stop=stop, grad=slope, preg=self.sigma,
                          step=np.nan, gaps=gap, violation=violation,
                          qp_iterations=qp_iterations, qp_primal=prim, polished=polished,
                          qp_factorizations=self._factorizations, qp_sweeps=self._sweeps,
                          rho=self.rho_now, dV_exp=np.nan,
                          dV=np.nan, time=0.0)
            if finite and settles and self._settled(cost, gap, violation, polished,
                                                  cost_slope, curvature):
                status, converged = SETTLED, True
                self._record(history, callbacks, iteration, record, t0)
                break
            accepted = None
            first = self._first_trial(history["step"][since:])
            if filter_ is None:
                filter_ = _Filter(infeasibility)
            # the filter's verdict on the trials the merit refuses (``filter_fallback``),
            # where the step solves the QP (the active-set method's, or ADMM's to its
            # tolerance): the filter's premise is a step along which the linearized gaps
            # and rows vanish, theta's model (1 - step) theta (Waechter & Biegler Sec.
            # 2.3; an inconsistent linearization goes to their restoration phase).  A step
            # of an unsolved or certified-infeasible QP makes no such promise (the
            # swing-up from rest: the filter took the first certified QP's full step, to a
            # point from which ProxDDP's restoration does not converge in 500 iterations)
            fallback = self.filter_fallback and bool(solved or polished)
            largest, verdict = None, None   # the largest trial the filter accepts
            # a step that is not finite (``finite``): no trial (problem.calc's checks
            # refused each)
            if self.rollout_fallback:
                # the iterate's gaps, which the trials' evaluations overwrite
                self._iterate_gaps[:] = self.gaps
            for step in self.alphas[first:] if finite else ():
                try:
                    x_try, u_try, trial = self._trial(xs, us, step, slot)
                except (KERNEL_ERRORS + (ValueError,)):
                    continue
                trial_merit = _l1_merit(trial, nu)
                if self._armijo(trial_merit, merit, step, slope):
                    accepted = (step, x_try, u_try, trial_merit, trial)
                    break
                if fallback and largest is None:
                    verdict = filter_.accepts(cost, infeasibility, cost_slope, step,
                                              trial[0], trial[2] + trial[4], self.c1)
                    largest = None if verdict is None else step
            by_filter = accepted is None and largest is not None
            if by_filter:
                # the merit refused every trial, the filter accepts one: IPOPT's order (its
                # restoration phase only where the filter refuses every trial).  The
                # trial buffers hold the last trial: the filter's is evaluated again (the
                # same bits)
                accepted = self._linear_trial(xs, us, largest, slot, nu)
            # the rollout's search (``rollout_fallback``, :meth:`_rollout_search`) where the
            # linear one crawls or accepts nothing (kinova "pose" from FDDP's optimum: 2^-9
            # twice, then the restoration; the rollout takes 1/4).  Right after a rollout
            # step also in place of the filter's step (panda "obstacle" from the guess: the
            # filter's full linear step grew the gaps to 52 and the SQP then converged
            # linearly, 30 iterations against 26 with the restoration) and of a step <=
            # CRAWL while the iterate has gaps (pose: 1/32, 1/16 against 1/2).  At any
            # iterate, gaps or not, at a crawl (2^-9 or no step), and in place of the
            # filter's step after a rollout step: at gap-free iterates of ur5_limited
            # "limits" (30 knots, from FDDP's optimum) the rollout's 2^-8 replaces the
            # filter's 1/16 and it helps (103 iterations, 145 without: rev33b on gl33's
            # code, the lead on the merged one; 125 while cq33's sign tolerance was in,
            # gl33b).  The CRAWL clause at gap-free iterates did
            # not (169 against 142: the rollout has no gaps to close and leaves the linear
            # rows the linear trial keeps).  Measured in benchmarks/constrained_notes.md,
            # gl33, gl33b
            by_rollout = False
            # the linear search crawled (its smallest step, or none, or the filter's)
            linear_crawl = accepted is None or by_filter or accepted[0] == self.alphas[-1] < 1.0
            if self.rollout_fallback and bool(solved or polished) and finite and \
                    (not by_filter or rolling) and (
                        accepted is None or accepted[0] == self.alphas[-1] < 1.0 or
                        (rolling and (by_filter or (gap > self.th_gaps and
                                                    accepted[0] <= CRAWL)))):
                rolled = self._rollout_search(xs, us, slot, merit, nu, slope,
                                              None if by_filter else accepted)
                by_rollout = rolled is not None
                if by_rollout:
                    accepted = rolled
                elif accepted is not None:
                    # the linear trial again: the buffers and the problem's values hold
                    # the last rollout's
                    accepted = self._linear_trial(xs, us, accepted[0], slot, nu)
            if by_filter and not by_rollout and verdict == "h":
                # the filter's entry where its step is taken (an h-type step, Waechter &
                # Biegler Sec. 2.2), not where the rollout's merit step replaced it (gl33b)
                filter_.add(cost, infeasibility)
            if accepted is None:
                # no step after a QP that ended with a primal residual of the order of
                # the violation (ADMM could not bring the linearized rows within their
                # bounds): the linearized constraints, most likely the constraints,
                # have no solution
                # (or the QP certified infeasible: :meth:`_certified_infeasible`)
                infeasible = self._certified or (
                    not (solved or polished) and violation > self.th_constraint
                    and prim >= INFEASIBLE_RATIO * violation)
                status = "infeasible" if infeasible else "no step accepted by the line search"
                self._record(history, callbacks, iteration, record, t0)
                if self._restorable(gap, violation):
                    restore = "stopped"
                    beaten = 0.0 if infeasible else max(gap, violation)
                    continue
                break
            step, xs, us, trial_merit, trial = accepted
            rolling = by_rollout or (rolling and step < 1.0)
            slot = 1 - slot             # the next trials: the buffers that are not (xs, us)
            record.update(step=step, dV_exp=-self.c1 * step * slope, dV=merit - trial_merit)
            try:
                cost, gap, gap_sum, violation, violation_sum = self._evaluate(xs, us, DIFF,
                                                                              trial=trial)
            except KERNEL_ERRORS as error:
                status = f"the dynamics failed at the current iterate ({type(error).__name__})"
                evaluated = False
                break
            self._record(history, callbacks, iteration, record, t0)
            if time_limit is not None and time.perf_counter() - start_time > time_limit:
                status = "time_limit"
                break
            # a crawl: the smallest step of a line search that has one below 1 (with
            # ``alphas`` [1] every accepted step is a full one: no crawl; review rev25),
            # or the filter's step where the merit refused every trial: the merit's model
            # refused the step as a crawl says it is valid on 1/512 of it, and the SQP
            # alone would have stopped there before the fallback.  Two in a row start
            # the restoration; with ``restoration`` None nothing but max_iter ends such a
            # run (review rev29: panda "obstacle", 30 knots, from the guess: 4 filter
            # steps, then the merit's steps of 1/64 .. 1/512 to max_iter 500, cost 1.23,
            # violation 0.030, where the merit alone stopped at iteration 225, "no step
            # accepted", cost 37.9, violation 0.26; with the default restoration both
            # converge, to the same bits).  A rollout step where the linear search crawled
            # counts too, for the same reason (panda "obstacle", 75 knots, from the guess:
            # without it the rollout's steps broke the count, the restoration never ran
            # and the SQP crawled at 1/256 .. 1/64 to max_iter 500 next to the optimum
            # that the restoration reaches in 24 iterations; gl33)
            crawled = crawled + 1 if step == self.alphas[-1] < 1.0 or by_filter or (
                by_rollout and linear_crawl) else 0
            if crawled >= RESTORE_CRAWL and self._restorable(gap, violation):
                restore, beaten = "crawling", max(gap, violation)
        return self._result(xs, us, cost, iteration, converged, status, stop, history,
                            (gap, violation) if evaluated else None)

    def _derivatives_finite(self):
        """Whether the rows' values and Jacobians and the cost's derivatives at the last
        evaluation (DIFF) are all finite: a residual that returns NaN is reported as such,
        not as a QP that failed (the values alone miss a NaN Jacobian: a violation
        max(l - r, r - h, 0) drops a NaN)."""
        return derivatives_finite(self.problem, self.items)

    def _armijo(self, trial_merit, merit, step, slope):
        """Whether a trial's l1 merit passes the Armijo test of the step ``step`` along a
        direction of merit slope ``slope`` (the linear and the rollout search alike)."""
        return math.isfinite(trial_merit) and \
            trial_merit <= merit + self.c1 * step * min(slope, 0.0)

    def _linear_trial(self, xs, us, step, slot, nu):
        """The linear trial x (+) a dx, u + a du at ``step`` evaluated (again) into the
        trial buffers ``slot``, as the line search's accepted tuple (step, xs, us, l1
        merit, the evaluation)."""
        x_try, u_try, trial = self._trial(xs, us, step, slot)
        return (step, x_try, u_try, _l1_merit(trial, nu), trial)

    def _rollout_search(self, xs, us, slot, merit, nu, slope, accepted):
        """The line search along the QP's policy rolled out through the nonlinear dynamics
        (FDDP's trial, :class:`~.forward.ForwardPass`: u_t = u_t - a k_t - K_t (x_t^try (-)
        x_t), x_{t+1}^try = f(x_t^try, u_t^try) (+) (a - 1) f_{t+1}), where the linear
        trials x (+) a dx, u + a du accepted nothing or only the smallest of ``alphas``.
        The gaps of its trial are (1 - a) f exactly: the dynamics' second-order term,
        which the linear trial leaves in the gaps (nu times their growth: the merit's
        curvature), is absorbed by the feedback, as a second-order correction does for
        the gaps (Waechter & Biegler, Math. Prog. 106, 2006, Sec. 2.4; the Maratos
        effect, Nocedal & Wright Sec. 15.5).  (k, K) are the QP's policy: rolled out on
        the linearized dynamics (:func:`_rollout`) they give its step (dx, du), to the bit
        where checked (tests/test_csqp_rollout.py).  The rolled-out trial itself is the
        QP's step to first order in a (the merit's slope holds) where the state is a
        vector space or the iterate has no gaps; not on a Lie group state with gaps: the
        trial puts the gap's (a - 1) f_{t+1} on the prediction f(x_t^try, u_t^try), the
        linearization puts f_{t+1} at x_{t+1}, and their tangent spaces differ by the
        group's transport (the Jacobian of exp at f: not the identity for a free-flyer's
        rotation), a first-order term in a of the size of |f| |dx|: on solo12's trot with
        hard cones from a noisy start |(x_roll (-) x) / a - dx| is 0.45 against |dx| 10.5,
        the Armijo slope along the rollout off by 0.06-0.25% (rev33b).  The Armijo test
        still asks the trial's evaluated merit to fall by c1 a times the QP's slope.
        The steps of ``alphas`` above the linear search's ``accepted`` step (all where it
        accepted none), largest first, on the same Armijo test of the l1 merit; returns
        the accepted trial (the linear search's tuple) in the trial buffers ``slot``, or
        None (the buffers and the problem's values then hold the last rollout's: the
        caller evaluates the linear ``accepted`` trial again)."""
        problem = self.problem
        if self._forward is None:
            self._forward = ForwardPass(problem)
            self._no_bounds = np.zeros((problem.N, problem.nu))
        below = accepted[0] if accepted is not None else 0.0
        x_try, u_try = self.x_trials[slot], self.u_trials[slot]
        for step in self.alphas:
            if step <= below:
                break
            try:
                rolled = self._forward(xs, us, (self.k, self.K),
                                       (self._no_bounds, self._no_bounds), step, True, False,
                                       self._iterate_gaps)
                if rolled is None:
                    continue
                x_try[:], u_try[:] = rolled[0], rolled[1]
                trial = self._evaluate(x_try, u_try, CALC, self._unchecked)
            except (KERNEL_ERRORS + (ValueError,)):
                continue
            trial_merit = _l1_merit(trial, nu)
            if self._armijo(trial_merit, merit, step, slope):
                return (step, x_try, u_try, trial_merit, trial)
        return None

    def _restorable(self, gap, violation):
        """Whether the restoration may run at an iterate with the largest gap ``gap`` and
        violation ``violation``: the ``restoration`` option set, none run yet in this
        solve, the iterate infeasible."""
        return self.restoration is not None and self.restored is None and (
            gap > self.th_gaps or violation > self.th_constraint)

    def _restore(self, xs, us, max_iter, time_limit, start_time, beaten, infeasibility,
                 verbose=False):
        """The restoration from (xs, us): the ``restoration`` option's augmented-
        Lagrangian solver (ProxDDP or ALDDP, default options, this solver's
        th_constraint; multipliers from zero: the SQP's are those of a QP the
        linearization forced) for up to ``max_iter`` iterations and the solve's time left.
        Its result in :attr:`restored`.  Returns its (xs, us), with its multipliers in the
        rows (y, rho_init, a fresh active set), where it converged or ended feasible
        (gaps <= th_gaps, violation <= th_constraint), or, not "infeasible" by its own
        test, with max(gaps, violation) below ``beaten`` (the iterate's, where no QP
        certified the linearization infeasible: a stalled line search or a crawl; 0
        after a certificate); otherwise None.  The restoration ends "crawling" after
        :data:`RESTORE_CRAWL` smallest steps in a row (ALDDP's ``crawl_limit``): at any
        infeasibility where ``beaten`` > 0, after a certificate only above
        :data:`RESTORE_PROGRESS` times ``infeasibility``, the iterate's max(gaps,
        violation); after a certificate also as "stalled" once its least infeasibility
        has not fallen below :data:`RESTORE_STALL_RATIO` times what it was
        :data:`RESTORE_STALL` iterations before (ALDDP's ``stall_window``; rs35).  A
        result with non-finite values (point or multipliers) is a failed restoration.
        The solver is built at the first restoration and again where the
        ``restoration`` option changed; this solver's th_constraint is read at each run.
        ``verbose``: one line at the restoration's end (its iterations are not in the
        SQP's history or callbacks; :attr:`restored` has its own history)."""
        kind = RESTORATIONS[self.restoration]
        if type(self._restorer) is not kind:
            # ProxDDP's search interpolates from iterates with gaps too (where the
            # restoration starts; measured: kinova "pose" from FDDP's optimum 111 -> 57
            # trials, the same iterations; benchmarks/constrained_notes.md, pw31)
            gaps_option = {"interpolated_with_gaps": True} if kind is ProxDDP else {}
            self._restorer = kind(self.problem, th_constraint=self.th_constraint,
                                  **gaps_option)
        # the options as they are at this solve, not at the first restoration's
        self._restorer.th_constraint = self.th_constraint
        left = None if time_limit is None else max(
            time_limit - (time.perf_counter() - start_time), 0.0)
        # the restoration stops paying once its own line search crawls as the SQP's did:
        # anywhere where a less infeasible point may go back (``beaten`` > 0: no
        # certificate); after a certificate (only a feasible point goes back) only before
        # it reduced the infeasibility to RESTORE_PROGRESS times the iterate's
        crawl_above = 0.0 if beaten > 0.0 else RESTORE_PROGRESS * infeasibility
        # after a certificate also a stall of the infeasibility, above the tolerances
        # (a point at or below them would be feasible: the stall test never cuts a
        # restoration that has reached one)
        stall = {} if beaten > 0.0 else dict(
            stall_window=RESTORE_STALL, stall_ratio=RESTORE_STALL_RATIO,
            stall_above=max(self.th_gaps, self.th_constraint))
        result = self._restorer.solve(xs, us, max_iter=max_iter, time_limit=left,
                                      crawl_limit=RESTORE_CRAWL, crawl_above=crawl_above,
                                      **stall)
        self.restored = result
        feasible = result.gaps <= self.th_gaps and result.violation <= self.th_constraint
        less = result.status != "infeasible" and max(result.gaps, result.violation) < beaten
        # a point or multipliers that are not finite: a failed restoration, not an
        # exception out of solve (review rev25)
        finite = bool(np.all(np.isfinite(result.xs)) and np.all(np.isfinite(result.us))
                      and all(np.all(np.isfinite(y)) for y in result.multipliers))
        handed = finite and (result.converged or feasible or less)
        if verbose:
            print(f"restoration ({self.restoration}): {result.status}, {result.iterations} "
                  f"iterations, gaps {result.gaps:.2e}, violation {result.violation:.2e}, "
                  + ("handed back" if handed else "nothing handed back"))
        if not handed:
            return None
        self._start_rows(result.multipliers)
        self._fresh = True
        self._certified = False
        return np.array(result.xs, order="C"), np.array(result.us, order="C")

    def _settled(self, cost, gap, violation, polished, slope, curvature):
        """Whether the iterate is a solution to the cost's precision (the second stopping
        test, status :data:`SETTLED`, tried after each QP before the line search): the
        iterate feasible (gap <= th_gaps, violation <= th_constraint), the QP solved by
        the active-set method (its polish, to its tolerance; not ADMM's iterate), the
        cost finite, and the magnitude of the full step's predicted decrease of the
        cost, the QP model's -(g^T w + 1/2 w^T H w) (``slope`` g^T w and ``curvature``
        w^T H w from :func:`_step_model`; FDDP's |d1 + d2 / 2|, Crocoddyl's stopping
        value), and the curvature's part 1/2 w^T H w alone, both at most ``th_decrease``
        max(1, |cost|): FDDP's test, relative to the cost's scale (the step would change
        the cost in its tenth significant digit).  The curvature's part on its own: at
        the QP's solution g^T w = -(w^T H w + y^T b + lam^T f), the rows' and gaps'
        restoration terms (b the active rows' residual, f the gaps, up to th_constraint
        and th_gaps) of the other sign, which could cancel the sum to zero at a step
        still worth w^T H w / 2 (review).  Below |cost| = 1 the test is absolute, as
        Crocoddyl's th_stop (a cost of 1e-4 may then stop 1e-5 relative from its
        optimum; th_decrease smaller asks more).
        Why not the stationarity alone (benchmarks/constrained_notes.md, section CSQP,
        gn19): the Gauss-Newton Hessian leaves out the costates' term lam^T F'', large
        where a light link makes M^-1 large (kinova's wrist 1589, talos_arm's 903 against
        ur5's 63): the SQP then converges linearly (kinova "box": the step / 4 per
        iteration, talos_arm "effort": / 1.7), and the stationarity, read from an adjoint
        sweep that amplifies the iterate's error backwards along the horizon (kinova:
        |lam_1| 3.8 at the iterate against 0.035 at the solution), stalls at 1e-4
        (kinova) or 6e-4 (the talos squat: the Hessian ~4e6 along its first knots'
        controls, where a gradient of 6e-4 is worth a decrease of 3e-10) with the cost
        converged to 12 digits.  Up to gn19 the test waited for a line search that
        refused every trial (the step's decrease below the merit's resolution, nu times
        the gaps' round-off): kinova "box" 18 iterations from the guess, of which the
        last 9 changed the cost by 6e-12 relative; it now stops at the first feasible
        iterate whose step is worth at most th_decrease, as FDDP does (9 iterations; the
        cost 2.6e-9 relative below IPOPT's at tol 1e-11).  On a problem where the full
        step is still worth more, the test waits: the 8 ur5 runs of
        benchmarks/constrained.py end on the stationarity test, bitwise as before."""
        if not (polished and gap <= self.th_gaps and violation <= self.th_constraint
                and np.isfinite(cost)):
            return False
        decrease = -(slope + 0.5 * curvature)
        # |decrease|: the step also closes the iterate's own residual gaps and rows (up to
        # th_gaps, th_constraint), which can make the signed value negative and hide the
        # optimality part of the decrease (review); the curvature's part bounds the
        # optimality part where the two cancel
        return max(abs(decrease), 0.5 * curvature) <= self.th_decrease * max(1.0, abs(cost))

    def _first_trial(self, steps):
        """The index in ``alphas`` of the line search's first trial after the accepted
        ``steps`` (the warm line search; 0 without it).  Crawling (the last accepted step
        <= 1/8): a step above the last (ALDDP's warm_line_search, which waits for two
        such steps in a row: on the stiff tasks a crawl resumes after one full step,
        ``1/4, 1, 1/32, 1/16, 1/8``, and each search from 1 after its first small step
        tried 1 .. 1/8 again).  A full step accepted right after a crawl (the step before
        it <= :data:`CRAWL_RESUME`): that step, where every search from 1 after such a
        full step on the stiff tasks went down to 1/32 .. 1/4 (the Gauss-Newton model's
        error at the 5 cm drop of the last knot; Maratos-like).  Each refused trial
        costs a problem.calc (benchmarks/constrained_notes.md, section CSQP, qp14)."""
        if not self.warm_line_search or len(steps) < 2:
            return 0
        before, last = steps[-2], steps[-1]
        if last <= CRAWL:
            return max(self.alphas.index(last) - 1, 0)
        if last == self.alphas[0] and before <= CRAWL_RESUME:
            return self.alphas.index(before)
        return 0

    def max_violation(self, xs, us):
        """The largest violation of the constraints (and bounds) along (xs, us)."""
        xs, us = self.problem._validate(xs, us)
        return self._evaluate(np.ascontiguousarray(xs), np.ascontiguousarray(us), CALC)[3]

    def _record(self, history, callbacks, iteration, record, t0):
        record_iteration(self, _HISTORY_KEYS, history, callbacks, iteration, record, t0)

    def _result(self, xs, us, cost, iterations, converged, status, stop, history,
                evaluated=None):
        """The result at (xs, us); ``evaluated``: its (largest gap, largest violation),
        with ``cost``, from the last evaluation (the same bits as a CALC evaluation's,
        which is left out: one trial's time per solve), or None to evaluate."""
        if evaluated is not None and np.isfinite(cost):
            gaps, violation = evaluated
        elif np.isfinite(cost):
            cost, gaps, _, violation, _ = self._evaluate(xs, us, CALC)
        else:
            gaps = violation = np.inf
        self.multipliers = [y.copy() for y in self.y]
        # a solve that ends right after a hand-back (time or iterations out) returns the
        # restoration's feedback policy at the returned point, not the last QP's at the
        # point before the restoration (MPC's use_feedback applies it; review rev26)
        K, k = (self.restored.K, self.restored.k) if self._handed_back else (self.K, self.k)
        return ConstrainedResult(xs=xs.copy(), us=us.copy(), K=K.copy(), k=k.copy(),
                                 cost=float(cost), iterations=iterations, converged=converged,
                                 status=status, gaps=gaps, stop=stop, history=history,
                                 violation=violation, multipliers=[y.copy() for y in self.y],
                                 mu=self.rho_now, outer_iterations=0,
                                 restoration_iterations=0 if self.restored is None else
                                 self.restored.iterations)
