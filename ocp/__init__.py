"""Optimal control problems: state manifolds, stage dynamics and integrators,
residuals, activations, costs, constraints and the shooting problem, every
term evaluated for all knots of a phase in one Numba kernel.

A reaching task on a real arm::

    import geppetto as gp
    robot = gp.robots.load("ur5")
    dynamics = gp.ocp.FreeDynamics(robot.model)
    state, nu = dynamics.state, dynamics.nu
    x0 = np.concatenate([robot.q0, np.zeros(robot.model.nv)])
    reach = gp.ocp.Cost(gp.ocp.FrameTranslationResidual(robot.model, "tool0", [0.4, 0.2, 0.4]))
    x_reg = gp.ocp.Cost(gp.ocp.StateResidual(state, x0), weight=1e-2)
    u_reg = gp.ocp.Cost(gp.ocp.ControlResidual(nu), weight=1e-4)
    running = gp.ocp.StageModel(dynamics, [reach, x_reg, u_reg], dt=0.01)
    terminal = gp.ocp.TerminalModel(state, [gp.ocp.Cost(reach.residual, weight=1e3), x_reg])
    problem = gp.ocp.ShootingProblem(x0, [running] * 100, terminal)

Custom dynamics (:mod:`.custom_dynamics`: ``unicycle()``, ``quadrotor()``) and
every derivative can be checked against finite differences on the manifold
with :mod:`.checks`: ``check_dynamics``, ``check_integrator``,
``check_residual``, ``check_cost``, ``check_activation``,
``check_problem_gradient``.
"""
from .state import StateMultibody, StateVector
from .dynamics import Actuation, FreeDynamics, CustomDynamics
from .integrators import Integrator, INTEGRATORS
from .residuals import (Residual, StateResidual, ControlResidual, FrameTranslationResidual,
                        FrameRotationResidual, FramePlacementResidual, FrameVelocityResidual,
                        CenterOfMassResidual, JointTorqueResidual)
from .numba_residual import NumbaResidual
from .costs import (Activation, Quadratic, WeightedQuadratic, QuadraticBarrier, Smooth1Norm,
                    Smooth2Norm, Cost, Constraint)
from .stage import StageModel, TerminalModel
from .problem import ShootingProblem
from .custom_dynamics import unicycle, quadrotor
from .checks import (check_dynamics, check_integrator, check_residual, check_cost,
                     check_activation, check_problem_gradient, dynamics_derivatives_fd,
                     integrator_derivatives_fd, residual_derivatives_fd, cost_derivatives_fd,
                     problem_gradient_fd)
from .contacts import (ContactDynamics, ImpulseDynamics, ContactForceResidual,
                       FrictionConeResidual, SmoothFrictionConeResidual,
                       CenterOfPressureResidual, GaitPhase, gait_stages)
