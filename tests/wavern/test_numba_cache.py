"""wavern.numba_cache: compiled loops load from numba's cache without numba's compile set-up, and
run the same machine code as after it (each check in a fresh process: this one has compiled, so
its numba is set up already)."""

import os
import subprocess
import sys

import numpy as np

from wavern.numba_cache import cached_njit

_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, env=_ENV)
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


def test_cached_njit_compiles_the_function():
    def double_plus(a, b):  # pragma: no cover - compiled
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = 2.0 * a[i] + b
        return out

    fn = cached_njit(double_plus, nogil=True)
    x = np.arange(5.0)
    assert np.array_equal(fn(x, 1.5), double_plus(x, 1.5))
