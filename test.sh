#!/usr/bin/env bash
# Run the whole wavern test suite headless (sets up first if needed; idempotent).
#   ./test.sh            all tests
#   ./test.sh -k attn    extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --no-speak --dev
export QT_QPA_PLATFORM=offscreen
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$PWD/.numba_cache}"
exec .venv/bin/python -m pytest -q "$@"
