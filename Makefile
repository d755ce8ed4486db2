# Convenience targets; the README's two commands (./setup.sh, ./test.sh) need no make.
PY := .venv/bin/python
.PHONY: setup test bench voice natural-voice corpus doctor
setup:
	./setup.sh --no-speak
test:
	./test.sh
bench: setup data/corpus/metadata.jsonl
	$(PY) bench/run_all.py
data/corpus/metadata.jsonl: | setup
	.venv/bin/wavern corpus build data/corpus --utterances 2000 --seed 0
voice: setup
	.venv/bin/wavern train voice
natural-voice: setup
	sh assets/training/natural_voice.sh
corpus: setup
	.venv/bin/wavern corpus build data/corpus --utterances 2000 --seed 0
doctor: setup
	.venv/bin/wavern doctor
