"""``wavern speechd install`` / ``uninstall``: make wavern a Speech Dispatcher voice for this user.

No root needed. Speech Dispatcher (0.10 on) looks for output modules in the user's
``~/.local/libexec/speech-dispatcher-modules`` (``$XDG_DATA_HOME/../libexec/...``): every
``sd_NAME`` file there is a module called NAME, started with its configuration
``~/.config/speech-dispatcher/modules/NAME.conf``. Install writes:

- ``sd_wavern``: a small shell script that runs this installation's Python on
  ``wavern speechd`` (with this shell's ``NUMBA_CACHE_DIR``, so the module finds the kernels
  ``wavern say`` compiled);
- ``wavern.conf``: the module's settings (voice, audio output), kept if it is already there;
- where the server's configuration lists its modules itself (``AddModule`` lines: then it looks
  for no others) or ``--default`` is asked for: a marked block in the user's ``speechd.conf``.

A running server is asked to reload its configuration (SIGHUP), which restarts its modules.
``uninstall`` removes exactly what install wrote.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from wavern.errors import ParameterError

__all__ = ["Paths", "paths", "install", "uninstall", "status", "probe", "MODULE"]

MODULE = "wavern"
_BEGIN = "# wavern: begin (written by `wavern speechd install`; `wavern speechd uninstall` removes it)"
_END = "# wavern: end"
_CREATED = "# wavern: this file was created by `wavern speechd install`, from {system}"
_SCRIPT_TAG = "wavern's Speech Dispatcher output module"
SYSTEM_CONF = Path("/etc/speech-dispatcher/speechd.conf")


def _xdg(name: str, default: str) -> Path:
    value = os.environ.get(name, "")
    return Path(value) if os.path.isabs(value) else Path.home() / default


@dataclasses.dataclass(frozen=True)
class Paths:
    module: Path  # the sd_wavern script
    config: Path  # wavern.conf
    speechd_conf: Path  # the user's speechd.conf
    pid_file: Path  # a running server's pid


def paths() -> Paths:
    """Where Speech Dispatcher looks, for this user (its own rules: XDG folders, then ~/.local)."""
    data = _xdg("XDG_DATA_HOME", ".local/share")
    config = _xdg("XDG_CONFIG_HOME", ".config") / "speech-dispatcher"
    runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")
    return Paths(module=(data.parent / "libexec" / "speech-dispatcher-modules" / f"sd_{MODULE}"),
                 config=config / "modules" / f"{MODULE}.conf", speechd_conf=config / "speechd.conf",
                 pid_file=runtime / "speech-dispatcher" / "pid" / "speech-dispatcher.pid")


def _script(python: str) -> str:
    env = ""
    cache = os.environ.get("NUMBA_CACHE_DIR")
    if cache:
        env = f"export NUMBA_CACHE_DIR={shlex.quote(os.path.abspath(cache))}\n"
    return (f"#!/bin/sh\n# {_SCRIPT_TAG} (`wavern speechd install` wrote this file; `wavern speechd uninstall`\n"
            f"# removes it). Speech Dispatcher runs it as: sd_{MODULE} CONFIGFILE\n"
            f"{env}exec {shlex.quote(python)} -m wavern.app.cli speechd \"$@\"\n")


def _config_text(voice: str | None, audio: str | None) -> str:
    return (
        "# wavern's settings as a Speech Dispatcher output module (docs/SPEECHD.md).\n"
        "# The voice: a name from `wavern voices`, or a voice folder.\n"
        f"{'' if voice else '# '}WavernVoice \"{voice or 'default'}\"\n"
        "# Where audio goes: auto (the server plays it where it can, 0.11 on; else the sound card),\n"
        "# device (the sound card, always), paced (nowhere, in real time), null (nowhere, at once).\n"
        f"{'' if audio else '# '}WavernAudio \"{audio or 'auto'}\"\n"
        "# The sound card for `device` (a name or number from `python -m sounddevice`).\n"
        "# WavernDevice \"default\"\n"
        "# Mel-matching passes: for messages (unset: the voice's own), for single characters and keys\n"
        "# (0: the earliest audio).\n"
        "# WavernPasses 8\n"
        "# WavernCharPasses 0\n"
        "# A folder that receives a copy of all audio and events (for tests and benchmarks).\n"
        "# WavernRecord \"/tmp/wavern-speechd\"\n")


def _active(line: str, word: str) -> bool:
    return line.strip().lower().startswith(word.lower())


def _lists_modules(conf: Path) -> bool:
    """Whether a speechd.conf names its modules (AddModule): then the server looks for no others."""
    try:
        return any(_active(line, "AddModule") for line in conf.read_text(errors="replace").splitlines())
    except OSError:
        return False


def _without_block(text: str) -> str:
    return re.sub(rf"\n?{re.escape(_BEGIN)}\n.*?{re.escape(_END)}\n?", "\n", text, flags=re.S)


def install(*, voice: str | None = None, audio: str | None = None, default: bool = False,
            reload: bool = True, python: str | None = None) -> list[str]:
    """Install the module for this user; returns what was done, a line each.

    Args:
        voice: the voice to set in a new wavern.conf (None: the default voice).
        audio: the audio method to set in a new wavern.conf (None: auto).
        default: also make wavern Speech Dispatcher's default module (``DefaultModule``).
        reload: ask a running server to reload (SIGHUP).
        python: the interpreter the module runs on (default: this one).

    Raises:
        ParameterError: a file cannot be written (the message names it).
    """
    p = paths()
    done = []
    try:
        # the server reaches the folder as $XDG_DATA_HOME/../libexec/...: the data folder must exist
        _xdg("XDG_DATA_HOME", ".local/share").mkdir(parents=True, exist_ok=True)
        p.module.parent.mkdir(parents=True, exist_ok=True)
        p.module.write_text(_script(python or sys.executable))
        p.module.chmod(0o755)
        done.append(f"module: {p.module}")
        p.config.parent.mkdir(parents=True, exist_ok=True)
        if p.config.exists() and voice is None and audio is None:
            done.append(f"settings: {p.config} (kept as it was)")
        else:
            p.config.write_text(_config_text(voice, audio))
            done.append(f"settings: {p.config}")
        done += _edit_speechd_conf(p, default)
    except OSError as e:
        raise ParameterError(f"cannot install the Speech Dispatcher module: {e}") from None
    if reload:
        done.append(_reload(p))
    return done


def _edit_speechd_conf(p: Paths, default: bool) -> list[str]:
    """The marked block in the user's speechd.conf, where one is needed."""
    own = p.speechd_conf.exists()
    listed = _lists_modules(p.speechd_conf if own else SYSTEM_CONF)
    lines = []
    if listed:
        lines.append(f'AddModule "{MODULE}" "sd_{MODULE}" "{MODULE}.conf"')
    if default:
        lines.append(f"DefaultModule {MODULE}")
    original = p.speechd_conf.read_text(errors="replace") if own else ""
    text = _without_block(original)
    if not lines:
        if text != original:  # a block from an earlier install that is no longer needed
            p.speechd_conf.write_text(text)
        return []
    if not own:
        base = SYSTEM_CONF.read_text(errors="replace") if SYSTEM_CONF.is_file() else ""
        text = _CREATED.format(system=SYSTEM_CONF) + "\n" + base
    if default:  # one DefaultModule: ours, the file's own commented out inside our block's reach
        text = re.sub(r"(?im)^(\s*DefaultModule\b.*)$", r"#\1  # (wavern speechd install --default)", text)
    text = text.rstrip("\n") + "\n" + _BEGIN + "\n" + "\n".join(lines) + "\n" + _END + "\n"
    p.speechd_conf.parent.mkdir(parents=True, exist_ok=True)
    p.speechd_conf.write_text(text)
    return [f"{'created' if not own else 'edited'} {p.speechd_conf}: {'; '.join(lines)}"
            + (" (takes effect when Speech Dispatcher next starts)" if not own else "")]


def uninstall(*, reload: bool = True) -> list[str]:
    """Remove what :func:`install` wrote; returns what was done, a line each."""
    p = paths()
    done = []
    try:
        if p.module.exists():
            p.module.unlink()
            done.append(f"removed {p.module}")
        if p.config.exists():
            p.config.unlink()
            done.append(f"removed {p.config}")
        if p.speechd_conf.exists():
            text = p.speechd_conf.read_text(errors="replace")
            if _BEGIN in text or "(wavern speechd install --default)" in text:
                text = _without_block(text)
                text = re.sub(r"(?m)^#(\s*DefaultModule\b.*?)  # \(wavern speechd install --default\)$", r"\1", text)
                if text.startswith(_CREATED.split("{")[0]):  # a file install made: gone with it
                    p.speechd_conf.unlink()
                    done.append(f"removed {p.speechd_conf}")
                else:
                    p.speechd_conf.write_text(text)
                    done.append(f"edited {p.speechd_conf}: wavern's lines removed")
    except OSError as e:
        raise ParameterError(f"cannot uninstall the Speech Dispatcher module: {e}") from None
    if not done:
        done.append("nothing to remove: the module was not installed")
    elif reload:
        done.append(_reload(p))
    return done


def _running_server(p: Paths) -> int | None:
    """The pid of this user's running Speech Dispatcher, from its pid file (None: none running)."""
    try:
        pid = int(p.pid_file.read_text().split()[0])
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if not comm.startswith("speech-dispatch") or os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return None
        return pid
    except (OSError, ValueError, IndexError):
        return None


def _reload(p: Paths) -> str:
    pid = _running_server(p)
    if pid is None:
        return "Speech Dispatcher is not running: it finds the module when it next starts"
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as e:
        return f"could not ask Speech Dispatcher (pid {pid}) to reload ({e.strerror}): restart it to see the change"
    return f"asked Speech Dispatcher (pid {pid}) to reload its modules"


def status() -> tuple[bool, str]:
    """(installed, a line saying where and for which interpreter) without running anything."""
    p = paths()
    if not p.module.exists():
        return False, f"not installed (`wavern speechd install` puts it in {p.module.parent})"
    text = p.module.read_text(errors="replace")
    m = re.search(r"exec (\S+) -m wavern", text)
    python = shlex.split(m.group(1))[0] if m else None
    if python is None or not os.access(python, os.X_OK):
        return False, f"{p.module} runs {python or 'an unknown program'}, which is not there: install it again"
    return True, f"{p.module} (runs {python})"


def probe(timeout_s: float = 60.0) -> tuple[bool, str]:
    """Start the installed module as the server would and ask it INIT, LIST VOICES and QUIT;
    (working, what it said). Loads the voice, so it takes a few seconds."""
    p = paths()
    if not p.module.exists():
        return False, "not installed"
    script = "INIT\nLIST VOICES\nQUIT\n"
    try:
        r = subprocess.run([str(p.module), str(p.config)], input=script.encode(), capture_output=True,
                           timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False, f"no answer within {timeout_s:g} s"
    except OSError as e:
        return False, f"cannot run {p.module}: {e.strerror or e}"
    lines = r.stdout.decode("utf-8", "replace").splitlines()
    init = next((ln for ln in lines if ln[:3] in ("299", "399") and ln[3:4] == " "), None)
    if init is None or not init.startswith("299"):
        why = [ln[4:] for ln in lines if ln.startswith("399-")] or \
            r.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        return False, f"INIT failed: {'; '.join(why) or 'no answer'}"
    voices = sum(1 for ln in lines if ln.startswith("200-"))
    said = next((ln[4:] for ln in lines if ln.startswith("299-")), "")
    return True, f"answers INIT ({said}); lists {voices} voice(s)"
