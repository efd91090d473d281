"""Solvers on a ShootingProblem: DDP (iLQR), FDDP and BoxFDDP, with callbacks;
ALDDP (augmented-Lagrangian DDP), ProxDDP (primal-dual augmented-Lagrangian DDP)
and CSQP (stagewise SQP with an ADMM QP on Riccati sweeps) for hard constraints;
the multiple-shooting NLP through CasADi and IPOPT (:mod:`.nlp`; casadi is
imported when an NLP is built); the MPC loop and its simulator; matplotlib
figures of both (:mod:`.plots`); many problems at once on Dask workers
(:func:`solve_batch`, :mod:`.batch`; dask is imported when a batch runs)."""
from .ddp import DDP, FDDP, BoxFDDP, SolverResult
from .alddp import ALDDP, ConstrainedResult
from .proxddp import ProxDDP
from .csqp import CSQP
from .callbacks import CallbackVerbose, CallbackLogger
from .nlp import NLP, CallbackNLPVerbose
from .mpc import MPC, Simulator, Push, MPCLog, run_mpc
from .batch import solve_batch, BatchResult
from . import plots
