"""Solvers on a ShootingProblem: DDP (iLQR), FDDP and BoxFDDP, with callbacks."""
from .ddp import DDP, FDDP, BoxFDDP, SolverResult
from .callbacks import CallbackVerbose, CallbackLogger
