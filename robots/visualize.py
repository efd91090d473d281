"""Meshcat visualization of a :class:`~geppetto.robots.robot.Robot`.

>>> viz = MeshcatVisualizer(robot, open=True)     # live viewer on 127.0.0.1
>>> viz.display(q)                                 # q: (nq,)
>>> viz.play(qs, dt)                               # qs: (K, nq), real time
>>> viz.export_html(qs, dt, "solution.html")       # standalone animated page
>>> viz.export_html(xs, dt, path, camera_position=(1.5, 1.5, 1.0))  # xs: (K, nq + nv)
>>> MeshcatVisualizer(robot, server=False).export_html(qs, dt, path)  # no server

Notation: a visual geometry g is carried by joint i at the placement iMg =
(``visual.R``, ``visual.p``); its world placement is oMg = oMi iMg, with oMi
from :func:`geppetto.dynamics.forward_kinematics` (all K configurations of a
trajectory in one call).  Each geometry is the meshcat node
``/meshcat/<robot name>/<visual name>`` whose transform is oMg; what the
geometry needs on top of a rigid placement (a mesh's scale, a URDF cylinder's
z axis against three.js's y axis) is the fixed matrix of the object inside
that node, so that a placement is always a rigid motion (position and
quaternion, which is all a meshcat animation track holds).

The live server is meshcat's own ZMQ/websocket bridge, started in a
subprocess with both its sockets bound to 127.0.0.1 (meshcat binds ZMQ to
127.0.0.1 but its web server to every interface; here it is forced to the
loopback).  The exported HTML inlines meshcat's viewer (``main.min.js`` of the
installed package) and the scene, so it opens in any browser from a file, with
no server and no network.  It embeds only the mesh files the URDF loader
accepted (``visual.mesh_path``): files inside the package a ``package://``
URI names or inside the URDF's folder, or in ``allowed_mesh_roots``; a mesh
name that leads elsewhere is left out, with a warning, by
:func:`~geppetto.robots.urdf.resolve_mesh_path`.
"""
import atexit
import base64
import os
import subprocess
import sys
import tempfile
import threading
import time
import webbrowser

import numpy as np
import umsgpack
import zmq
from meshcat import geometry as mg
from meshcat.animation import Animation, AnimationFrameVisualizer
from meshcat.commands import SetAnimation, SetObject, SetProperty, SetTransform
from meshcat.path import Path
from meshcat.visualizer import ViewerWindow

from ..dynamics import forward_kinematics
from ..dynamics.mimic import MimicModel

LOOPBACK = "127.0.0.1"
DEFAULT_RGBA = (0.75, 0.75, 0.75, 1.0)
SERVER_START_TIMEOUT = 30.0     # seconds to wait for the server to say its URLs
CONNECT_TIMEOUT_MS = 3000       # a given zmq_url must answer within this
_VIEWER_JS = os.path.join(os.path.dirname(mg.__file__), "viewer", "dist", "main.min.js")
# URDF cylinders lie along z, three.js cylinders along y: rotate y onto z.
_Y_TO_Z = np.array([[1.0, 0.0, 0.0, 0.0],
                    [0.0, 0.0, -1.0, 0.0],
                    [0.0, 1.0, 0.0, 0.0],
                    [0.0, 0.0, 0.0, 1.0]])
_MESH_EXTENSIONS = (".dae", ".stl", ".obj")
_CAMERA = Path(("Cameras", "default", "rotated", "<object>"))


# ------------------------------------------------------------- geometry
class _PlacedObject(mg.Mesh):
    """A meshcat mesh object with a fixed (possibly non-rigid) 4x4 ``matrix``.

    meshcat 0.3.2 writes an object's matrix row-major (harmless for its
    diagonal ellipsoids); three.js reads it column-major, as written here.
    """

    def __init__(self, geometry, material, matrix):
        super().__init__(geometry, material)
        self.matrix = np.asarray(matrix, dtype=float)

    def lower(self):
        data = super().lower()
        data["object"]["matrix"] = list(self.matrix.T.flatten())
        return data


class _DaeObject(mg.Object):
    """A COLLADA mesh drawn with its own materials (three.js ``_meshfile_object``)."""

    def __init__(self, contents, matrix):
        mg.SceneElement.__init__(self)      # no separate geometry and material
        self.contents = contents
        self.matrix = np.asarray(matrix, dtype=float)

    def lower(self):
        return {
            "metadata": {"version": 4.5, "type": "Object"},
            "geometries": [],
            "materials": [],
            "object": {"uuid": self.uuid, "type": "_meshfile_object", "format": "dae",
                       "data": self.contents, "resources": {},
                       "matrix": list(self.matrix.T.flatten())},
        }


def _material(rgba):
    r, g, b, a = DEFAULT_RGBA if rgba is None else rgba
    color = (int(round(255 * r)) << 16) + (int(round(255 * g)) << 8) + int(round(255 * b))
    return mg.MeshPhongMaterial(color=color, opacity=float(a))


def _mesh_object(visual):
    """The meshcat object of a mesh visual, or None if its file is missing."""
    if visual.mesh_path is None:
        return None
    extension = os.path.splitext(visual.mesh_path)[1].lower()
    if extension not in _MESH_EXTENSIONS:
        raise ValueError(f"visual {visual.name!r}: mesh format {extension!r} of "
                         f"{visual.mesh_path} is not one of {_MESH_EXTENSIONS}")
    scale = np.diag(np.append(np.asarray(visual.scale, dtype=float), 1.0))
    if extension == ".dae" and visual.rgba is None:
        with open(visual.mesh_path, "r", encoding="utf-8", errors="replace") as f:
            return _DaeObject(f.read(), scale)
    if extension == ".stl":
        geometry = mg.StlMeshGeometry.from_file(visual.mesh_path)
    elif extension == ".dae":
        geometry = mg.DaeMeshGeometry.from_file(visual.mesh_path)
    else:
        geometry = mg.ObjMeshGeometry.from_file(visual.mesh_path)
    return _PlacedObject(geometry, _material(visual.rgba), scale)


def visual_object(visual):
    """The meshcat object that draws a :class:`VisualGeometry` in its own frame.

    Boxes, spheres and cylinders become three.js primitives (cylinders turned
    from three.js's y axis to the URDF's z axis); meshes (.dae, .stl, .obj)
    are embedded, scaled by ``visual.scale``.  A .dae mesh without a URDF
    colour keeps the colours of its file.  Returns None for a mesh whose file
    was not found (``visual.mesh_path`` is None).
    """
    if visual.kind == "mesh":
        return _mesh_object(visual)
    material = _material(visual.rgba)
    if visual.kind == "box":
        return _PlacedObject(mg.Box([float(s) for s in visual.size]), material, np.eye(4))
    if visual.kind == "sphere":
        return _PlacedObject(mg.Sphere(float(visual.size[0])), material, np.eye(4))
    if visual.kind == "cylinder":
        radius, length = (float(s) for s in visual.size)
        return _PlacedObject(mg.Cylinder(length, radius), material, _Y_TO_Z)
    raise ValueError(f"visual {visual.name!r}: unknown geometry kind {visual.kind!r}")


def visual_placements(robot, data, qs):
    """World placements oMg of every visual of ``robot``, as 4x4 matrices.

    Parameters
    ----------
    robot : Robot
    data : Data of ``robot.model`` (its workspace is overwritten)
    qs : (K, nq) array of configurations (a MimicModel's reduced ones: the
        mimic joints follow)

    Returns
    -------
    (K, len(robot.visuals), 4, 4) array: oMg = oMi iMg for each configuration.
    """
    model = robot.model
    if isinstance(model, MimicModel):      # the full tree, mimic joints following
        model, qs = model.full, model.expand_configuration(qs)
    oR, op = forward_kinematics(model, data, qs)                # (K, nj, 3, 3), (K, nj, 3)
    K, G = oR.shape[0], len(robot.visuals)
    oMg = np.zeros((K, G, 4, 4))
    oMg[:, :, 3, 3] = 1.0
    if G == 0:
        return oMg
    joints = np.array([v.joint for v in robot.visuals])
    iRg = np.stack([v.R for v in robot.visuals])                # (G, 3, 3)
    ipg = np.stack([v.p for v in robot.visuals])                # (G, 3)
    oMg[:, :, :3, :3] = np.einsum("kgij,gjl->kgil", oR[:, joints], iRg)
    oMg[:, :, :3, 3] = op[:, joints] + np.einsum("kgij,gj->kgi", oR[:, joints], ipg)
    return oMg


# ------------------------------------------------------------------ HTML
_HTML_TEMPLATE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<style>
body { margin: 0; }
#meshcat-pane { width: 100vw; height: 100vh; overflow: hidden; }
</style>
</head>
<body>
<div id="meshcat-pane"></div>
<script>
@VIEWER_JS@
</script>
<script>
var viewer = new MeshCat.Viewer(document.getElementById("meshcat-pane"));
var commands = [
@COMMANDS@
];
for (var i = 0; i < commands.length; i++) {
    var bytes = Uint8Array.from(atob(commands[i]), function (c) { return c.charCodeAt(0); });
    viewer.handle_command_bytearray(bytes);
}
</script>
</body>
</html>
"""


def static_html(commands, title="geppetto"):
    """A standalone HTML page that runs meshcat ``commands`` in order.

    The page inlines meshcat's viewer script from the installed package and
    the msgpack-encoded commands (base64), decoded synchronously so that they
    apply in the order given.  It needs no server and no network.
    """
    with open(_VIEWER_JS, "r", encoding="utf-8") as f:
        viewer_js = f.read()
    encoded = ",\n".join('"' + base64.b64encode(umsgpack.packb(c.lower())).decode("ascii") + '"'
                         for c in commands)
    title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # Substitute the (small, known) title and commands before the large script,
    # so that nothing inside meshcat's script is ever taken for a placeholder.
    page = _HTML_TEMPLATE.replace("@TITLE@", title).replace("@COMMANDS@", encoded)
    return page.replace("@VIEWER_JS@", viewer_js)


# ----------------------------------------------------------- live server
def _serve_loopback():
    """Run meshcat's ZMQ/websocket bridge on 127.0.0.1 (the server subprocess).

    Prints ``zmq_url=...`` and ``web_url=...``, then serves until its standard
    input closes: the parent holds the other end, so the server ends with the
    parent even when the parent is killed.
    """
    import tornado.web
    from meshcat.servers import zmqserver

    class LoopbackApplication(tornado.web.Application):
        def listen(self, port, address=None, **kwargs):
            return super().listen(port, address=LOOPBACK, **kwargs)

    class LoopbackBridge(zmqserver.ZMQWebSocketBridge):
        def make_app(self):
            return LoopbackApplication([
                (r"/static/(.*)", zmqserver.StaticFileHandlerNoCache,
                 {"path": zmqserver.VIEWER_ROOT, "default_filename": zmqserver.VIEWER_HTML}),
                (r"/", zmqserver.WebSocketHandler, {"bridge": self}),
            ])

    bridge = LoopbackBridge(host=LOOPBACK)
    print(f"zmq_url={bridge.zmq_url}")
    print(f"web_url={bridge.web_url}", flush=True)
    sys.stdout = open(os.devnull, "w")          # the parent reads nothing more
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    bridge.run()


def _stop(process):
    if process.poll() is None:
        process.kill()
        process.wait()
    process.stdin.close()


def start_loopback_server():
    """Start a meshcat server bound to 127.0.0.1 in a subprocess.

    Returns ``(process, zmq_url, web_url)``.  The server stops when
    :meth:`MeshcatVisualizer.close` kills it, at exit, or when this process
    ends in any way (it watches its standard input).
    """
    errors = tempfile.TemporaryFile()
    process = subprocess.Popen(
        [sys.executable, "-u", "-c",
         "from geppetto.robots.visualize import _serve_loopback; _serve_loopback()"],
        stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.PIPE,
        start_new_session=True)
    urls = {}
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while len(urls) < 2 and time.monotonic() < deadline:
        line = process.stdout.readline().decode("utf-8", "replace").strip()
        if not line and process.poll() is not None:
            break
        key, _, value = line.partition("=")
        if key in ("zmq_url", "web_url"):
            urls[key] = value
    process.stdout.close()
    if len(urls) < 2:
        _stop(process)
        errors.seek(0)
        raise RuntimeError("the meshcat server did not start:\n"
                           + errors.read().decode("utf-8", "replace"))
    errors.close()
    atexit.register(_stop, process)
    return process, urls["zmq_url"], urls["web_url"]


def _check_server(zmq_url):
    """Raise ConnectionError unless a meshcat server answers at ``zmq_url``."""
    socket = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.RCVTIMEO, CONNECT_TIMEOUT_MS)
    socket.setsockopt(zmq.LINGER, 0)
    try:
        socket.connect(zmq_url)
        socket.send(b"url")
        socket.recv()
    except zmq.ZMQError as error:
        raise ConnectionError(f"no meshcat server answers at {zmq_url!r} "
                              f"({error})") from None
    finally:
        socket.close()


# ------------------------------------------------------------ visualizer
class MeshcatVisualizer:
    """Show a robot in meshcat: live, or as a standalone HTML animation.

    Parameters
    ----------
    robot : Robot
        Its ``visuals`` are drawn; meshes whose file was not found are skipped
        (listed in ``skipped``).
    open : bool
        Open the live viewer in a web browser.
    zmq_url : str, optional
        Connect to a meshcat server already running there (for instance
        ``tcp://127.0.0.1:6000``) instead of starting one.
    server : bool
        False: no live viewer at all; only :meth:`html` and
        :meth:`export_html` work (for scripts and tests without a display).

    Attributes
    ----------
    robot, data : the robot and the dynamics workspace used for placements
    prefix : str, the meshcat path of the robot, ``/meshcat/<robot name>``
    web_url : str or None, where a browser finds the live viewer
    skipped : list of str, visuals not drawn (mesh file not found)
    """

    def __init__(self, robot, open=False, zmq_url=None, server=True):
        self.robot = robot
        self.data = robot.model.create_data()
        self.prefix = "/meshcat/" + robot.name
        self.skipped = []
        self._drawn = []                    # indices into robot.visuals
        self._objects = []                  # SetObject commands, one per drawn visual
        for g, visual in enumerate(robot.visuals):
            obj = visual_object(visual)
            if obj is None:
                self.skipped.append(visual.name)
                continue
            self._drawn.append(g)
            self._objects.append(SetObject(obj, path=self._path(visual)))
        self._process = None
        self._window = None
        self.web_url = None
        if server:
            self._connect(zmq_url)
            for command in self._objects:
                self._window.send(command)
            self.display(robot.q0)
            if open:
                webbrowser.open(self.web_url, new=2)

    def _path(self, visual):
        return Path(tuple(s for s in (self.prefix + "/" + visual.name).split("/") if s))

    def _connect(self, zmq_url):
        if zmq_url is None:
            self._process, zmq_url, _ = start_loopback_server()
        else:
            _check_server(zmq_url)
        self._window = ViewerWindow(zmq_url=zmq_url, start_server=False, server_args=[])
        self.web_url = self._window.web_url

    def _placements(self, qs):
        """(K, n_drawn, 4, 4) oMg of the drawn visuals for qs (K, nq)."""
        return visual_placements(self.robot, self.data, qs)[:, self._drawn]

    def _transforms(self, oMg):
        """SetTransform commands placing the drawn visuals at oMg (n_drawn, 4, 4)."""
        return [SetTransform(M, self._objects[d].path) for d, M in enumerate(oMg)]

    def _require_server(self):
        if self._window is None:
            raise RuntimeError("this MeshcatVisualizer has no live viewer (server=False "
                               "or closed); use html() or export_html()")

    def _as_trajectory(self, qs):
        """(K, nq) configurations from qs (K, nq), xs (K, nq + nv) or one q (nq,)."""
        nq, nv = self.robot.nq, self.robot.nv
        qs = np.asarray(qs, dtype=float)
        if qs.ndim == 1:
            qs = qs[None]
        if qs.ndim == 2 and qs.shape[1] == nq + nv and nv > 0:
            qs = qs[:, :nq]                 # states x = (q, v): a solver's xs
        if qs.ndim != 2 or qs.shape[1] != nq or qs.shape[0] == 0:
            raise ValueError(f"qs must have shape (K, {nq}) (or states (K, {nq + nv})) "
                             f"with K >= 1, got {np.shape(qs)}")
        return qs

    # --------------------------------------------------------- live
    def display(self, q):
        """Show configuration ``q`` (nq,) in the live viewer."""
        self._require_server()
        q = np.asarray(q, dtype=float)
        if q.shape != (self.robot.nq,):
            raise ValueError(f"q must have shape ({self.robot.nq},), got {q.shape}")
        for command in self._transforms(self._placements(q[None])[0]):
            self._window.send(command)

    def play(self, qs, dt):
        """Play the trajectory ``qs`` (K, nq), one configuration every ``dt`` s.

        ``qs`` may also be states xs (K, nq + nv), as a solver returns them.

        Runs at real time: the placements of all K configurations are computed
        first (one kinematics call); a configuration whose time has passed
        while the viewer was busy is skipped, the last one always shown.
        """
        self._require_server()
        qs, dt = self._as_trajectory(qs), _check_dt(dt)
        oMg = self._placements(qs)
        start = time.perf_counter()
        for k in range(len(qs)):
            late = time.perf_counter() - start > (k + 1) * dt
            if late and k < len(qs) - 1:
                continue
            for command in self._transforms(oMg[k]):
                self._window.send(command)
            pause = start + (k + 1) * dt - time.perf_counter()
            if pause > 0:
                time.sleep(pause)

    def close(self):
        """Disconnect, and stop the server if this visualizer started it."""
        if self._window is not None:
            self._window.zmq_socket.close(linger=0)
            self._window = None
        if self._process is not None:
            _stop(self._process)
            self._process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------- export
    def html(self, qs, dt=None, repetitions=1, camera_position=None):
        """The standalone HTML page of ``qs``: a trajectory (K, nq), states xs
        (K, nq + nv) or one configuration (nq,).

        The page starts at ``qs[0]``; with K > 1 it plays the trajectory, one
        configuration every ``dt`` seconds, ``repetitions`` times, and stays
        at ``qs[-1]`` (meshcat's Animations panel replays and scrubs it).
        ``camera_position`` (3,) places the camera in the world (z up),
        looking at the origin; meshcat's default view otherwise.
        """
        qs = self._as_trajectory(qs)
        oMg = self._placements(qs)
        commands = self._objects + self._transforms(oMg[0])
        if camera_position is not None:
            commands.append(_camera_command(camera_position))
        if len(qs) > 1:
            dt = _check_dt(dt)
            animation = Animation(default_framerate=1.0 / dt)
            for k in range(len(qs)):
                for d, M in enumerate(oMg[k]):
                    frame = AnimationFrameVisualizer(animation, self._objects[d].path, k)
                    frame.set_transform(M)
            commands.append(SetAnimation(animation, play=True, repetitions=repetitions))
        return static_html(commands, title=f"geppetto: {self.robot.name}")

    def export_html(self, qs, dt=None, path="animation.html", repetitions=1,
                    camera_position=None):
        """Write :meth:`html` of ``qs`` to ``path``; returns the absolute path."""
        page = self.html(qs, dt, repetitions, camera_position)
        path = os.path.abspath(path)
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        return path

    def __repr__(self):
        where = self.web_url if self._window is not None else "no live viewer"
        return f"MeshcatVisualizer({self.robot.name!r}, {where})"


def _camera_command(position):
    """Place meshcat's default camera at ``position`` (3,), world frame, z up."""
    x, y, z = np.asarray(position, dtype=float).reshape(3)
    # The camera lives in three.js's frame (y up): world (x, y, z) is (x, z, -y).
    return SetProperty("position", [x, z, -y], _CAMERA)


def _check_dt(dt):
    if dt is None or not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a positive finite number of seconds, got {dt!r}")
    return float(dt)
