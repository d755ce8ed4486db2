"""An installation without torch (`pip install .`, no `train` extra) speaks, renders and builds a
corpus; the commands that need torch say how to add it. Each command runs in a fresh process
whose `import torch` fails as it does where torch is not installed."""

import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def no_torch_env(tmp_path_factory):
    blocker = tmp_path_factory.mktemp("notorch")
    (blocker / "torch").mkdir()
    (blocker / "torch" / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n')
    path = os.pathsep.join(p for p in (str(blocker), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _wavern(env, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "wavern", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_the_blocker_blocks(no_torch_env):
    res = subprocess.run([sys.executable, "-c", "import torch"], env=no_torch_env, capture_output=True, text=True)
    assert res.returncode == 1 and "No module named 'torch'" in res.stderr


def test_speaking_rendering_and_doctor_run_without_torch(no_torch_env, tiny_voice, tmp_path):
    said = _wavern(no_torch_env, "say", "Hello there. A second sentence.", "--voice", str(tiny_voice),
                   "--out", str(tmp_path / "said.wav"))
    assert said.returncode == 0, said.stderr
    assert (tmp_path / "said.wav").stat().st_size > 1000
    (tmp_path / "texts.txt").write_text("One line.\nAnother line, a little longer.\n")
    rendered = _wavern(no_torch_env, "render", str(tmp_path / "texts.txt"), "--voice", str(tiny_voice),
                       "--out-dir", str(tmp_path / "out"), "--jobs", "1")
    assert rendered.returncode == 0, rendered.stderr
    assert len(list((tmp_path / "out").glob("*.wav"))) == 2
    doctor = _wavern(no_torch_env, "doctor")
    assert "torch not installed (only training needs it" in doctor.stdout


def test_training_without_torch_says_how_to_add_it(no_torch_env, tmp_path):
    res = _wavern(no_torch_env, "train", "vocoder", "--corpus", str(tmp_path / "none"), "--run-dir", str(tmp_path / "run"))
    assert res.returncode == 2
    assert "`wavern train` needs torch, which this installation lacks" in res.stderr
    assert "download.pytorch.org/whl/cpu" in res.stderr and "Traceback" not in res.stderr
