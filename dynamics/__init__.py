"""Rigid-body dynamics in Numba: Model/Data, Lie groups, kinematics, RNEA,
CRBA, ABA, M^-1 and their analytical derivatives.  Names are Pinocchio's in snake case; every function takes
one state or a stack of states with a leading batch axis."""
from .model import (Model, ModelBuilder, ModelArrays, Frame, spatial_inertia,
                    inertia_parameters, transform_inertia, REVOLUTE,
                    REVOLUTE_UNBOUNDED, PRISMATIC, FREE_FLYER, SPHERICAL, PLANAR,
                    TRANSLATION, OP_FRAME, JOINT_FRAME, FIXED_JOINT_FRAME,
                    BODY_FRAME)
from .data import Data
from .mimic import MimicModel
from .liegroups import (neutral, random_configuration, integrate, difference,
                        interpolate, normalize)
from .kinematics import (LOCAL, WORLD, LOCAL_WORLD_ALIGNED, forward_kinematics,
                         update_frame_placements, frame_placement,
                         compute_joint_jacobians, frame_jacobian, joint_jacobian,
                         center_of_mass, jacobian_center_of_mass)
from .rnea import rnea, nonlinear_effects, generalized_gravity
from .crba import crba
from .aba import aba, compute_minverse
from .energy import kinetic_energy, potential_energy
from .rnea_derivatives import rnea_derivatives
from .aba_derivatives import aba_derivatives, aba_derivative_f_ext
from .kinematics_derivatives import (compute_forward_kinematics_derivatives,
                                     joint_velocity_derivatives,
                                     joint_acceleration_derivatives,
                                     frame_velocity_derivatives,
                                     frame_acceleration_derivatives,
                                     compute_joint_jacobians_time_variation,
                                     frame_jacobian_time_variation,
                                     center_of_mass_derivatives,
                                     center_of_mass_velocity_derivatives)
from .liegroup_derivatives import d_integrate, d_difference
from .finite_differences import numerical_jacobian, rnea_derivatives_fd, aba_derivatives_fd
from .constraints import (CONTACT_3D, CONTACT_6D, RigidConstraint, ConstraintSet, contact_3d,
                          contact_6d, loop_closure, constraint_jacobian, constraint_drift,
                          constraint_acceleration, constraint_forces)
from .constraint_derivatives import constraint_acceleration_derivatives
from .constrained_dynamics import (constraint_dynamics, constraint_dynamics_derivatives,
                                   impulse_dynamics, impulse_dynamics_derivatives)
from .batch_lanes import rnea_lanes, rnea_batch, aba_lanes, aba_batch, crba_lanes, crba_batch
from .constraint_lanes import constraint_dynamics_lanes, constraint_dynamics_batch
from .constraint_derivative_lanes import (constraint_dynamics_derivatives_lanes,
                                          constraint_dynamics_derivatives_batch)
from .derivative_lanes import (aba_derivatives_lanes, aba_derivatives_batch,
                               rnea_derivatives_lanes, rnea_derivatives_batch,
                               compute_minverse_lanes, compute_minverse_batch)
