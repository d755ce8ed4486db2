#!/usr/bin/env bash
# Run the whole wavern test suite headless (sets up first if needed; idempotent).
#   ./test.sh            all tests
#   ./test.sh -k attn    extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --no-speak --dev
export QT_QPA_PLATFORM=offscreen
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$PWD/.numba_cache}"
# The engine's numba kernels first, one weight type per process side by side: an empty cache fills
# in ~1 min on 2 cores instead of ~2 inside the tests' one process; a filled one takes seconds.
for half in False True; do
  .venv/bin/python -c "import wavern.engine.kernels as K; K.warmup(half=$half)" &
done
wait || true  # a kernel that does not compile fails in the tests, with their report
exec .venv/bin/python -m pytest -q "$@"
