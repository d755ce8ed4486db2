#!/usr/bin/env bash
# Set up wavern on a fresh Debian/Ubuntu machine with Python 3.11, then speak a sentence.
# Idempotent: every step checks whether it is already done.
#   ./setup.sh                  set up, then speak "Hello from wavern." (plays, or writes hello.wav)
#   ./setup.sh --no-speak       set up only
#   ./setup.sh --dev            also the test and evaluation extras (./test.sh passes it; pesq
#                               builds from source, so this adds a C compiler and Python's headers)
#   WAVERN_PYTHON=python3.11 ./setup.sh   choose the interpreter
set -euo pipefail
cd "$(dirname "$0")"

PY=${WAVERN_PYTHON:-python3}
VENV="$PWD/.venv"
SPEAK=1
DEV=0
for arg in "$@"; do
  case "$arg" in
    --no-speak) SPEAK=0 ;;
    --dev) DEV=1 ;;
    *) echo "usage: ./setup.sh [--no-speak] [--dev]" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

command -v "$PY" >/dev/null || { say "no $PY found: install Python >= 3.11 or set WAVERN_PYTHON"; exit 1; }
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  say "wavern needs Python >= 3.11; found $("$PY" --version 2>&1). Set WAVERN_PYTHON."; exit 1; }
PYVER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

# 1. System packages (Debian/Ubuntu), each checked by dpkg, all installed in one apt call:
#    PortAudio (to play audio; without it wavern writes files), Qt's X11 libraries (the window),
#    venv support when the interpreter lacks it, and with --dev a C compiler and Python's headers
#    and Speech Dispatcher with its espeak-ng module (`wavern speechd`'s end-to-end test and benchmark).
#    Optional: when apt cannot install them, setup says what is missing and goes on.
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
  want=(libportaudio2 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxkbcommon-x11-0 libegl1)
  "$PY" -c 'import ensurepip' 2>/dev/null || want+=("python$PYVER-venv")
  if [ "$DEV" = 1 ]; then
    command -v cc >/dev/null || want+=(build-essential)
    # the Speech Dispatcher module's end-to-end test and benchmark (wavern speechd; espeak-ng's own
    # module is the benchmark's comparison)
    want+=(speech-dispatcher speech-dispatcher-espeak-ng)
    "$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
      || want+=("python$PYVER-dev")
  fi
  missing=()
  for p in "${want[@]}"; do installed "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
    say "installing system packages: ${missing[*]}"
    if ! { $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || \
           { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; }; }; then
      say "could not install ${missing[*]}: without libportaudio2 wavern writes audio files instead of playing;" \
          "without the libxcb ones the window does not open"
    fi
  fi
else
  say "not a Debian/Ubuntu system: install PortAudio to hear audio (files work without it) and a C compiler for --dev"
fi

# 2. A virtual environment. One whose pip does not run (made while python3-venv was missing) is
#    made again.
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  say "creating $VENV"
  "$PY" -m venv --clear "$VENV" || {
    say "could not create a virtual environment: sudo apt-get install python$PYVER-venv, then ./setup.sh again"; exit 1; }
fi

# 3. Python packages: torch first, the CPU build (pinned, from PyTorch's CPU index; PyPI's Linux
#    wheel pulls several GB of CUDA libraries), then wavern itself, editable, with its `train` extra
#    (torch: speaking runs without it, training needs it). Skipped when
#    pyproject.toml is unchanged and the installed `wavern` runs (a moved checkout's does not).
#    --dev: the test extras too, in a step of their own, so a failure there leaves wavern working.
#    (Where PyTorch's index cannot be reached, pip's warnings about it are dropped: torch then comes
#    from pip's other sources, a local wheel folder on machines set up that way.)
pip_install() { PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip install -q "$@" 2>&1 | grep -v -e "is ignored" -e "download.pytorch.org" || true; }
HASH=$(sha256sum pyproject.toml | cut -c1-16)
STAMP="$VENV/.wavern-installed"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$HASH" ] || ! "$VENV/bin/wavern" --help >/dev/null 2>&1; then
  say "installing Python packages (first time: a few minutes)"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  # (torch alone from there, --no-deps: its dependencies come with wavern's from the usual index, so
  #  a slow or blocked PyTorch index is asked once, not once per dependency)
  pip_install "torch==2.13.0" --no-deps --extra-index-url https://download.pytorch.org/whl/cpu --timeout 10 --retries 0
  pip_install -e ".[train]"
  (cd / && "$VENV/bin/python" -c "import wavern.app.cli, torch, numba") && "$VENV/bin/wavern" --help >/dev/null \
    || { say "installation failed (pip's messages above)"; exit 1; }
  echo "$HASH" > "$STAMP"
fi
DEV_STAMP="$VENV/.wavern-dev-installed"
if [ "$DEV" = 1 ] && [ "$(cat "$DEV_STAMP" 2>/dev/null)" != "$HASH" ]; then
  say "installing the test extras (pytest, pesq, ...)"
  pip_install -e ".[dev]"
  (cd / && "$VENV/bin/python" -c "import pytest, pytestqt, pesq, pystoi, transformers") || {
    say "the test extras did not install (pip's messages above; pesq needs a C compiler and python$PYVER-dev)"; exit 1; }
  echo "$HASH" > "$DEV_STAMP"
fi

# 4. A voice. The shipped default lives in assets/voices/; only where `wavern voices` finds none
#    (its exit code 1) is the tiny one built; any other failure is shown, not trained over.
if [ "$SPEAK" = 1 ]; then
  rc=0; "$VENV/bin/wavern" voices >/dev/null 2>&1 || rc=$?
  if [ "$rc" = 1 ]; then
    say "no voice found: building the tiny bootstrap voice (a few minutes, once)"
    "$VENV/bin/wavern" train voice --set preset='"tiny"'
  elif [ "$rc" != 0 ]; then
    "$VENV/bin/wavern" voices || true
    say "wavern voices failed (exit code $rc)"; exit 1
  fi
fi

# 5. Speak.
if [ "$SPEAK" = 1 ]; then
  say "speaking with the default voice (the very first time it also compiles the engine's kernels, 20-40 s, cached after)"
  "$VENV/bin/wavern" say "Hello from wavern."
  # The batch renderer's kernels too, so the first `wavern render` does not compile them (measured
  # on 2 cores, one busy: a two-line render 22 s the first time, 5 s after this). From the cache: ~1 s.
  # One weight type per process, side by side: after that first say, 104 s in one process on a
  # Zen 3 EPYC, the float16 kernels alone 52 s.
  say "compiling the batch renderer's kernels (the first time up to a minute, cached after)"
  for half in True False; do
    "$VENV/bin/python" -c "from wavern.engine.kernels import warmup; warmup(half=$half)" &
  done
  wait
fi
