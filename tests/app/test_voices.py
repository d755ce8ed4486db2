"""Voice discovery: the search path, model cards, broken voices listed with their error."""

import json

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
