"""A throwaway Speech Dispatcher: the real daemon, in single mode, all its files in one folder.

For the end-to-end test and the benchmark: the server's configuration lists wavern's module
(and optionally espeak-ng's) and sends all audio to ALSA's ``null`` device, so nothing is heard
and no sound card is needed; its socket, pid file, logs and the user folders it reads (XDG_*)
are the folder's, so a user's own Speech Dispatcher is never touched. The daemon runs in a
process group of its own, which :meth:`LocalServer.stop` ends whatever happened (modules too).

    with LocalServer(tmp, voice="assets/voices/default", record=tmp / "rec") as server:
        subprocess.run(["spd-say", "-w", "-o", "wavern", "Hello"], env=server.env)
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from wavern.errors import ParameterError

__all__ = ["LocalServer", "module_dirs", "daemon_version"]

log = logging.getLogger(__name__)

#: Where distributions put Speech Dispatcher's own modules (sd_espeak-ng, ...).
_MODULE_DIRS = ("/usr/lib/speech-dispatcher-modules", "/usr/lib/x86_64-linux-gnu/speech-dispatcher-modules",
                "/usr/lib/aarch64-linux-gnu/speech-dispatcher-modules", "/usr/libexec/speech-dispatcher-modules",
                "/usr/local/lib/speech-dispatcher-modules")


def module_dirs() -> list[Path]:
    """The system's module folders that exist."""
    return [Path(d) for d in _MODULE_DIRS if Path(d).is_dir()]


def daemon_version() -> str | None:
    """``speech-dispatcher --version``'s version, or None when it is not installed."""
    exe = shutil.which("speech-dispatcher")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.strip().splitlines()[:1]
    return first[0].split()[-1] if first else "unknown"


class LocalServer:
    """Start ``speech-dispatcher -s`` in ``folder`` with wavern's module (and espeak-ng's).

    Args:
        folder: an empty folder of its own (created).
        voice: wavern's voice (name or folder).
        record: the module's record folder (``WavernRecord``), or None.
        espeak: also load the system's espeak-ng module (the benchmark's comparison).
        alsa_device: the server's ALSA output (``null``: nothing heard, no card needed).
        module_args: more ``wavern.conf`` lines.

    Raises:
        ParameterError: speech-dispatcher is not installed, or did not start (its log's tail quoted).
    """

    def __init__(self, folder: str | Path, *, voice: str | None = None, record: str | Path | None = None,
                 espeak: bool = False, alsa_device: str = "null", module_args: tuple[str, ...] = (),
                 start_timeout_s: float = 60.0):
        self.folder = Path(folder)
        self.exe = shutil.which("speech-dispatcher")
        if self.exe is None:
            raise ParameterError("speech-dispatcher is not installed (Debian: apt-get install speech-dispatcher)")
        self.voice, self.record, self.espeak = voice, record, espeak
        self.alsa_device, self.module_args = alsa_device, module_args
        self.start_timeout_s = start_timeout_s
        self.socket = self.folder / "speechd.sock"
        self.proc: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        """The environment clients (spd-say) use to reach this server and no other."""
        env = dict(os.environ)
        env.update(SPEECHD_ADDRESS=f"unix_socket:{self.socket}", XDG_RUNTIME_DIR=str(self.folder / "run"),
                   XDG_DATA_HOME=str(self.folder / "data"), XDG_CONFIG_HOME=str(self.folder / "config"))
        return env

    def _write_config(self) -> None:
        f = self.folder
        for d in ("conf/modules", "log", "run", "data", "config", "modules"):
            (f / d).mkdir(parents=True, exist_ok=True)
        (f / "run").chmod(0o700)
        script = f / "modules" / "sd_wavern"
        cache = os.environ.get("NUMBA_CACHE_DIR")
        script.write_text("#!/bin/sh\n"
                          + (f"export NUMBA_CACHE_DIR={shlex.quote(os.path.abspath(cache))}\n" if cache else "")
                          + f"exec {shlex.quote(sys.executable)} -m wavern.app.cli speechd \"$@\"\n")
        script.chmod(0o755)
        lines = [f'WavernVoice "{self.voice}"'] if self.voice else []
        if self.record is not None:
            lines.append(f'WavernRecord "{Path(self.record).absolute()}"')
        lines += list(self.module_args)
        (f / "conf" / "modules" / "wavern.conf").write_text("\n".join(lines) + "\n")
        conf = ["LogLevel 3", 'AudioOutputMethod "alsa"', f'AudioALSADevice "{self.alsa_device}"',
                f'AddModule "wavern" "{script}" "wavern.conf"']
        if self.espeak:
            found = [d / "sd_espeak-ng" for d in module_dirs() if (d / "sd_espeak-ng").exists()]
            if not found:
                raise ParameterError("espeak-ng's Speech Dispatcher module is not installed "
                                     "(Debian: apt-get install speech-dispatcher-espeak-ng)")
            conf.append(f'AddModule "espeak-ng" "{found[0]}" "espeak-ng.conf"')
        conf.append("DefaultModule wavern")
        (f / "conf" / "speechd.conf").write_text("\n".join(conf) + "\n")

    def start(self) -> "LocalServer":
        self._write_config()
        f = self.folder
        dirs = module_dirs()
        cmd = [self.exe, "-s", "-t", "0", "-C", str(f / "conf"), "-L", str(f / "log"), "-c", "unix_socket",
               "-S", str(self.socket), "-P", str(f / "run" / "speechd.pid")]
        if dirs:
            cmd += ["-m", str(dirs[0])]
        self._out = open(f / "log" / "stdout.txt", "wb")
        self.proc = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        from wavern.app.speechd.ssip import SsipClient, SsipError

        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise ParameterError(f"speech-dispatcher exited with code {self.proc.returncode}: {self.log_tail()}")
            if self.socket.exists():
                try:
                    with SsipClient(self.socket, timeout_s=5.0) as c:
                        if "wavern" in " ".join(c.list_output_modules()):
                            return
                except SsipError:
                    pass
            if time.monotonic() > deadline:
                raise ParameterError(f"speech-dispatcher did not list wavern's module within "
                                     f"{self.start_timeout_s:g} s: {self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for name in ("speech-dispatcher.log", "wavern.log", "stdout.txt"):
            p = self.folder / "log" / name
            if p.is_file():
                out += [f"[{name}] {ln}" for ln in p.read_text(errors="replace").splitlines()[-lines:]]
        return "\n".join(out) or "(no log)"

    def stop(self) -> None:
        """End the daemon and its modules: SIGTERM to the group, then SIGKILL after 5 s."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait_s)
                # the group may outlive its leader (modules still exiting): kill what is left
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
            break
        self._out.close()

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
