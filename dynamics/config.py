"""All Numba options of geppetto, in one place.

Every kernel in the package is compiled through :func:`kernel` so that the
flags are the same everywhere: ``cache=True`` (compile once per machine, not
once per process), ``fastmath=False`` (accuracy is the product: the results
are compared with Pinocchio to 1e-10), no object mode, and NumPy's error
model: a division by zero gives inf or NaN (which the solvers detect and
reject) instead of raising from inside a kernel, and no division pays for a
zero check.  ``NUMBA_BOUNDSCHECK=1``
in the environment turns on bounds checking for all of them, as CI does once
for the dynamics tests.

Numba keys a function's on-disk cache entry on its own source file's stamp only (0.68:
a SHA-256 of the file's contents; before, its mtime and size): a kernel calling (or
inlining) kernels of other files kept its cached machine code when only those files
changed (``git pull``, a branch switch, an edit of an editable install), and ran the old
callees' code.  So every kernel of the package is cached by
:class:`PackageFunctionCache`: its stamp is Numba's plus :func:`source_fingerprint` of
its module, a hash of the contents of the package's modules that module imports,
transitively (all the package's sources for a kernel defined outside it): an edit
recompiles, once, the kernels that can call the edited code, and no others (the flags
and the compiled code are Numba's own).
"""
import hashlib
import os
import re
import types
import warnings

import numba
from numba.np.ufunc import parallel as _numba_parallel

try:
    from numba.core.caching import FunctionCache as _FunctionCache
except ImportError:  # a Numba without it: Numba's own cache (see _fingerprinted)
    _FunctionCache = None

NUMBA_OPTIONS = dict(cache=True, fastmath=False, nogil=True, error_model="numpy")
# The options the decorators hand to Numba: the cache is installed by _fingerprinted.
_COMPILE_OPTIONS = dict(NUMBA_OPTIONS, cache=False)

# The package's folders whose code no kernel of the package calls: tests, measurements,
# examples (an edit there recompiles nothing).
_OUTSIDE_KERNELS = frozenset(("tests", "benchmarks", "examples"))
_PACKAGE = __name__.split(".")[0]
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# "from X import names" (a parenthesized list may span lines); X relative or absolute.
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)",
                          re.MULTILINE)
# "import X.Y" / "import X.Y as Z" of the package's modules (absolute only).
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w.]+)", re.MULTILINE)
_SOURCES = {}
_FINGERPRINTS = {}
_DECLARED = {}


def package_sources(root=None, package=None):
    """The package's Python sources, read once per process: {module name: (SHA-256 of the
    file's contents, the package's modules it imports)}, for the package folder and its
    subpackages (folders with an ``__init__.py``), less tests/, benchmarks/ and
    examples/.  Contents, not (mtime, size): a checkout that restores the same files
    keeps its compiled code, a touched file recompiles nothing."""
    if root is None:
        if not _SOURCES:
            _SOURCES.update(package_sources(_ROOT, _PACKAGE))
        return _SOURCES
    texts, folders = {}, [""]
    while folders:
        folder = folders.pop()
        for name in sorted(os.listdir(os.path.join(root, folder))):
            relative = os.path.join(folder, name)
            path = os.path.join(root, relative)
            if name.endswith(".py"):
                parts = [package] + relative[:-3].split(os.sep)
                is_package = parts[-1] == "__init__"
                module = ".".join(parts[:-1] if is_package else parts)
                with open(path, "rb") as handle:
                    texts[module] = (handle.read(), is_package)
            elif (not folder and name in _OUTSIDE_KERNELS) or name.startswith((".", "_")):
                continue
            elif os.path.isfile(os.path.join(path, "__init__.py")):
                folders.append(relative)
    return {module: (hashlib.sha256(text).hexdigest(),
                     _imports(module, is_package, text.decode("utf-8", "replace"), texts))
            for module, (text, is_package) in texts.items()}


def _imports(module, is_package, text, modules):
    """The modules of ``modules`` that ``text`` (the source of ``module``) imports with
    ``from X import a, b`` (X.a where it is a module, else X) or ``import X`` (any such
    line, in a function or a docstring too: more dependencies, never fewer).  A kernel's
    code reaches other code only through the names its module imports or defines."""
    found = set()
    for origin, names in _FROM_IMPORT.findall(text):
        dots = len(origin) - len(origin.lstrip("."))
        if dots:
            base = module if is_package else module.rpartition(".")[0]
            for _ in range(dots - 1):
                base = base.rpartition(".")[0]
            origin = base + ("." + origin[dots:] if origin[dots:] else "")
        names = [n.split()[0] for n in names.strip("()").split(",") if n.split()]
        for name in names or ["*"]:
            # X.a where it is a module (X's own code is then not what the name binds)
            target = origin + "." + name if origin + "." + name in modules else origin
            if target in modules and target != module:
                found.add(target)
    found.update(name for name in _IMPORT.findall(text) if name in modules and name != module)
    return frozenset(found)


def source_fingerprint(module=None, sources=None):
    """A SHA-256 of the sources that the code of ``module`` (a module name) can call: its
    file and the package's modules it imports, transitively; for a module declared by
    :func:`declare_imports` (a generated phase module), the modules declared and what
    they import; of all the package's sources for ``module=None`` or another module
    outside the package (a user's kernel: it may call any kernel of it).  Once per
    process and module."""
    if sources is None:
        if module in _FINGERPRINTS:
            return _FINGERPRINTS[module]
        fingerprint = _FINGERPRINTS[module] = source_fingerprint(module, package_sources())
        return fingerprint
    if module in sources:
        return imports_fingerprint([module], sources)
    if module in _DECLARED:
        return imports_fingerprint(_DECLARED[module], sources)
    return imports_fingerprint(sources, sources)


def imports_fingerprint(modules, sources=None):
    """A SHA-256 of the contents of the package's ``modules`` and of the package's modules
    they import, transitively."""
    sources = package_sources() if sources is None else sources
    reached = {module for module in modules if module in sources}
    pending = list(reached)
    while pending:
        for imported in sources[pending.pop()][1] - reached:
            reached.add(imported)
            pending.append(imported)
    digest = hashlib.sha256()
    for name in sorted(reached):
        digest.update(f"{name}:{sources[name][0]};".encode())
    return digest.hexdigest()


def imported_modules(text):
    """The package's modules that the source ``text`` (of a module outside the package:
    absolute imports) imports."""
    return _imports("", False, text, package_sources())


def declare_imports(module, imported):
    """Declare ``module`` (a module outside the package, generated from a source that
    imports the package's ``imported`` modules, :func:`imported_modules`): its kernels'
    stamp follows those modules (and what they import) instead of all the package."""
    _DECLARED[module] = frozenset(imported)
    _FINGERPRINTS.pop(module, None)


if _FunctionCache is not None:
    class PackageFunctionCache(_FunctionCache):
        """Numba's cache of a function's compiled code, its index stamped with the
        function's file stamp and :func:`source_fingerprint` of its module: an index
        written under other sources of the modules it imports is stale (Numba then
        compiles and overwrites it)."""

        def __init__(self, py_func):
            super().__init__(py_func)
            index = self._cache_file
            index._source_stamp = (index._source_stamp,
                                   source_fingerprint(py_func.__module__))
else:
    def PackageFunctionCache(py_func):  # noqa: N802 - stands for the class
        raise ImportError("numba.core.caching.FunctionCache")


def _fingerprinted(dispatcher):
    """``dispatcher`` (compiled with ``cache=False``) given :class:`PackageFunctionCache`:
    ``cache=True`` of ``NUMBA_OPTIONS`` done with the package's stamp (one cache object
    made per kernel, not two: 593 kernels, ~30 ms of import).  Should Numba's internals
    differ (no ``FunctionCache``, no index stamp), Numba's own cache, with a warning that
    after an update of the package its ``__pycache__`` folders need deleting."""
    try:
        dispatcher._cache = PackageFunctionCache(dispatcher.py_func)
    except Exception as error:  # noqa: BLE001 - any internal change: Numba's default
        dispatcher.enable_caching()
        if not _WARNED:
            _WARNED.append(True)
            warnings.warn(f"geppetto: Numba's cache cannot be keyed on the package's "
                          f"sources ({type(error).__name__}: {error}); after an update of "
                          f"the package delete its __pycache__ folders", RuntimeWarning)
    return dispatcher


_WARNED = []


def kernel(function):
    """Compile ``function`` in nopython mode with the project's options."""
    return _fingerprinted(numba.njit(**_COMPILE_OPTIONS)(function))


def model_kernel(function):
    """Like :func:`kernel`, for a kernel whose first argument ``model`` is a
    ``ModelArrays`` tuple or a ``ModelRef`` (:mod:`.model_ref`; the kernel starts with
    ``m = model_arrays(model)``): ``validation.call_kernel`` passes it the ModelRef,
    one object to unbox instead of 22."""
    dispatcher = kernel(function)
    dispatcher.takes_model_ref = True
    return dispatcher


def inline_kernel(function):
    """Like :func:`kernel`, inlined into its callers at the Numba IR level.

    For the small per-joint helpers that take the whole ``ModelArrays``
    tuple: passing that tuple to a separately compiled function costs more
    than the helper's arithmetic (measured: placements 2.8 us -> 1.0 us on
    ur5), inlining removes the call.
    """
    return _fingerprinted(numba.njit(inline="always", **_COMPILE_OPTIONS)(function))


def parallel_kernel(batch):
    """Like :func:`kernel`, for loops written with ``numba.prange`` over the items of
    the argument named ``batch`` (its first dimension: the knots or states), compiled
    for the thread count it is called on: on one Numba thread (``ShootingProblem``'s
    default) a serial compile of the same function (``prange`` runs as ``range``:
    the same loop, the same results), which compiles several times faster than
    the parallel one; the parallel compile happens only for callers on more
    threads, and only for batches of two items or more.  Call it from Python only
    (it is not a Numba dispatcher itself)."""
    def decorate(function):
        return ThreadedKernel(function, batch)
    return decorate


class ThreadedKernel:
    """A ``prange`` function compiled twice, lazily: ``serial`` (numba.njit) and
    ``parallel`` (numba.njit(parallel=True)); a call goes to ``serial`` when
    ``numba.get_num_threads()`` is 1 or when the batch argument holds one item (or
    none): one item cannot be split, and starting Numba's thread pool for it cost
    8-12 ms a call on a loaded machine (a terminal constraint left to Python, cq30;
    ~10 us on the serial copy).  The serial copy is named ``<name>_serial``
    so that the two keep separate entries in Numba's on-disk cache (its index
    is keyed by the function's name and signature, not by the flags)."""

    def __init__(self, function, batch):
        names = function.__code__.co_varnames[:function.__code__.co_argcount]
        if batch not in names:
            raise ValueError(f"{function.__name__} has no argument {batch!r}")
        self.batch_index = names.index(batch)
        self.py_func = function
        self.parallel = _fingerprinted(numba.njit(parallel=True, **_COMPILE_OPTIONS)(function))
        self.serial = kernel(_renamed(function, "_serial"))
        self.__name__, self.__qualname__ = function.__name__, function.__qualname__
        self.__doc__, self.__module__ = function.__doc__, function.__module__

    def __call__(self, *args):
        if num_threads() == 1 or args[self.batch_index].shape[0] < 2:
            return self.serial(*args)
        return self.parallel(*args)


def num_threads():
    """``numba.get_num_threads()`` without its locks once the threading layer is up.

    Numba's function takes two locks to launch the layer on every call (measured
    0.7-1.0 us, ~40 calls per FDDP iteration); once launched, the count is one read
    of the calling thread's setting (~0.1 us).  Falls back to Numba's function before
    the launch (or should Numba rename its internals)."""
    if getattr(_numba_parallel, "_is_initialized", False):
        return _numba_parallel._get_num_threads()
    return numba.get_num_threads()


def _renamed(function, suffix):
    """A copy of ``function`` (same code, globals and defaults) named name + suffix."""
    copy = types.FunctionType(function.__code__, function.__globals__,
                              function.__name__ + suffix, function.__defaults__,
                              function.__closure__)
    copy.__qualname__ = function.__qualname__ + suffix
    copy.__module__, copy.__doc__ = function.__module__, function.__doc__
    return copy
