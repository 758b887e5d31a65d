"""The evaluation sets: transcripts and the questions asked of them.

- "topical": six single-topic transcripts (an incident, a personal assistant, travel,
  customer support, coding help, a budget review) and 75 questions (`transcripts.py`,
  `queries.py`).
- "mixed": long multi-topic transcripts whose topics share vocabulary, so that most
  questions have distractors holding their words (`mixed_transcripts.py`,
  `mixed_queries.py`).
- "paraphrase": one chat of 40 personal facts among 119 distractors that share the
  questions' words, each fact asked about in other words (`paraphrase_set.py`).
- "shared-words": three multi-topic transcripts where each question's words appear in many
  wrong items and its answer is in other words (`shared_words_set.py`).
- "identifiers": three transcripts of near-identical records told apart only by ids, error
  codes, hosts and names: meaning misleads, keywords find (`identifiers_set.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from . import (
    identifiers_set,
    mixed_queries,
    mixed_transcripts,
    paraphrase_set,
    queries,
    shared_words_set,
    transcripts,
)
from .queries import Query
from .transcripts import Conversation


@dataclass(frozen=True)
class EvalSet:
    """Named transcripts and the questions asked of them."""

    name: str
    conversations: tuple[Conversation, ...]
    queries: tuple[Query, ...]


@cache
def eval_sets() -> dict[str, EvalSet]:
    """Every set, by name."""
    return {
        "topical": EvalSet("topical", tuple(transcripts.conversations()), tuple(queries.QUERIES)),
        "mixed": EvalSet(
            "mixed", tuple(mixed_transcripts.conversations()), tuple(mixed_queries.QUERIES)
        ),
        "paraphrase": EvalSet(
            "paraphrase", (paraphrase_set.memory(),), tuple(paraphrase_set.QUERIES)
        ),
        "shared-words": EvalSet(
            "shared-words",
            tuple(shared_words_set.conversations()),
            tuple(shared_words_set.QUERIES),
        ),
        "identifiers": EvalSet(
            "identifiers",
            tuple(identifiers_set.conversations()),
            tuple(identifiers_set.QUERIES),
        ),
    }


def all_conversations() -> list[Conversation]:
    """The transcripts of every set (their names are unique across sets)."""
    return [c for s in eval_sets().values() for c in s.conversations]
