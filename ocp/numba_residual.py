"""Residuals written by the user as Numba kernels, evaluated in the same compiled call as
the built-in terms of a phase (:mod:`.fused`).

The protocol: a module-level function compiled with ``numba.njit(cache=True)`` (or
:func:`geppetto.dynamics.config.kernel`) that evaluates one knot::

    def kernel(x, u, oR, op, J, reference, parameters, r, Rx, Ru, with_jacobian):
        # x (nx,), u (nu,): the knot's state and controls (u is empty at the terminal knot)
        # oR (njoints, 3, 3), op (njoints, 3): the joints' placements in the world
        # J (6, nv): the world Jacobian of every joint's motion (columns of the dofs:
        #     the joint's motion at the world origin, [linear; angular], Pinocchio's
        #     WORLD frame); valid when the residual says needs_kinematics=True
        # reference (nref,): the knot's reference (ShootingProblem.set_reference writes it)
        # parameters (npar,): constant parameters
        # r (nr,): write the residual;  Rx (nr, ndx), Ru (nr, nu): write its Jacobians
        #     when with_jacobian is True (tangent coordinates of x; entries left alone
        #     keep the zeros they start with)
        # The arrays are lent for the call: they have no owner of their own (the phase's
        # program holds their memory), so a kernel must not keep one past its return
        # (an objmode block that stores r somewhere, for instance: copy it).

A compiled loop over the knots calls it (:func:`.fused.knot_loop`, one per kernel),
and the phase's interpreter program calls that loop by the address of its compiled
code (:func:`.fused._user`): a user residual costs what the same arithmetic costs in a
built-in kernel, with no Python per knot, per call or per phase (the horizon's calc,
calc_diff and line-search trial stay one compiled call each, :mod:`.horizon`), and a
new kernel compiles its loop alone.  The kernel must be importable by its module and
name (a module-level function of an importable module, or of the script being run);
an edited kernel gets a new loop (its code, and the contents of its file and of the files
of the Numba functions it calls and of the modules whose constants it reads, are part
of the loop module's hash: :func:`.fused._kernel_fingerprint`; a helper reached other
than by a name the code reads, a ``getattr`` say, is not followed).  Check its Jacobians with
:func:`geppetto.ocp.check_residual`.
"""
import numba
import numpy as np

from ..dynamics.native import callee_address
from .fused import Step, _user, knot_loop
from .residuals import JACOBIANS, NONE, Residual

_STACK = numba.types.Array(numba.float64, 2, "C")


class NumbaResidual(Residual):
    """A residual r(x, u) (nr,) computed knot by knot by a user Numba ``kernel`` (see the
    module docstring for its signature).

    Parameters
    ----------
    nr : size of r.
    kernel : the Numba dispatcher (``numba.njit(cache=True)``).
    parameters : (npar,) constant parameters handed to every call.
    reference : (nref,) the reference (or (K, nref): one per knot of the phase).
    needs_kinematics : whether the kernel reads oR, op, J (the stage then computes the
        knots' placements and world Jacobians before it).
    uses_control : whether r depends on u (else Ru is not accumulated).
    depends_on_state : whether r depends on x (else Rx is not accumulated).
    """

    def __init__(self, nr, kernel, parameters=(), reference=(), needs_kinematics=False,
                 uses_control=False, depends_on_state=True):
        if not hasattr(kernel, "py_func"):
            raise ValueError(f"kernel: expected a Numba dispatcher (numba.njit), got "
                             f"{type(kernel).__name__}")
        self.nr = int(nr)
        if self.nr < 1:
            raise ValueError(f"nr: expected a positive size, got {nr}")
        self.kernel = kernel
        self.parameters = np.ascontiguousarray(np.asarray(parameters, dtype=float).reshape(-1))
        if not np.all(np.isfinite(self.parameters)):
            raise ValueError("parameters: contains NaN or inf")
        self.reference = np.asarray(reference, dtype=float)
        self.needs_kinematics = bool(needs_kinematics)
        self.kinematics = JACOBIANS if self.needs_kinematics else NONE
        self.uses_control = bool(uses_control)
        self.depends_on_state = bool(depends_on_state)

    def reference_shape(self):
        return self.reference.shape[-1:] if self.reference.ndim else (1,)

    def _args(self, data, kinematics):
        K = data.r.shape[0]
        if kinematics is None:
            if not hasattr(data, "no_kinematics"):
                data.no_kinematics = (np.zeros((K, 1, 3, 3)), np.zeros((K, 1, 3)),
                                      np.zeros((K, 6, 0)))
            oR, op, J = data.no_kinematics
        else:
            oR, op, J = kinematics.oR, kinematics.op, kinematics.J
        return (oR, op, J, data.reference, self.parameters, data.r, data.Rx, data.Ru)

    def fused_step(self, data, kinematics, state):
        """The :func:`.fused._user` step: the knot loop of :func:`.fused.knot_loop` called by
        the (address, key) of its specialization for these operands (so the phase stays a
        program of the interpreter, and the horizon one compiled call)."""
        args = self._args(data, kinematics)
        callee = callee_address(knot_loop(self.kernel),
                                (_STACK, _STACK, numba.typeof(args), numba.int64))
        return Step(callee + args, _user)

    def _run(self, data, kinematics, xs, us, mode):
        """The per-term path: the knot loop of :func:`.fused.knot_loop` from Python."""
        K = data.r.shape[0]
        us = np.zeros((K, 0)) if us is None else np.ascontiguousarray(us)
        knot_loop(self.kernel)(np.ascontiguousarray(xs), us, self._args(data, kinematics),
                               np.int64(mode))

    def calc(self, data, kinematics, xs, us):
        self._run(data, kinematics, xs, us, 0)

    def calc_diff(self, data, kinematics, xs, us):
        self._run(data, kinematics, xs, us, 1)
