"""Voice discovery: the search path, model cards, broken voices listed with their error."""

import json
from pathlib import Path

from wavern.app.voices import find_voices, resolve_voice, voice_info

from voice_factory import make_tiny_voice


def test_voices_on_the_search_path_with_cards_and_errors(tmp_path, monkeypatch):
    good = make_tiny_voice(tmp_path / "voices" / "good", name="good")
    (good / "MODEL_CARD.md").write_text("# Good\n\nA tiny   test voice.\nSecond line.\n\n## More\n\nignored\n")
    bad = tmp_path / "voices" / "bad"
    bad.mkdir()
    (bad / "voice.json").write_text(json.dumps({"format": "not a voice"}))
    (tmp_path / "voices" / "not_a_voice").mkdir()
    monkeypatch.setenv("WAVERN_VOICES", str(tmp_path / "voices"))
    found = {v.name: v for v in find_voices()}
    assert "not_a_voice" not in found
    assert found["good"].card == "A tiny test voice. Second line." and found["good"].error is None
    assert found["bad"].error  # listed, marked broken with the reason
    assert found["bad"].card == ""
    assert voice_info(good) == found["good"]
    assert resolve_voice(str(good)) == good


def test_voices_list_their_speakers(tiny_prosody_voice, tmp_path, monkeypatch, capsys):
    import shutil

    from wavern.app.cli import main

    many = tmp_path / "voices" / "many"
    shutil.copytree(tiny_prosody_voice, many)
    meta = json.loads((many / "voice.json").read_text())
    names = [f"en-us+m{i}" for i in range(1, 10)]  # nine names for the one embedding row each needs
    assert len(meta["acoustic"]["speakers"]) == 1
    meta["acoustic"]["speakers"] = names
    meta["inference"]["speaker"] = "en-us+m3"
    (many / "voice.json").write_text(json.dumps(meta))
    info = voice_info(many)  # read from voice.json alone: the weights are not loaded
    assert info.speakers == tuple(names) and info.default_speaker == "en-us+m3" and info.prosody
    assert voice_info(make_tiny_voice(tmp_path / "plain")).prosody is False
    monkeypatch.setenv("WAVERN_VOICES", str(tmp_path / "voices"))
    assert main(["voices"]) == 0
    out = capsys.readouterr().out
    assert "9 speaker(s), default en-us+m3; pitch and pitch range can be set" in out and "en-us+m9" not in out
    assert main(["voices", "--speakers"]) == 0
    assert "en-us+m9" in capsys.readouterr().out


def test_unreadable_or_incomplete_voices_are_listed_as_invalid_not_a_crash(tiny_voice, tmp_path, monkeypatch):
    import json
    import shutil

    from wavern.app.voices import find_voices

    root = tmp_path / "voices"
    shutil.copytree(tiny_voice, root / "good")
    shutil.copytree(tiny_voice, root / "nodsp")
    meta = json.loads((root / "nodsp" / "voice.json").read_text())
    meta["dsp"] = {}  # validated as the defaults, then the engine read a field it lacked
    (root / "nodsp" / "voice.json").write_text(json.dumps(meta))
    shutil.copytree(tiny_voice, root / "locked")
    real_read = Path.read_text

    def read_text(self, *a, **kw):  # (root reads anything: the permission error is simulated)
        if self.parent.name == "locked":
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self, *a, **kw)

    real_open = Path.open

    def open_(self, *a, **kw):
        if self.parent.name == "locked":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *a, **kw)

    monkeypatch.setattr(Path, "read_text", read_text)
    monkeypatch.setattr(Path, "open", open_)
    monkeypatch.setenv("WAVERN_VOICES", str(root))
    found = {v.name: v for v in find_voices() if v.path.parent == root}
    assert found["good"].error is None
    assert "field 'dsp' lacks sample_rate" in found["nodsp"].error
    assert "cannot read it (Permission denied)" in found["locked"].error and found["locked"].card == ""


def test_voices_lists_a_voice_with_bad_post_processing_settings_as_invalid(tiny_voice, tmp_path, monkeypatch):
    """An unknown post-filter or mel-matching key is what `Voice.load` refuses; `wavern voices` and
    `doctor` (through find_voices) say so too, not "ok"."""
    import json
    import shutil

    from wavern.app.voices import find_voices

    for key, value in (("postfilter", {"gama": 1.0}), ("melmatch", {"passes": 3}), ("melmatch_measured", [1])):
        root = tmp_path / key
        shutil.copytree(tiny_voice, root / "v")
        meta = json.loads((root / "v" / "voice.json").read_text())
        meta.setdefault("inference", {})[key] = value
        (root / "v" / "voice.json").write_text(json.dumps(meta))
        monkeypatch.setattr("wavern.app.voices.voice_dirs", lambda root=root: [root])
        (info,) = find_voices()
        assert info.error is not None and f"inference.{key}" in info.error, info


def test_a_huge_voice_json_or_model_card_is_not_read_whole(tiny_voice, tmp_path, monkeypatch):
    """An installed voice is validated whenever voices are listed or looked up: a voice.json of
    megabytes is refused unread, and of a model card only the start is read (its first paragraph
    is what is shown)."""
    import json
    import shutil

    from wavern.app.voices import find_voices
    from wavern.engine.voicefile import MAX_VOICE_JSON_BYTES

    big = tmp_path / "v" / "big"
    shutil.copytree(tiny_voice, big)
    text = (big / "voice.json").read_text()
    (big / "voice.json").write_text(text + " " * MAX_VOICE_JSON_BYTES)
    card = tmp_path / "v" / "card"
    shutil.copytree(tiny_voice, card)
    (card / "MODEL_CARD.md").write_text("# card\n\nThe first paragraph.\n\n" + "x" * (8 << 20))
    monkeypatch.setattr("wavern.app.voices.voice_dirs", lambda: [tmp_path / "v"])
    import tracemalloc

    tracemalloc.start()
    infos = {i.name: i for i in find_voices()}
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "more than a voice.json holds" in infos["big"].error and json.loads(text)
    assert infos["card"].error is None and infos["card"].card == "The first paragraph."
    assert peak < 2 << 20, peak  # neither the 4 MB voice.json nor the 8 MB card was read whole


def test_a_bare_name_is_the_installed_voice_even_where_a_folder_of_that_name_is_here(tiny_voice, tmp_path,
                                                                                     monkeypatch):
    """`--voice default` and no `--voice` speak with the same voice wherever they run: a bare name
    is an installed voice first; a folder of that name here is taken when none is installed, and
    ./NAME always means the folder."""
    import shutil

    from wavern.app.voices import resolve_voice

    installed = tmp_path / "installed"
    shutil.copytree(tiny_voice, installed / "default")
    shutil.copytree(tiny_voice, tmp_path / "here" / "default")
    shutil.copytree(tiny_voice, tmp_path / "here" / "mine")
    monkeypatch.setattr("wavern.app.voices.voice_dirs", lambda: [installed])
    monkeypatch.chdir(tmp_path / "here")
    assert resolve_voice("default") == resolve_voice(None) == installed / "default"
    assert resolve_voice("./default") == Path("./default")
    assert resolve_voice("mine") == Path("mine")  # not installed: the folder here


def test_a_voice_shows_its_description_else_its_card(tiny_voice, tmp_path, monkeypatch, capsys):
    """`wavern voices` and the window show a user's description: voice.json's optional
    ``description`` (who speaks, what the voice is good at, its licence), else the model card's first
    paragraph; a description that is not one line of printable text is refused, naming the field."""
    import shutil

    import pytest

    from wavern.app.cli import main
    from wavern.engine.voicefile import MAX_DESCRIPTION_CHARS, read_voice_json
    from wavern.errors import VoiceFileError

    described = tmp_path / "v" / "described"
    shutil.copytree(tiny_voice, described)
    (described / "MODEL_CARD.md").write_text("# described\n\nHow it was trained, at length.\n")
    meta = json.loads((described / "voice.json").read_text())
    meta["description"] = "A test speaker: good at beeps. Licence: GPL-3.0-or-later."
    (described / "voice.json").write_text(json.dumps(meta))
    carded = tmp_path / "v" / "carded"
    shutil.copytree(tiny_voice, carded)
    (carded / "MODEL_CARD.md").write_text("# carded\n\nThe card's first paragraph.\n")
    monkeypatch.setattr("wavern.app.voices.voice_dirs", lambda: [tmp_path / "v"])
    infos = {i.name: i for i in find_voices()}
    assert infos["described"].description == meta["description"]
    assert infos["described"].card == "How it was trained, at length."  # the card itself is still read
    assert infos["carded"].description == "The card's first paragraph."
    assert main(["voices"]) == 0
    out = capsys.readouterr().out
    assert meta["description"] in out and "How it was trained" not in out and "The card's first" in out
    for bad in ("", "   ", "two\nlines", "x" * (MAX_DESCRIPTION_CHARS + 1), 42):
        meta["description"] = bad
        (described / "voice.json").write_text(json.dumps(meta))
        with pytest.raises(VoiceFileError, match="field 'description'"):
            read_voice_json(described)


def test_the_shipped_voice_has_a_description():
    import wavern.assets

    info = voice_info(Path(wavern.assets.__file__).parent / "voices" / "default")
    assert info.error is None and info.description and "licen" in info.description.lower()
