"""The espeak-ng training corpus: building, reading, the held-out split, LJSpeech loading.

>>> from wavern.training.corpus import build_corpus, load_corpus
>>> build_corpus("data/corpus", utterances=2000, seed=0)          # doctest: +SKIP
>>> corpus = load_corpus("data/corpus")                           # doctest: +SKIP
>>> train, held_out = corpus.train, corpus.held_out               # doctest: +SKIP
"""

from wavern.training.corpus.build import (
    ALL_VOICES,
    LANGUAGES,
    VARIANTS,
    build_corpus,
    default_sentences_path,
    plan_utterances,
    read_sentences,
)
from wavern.training.corpus.records import (
    HELD_OUT_PER_MILLE,
    Corpus,
    CorpusRecord,
    is_held_out,
    load_corpus,
    load_ljspeech,
    read_wav,
    write_wav,
)

__all__ = [
    "ALL_VOICES",
    "LANGUAGES",
    "VARIANTS",
    "build_corpus",
    "default_sentences_path",
    "plan_utterances",
    "read_sentences",
    "HELD_OUT_PER_MILLE",
    "Corpus",
    "CorpusRecord",
    "is_held_out",
    "load_corpus",
    "load_ljspeech",
    "read_wav",
    "write_wav",
]
