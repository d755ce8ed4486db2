"""How wavern's compiled loops come back from numba's disk cache: :func:`cached_njit`.

numba's own cache (``njit(cache=True)``) sets up its whole CPU target before it loads a function:
it imports and registers every implementation numba can compile (numpy, math, lists, dicts, ...),
and its BLAS check imports ``scipy.linalg``. That is what compiling needs; running machine code
from the cache needs only numba's runtime (NRT) and the symbols that code links to. A process
that only speaks compiles nothing, so this cache loads a function without that set-up: about a
third of `wavern say`'s start-up (docs/bench/cold_start.md). A function not in the cache is
compiled as always (numba's compiler sets the target up itself first), and the machine code
loaded is the same either way, so no sample changes (tested).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

__all__ = ["cached_njit", "LoadOnlyCache", "prepare_runtime"]

_READY: set[int] = set()  # ids of the target contexts prepare_runtime has readied


def prepare_runtime(target_context) -> None:
    """Ready numba's runtime in ``target_context`` to run machine code from the cache: its NRT
    (reference counting, allocation) with the symbols of it that compiled code calls, and the hash
    secrets compiled hashing reads. These are the symbols numba adds as it sets its target up
    (tests/wavern/test_numba_cache.py checks that no other is missing); the rest of that set-up
    only compiles."""
    if id(target_context) in _READY:
        return
    from numba.core.runtime import rtsys

    rtsys.initialize(target_context)
    import numba.cpython.hashing  # noqa: F401 - adds the _numba_hashsecret_* symbols

    _READY.add(id(target_context))


try:
    from numba.core.caching import FunctionCache

    class LoadOnlyCache(FunctionCache):
        """numba's cache of one function, loading without setting numba's CPU target up first."""

        def load_overload(self, sig, target_context):
            # numba's FunctionCache.load_overload, less its target_context.refresh() (the set-up)
            prepare_runtime(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
except (ImportError, AttributeError):  # pragma: no cover - another numba: its own cache
    LoadOnlyCache = None  # type: ignore[assignment,misc]


def cached_njit(fn, *, cache_class=None, **options):
    """``numba.njit(cache=True, **options)(fn)``, its cache a :class:`LoadOnlyCache` (or
    ``cache_class``, a subclass of it). With a numba whose cache this module does not know, numba's
    own ``cache=True``."""
    import numba

    cache_class = cache_class or LoadOnlyCache
    if cache_class is None:
        return numba.njit(cache=True, **options)(fn)
    dispatcher = numba.njit(**options)(fn)
    if hasattr(dispatcher, "_cache"):  # (not with NUMBA_DISABLE_JIT=1: the plain function)
        dispatcher._cache = cache_class(fn)  # what njit(cache=True) does, with this class
    return dispatcher
