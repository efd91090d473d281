"""What the URDF loader checks beyond syntax, and how it reports it.

Pinocchio's ``buildModelFromUrdf`` loads many files whose numbers are not
physically consistent (a rotational inertia that is indefinite by rounding,
principal moments breaking the triangle inequality, a lower position limit
above the upper one); real URDFs are full of such rounding.
:mod:`geppetto.robots.urdf` loads them too, each defect reported once as a
:class:`URDFWarning` that names the link or joint and the defect;
``strict=True`` raises :class:`URDFError` instead.

Reported the same way: moving joints whose subtree has no mass or inertia
along their motion (romeo's fingers): the joint-space inertia matrix M is
singular (Pinocchio's ``aba`` returns NaN there; ours raises a ValueError
saying why); the warning says so at load, ``strict=True`` refuses the file.  Refused
whatever ``strict`` says (a :class:`URDFError` naming the element): what
Pinocchio refuses too (negative velocity or effort limits, non-finite
numbers), and a negative mass (Pinocchio loads it into an inertia with
entries of 1e30).

Quoted text in every message is cut to :data:`QUOTE_LIMIT` characters, so a
malformed file never produces a message the size of the file.
"""
import os
import sys
import warnings

import numpy as np

QUOTE_LIMIT = 80
MESSAGE_LIMIT = 2000
_LIST_LIMIT = 10


class URDFError(ValueError):
    """A URDF or SRDF document that does not describe a valid robot."""

    def __init__(self, message):
        super().__init__(_shorten(str(message), MESSAGE_LIMIT))


class URDFWarning(UserWarning):
    """A URDF loaded as Pinocchio loads it, with a defect worth knowing: a
    physically inconsistent inertia, crossed position limits, or mimic joints
    loaded as independent joints."""


def _shorten(text, limit):
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}...[{len(text) - 2 * half} characters cut]...{text[-half:]}"


def quote(text, limit=QUOTE_LIMIT):
    """``repr(text)``, cut in the middle past ``limit`` characters."""
    text = str(text)
    if len(text) <= limit:
        return repr(text)
    head = limit // 2          # the start and the end (a path's file name) are kept
    return repr(text[:head] + " ... " + text[len(text) - (limit - head):]) + \
        f" ({len(text)} characters)"


def quote_list(names):
    """Up to ten quoted names, comma-separated, then how many more."""
    names = list(names)
    shown = ", ".join(quote(name) for name in names[:_LIST_LIMIT])
    more = len(names) - _LIST_LIMIT
    return shown if more <= 0 else f"{shown} and {more} more"


def warn(message):
    """Warn with URDFWarning, attributed to the first caller outside ``robots/``."""
    here, frame, level = os.path.dirname(os.path.abspath(__file__)), sys._getframe(1), 2
    while frame is not None and os.path.dirname(os.path.abspath(
            frame.f_code.co_filename)) == here:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, URDFWarning, stacklevel=level)


def report(message, strict):
    """Raise URDFError(message) if ``strict``, else warn with URDFWarning."""
    if strict:
        raise URDFError(message + " (strict=True)")
    warn(message)


def check_inertia(link, mass, inertia, strict):
    """Raise on a negative mass; report a rotational inertia (about the com)
    that is not positive semi-definite or breaks the triangle inequality."""
    what = f"link {quote(link)}"
    if mass < 0.0:
        raise URDFError(f"{what}: negative mass {mass}")
    if inertia[0, 1] == inertia[0, 2] == inertia[1, 2] == 0.0:    # principal axes
        moments = np.sort(np.diag(inertia))
    else:
        moments = np.linalg.eigvalsh(inertia)
    scale = max(np.abs(moments).max(), 1e-300)
    if moments[0] < -1e-10 * scale:
        report(f"{what}: rotational inertia is not positive semi-definite (principal "
               f"moments {moments})", strict)
    elif moments[0] + moments[1] < moments[2] - 1e-9 * moments.sum():
        report(f"{what}: principal moments {moments} break the triangle inequality "
               "I1 + I2 >= I3", strict)


def check_limit(joint, limit, strict):
    """Negative velocity or effort limits raise (Pinocchio refuses them);
    lower > upper is reported (Pinocchio loads it)."""
    what = f"joint {quote(joint)}: limit"
    for key in ("velocity", "effort"):
        if limit[key] < 0.0:
            raise URDFError(f"{what}: {key}={limit[key]} is negative")
    if limit["lower"] > limit["upper"]:
        report(f"{what}: lower={limit['lower']} is above upper={limit['upper']} "
               "(random_configuration cannot draw this joint)", strict)


def _joint_space_inertia_blocks(arrays):
    """Diagonal blocks ``S_i^T Ic_i S_i`` of M at the neutral configuration,
    with ``Ic_i`` the composite inertia of the subtree of joint i (one backward
    pass, Featherstone's CRBA, eq. 6.5).  At the neutral configuration every
    joint transform is the identity, so ``liMi`` is the joint placement."""
    Ic = np.array(arrays.inertia, dtype=float)
    for i in range(arrays.njoints - 1, 0, -1):
        Xf = _force_transform(arrays.jR[i], arrays.jp[i])
        Ic[arrays.parents[i]] += Xf @ Ic[i] @ Xf.T
    blocks = []
    for i in range(1, arrays.njoints):
        S = arrays.S[:, arrays.idx_v[i]:arrays.idx_v[i] + arrays.nvs[i]]
        blocks.append(S.T @ Ic[i] @ S)
    return blocks


def _force_transform(R, p):
    """6x6 matrix mapping a spatial force [f; n] from frame i to its parent,
    where (R, p) places i in the parent: [[R, 0], [[p]x R, R]]."""
    X = np.zeros((6, 6))
    X[:3, :3] = R
    X[3:, 3:] = R
    px = np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])
    X[3:, :3] = px @ R
    return X


def check_motion_has_inertia(model, strict):
    """Report the joints whose subtree has no mass or inertia along their
    motion at the neutral configuration: M is singular there."""
    singular = []
    for i, block in enumerate(_joint_space_inertia_blocks(model.arrays), start=1):
        moments = np.abs(block[0]) if block.shape == (1, 1) else np.abs(
            np.linalg.eigvalsh(block))
        if moments.max() == 0.0 or moments.min() <= 1e-14 * moments.max():
            singular.append(model.names[i])
    if singular:
        report(f"joints {quote_list(singular)} move links without mass or inertia along "
               "their motion: the joint-space inertia matrix M is singular, and aba and "
               "compute_minverse raise (Pinocchio's return NaN); give those links "
               "an <inertial>, make the joints fixed, or add armature "
               "(model.with_changes(armature=...))", strict)
