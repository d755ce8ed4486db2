#!/usr/bin/env bash
# Set up wavern on a fresh Debian/Ubuntu machine with Python 3.11, then speak a sentence.
# Idempotent: every step checks whether it is already done.
#   ./setup.sh                  set up, then speak "Hello from wavern." (plays, or writes hello.wav)
#   ./setup.sh --no-speak       set up only
#   WAVERN_PYTHON=python3.11 ./setup.sh   choose the interpreter
set -euo pipefail
cd "$(dirname "$0")"

PY=${WAVERN_PYTHON:-python3}
VENV=.venv
SPEAK=1
[ "${1:-}" = "--no-speak" ] && SPEAK=0

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# 1. System library for sounddevice (PortAudio). Optional: without it wavern writes files.
if ! ldconfig -p 2>/dev/null | grep -q libportaudio.so.2; then
  if command -v apt-get >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
    say "installing libportaudio2 (audio output)"
    if ! { $SUDO apt-get install -y -qq libportaudio2 >/dev/null 2>&1 || \
           { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq libportaudio2 >/dev/null 2>&1; }; }; then
      say "could not install libportaudio2; wavern will write audio files instead of playing"
    fi
  else
    say "no apt-get: install PortAudio yourself to hear audio; files work without it"
  fi
fi

# 2. Python >= 3.11 and a virtual environment.
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  say "wavern needs Python >= 3.11; found $("$PY" --version 2>&1). Set WAVERN_PYTHON."; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PY" -m venv "$VENV" || { say "python3-venv missing: sudo apt-get install python3-venv"; exit 1; }
fi

# 3. Dependencies: the pinned CPU torch first (an unpinned one pulls a multi-GB CUDA build),
#    then wavern itself, editable, with the test extras. Skipped when pyproject.toml is unchanged.
STAMP="$VENV/.wavern-installed"
HASH=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$HASH" ]; then
  say "installing Python packages (first time: a few minutes)"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  "$VENV/bin/python" -m pip install -q "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
  "$VENV/bin/python" -m pip install -q -e ".[dev]" 2>&1 | grep -v "is ignored" || true
  "$VENV/bin/python" -c "import wavern.app.cli, torch, numba" || { say "installation failed"; exit 1; }
  echo "$HASH" > "$STAMP"
fi

# 4. A voice. The shipped default lives in assets/voices/; if none is there, build the tiny one.
if [ "$SPEAK" = 1 ] && ! "$VENV/bin/wavern" voices >/dev/null 2>&1; then
  say "no voice found: building the tiny bootstrap voice (a few minutes, once)"
  "$VENV/bin/wavern" train voice --set preset='"tiny"'
fi

# 5. Speak.
if [ "$SPEAK" = 1 ]; then
  say "speaking with the default voice (the very first time it also compiles the engine's kernels, ~6 s, cached after)"
  "$VENV/bin/wavern" say "Hello from wavern."
  # The batch renderer's kernels too, so the first `wavern render` does not compile them (measured
  # on 2 cores, one busy: a two-line render 22 s the first time, 5 s after this). From the cache: ~1 s.
  say "compiling the batch renderer's kernels (the first time 15-30 s, cached after)"
  "$VENV/bin/python" -c "from wavern.engine.kernels import warmup; warmup()"
fi
