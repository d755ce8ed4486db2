"""How a request is cut up: sentence blocks for the front end (:func:`plan_blocks`), chunk sizes for
the vocoder (:func:`chunk_samples`), and when each word is heard (:class:`WordTiming`)."""

from __future__ import annotations

import dataclasses

from wavern.errors import ParameterError

__all__ = ["FIRST_CHUNK_SAMPLES", "CHUNK_SAMPLES", "RAMP_SAMPLES", "GROW_SAMPLES", "STOP_CHECK_SAMPLES",
           "BLOCK_SENTENCES", "chunk_samples", "plan_blocks", "WordTiming", "SpokenPart", "retimed"]

FIRST_CHUNK_SAMPLES = 512  # ~23 ms: the first chunk of a request is small, for latency
CHUNK_SAMPLES = 8192  # ~372 ms: the largest chunk (fewer round trips through Python and the passes)


#: Chunk sizes at the start of a request (the ramp to first audio: the worker thread waits for
#: it), then :data:`GROW_SAMPLES`, then :data:`CHUNK_SAMPLES`. A player starting at chunk 0 needs
#: chunk ``j`` once chunks ``0..j-1`` have played, so with wall-clock RTF ``r`` (compute / audio,
#: what this process gets of a core) there is no underrun while ``r · (n_1 + ... + n_j) <= n_0 +
#: ... + n_{j-1}`` for every ``j``: ``r <= 0.73`` for the whole schedule (doubling from 512 would
#: need ``r <= 0.5``). Multiples of the hop: whole frames.
RAMP_SAMPLES = (512, 512, 768, 1024, 1536)
#: After the ramp the chunks keep growing, by at most 1.5x, to :data:`CHUNK_SAMPLES`: each chunk
#: costs fixed work (Python, the post-filter's and every mel-matching pass's calls; ~100 us a
#: pass), so 8192-sample chunks made the default voice's stream ~11 % cheaper than 2048 did
#: (CPU RTF 0.109 against 0.122, medians of 4 alternating runs on 8 shipped lines).
GROW_SAMPLES = (2048, 2048, 3072, 4096, 6144)
#: The vocoder makes a chunk in pieces of at most this many samples and a stop is honoured between
#: them, so a stop, and a new request after it, waits for ~10 ms of compute whatever the chunk size
#: (the pieces are the same samples as one call: the kernel carries its state sample by sample).
STOP_CHECK_SAMPLES = 2048


#: Sentences per front-end block: the first block is one sentence, so the first audio waits
#: for one sentence's phonemes whatever the text's length; later blocks grow to bound the
#: per-call overhead and keep a few sentences of context for the encoder's global tokens.
BLOCK_SENTENCES = (1, 2, 4, 8)


def chunk_samples(k: int) -> int:
    """Samples in the request's ``k``-th chunk (0-based): :data:`RAMP_SAMPLES`, then
    :data:`GROW_SAMPLES`, then :data:`CHUNK_SAMPLES`.

    The last chunk of a sentence may be shorter.
    """
    if k < 0:
        raise ParameterError(f"chunk index must be >= 0, found {k}")
    if k < len(RAMP_SAMPLES):
        return RAMP_SAMPLES[k]
    k -= len(RAMP_SAMPLES)
    return GROW_SAMPLES[k] if k < len(GROW_SAMPLES) else CHUNK_SAMPLES


def plan_blocks(n_sentences: int) -> list[tuple[int, int]]:
    """``(first, end)`` sentence ranges covering ``n_sentences`` in :data:`BLOCK_SENTENCES` steps."""
    blocks, i, k = [], 0, 0
    while i < n_sentences:
        size = BLOCK_SENTENCES[min(k, len(BLOCK_SENTENCES) - 1)]
        blocks.append((i, min(n_sentences, i + size)))
        i += size
        k += 1
    return blocks


@dataclasses.dataclass(frozen=True)
class WordTiming:
    """When a word is heard: character span in the original text, sample span in the audio."""

    char_start: int
    char_end: int
    start_sample: int
    end_sample: int


@dataclasses.dataclass(frozen=True)
class SpokenPart:
    """One sentence's mel, with what is needed to place it in the original text.

    utt: the front end's output for the block of sentences this one was analysed with (its spans
        are the request's text's).
    sentence: index of the sentence in the whole request.
    part: the acoustic model's :class:`~wavern.conditioning.stream.SentenceMel`.
    """

    utt: object
    sentence: int
    part: object


def retimed(timeline, new, lands: int) -> tuple[WordTiming, ...]:
    """After a change of speed that lands at sample ``lands``: the words of ``timeline`` (a
    sentence's :class:`WordTiming` as last timed) not begun there, with their timings in ``new``
    (the sentence at the new speed, matched by character span), none starting before ``lands``.

    Which words are still to come is the old timeline's call: the new one puts sample ``lands``
    at the same fraction of the sentence, not at the same word boundary, so a word just after
    it by the old timing may start just before it by the new. Sent again from ``lands`` (the
    audio before it was made at the old speed), every word not begun is timed once more, in
    order, and the words begun keep their timings.
    """
    by_span = {(t.char_start, t.char_end): t for t in new}
    out = []
    for t in timeline:
        if t.start_sample < lands:
            continue
        n = by_span.get((t.char_start, t.char_end), t)
        start = max(n.start_sample, lands)
        out.append(dataclasses.replace(n, start_sample=start, end_sample=max(n.end_sample, start)))
    return tuple(out)


