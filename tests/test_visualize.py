"""Meshcat visualization: placements, the standalone HTML export rendered in
headless Chromium, and the live server's loopback binding.

The rendering tests need Debian's chromium (``apt-get install -y chromium``);
they are skipped, saying so, when it is absent.  Every page is rendered from a
file:// URL with networking off, so a robot on the screenshot proves the page
is standalone.
"""
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import numpy as np
import pytest

from geppetto import robots
from geppetto.robots import visualize
from geppetto.robots.robot import Robot, VisualGeometry
from geppetto.robots.visualize import MeshcatVisualizer, visual_object, visual_placements

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "/usr/bin/chromium")
WINDOW = (800, 600)
CAMERA = (1.2, 1.2, 0.8)                          # world frame, looking at the origin
UR5_MOTION = np.array([1.0, -1.2, 1.0, 0.3, 0.5, 0.2])
PIXEL_TOLERANCE = 40                              # per channel, out of 255


def _chromium():
    for candidate in CHROMIUM_CANDIDATES:
        path = shutil.which(candidate)
        if path:
            return path
    pytest.skip("chromium not installed: the HTML export is rendered in headless "
                "Chromium (Debian: apt-get install -y chromium)")


def _screenshot_commands(chromium, pages, folder):
    """One headless-Chromium command per page -> (command, png path)."""
    commands = {}
    for name, page in pages.items():
        png = os.path.join(folder, name + ".png")
        commands[name] = ([
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--hide-scrollbars", "--mute-audio",
            # WebGL on the CPU (SwiftShader): newer Chromium asks for it by name
            "--enable-unsafe-swiftshader",
            f"--user-data-dir={os.path.join(folder, 'profile-' + name)}",
            f"--screenshot={png}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--virtual-time-budget=5000", "file://" + page], png)
    return commands


def _render(pages, folder):
    """Screenshots (H, W, 3) uint8 of the HTML files ``pages`` (name -> path), in parallel."""
    from PIL import Image
    commands = _screenshot_commands(_chromium(), pages, folder)
    running = {name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
               for name, (cmd, _) in commands.items()}
    images = {}
    for name, process in running.items():
        output, _ = process.communicate(timeout=120)
        png = commands[name][1]
        assert process.returncode == 0 and os.path.isfile(png), (
            f"chromium failed on {pages[name]}:\n{output.decode(errors='replace')[-2000:]}")
        images[name] = np.asarray(Image.open(png).convert("RGB"))
    return images


def _changed_pixels(a, b, region=None):
    """How many pixels of ``region`` (slices) differ by more than PIXEL_TOLERANCE."""
    region = region or (slice(None), slice(None))
    difference = np.abs(a[region].astype(int) - b[region].astype(int)).max(axis=-1)
    return int((difference > PIXEL_TOLERANCE).sum())


# The central 60 % of the view: the robot is there, the Controls bar is not.
CENTRAL = (slice(int(0.2 * WINDOW[1]), int(0.8 * WINDOW[1])),
           slice(int(0.2 * WINDOW[0]), int(0.8 * WINDOW[0])))


@pytest.fixture(scope="module")
def ur5():
    return robots.load("ur5")


@pytest.fixture(scope="module")
def ur5_trajectory(ur5):
    """10 configurations, 0.1 s apart: a 0.9 s motion of every joint."""
    return ur5.q0 + np.linspace(0.0, 1.0, 10)[:, None] * UR5_MOTION


@pytest.fixture(scope="module")
def screenshots(ur5, ur5_trajectory, tmp_path_factory):
    """Screenshots of: the ur5 animation; the ur5 standing still at the first and
    at the last configuration; the same scene with no robot geometry."""
    _chromium()
    folder = str(tmp_path_factory.mktemp("meshcat_html"))
    viz = MeshcatVisualizer(ur5, server=False)
    empty = MeshcatVisualizer(Robot(ur5.model, name="ur5", visuals=()), server=False)
    qs = ur5_trajectory
    pages = {
        "animation": viz.export_html(qs, 0.1, os.path.join(folder, "animation.html"),
                                     camera_position=CAMERA),
        "first": viz.export_html(qs[0], None, os.path.join(folder, "first.html"),
                                 camera_position=CAMERA),
        "last": viz.export_html(qs[-1], None, os.path.join(folder, "last.html"),
                                camera_position=CAMERA),
        "empty": empty.export_html(qs, 0.1, os.path.join(folder, "empty.html"),
                                   camera_position=CAMERA),
    }
    return _render(pages, folder)


# ------------------------------------------------------------- rendering
def test_exported_animation_draws_the_robot(screenshots):
    drawn = _changed_pixels(screenshots["animation"], screenshots["empty"], CENTRAL)
    area = (CENTRAL[0].stop - CENTRAL[0].start) * (CENTRAL[1].stop - CENTRAL[1].start)
    assert drawn > 0.02 * area, (
        f"only {drawn} of {area} central pixels differ from the scene without the robot")
    # The scene itself (background, grid, axes) is drawn: not a blank page.
    colours = screenshots["empty"].astype(np.int64) @ [65536, 256, 1]
    assert len(np.unique(colours)) > 50
    # The still page draws it too.
    assert _changed_pixels(screenshots["first"], screenshots["empty"]) > 0.02 * area


def test_exported_animation_plays_to_its_last_configuration(screenshots):
    # After 5 s of virtual time the 0.9 s animation has played and holds the
    # last configuration: the same picture as a still page at qs[-1] ...
    assert _changed_pixels(screenshots["animation"], screenshots["last"]) < 50
    # ... and not the picture of the configuration it started from.
    assert _changed_pixels(screenshots["animation"], screenshots["first"], CENTRAL) > 1000


def test_exported_html_is_standalone(ur5, ur5_trajectory, tmp_path):
    path = MeshcatVisualizer(ur5, server=False).export_html(
        ur5_trajectory, 0.1, str(tmp_path / "ur5.html"))
    with open(path, encoding="utf-8") as f:
        page = f.read()
    assert page.startswith("<!DOCTYPE html>")
    assert "<script src" not in page and "<link" not in page
    assert "MeshCat.Viewer" in page
    # 7 meshes + 7 placements + 1 animation
    start, end = page.index("var commands = [") + 16, page.index("];\nfor (var i")
    assert len(page[start:end].split(",")) == 2 * len(ur5.visuals) + 1


# ------------------------------------------------------------ placements
@pytest.mark.parametrize("name", ["ur5", "hyq"])
def test_visual_placements_match_pinocchio(name, load_case):
    import pinocchio as pin
    case = load_case(name)
    robot = case.robot
    geometry = pin.buildGeomFromUrdf(case.pin_model, robot.urdf_path, pin.GeometryType.VISUAL,
                                     package_dirs=robot.package_dirs)
    qs = case.states(3, seed=1).q
    oMg = visual_placements(robot, robot.model.create_data(), qs)
    pin_data, geometry_data = case.pin_data(), geometry.createData()
    index = {g.name: i for i, g in enumerate(geometry.geometryObjects)}
    for k, q in enumerate(qs):
        pin.updateGeometryPlacements(case.pin_model, pin_data, geometry, geometry_data, q)
        for g, visual in enumerate(robot.visuals):
            expected = geometry_data.oMg[index[visual.name]].homogeneous
            np.testing.assert_allclose(oMg[k, g], expected, rtol=0, atol=1e-12,
                                       err_msg=f"{name} {visual.name} state {k}")


def _visual(kind, size=(), rgba=None, mesh_path=None, scale=(1.0, 1.0, 1.0)):
    return VisualGeometry(name=f"link_{kind}_0", link="link", frame_id=0, joint=0,
                          R=np.eye(3), p=np.zeros(3), kind=kind, size=size,
                          mesh_path=mesh_path, scale=np.array(scale), rgba=rgba)


def _object_matrix(obj):
    """The object's fixed matrix as three.js reads it (column-major)."""
    return np.array(obj.lower()["object"]["matrix"]).reshape(4, 4).T


def test_primitives_lower_to_threejs_geometry():
    box = visual_object(_visual("box", (0.1, 0.2, 0.3), rgba=(1.0, 0.0, 0.0, 1.0))).lower()
    assert box["geometries"][0]["type"] == "BoxGeometry"
    assert [box["geometries"][0][k] for k in ("width", "height", "depth")] == [0.1, 0.2, 0.3]
    assert box["materials"][0]["color"] == 0xFF0000
    sphere = visual_object(_visual("sphere", (0.25,))).lower()
    assert sphere["geometries"][0]["radius"] == 0.25
    cylinder = visual_object(_visual("cylinder", (0.05, 0.4)))
    lowered = cylinder.lower()["geometries"][0]
    assert (lowered["radiusTop"], lowered["height"]) == (0.05, 0.4)
    # three.js's cylinder axis (y) is turned onto the URDF's (z)
    np.testing.assert_allclose(_object_matrix(cylinder) @ [0, 1, 0, 0], [0, 0, 1, 0])


def test_mesh_scale_and_colour(ur5):
    dae = next(v for v in ur5.visuals if v.mesh_path.endswith(".dae")).mesh_path
    stl = next(v for v in robots.load("solo12").visuals).mesh_path
    mirrored = visual_object(_visual("mesh", mesh_path=stl, scale=(1.0, -1.0, 2.0)))
    np.testing.assert_allclose(_object_matrix(mirrored), np.diag([1.0, -1.0, 2.0, 1.0]))
    assert mirrored.lower()["geometries"][0]["format"] == "stl"
    # a .dae without a URDF colour keeps its own materials ...
    own = visual_object(_visual("mesh", mesh_path=dae)).lower()
    assert own["object"]["type"] == "_meshfile_object" and own["object"]["format"] == "dae"
    # ... and takes the URDF colour when there is one
    coloured = visual_object(_visual("mesh", mesh_path=dae, rgba=(0.0, 1.0, 0.0, 0.5))).lower()
    assert coloured["materials"][0]["color"] == 0x00FF00
    assert coloured["materials"][0]["opacity"] == 0.5


def test_missing_mesh_is_skipped_and_unknown_format_refused(ur5, tmp_path):
    missing = _visual("mesh", mesh_path=None)
    viz = MeshcatVisualizer(Robot(ur5.model, visuals=[missing]), server=False)
    assert viz.skipped == [missing.name]
    ply = tmp_path / "part.ply"
    ply.write_text("ply\n")
    with pytest.raises(ValueError, match="mesh format '.ply'"):
        visual_object(_visual("mesh", mesh_path=str(ply)))


def test_states_are_accepted_as_trajectory(ur5, ur5_trajectory):
    viz = MeshcatVisualizer(ur5, server=False)
    xs = np.hstack([ur5_trajectory, np.ones((len(ur5_trajectory), ur5.nv))])
    assert viz.html(xs, 0.1) == viz.html(ur5_trajectory, 0.1)


def test_bad_input_is_refused(ur5, ur5_trajectory):
    viz = MeshcatVisualizer(ur5, server=False)
    with pytest.raises(ValueError, match=r"shape \(K, 6\)"):
        viz.html(np.zeros((3, 5)), 0.1)
    with pytest.raises(ValueError, match="dt must be"):
        viz.html(ur5_trajectory, 0.0)
    with pytest.raises(ValueError, match="dt must be"):
        viz.html(ur5_trajectory)
    with pytest.raises(RuntimeError, match="no live viewer"):
        viz.display(ur5.q0)


# ------------------------------------------------------------ live server
def _listening_addresses(pid):
    """(address, port) of every TCP socket the process ``pid`` listens on (Linux)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    addresses = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state != "0A" or inode not in inodes:          # 0A: LISTEN
                    continue
                hex_address, hex_port = local.split(":")
                raw = bytes.fromhex(hex_address)
                # /proc writes each 32-bit word in host (little-endian) order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                addresses.append((socket.inet_ntop(family, raw), int(hex_port, 16)))
    return addresses


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc")
def test_live_server_listens_on_loopback_only(ur5, ur5_trajectory):
    with MeshcatVisualizer(ur5) as viz:
        process = viz._process
        addresses = _listening_addresses(process.pid)
        assert len(addresses) == 2, addresses                  # ZMQ and the web server
        assert all(address == "127.0.0.1" for address, _ in addresses), addresses
        assert viz.web_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(viz.web_url, timeout=10) as response:
            assert response.status == 200 and b"meshcat" in response.read().lower()
        viz.display(ur5_trajectory[-1])
        start = time.perf_counter()
        viz.play(ur5_trajectory[:5], 0.05)
        assert time.perf_counter() - start >= 5 * 0.05 - 1e-3   # not faster than real time
        # a second visualizer joins the running server instead of starting one
        with MeshcatVisualizer(ur5, zmq_url=viz._window.zmq_url) as other:
            assert other._process is None and other.web_url == viz.web_url
            other.display(ur5.q0)
    assert process.poll() is not None                           # close() stopped it


def test_server_ends_with_its_parent():
    # The server watches its standard input, which only the parent holds.
    process, zmq_url, web_url = visualize.start_loopback_server()
    assert zmq_url.startswith("tcp://127.0.0.1:") and web_url.startswith("http://127.0.0.1:")
    process.stdin.close()
    assert process.wait(timeout=30) == 0


def test_unreachable_server_is_refused(ur5, monkeypatch):
    monkeypatch.setattr(visualize, "CONNECT_TIMEOUT_MS", 200)
    with socket.socket() as s:                                  # a port nobody serves
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError, match="no meshcat server answers"):
        MeshcatVisualizer(ur5, zmq_url=f"tcp://127.0.0.1:{port}")
