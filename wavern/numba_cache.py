"""How wavern's compiled loops come back from numba's disk cache: :func:`cached_njit`.

numba's own cache (``njit(cache=True)``) sets up its whole CPU target before it loads a function:
it imports and registers every implementation numba can compile (numpy, math, lists, dicts, ...),
and its BLAS check imports ``scipy.linalg``. That is what compiling needs; running machine code
from the cache needs only numba's runtime (NRT) and the symbols that code links to. A process
that only speaks compiles nothing, so this cache loads a function without that set-up: about a
third of `wavern say`'s start-up (docs/bench/cold_start.md). A function not in the cache is
compiled as always (numba's compiler sets the target up itself first), and the machine code
loaded is the same either way, so no sample changes (tested).

What a load from the cache still paid and does not need, each skipped here: the NRT's own
functions compiled from LLVM IR (their machine code is cached beside the loops'), numba's listing
of every installed package's entry points before it types a call (done before a compile instead),
numpy's masked-array package imported to type an array argument, and numba's start importing
scipy, yaml and ``importlib.metadata`` (:func:`import_numba`).
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger(__name__)

__all__ = ["cached_njit", "LoadOnlyCache", "prepare_runtime", "import_numba"]


def import_numba():
    """``import numba``, less three imports its start makes that a process loading cached kernels
    never uses: scipy, imported only for a version check (numba's BLAS support imports
    ``scipy.linalg`` itself when it compiles), yaml, for a ``.numba_config.yaml`` in the working
    folder (kept where that file exists), and ``importlib.metadata`` (with the email and socket
    packages it imports), which numba reads only to list the installed packages' extensions before
    a compile: it is imported then (:class:`_LazyMetadata`). About 30 ms of a voice's start
    (docs/bench/cold_start.md). Each module imports as usual afterwards. With other threads
    running, a plain ``import numba``: one of them could be importing these modules meanwhile."""
    if "numba" in sys.modules:
        return sys.modules["numba"]
    import os
    import threading
    import types

    # (only while this is the process's one thread: another could be importing one meanwhile)
    alone = threading.active_count() == 1
    skipped = [name for name, wanted in (("scipy", False), ("yaml", os.path.isfile(".numba_config.yaml")))
               if alone and name not in sys.modules and not wanted]
    for name in skipped:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    stub = None
    if alone and _METADATA not in sys.modules:  # numba.core.entrypoints binds it at import: a stand-in
        stub = sys.modules[_METADATA] = types.ModuleType(_METADATA)
    try:
        import numba
    finally:
        for name in skipped:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
        if stub is not None and sys.modules.get(_METADATA) is stub:
            del sys.modules[_METADATA]
    if stub is not None:
        from numba.core import entrypoints

        if entrypoints.importlib_metadata is stub:
            entrypoints.importlib_metadata = _LazyMetadata()
    return numba


_METADATA = "importlib.metadata"


class _LazyMetadata:
    """Stands for ``importlib.metadata`` in numba's entry-point module: imports it when numba first
    reads from it (listing the extensions before a compile)."""

    def __getattr__(self, name: str):
        import importlib.metadata

        return getattr(importlib.metadata, name)


_READY: set[int] = set()  # ids of the target contexts prepare_runtime has readied


def prepare_runtime(target_context, cache_dir: str | None = None) -> None:
    """Ready numba's runtime in ``target_context`` to run machine code from the cache: its NRT
    (reference counting, allocation) with the symbols of it that compiled code calls, and the hash
    secrets compiled hashing reads. These are the symbols numba adds as it sets its target up
    (tests/wavern/test_numba_cache.py checks that no other is missing), the secrets without
    importing numba's hashing module (:func:`_add_hash_secrets`); the rest of that set-up only
    compiles.

    numba compiles the NRT's own functions from LLVM IR in every process (~20 ms); with
    ``cache_dir`` (the folder of the function's cache) their machine code comes from a file there
    (:func:`_nrt_library`), written by the first process that compiles them."""
    if id(target_context) in _READY:
        return
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys

    with global_compiler_lock:
        if not rtsys._init:
            _initialize_nrt(rtsys, target_context, cache_dir)
        _add_hash_secrets()
    _READY.add(id(target_context))


# numba.cpython.hashing adds these symbols as it is imported (~4 ms of a voice's start, its imports
# with it): CPython's hash secrets, which compiled string hashing reads. The same three values
# from CPython's ``_Py_HashSecret`` (24 bytes: SipHash's k0 and k1, then the suffix of its
# small-string hash after 16 bytes of padding), kept alive here; numba adds them again, the same
# values, if it imports that module later.
_HASH_SECRETS: dict = {}


def _add_hash_secrets() -> None:
    if _HASH_SECRETS or "numba.cpython.hashing" in sys.modules:
        return
    import ctypes

    import llvmlite.binding as ll

    raw = (ctypes.c_uint64 * 3).in_dll(ctypes.pythonapi, "_Py_HashSecret")
    for name, value in (("siphash_k0", raw[0]), ("siphash_k1", raw[1]), ("djbx33a_suffix", raw[2])):
        cell = _HASH_SECRETS[name] = ctypes.c_uint64(value)
        ll.add_symbol(f"_numba_hashsecret_{name}", ctypes.addressof(cell))


def _initialize_nrt(rtsys, ctx, cache_dir: str | None) -> None:
    """numba's ``rtsys.initialize(ctx)`` (numba.core.runtime.nrt), its compiled functions from
    :func:`_nrt_library`."""
    import llvmlite.binding as ll
    from numba.core import config
    from numba.core.runtime import _nrt_python as _nrt

    if config.NRT_STATS:
        _nrt.memsys_enable_stats()
    for py_name, address in _nrt.c_helpers.items():
        ll.add_symbol(py_name if py_name.startswith("_") else "NRT_" + py_name, address)
    rtsys._library = _nrt_library(ctx, cache_dir)
    rtsys._init = True


def _nrt_library(ctx, cache_dir: str | None):
    """The NRT's LLVM functions (numba's ``nrtdynmod.compile_nrt_functions``) as a code library:
    unserialised from ``cache_dir``'s file for this numba, llvmlite and CPU target (numba's
    ``codegen.magic_tuple()``, as its cache index keys a function), else compiled and saved there."""
    import hashlib
    import os
    import pickle

    import llvmlite
    import numba
    from numba.core.runtime import nrtdynmod

    codegen = ctx.codegen()
    key = repr((numba.__version__, llvmlite.__version__, codegen.magic_tuple())).encode()
    path = (os.path.join(cache_dir, f"wavern-nrt-{hashlib.sha256(key).hexdigest()[:16]}.nbc")
            if cache_dir else None)
    if path is not None:
        try:
            with open(path, "rb") as f:
                stored_key, state = pickle.load(f)
            if stored_key == key:
                return codegen.unserialize_library(state)
        except FileNotFoundError:
            pass
        except Exception as e:  # noqa: BLE001 - a damaged file: compile afresh and replace it
            log.debug("NRT cache %s unreadable (%s); compiling", path, e)
    ir_mod, library = nrtdynmod.create_nrt_module(ctx)
    library.enable_object_caching()
    library.add_ir_module(ir_mod)
    library.finalize()
    if path is not None:
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(cache_dir, exist_ok=True)
            with open(tmp, "wb") as f:
                pickle.dump((key, library.serialize_using_object_code()), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError as e:  # a read-only cache folder: compiled each time, as numba does
            log.debug("NRT cache %s not written (%s)", path, e)
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return library


def _type_arrays_without_numpy_ma() -> None:
    """numba types an ndarray argument (at a function's first call, before the cache is read) with
    ``typeof_impl``'s ndarray rule, whose first step, refusing a masked array, reads ``np.ma``:
    numpy imports its masked-array package then (~10 ms). The same rule is registered here with
    that test made only where numpy.ma is imported already (a masked array cannot exist before);
    the rest is numba's rule, line for line (tests/wavern/test_numba_cache.py compares the two)."""
    import numpy as np
    from numba.core import errors, types
    from numba.core.typing import typeof as numba_typeof
    from numba.np import numpy_support

    original = getattr(numba_typeof, "_typeof_ndarray", None)
    if original is None or numba_typeof.typeof_impl.dispatch(np.ndarray) is not original:
        return  # another numba, or someone else's rule: leave it

    def _typeof_ndarray(val, c):
        ma = sys.modules.get("numpy.ma")
        if ma is not None and isinstance(val, ma.MaskedArray):
            raise errors.NumbaTypeError("Unsupported array type: numpy.ma.MaskedArray.")
        try:
            dtype = numpy_support.from_dtype(val.dtype)
        except errors.NumbaNotImplementedError:
            raise errors.NumbaValueError(f"Unsupported array dtype: {val.dtype}") from None
        layout = numpy_support.map_layout(val)
        readonly = not val.flags.writeable
        return types.Array(dtype, val.ndim, layout, readonly=readonly)

    _typeof_ndarray.numba_rule = original  # (for the test)
    numba_typeof.typeof_impl.register(np.ndarray)(_typeof_ndarray)


try:
    import_numba()
    from numba.core.caching import CompileResultCacheImpl, FunctionCache

    _type_arrays_without_numpy_ma()

    _WRITABLE: set[str] = set()  # cache folders already found writable in this process

    class _EnsureOnce:
        """A numba cache locator that checks its folder (made if missing, a temporary file written
        and removed) once a process, not once for every function defined: ~0.1 ms each, some 50
        functions at the kernels' import."""

        def ensure_cache_path(self):
            path = self.get_cache_path()
            if path not in _WRITABLE:
                super().ensure_cache_path()
                _WRITABLE.add(path)

    class _CheckedOnceImpl(CompileResultCacheImpl):
        _locator_classes = [type(cls.__name__, (_EnsureOnce, cls), {})
                            for cls in CompileResultCacheImpl._locator_classes]

    class LoadOnlyCache(FunctionCache):
        """numba's cache of one function, loading without setting numba's CPU target up first."""

        _impl_class = _CheckedOnceImpl

        def load_overload(self, sig, target_context):
            # numba's FunctionCache.load_overload, less its target_context.refresh() (the set-up)
            prepare_runtime(target_context, getattr(self, "_cache_path", None))
            with self._guard_against_spurious_io_errors():
                loaded = self._load_overload(sig, target_context)
            if loaded is None:  # not cached: numba compiles it next, its extensions registered first
                from numba.core import entrypoints

                entrypoints.init_all()
            return loaded
except (ImportError, AttributeError):  # pragma: no cover - another numba: its own cache
    LoadOnlyCache = None  # type: ignore[assignment,misc]


def cached_njit(fn, *, cache_class=None, **options):
    """``numba.njit(cache=True, **options)(fn)``, its cache a :class:`LoadOnlyCache` (or
    ``cache_class``, a subclass of it). With a numba whose cache this module does not know, numba's
    own ``cache=True``."""
    numba = import_numba()
    cache_class = cache_class or LoadOnlyCache
    if cache_class is None:
        return numba.njit(cache=True, **options)(fn)
    dispatcher = numba.njit(**options)(fn)
    if hasattr(dispatcher, "_cache"):  # (not with NUMBA_DISABLE_JIT=1: the plain function)
        dispatcher._cache = cache_class(fn)  # what njit(cache=True) does, with this class
        # numba registers its extensions (installed packages' entry points, ~10 ms to list them)
        # before it types a call; they only matter to a compile, which the cache's load_overload
        # precedes with that registration itself when the function is not cached
        dispatcher._compilation_chain_init_hook = _no_hook
    return dispatcher


def _no_hook() -> None:
    pass
