import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# `say`, `render` and the window read the user's lexicon.json from here: never the real user's
import tempfile  # noqa: E402

os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="wavern-test-config-")
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def tiny_voice(tmp_path_factory):
    """A real voice folder with tiny random models (built once per test session)."""
    import torch

    from voice_factory import make_tiny_voice

    torch.set_num_threads(1)
    return make_tiny_voice(tmp_path_factory.mktemp("voices") / "testvoice")


@pytest.fixture(scope="session")
def tiny_prosody_voice(tmp_path_factory):
    """As ``tiny_voice``, but its acoustic model reads pitch and pitch range (random weights)."""
    import torch

    from voice_factory import make_tiny_voice

    torch.set_num_threads(1)
    return make_tiny_voice(tmp_path_factory.mktemp("voices") / "pitchvoice", seed=3, prosody=True)
