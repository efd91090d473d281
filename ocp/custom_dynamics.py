"""Built-in :class:`~.dynamics.CustomDynamics`: a unicycle and a quadrotor with thrust inputs.

They are also the templates for writing your own: two batched Numba kernels,
``calc(xs, us, params, f)`` and ``calc_diff(xs, us, params, f, f_x, f_u)``,
compiled with :func:`geppetto.dynamics.config.kernel` (``cache=True``), a
flat ``params`` array for the constants, and a check of the analytical
Jacobians with :func:`geppetto.ocp.check_dynamics`.  Shapes: xs (K, nx),
us (K, nu), f (K, nx), f_x (K, nx, nx), f_u (K, nx, nu); the kernels write
every entry of their outputs.  For the NLP's ``derivatives="casadi"`` mode,
also pass the field once more as ``symbolic(ops, x, u, params)``, written with
the operations of ``ops`` (casadi, handed in by the NLP), as
:func:`_unicycle_field` and :func:`_quadrotor_field` are.

Unicycle (x = (px, py, theta), u = (v, omega))::

    d(px, py, theta)/dt = (v cos theta, v sin theta, omega)

Quadrotor (x = (p, rpy, v, w) in R^12, u = (T1, T2, T3, T4) rotor thrusts):

- p (3,) position of the centre of mass in the world; rpy = (phi, theta,
  psi) roll, pitch, yaw with R = Rz(psi) Ry(theta) Rx(phi) (Z-Y-X Euler
  angles, body to world); v (3,) linear velocity in the world; w (3,)
  angular velocity in the body frame.  The parameterization is Euclidean
  and valid away from pitch = +-pi/2 (where the Euler rates are singular).
- dp/dt = v;  d rpy/dt = E(phi, theta) w with
  E = [[1, s_phi t_theta, c_phi t_theta], [0, c_phi, -s_phi],
  [0, s_phi / c_theta, c_phi / c_theta]];
  dv/dt = (sum_i T_i / m) R e_z - g e_z;
  dw/dt = I^-1 (tau - w x I w),  tau = A u.
- The torque map A (3, 4): rotor i at (x_i, y_i) in the body plane with spin
  s_i = +-1 gives tau_i = (y_i T_i, -x_i T_i, s_i c T_i) (c: the ratio of
  the rotor's drag torque to its thrust).  "x" configuration: rotors at
  45, 135, 225, 315 degrees from the body x axis, spins (-1, +1, -1, +1)
  (rotor 1 front left ... counter-clockwise seen from above); "+":
  rotors on the x and y axes at 0, 90, 180, 270 degrees.
"""
import math

import numpy as np

from ..dynamics.config import kernel
from .dynamics import CustomDynamics


# --- unicycle -------------------------------------------------------------------------

@kernel
def _unicycle_calc(xs, us, params, f):
    for k in range(xs.shape[0]):
        f[k, 0] = us[k, 0] * math.cos(xs[k, 2])
        f[k, 1] = us[k, 0] * math.sin(xs[k, 2])
        f[k, 2] = us[k, 1]


@kernel
def _unicycle_calc_diff(xs, us, params, f, f_x, f_u):
    _unicycle_calc(xs, us, params, f)
    for k in range(xs.shape[0]):
        c, s = math.cos(xs[k, 2]), math.sin(xs[k, 2])
        f_x[k, :, :] = 0.0
        f_x[k, 0, 2] = -us[k, 0] * s
        f_x[k, 1, 2] = us[k, 0] * c
        f_u[k, :, :] = 0.0
        f_u[k, 0, 0] = c
        f_u[k, 1, 0] = s
        f_u[k, 2, 1] = 1.0


def _unicycle_field(ops, x, u, params):
    """The field of :func:`_unicycle_calc` with the operations ``ops`` (casadi)."""
    return ops.vertcat(u[0] * ops.cos(x[2]), u[0] * ops.sin(x[2]), u[1])


def unicycle():
    """A unicycle: x = (px, py, theta) (nx = 3), u = (v, omega) (forward and turn rates)."""
    return CustomDynamics(3, 2, _unicycle_calc, _unicycle_calc_diff, name="unicycle",
                          symbolic=_unicycle_field)


# --- quadrotor ------------------------------------------------------------------------
# params = [m, g, I (9, row-major), I^-1 (9), A (3 x 4, row-major)]

_MASS, _GRAVITY, _INERTIA, _INERTIA_INV, _TORQUE_MAP = 0, 1, 2, 11, 20


@kernel
def _thrust_direction(phi, theta, psi, b):
    """b = R e_z, the body z axis in the world, for R = Rz(psi) Ry(theta) Rx(phi)."""
    cf, sf = math.cos(phi), math.sin(phi)
    ct, st = math.cos(theta), math.sin(theta)
    cp, sp = math.cos(psi), math.sin(psi)
    b[0] = cp * st * cf + sp * sf
    b[1] = sp * st * cf - cp * sf
    b[2] = ct * cf


@kernel
def _quadrotor_state(x, u, params, f, k, b, Iw, tau):
    """f[k] for one state; leaves b = R e_z, Iw = I w, tau = A u."""
    m, g = params[_MASS], params[_GRAVITY]
    phi, theta, psi = x[3], x[4], x[5]
    w0, w1, w2 = x[9], x[10], x[11]
    cf, sf = math.cos(phi), math.sin(phi)
    ct, tt = math.cos(theta), math.tan(theta)
    _thrust_direction(phi, theta, psi, b)
    thrust = u[0] + u[1] + u[2] + u[3]
    for a in range(3):
        f[k, a] = x[6 + a]
        f[k, 6 + a] = thrust / m * b[a]
        Iw[a] = 0.0
        tau[a] = 0.0
        for c in range(3):
            Iw[a] += params[_INERTIA + 3 * a + c] * x[9 + c]
        for c in range(4):
            tau[a] += params[_TORQUE_MAP + 4 * a + c] * u[c]
    f[k, 8] -= g
    f[k, 3] = w0 + sf * tt * w1 + cf * tt * w2
    f[k, 4] = cf * w1 - sf * w2
    f[k, 5] = (sf * w1 + cf * w2) / ct
    # w x I w, then dw/dt = I^-1 (tau - w x I w)
    c0 = w1 * Iw[2] - w2 * Iw[1]
    c1 = w2 * Iw[0] - w0 * Iw[2]
    c2 = w0 * Iw[1] - w1 * Iw[0]
    for a in range(3):
        i = _INERTIA_INV + 3 * a
        f[k, 9 + a] = params[i] * (tau[0] - c0) + params[i + 1] * (tau[1] - c1) + \
            params[i + 2] * (tau[2] - c2)


@kernel
def _quadrotor_calc(xs, us, params, f):
    b, Iw, tau = np.empty(3), np.empty(3), np.empty(3)
    for k in range(xs.shape[0]):
        _quadrotor_state(xs[k], us[k], params, f, k, b, Iw, tau)


@kernel
def _quadrotor_jacobians(x, u, params, k, f_x, f_u, Iw, C):
    """f_x[k], f_u[k] for one state (every entry); Iw = I w from the value pass."""
    m = params[_MASS]
    phi, theta, psi = x[3], x[4], x[5]
    w0, w1, w2 = x[9], x[10], x[11]
    cf, sf = math.cos(phi), math.sin(phi)
    ct, st, tt = math.cos(theta), math.sin(theta), math.tan(theta)
    cp, sp = math.cos(psi), math.sin(psi)
    f_x[k, :, :] = 0.0
    f_u[k, :, :] = 0.0
    for a in range(3):
        f_x[k, a, 6 + a] = 1.0
    # Euler rates: E(phi, theta) w
    f_x[k, 3, 3] = cf * tt * w1 - sf * tt * w2
    f_x[k, 3, 4] = (sf * w1 + cf * w2) / (ct * ct)
    f_x[k, 4, 3] = -sf * w1 - cf * w2
    f_x[k, 5, 3] = (cf * w1 - sf * w2) / ct
    f_x[k, 5, 4] = (sf * w1 + cf * w2) * st / (ct * ct)
    f_x[k, 3, 9], f_x[k, 3, 10], f_x[k, 3, 11] = 1.0, sf * tt, cf * tt
    f_x[k, 4, 10], f_x[k, 4, 11] = cf, -sf
    f_x[k, 5, 10], f_x[k, 5, 11] = sf / ct, cf / ct
    # thrust: (T / m) d(R e_z)/d(phi, theta, psi); d/du_i = R e_z / m
    s = (u[0] + u[1] + u[2] + u[3]) / m
    f_x[k, 6, 3] = s * (-cp * st * sf + sp * cf)
    f_x[k, 7, 3] = s * (-sp * st * sf - cp * cf)
    f_x[k, 8, 3] = s * (-ct * sf)
    f_x[k, 6, 4] = s * cp * ct * cf
    f_x[k, 7, 4] = s * sp * ct * cf
    f_x[k, 8, 4] = s * (-st * cf)
    f_x[k, 6, 5] = s * (-sp * st * cf + cp * sf)
    f_x[k, 7, 5] = s * (cp * st * cf + sp * sf)
    b0, b1, b2 = cp * st * cf + sp * sf, sp * st * cf - cp * sf, ct * cf
    for i in range(4):
        f_u[k, 6, i], f_u[k, 7, i], f_u[k, 8, i] = b0 / m, b1 / m, b2 / m
    # d(-w x I w)/dw = [I w]x - [w]x I  (C, 3 x 3), then dw'/dw = I^-1 C, dw'/du = I^-1 A
    for c in range(3):
        e0 = params[_INERTIA + c]
        e1 = params[_INERTIA + 3 + c]
        e2 = params[_INERTIA + 6 + c]
        C[0, c] = -(w1 * e2 - w2 * e1)
        C[1, c] = -(w2 * e0 - w0 * e2)
        C[2, c] = -(w0 * e1 - w1 * e0)
    C[0, 1] -= Iw[2]
    C[0, 2] += Iw[1]
    C[1, 0] += Iw[2]
    C[1, 2] -= Iw[0]
    C[2, 0] -= Iw[1]
    C[2, 1] += Iw[0]
    for a in range(3):
        for c in range(3):
            f_x[k, 9 + a, 9 + c] = 0.0
            for d in range(3):
                f_x[k, 9 + a, 9 + c] += params[_INERTIA_INV + 3 * a + d] * C[d, c]
        for c in range(4):
            f_u[k, 9 + a, c] = 0.0
            for d in range(3):
                f_u[k, 9 + a, c] += params[_INERTIA_INV + 3 * a + d] * \
                    params[_TORQUE_MAP + 4 * d + c]


@kernel
def _quadrotor_calc_diff(xs, us, params, f, f_x, f_u):
    b, Iw, tau = np.empty(3), np.empty(3), np.empty(3)
    C = np.empty((3, 3))
    for k in range(xs.shape[0]):
        _quadrotor_state(xs[k], us[k], params, f, k, b, Iw, tau)
        _quadrotor_jacobians(xs[k], us[k], params, k, f_x, f_u, Iw, C)


def _quadrotor_field(ops, x, u, params):
    """The field of :func:`_quadrotor_state` with the operations ``ops`` (casadi)."""
    m, g = params[_MASS], params[_GRAVITY]
    I = ops.DM(params[_INERTIA:_INERTIA + 9].reshape(3, 3))
    I_inv = ops.DM(params[_INERTIA_INV:_INERTIA_INV + 9].reshape(3, 3))
    A = ops.DM(params[_TORQUE_MAP:_TORQUE_MAP + 12].reshape(3, 4))
    phi, theta, psi, w = x[3], x[4], x[5], x[9:12]
    cf, sf, ct, st = ops.cos(phi), ops.sin(phi), ops.cos(theta), ops.sin(theta)
    cp, sp, tt = ops.cos(psi), ops.sin(psi), ops.tan(theta)
    b = ops.vertcat(cp * st * cf + sp * sf, sp * st * cf - cp * sf, ct * cf)     # R e_z
    thrust = u[0] + u[1] + u[2] + u[3]
    rates = ops.vertcat(w[0] + sf * tt * w[1] + cf * tt * w[2], cf * w[1] - sf * w[2],
                        (sf * w[1] + cf * w[2]) / ct)
    dv = thrust / m * b - ops.vertcat(0.0, 0.0, g)
    dw = I_inv @ (A @ u - ops.cross(w, I @ w))
    return ops.vertcat(x[6:9], rates, dv, dw)


def quadrotor_torque_map(arm_length, torque_coefficient, configuration="x"):
    """A (3, 4): body torques tau = A u of the four rotor thrusts u (see the module
    docstring for the rotor layout of the "x" and "+" configurations)."""
    if configuration == "x":
        angles = np.deg2rad([45.0, 135.0, 225.0, 315.0])
    elif configuration == "+":
        angles = np.deg2rad([0.0, 90.0, 180.0, 270.0])
    else:
        raise ValueError(f"configuration must be 'x' or '+', got {configuration!r}")
    spins = np.array([-1.0, 1.0, -1.0, 1.0])
    x, y = arm_length * np.cos(angles), arm_length * np.sin(angles)
    return np.array([y, -x, spins * torque_coefficient])


def quadrotor(mass=0.5, inertia=(2.3e-3, 2.3e-3, 4.0e-3), arm_length=0.17,
              torque_coefficient=0.016, configuration="x", gravity=9.81, torque_map=None):
    """A quadrotor with the four rotor thrusts as controls (nx = 12, nu = 4).

    Parameters
    ----------
    mass : kg.  inertia : (3,) principal moments or (3, 3) inertia about the
        centre of mass, in the body frame (kg m^2, symmetric positive definite).
    arm_length : distance from the centre to each rotor (m).
    torque_coefficient : drag torque / thrust of a rotor (m).
    configuration : "x" or "+" (see the module docstring).
    gravity : m/s^2, along -z of the world.
    torque_map : (3, 4) tau = A u, replaces arm_length / torque_coefficient /
        configuration when given.

    The state is x = (p, rpy, v, w): position, Z-Y-X roll-pitch-yaw, world
    linear velocity, body angular velocity (valid away from pitch = +-pi/2);
    hover is u = m g / 4 per rotor.  Use "explicit_euler" (a StageModel's
    default here), "rk2", "rk3" or "rk4" (the velocities are not the time
    derivatives of the orientation coordinates, so there is no symplectic
    Euler, "euler").
    """
    mass = float(mass)
    if not np.isfinite(mass) or mass <= 0.0:
        raise ValueError(f"mass must be positive, got {mass}")
    inertia = np.asarray(inertia, dtype=float)
    if inertia.shape == (3,):
        inertia = np.diag(inertia)
    if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
        raise ValueError(f"inertia: expected (3,) or (3, 3) finite values, got {inertia.shape}")
    if not np.allclose(inertia, inertia.T) or np.linalg.eigvalsh(inertia).min() <= 0.0:
        raise ValueError("inertia must be symmetric positive definite")
    if torque_map is None:
        torque_map = quadrotor_torque_map(arm_length, torque_coefficient, configuration)
    torque_map = np.asarray(torque_map, dtype=float)
    if torque_map.shape != (3, 4) or not np.all(np.isfinite(torque_map)):
        raise ValueError(f"torque_map: expected (3, 4) finite values, got {torque_map.shape}")
    params = np.concatenate([[mass, float(gravity)], inertia.ravel(),
                             np.linalg.inv(inertia).ravel(), torque_map.ravel()])
    dynamics = CustomDynamics(12, 4, _quadrotor_calc, _quadrotor_calc_diff, params,
                              name="quadrotor", symbolic=_quadrotor_field)
    dynamics.mass, dynamics.inertia, dynamics.torque_map = mass, inertia, torque_map
    dynamics.gravity = float(gravity)
    dynamics.hover_thrust = mass * float(gravity) / 4.0
    return dynamics
