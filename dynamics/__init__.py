"""Rigid-body dynamics in Numba: Model/Data, Lie groups, kinematics, RNEA,
CRBA, ABA, M^-1 and (later) their derivatives.  Names follow Pinocchio."""
from .model import (Model, ModelBuilder, ModelArrays, Frame, spatial_inertia,
                    inertia_parameters, transform_inertia, REVOLUTE,
                    REVOLUTE_UNBOUNDED, PRISMATIC, FREE_FLYER, SPHERICAL, PLANAR,
                    TRANSLATION, OP_FRAME, JOINT_FRAME, FIXED_JOINT_FRAME,
                    BODY_FRAME)
