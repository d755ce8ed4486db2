"""wavern as a Speech Dispatcher output module (``wavern speechd``): the system voice of a Linux
desktop, for Orca, Firefox's Web Speech API, ``spd-say`` and every other Speech Dispatcher client.

- :mod:`.protocol`: the module protocol's lines, replies, events and ``705`` audio (pure).
- :mod:`.settings`: ``SET`` parameters and their mapping onto a voice's controls.
- :mod:`.text`: what SPEAK, CHAR, KEY and SOUND_ICON messages become; index marks' places.
- :mod:`.voices`: LIST VOICES and the speaker a message's settings pick.
- :mod:`.output`: where audio goes (the server's player, the sound card) and when marks are told.
- :mod:`.module`: the module loop (:class:`SpeechdModule`).
- :mod:`.install`: ``wavern speechd install`` / ``uninstall`` for this user, no root.

User guide: docs/SPEECHD.md.
"""

from __future__ import annotations

import logging
import os
import sys

from wavern.app.speechd.module import AUDIO_METHODS, ModuleConfig, SpeechdModule

__all__ = ["serve", "ModuleConfig", "SpeechdModule", "AUDIO_METHODS"]

log = logging.getLogger(__name__)


def serve(config_file: str | None = None, **overrides) -> int:
    """Run the module on this process's standard input and output until the server quits it.

    ``config_file``: the module configuration Speech Dispatcher passes (``wavern.conf``; may be
    missing); ``overrides`` (``voice``, ``audio``, ``device``, ``record``, ``passes``,
    ``char_passes``) win over it. Returns the exit code.

    The protocol keeps private copies of file descriptors 0 and 1; descriptor 1 then points at
    standard error, so nothing else printed by this process (a library's warning) can break it.
    """
    config = ModuleConfig.read(config_file, **overrides)
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.getLogger("wavern").setLevel(logging.INFO)
    log.info("wavern speechd %s (config %s)", os.getpid(), config_file or "none")
    return SpeechdModule(proto_in, proto_out, config=config).run()
