"""wavern.numba_cache: compiled loops load from numba's cache without numba's compile set-up, and
run the same machine code as after it (each check in a fresh process: this one has compiled, so
its numba is set up already)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wavern.numba_cache import cached_njit

_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _run(code: str, *, cwd=None, env: dict | None = None) -> str:
    """Run ``code`` in a fresh process (``env`` on top of this one's); its last line of output."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                         env={**_ENV, **(env or {})}, cwd=cwd)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def _speak(voice, *, set_up_first: bool) -> str:
    """A fresh process loads ``voice`` and streams a sentence: (sha256 of the samples, whether numba's
    implementation modules and scipy.linalg got imported)."""
    return _run("import hashlib, sys\n"
                "import numpy as np\n"
                "from wavern.engine import Voice\n"
                + ("from numba.core.registry import cpu_target\n"
                   "cpu_target.target_context.refresh()  # numba's own set-up, as its cache does before a load\n"
                   if set_up_first else "")
                + f"with Voice.load({str(voice)!r}) as v:\n"
                "    s = np.concatenate([c.samples for c in v.stream('Hello there. Two sentences.', seed=3)])\n"
                "print(hashlib.sha256(s.tobytes()).hexdigest(), 'numba.np.arraymath' in sys.modules,\n"
                "      'scipy.linalg' in sys.modules)\n")


def test_a_voice_speaks_from_the_cache_without_numbas_set_up_and_the_same_samples(tiny_voice):
    _speak(tiny_voice, set_up_first=False)  # fills the cache with whatever this voice needs (if a test has not)
    digest, arraymath, scipy_linalg = _speak(tiny_voice, set_up_first=False).split()
    assert arraymath == "False" and scipy_linalg == "False"  # nothing compiled, numba not set up
    reference, arraymath, _ = _speak(tiny_voice, set_up_first=True).split()
    assert arraymath == "True"
    assert digest == reference


def test_the_runtime_set_up_adds_every_symbol_numbas_set_up_adds():
    """Cached machine code links to symbols numba adds to LLVM's table; all that its compile
    set-up adds must be there after :func:`prepare_runtime` (a numba upgrade that adds another
    fails here, not in a user's process)."""
    missing = _run("import llvmlite.binding as ll\n"
                   "import wavern.engine.kernels\n"
                   "from numba.core.registry import cpu_target\n"
                   "from wavern.numba_cache import prepare_runtime\n"
                   "ctx = cpu_target.target_context\n"
                   "prepare_runtime(ctx)\n"
                   "missing, add = [], ll.add_symbol\n"
                   "def check(name, address):\n"
                   "    if not ll.address_of_symbol(name):\n"
                   "        missing.append(name)\n"
                   "    add(name, address)\n"
                   "ll.add_symbol = check\n"
                   "ctx.refresh()\n"
                   "print('missing', missing)\n")
    assert missing == "missing []"


def test_the_hash_secrets_are_cpythons_and_cached_string_hashing_matches_python(tmp_path):
    """prepare_runtime adds CPython's three hash secrets itself (numba's hashing module would add
    them as it is imported): the same values numba reads, and a cached loop that hashes a string,
    loaded without that module, gives Python's own hash (random per process)."""
    secrets = _run("import ctypes, sys\n"
                   "import llvmlite.binding as ll\n"
                   "import wavern.engine.kernels\n"
                   "from numba.core.registry import cpu_target\n"
                   "from wavern.numba_cache import prepare_runtime\n"
                   "prepare_runtime(cpu_target.target_context)\n"
                   "names = ('siphash_k0', 'siphash_k1', 'djbx33a_suffix')\n"
                   "ours = {n: ctypes.c_uint64.from_address(ll.address_of_symbol('_numba_hashsecret_' + n)).value\n"
                   "        for n in names}\n"
                   "print('numba.cpython.hashing' in sys.modules, end=' ')\n"
                   "import numba.cpython.hashing as h\n"
                   "print(all(ours[n] == h._hashsecret[n].value.value for n in names))\n")
    assert secrets.split() == ["False", "True"]
    (tmp_path / "hashes.py").write_text("from wavern.numba_cache import cached_njit\n"
                                        "def _h(s):\n"
                                        "    return hash(s)\n"
                                        "h = cached_njit(_h)\n")
    code = ("import sys\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "import hashes\n"
            "word = 'wavern' + str(len(sys.argv))\n"
            "print(hashes.h(word) == hash(word), len(hashes.h.overloads))\n")
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    assert _run(code, cwd=tmp_path, env=env).split() == ["True", "1"]  # compiled, saved
    assert _run(code, cwd=tmp_path, env=env).split() == ["True", "1"]  # from the cache


def test_each_cache_folder_is_checked_once_a_process():
    """numba checks a cache folder by writing a temporary file there, for every function it
    caches; the kernels' ~50 functions share a folder, checked once."""
    out = _run("import tempfile\n"
               "folders = []\n"
               "real = tempfile.TemporaryFile\n"
               "tempfile.TemporaryFile = lambda *a, **k: (folders.append(k.get('dir')), real(*a, **k))[1]\n"
               "import wavern.engine.kernels as K\n"
               "print(len(folders), len(set(folders)), len(K._generate.stats.cache_path or ''))\n")
    checks, folders, path = map(int, out.split())
    assert path > 0 and checks == folders >= 1


def test_cached_njit_compiles_the_function():
    def double_plus(a, b):  # pragma: no cover - compiled
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = 2.0 * a[i] + b
        return out

    fn = cached_njit(double_plus, nogil=True)
    x = np.arange(5.0)
    assert np.array_equal(fn(x, 1.5), double_plus(x, 1.5))


# A module with one cached loop that allocates (so it links to the NRT), and a process that calls it.
_MODULE = ("import numpy as np\n"
           "from wavern.numba_cache import cached_njit\n"
           "def _ramp(n):\n"
           "    out = np.empty(n)\n"
           "    for i in range(n):\n"
           "        out[i] = 0.5 * i\n"
           "    return out\n"
           "ramp = cached_njit(_ramp)\n")
_CALL = ("import sys\n"
         "sys.path.insert(0, {folder!r})\n"
         "import numba.core.runtime.nrtdynmod as nrtdynmod\n"
         "compiled = []\n"
         "_compile = nrtdynmod.create_nrt_module\n"
         "nrtdynmod.create_nrt_module = lambda ctx: (compiled.append(1), _compile(ctx))[1]\n"
         "import numba.core.entrypoints as ep\n"
         "import loops\n"
         "total = float(loops.ramp(10).sum())\n"
         "print(total, len(compiled), ep._already_initialized, len(loops.ramp.overloads))\n")


def _call_loops(tmp_path, cache) -> list[str]:
    return _run(_CALL.format(folder=str(tmp_path)), cwd=tmp_path, env={"NUMBA_CACHE_DIR": str(cache)}).split()


def test_the_nrt_machine_code_comes_from_the_cache_folder_and_a_damaged_file_is_replaced(tmp_path):
    (tmp_path / "loops.py").write_text(_MODULE)
    cache = tmp_path / "cache"
    # first process: nothing cached; the NRT compiled and saved, numba's extensions registered
    # before the loop compiles
    assert _call_loops(tmp_path, cache) == ["22.5", "1", "True", "1"]
    [nrt] = cache.rglob("wavern-nrt-*.nbc")
    # second: the loop and the NRT from the cache; numba's extension scan skipped
    assert _call_loops(tmp_path, cache) == ["22.5", "0", "False", "1"]
    nrt.write_bytes(b"not a pickle")  # damaged: compiled afresh, the file written again
    assert _call_loops(tmp_path, cache) == ["22.5", "1", "False", "1"]
    assert _call_loops(tmp_path, cache) == ["22.5", "0", "False", "1"]


def test_import_numba_leaves_scipy_and_yaml_unimported_unless_a_numba_config_file_asks(tmp_path):
    code = ("import sys\n"
            "from wavern.numba_cache import import_numba\n"
            "import_numba()\n"
            "print('scipy' in sys.modules, 'yaml' in sys.modules, end=' ')\n"
            "import scipy, yaml  # both import as usual afterwards\n"
            "import numba.core.config as c\n"
            "print(c.BOUNDSCHECK)\n")
    assert _run(code, cwd=tmp_path).split() == ["False", "False", "None"]
    (tmp_path / ".numba_config.yaml").write_text("boundscheck: 1\n")  # numba reads it with yaml
    assert _run(code, cwd=tmp_path).split() == ["False", "True", "1"]


def test_import_numba_leaves_importlib_metadata_until_numba_lists_its_extensions(tmp_path):
    """numba reads the installed packages' entry points (importlib.metadata) only before a compile;
    the import waits for that, and the list numba then reads is the real one."""
    code = ("import sys\n"
            "from wavern.numba_cache import import_numba\n"
            "numba = import_numba()\n"
            "from numba.core import entrypoints\n"
            "print('importlib.metadata' in sys.modules, 'email' in sys.modules, end=' ')\n"
            "triple = numba.njit(lambda x: 3 * x)  # not cached: registers numba's extensions first\n"
            "print(triple(2), entrypoints._already_initialized, 'importlib.metadata' in sys.modules, end=' ')\n"
            "import importlib.metadata as m\n"
            "print(entrypoints.importlib_metadata.entry_points is m.entry_points)\n")
    assert _run(code, cwd=tmp_path).split() == ["False", "False", "6", "True", "True", "True"]


def test_arrays_are_typed_as_numbas_own_rule_types_them_without_importing_numpy_ma():
    import numba.core.errors as errors
    from numba.core.typing.typeof import Purpose, typeof, typeof_impl

    import wavern.numba_cache  # noqa: F401 - registers the rule

    ours = typeof_impl.dispatch(np.ndarray)
    numba_rule = ours.numba_rule
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    frozen = base.copy()
    frozen.flags.writeable = False
    cases = [base, base.T, base[:, ::2], base[::2], frozen, np.zeros(3, np.int16), np.zeros((2, 2), np.complex128),
             np.zeros(0, np.uint64), np.zeros((1, 3, 2), np.float64)[:, :, 0], np.asfortranarray(base),
             np.zeros(2, "U3"), np.zeros(2, object), np.zeros(2, "M8[s]"), np.zeros(3, np.float16)]
    for a in cases:
        assert ours(a, Purpose.argument) == numba_rule(a, Purpose.argument)
        assert typeof(a, Purpose.argument) == numba_rule(a, Purpose.argument)
    masked = np.ma.masked_array(base, mask=base > 3)  # (numpy.ma imported now)
    for rule in (ours, numba_rule):
        with pytest.raises(errors.NumbaTypeError, match="MaskedArray"):
            rule(masked, Purpose.argument)
    for rule in (ours, numba_rule):
        with pytest.raises(errors.NumbaValueError, match="Unsupported array dtype"):
            rule(np.zeros(2, dtype="V3"), Purpose.argument)
    # a process that loads a voice's loops from the cache leaves numpy.ma unimported
    assert _run("import sys\n"
                "import numpy as np\n"
                "from wavern.engine.kernels import conv1d\n"
                "conv1d(np.zeros((8, 2), np.float32), np.zeros((3, 2, 3), np.float32), np.zeros(3, np.float32))\n"
                "print('numpy.ma' in sys.modules)\n") == "False"


def test_the_shipped_voice_loads_and_speaks_without_numbas_array_string_and_hashing_modules():
    """A cached loop that allocates an array, reshapes one or assigns a slice ties numba's array
    and string helpers to its code: loading it imports numba.np.arrayobj and numba.cpython.unicode
    (~14 ms of a voice's start). The shipped voice's loops (kernels, post-filter, LPC, mel matching)
    take their scratch from the caller instead. numba's hashing module is not needed either."""
    voice = Path(__file__).resolve().parents[2] / "assets" / "voices" / "default"
    code = ("import sys\n"
            "from wavern.engine import Voice\n"
            f"with Voice.load({str(voice)!r}) as v:\n"
            "    for chunk in v.stream('Hello there.', seed=1):\n"
            "        pass\n"
            "print(*(m in sys.modules for m in ('numba.np.arrayobj', 'numba.cpython.unicode',\n"
            "                                    'numba.cpython.hashing')))\n")
    _run(code)  # fills the cache with what this voice needs (if a test has not)
    assert _run(code).split() == ["False", "False", "False"]  # (hashing: the secrets, _add_hash_secrets)


def test_import_numba_with_other_threads_running_imports_numba_as_usual(tmp_path):
    code = ("import sys, threading\n"
            "stop = threading.Event()\n"
            "t = threading.Thread(target=stop.wait)\n"
            "t.start()\n"
            "from wavern.numba_cache import import_numba\n"
            "import_numba()\n"
            "stop.set()\n"
            "print('scipy' in sys.modules)\n")
    assert _run(code, cwd=tmp_path).split() == ["True"]  # numba's own start, scipy's version check included
