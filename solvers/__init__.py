"""Solvers on a ShootingProblem: DDP (iLQR), FDDP and BoxFDDP, with callbacks;
the MPC loop and its simulator; matplotlib figures of both (:mod:`.plots`)."""
from .ddp import DDP, FDDP, BoxFDDP, SolverResult
from .callbacks import CallbackVerbose, CallbackLogger
from .mpc import MPC, Simulator, Push, MPCLog, run_mpc
from . import plots
