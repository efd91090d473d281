"""Mesh files a URDF may make us read (and embed in an exported HTML page).

A mesh is read only from inside the package its ``package://`` URI names, or,
for ``file://`` and plain paths, from inside the URDF's folder, or from a
folder the user allows (``allowed_mesh_roots``).  A mesh name leading
anywhere else (``file:///...``, ``../..``, ``package://pkg/../../``, a
symbolic link out of the folder) is left out with a URDFWarning naming it,
and the exported page does not contain the file.
"""
import base64
import os
import re
import warnings

import pytest
import umsgpack

from geppetto.robots import URDFWarning, load_urdf
from geppetto.robots.visualize import MeshcatVisualizer

MARKER = b"geppetto-private-marker"


def _stl(path):
    """A one-triangle ASCII STL whose name is MARKER."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"solid " + MARKER + b"\nfacet normal 0 0 1\nouter loop\n"
                     b"vertex 0 0 0\nvertex 0.1 0 0\nvertex 0 0.1 0\nendloop\nendfacet\n"
                     b"endsolid " + MARKER + b"\n")
    return path


def _robot_file(folder, mesh_filename):
    """``folder/pkg/urdf/robot.urdf``: one link whose visual is ``mesh_filename``."""
    path = folder / "pkg" / "urdf" / "robot.urdf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""<robot name="r"><link name="base"><inertial><mass value="1"/>
      <inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>
      <visual><geometry><mesh filename="{mesh_filename}"/></geometry></visual></link></robot>""")
    return path


def _embedded_bytes(page):
    """Every msgpack-encoded meshcat command of an exported page, decoded."""
    chunks = re.findall(r'"([A-Za-z0-9+/=]{40,})"', page)
    return b"".join(umsgpack.packb(umsgpack.unpackb(base64.b64decode(c))) for c in chunks)


@pytest.fixture
def layout(tmp_path):
    """A secret file outside the robot's folder, and meshes inside it."""
    secret = _stl(tmp_path / "private" / "secret.stl")
    _stl(tmp_path / "pkg" / "meshes" / "part.stl")
    _stl(tmp_path / "pkg" / "urdf" / "local.stl")
    return tmp_path, secret


ESCAPES = {
    "absolute file URI": lambda root, secret: f"file://{secret}",
    "absolute path": lambda root, secret: str(secret),
    "relative path up": lambda root, secret: "../../private/secret.stl",
    "package URI up": lambda root, secret: "package://pkg/../private/secret.stl",
    "package URI to the file system root": lambda root, secret: (
        "package://pkg/" + "../" * 40 + str(secret).lstrip("/")),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_mesh_outside_the_robot_folders_is_not_read(case, layout):
    root, secret = layout
    filename = ESCAPES[case](root, secret)
    path = _robot_file(root, filename)
    with pytest.warns(URDFWarning, match=r"mesh .* outside the URDF's folder .* not read"):
        robot = load_urdf(path, package_dirs=[root])
    assert robot.visuals[0].mesh_path is None
    viz = MeshcatVisualizer(robot, server=False)
    assert viz.skipped == ["base_0"]
    assert MARKER not in _embedded_bytes(viz.html(robot.q0))
    # The same file is read when the user allows its folder.
    with warnings.catch_warnings():
        warnings.simplefilter("error", URDFWarning)
        allowed = load_urdf(path, package_dirs=[root], allowed_mesh_roots=[secret.parent])
    assert os.path.samefile(allowed.visuals[0].mesh_path, secret)
    page = MeshcatVisualizer(allowed, server=False).html(allowed.q0)
    assert MARKER in _embedded_bytes(page)


def test_symbolic_link_out_of_the_folder_is_not_followed(layout):
    root, secret = layout
    link = root / "pkg" / "urdf" / "link.stl"
    link.symlink_to(secret)
    with pytest.warns(URDFWarning, match="secret.stl"):
        robot = load_urdf(_robot_file(root, "link.stl"), package_dirs=[root])
    assert robot.visuals[0].mesh_path is None


@pytest.mark.parametrize("filename", ["package://pkg/meshes/part.stl", "local.stl",
                                      "file://local.stl"])
def test_meshes_inside_the_package_or_the_urdf_folder_are_read(filename, layout):
    root, _ = layout
    with warnings.catch_warnings():
        warnings.simplefilter("error", URDFWarning)
        robot = load_urdf(_robot_file(root, filename), package_dirs=[root])
    assert robot.visuals[0].mesh_path is not None
    page = MeshcatVisualizer(robot, server=False).html(robot.q0)
    assert MARKER in _embedded_bytes(page)


def test_default_package_dirs_still_stop_at_the_package(layout):
    root, secret = layout
    path = _robot_file(root, "package://pkg/../private/secret.stl")
    with pytest.warns(URDFWarning, match="not read"):
        robot = load_urdf(path)        # package_dirs: every folder above the URDF
    assert robot.visuals[0].mesh_path is None
