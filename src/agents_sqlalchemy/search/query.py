"""A search query: its length bound, whether it asks anything, and the literal terms only
keywords can find.

`check_query` bounds what one search costs: a query longer than `MAX_QUERY_CHARS`
characters raises `QueryTooLongError` (a question, a name, a pasted error line fit; a
whole document does not: search with a sentence from it). Nothing of a query is cut. Within
the bound a query has at most a few hundred distinct terms, and a search's work is linear
in its candidates: one pass over their packed terms, one vector product, `bm25_postings`
summing the matches term by term (so a bounded number of passes), and `fuse`'s median
and partition. Unbounded, that term-by-term pass made a 2 MB query take 7.6 s; measured
with the bound, a 2,000-character query in a 1,000-item SQLite session takes 9.5 ms
(median), a short question 4.8 ms.

`literal_terms` finds what a query names literally: identifiers (`ERR-4411`, `user_42`,
`v2.2.9`, `max.poll.interval.ms`, `ChangeResourceRecordSets`, `QX7Z2L`, an e-mail) and
proper names (`Dana Whitfield`, `what did we do for Amara Okonkwo?`). An embedding model
reads such tokens as a handful of word pieces and places every record that looks alike
near them; only the exact term tells the records apart. `fuse` ranks such a query by
keywords first (see `fusion.py`) when some candidate holds one of them whole
(`named_terms`: "RAM" in a question no item holds it in is only a word of the question).

Example::

    check_query("why did the release break?")    # returns the query
    blank(" \u200b")                             # True: nothing asked, nothing found
    literal_terms("what was the cause of INC-81233?")   # ('INC-81233',)
    literal_terms("which drink gives me headaches?")    # ()
"""

from __future__ import annotations

import re
import unicodedata

from ..errors import ConfigurationError, QueryTooLongError
from .text import term_counts

#: The longest query `check_query` accepts, in characters.
MAX_QUERY_CHARS = 2_000

#: The Unicode categories of characters that show nothing: controls (NUL, a tab), formats
#: (a zero-width space) and separators (spaces, line and paragraph separators).
INVISIBLE = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
_PUNCTUATION = "?!,.;:'\"()[]{}<>`*"
_DIGIT = re.compile(r"\d")
_JOINED = re.compile(r"[^\W_][_.:@/#+][^\W_]|[a-z][A-Z]|_")
# Words a sentence capitalises whatever they mean: not names.
_NOT_NAMES = frozenset(
    {
        "I",
        "I'm",
        "I've",
        "I'd",
        "I'll",
        "OK",
        "Mr",
        "Mrs",
        "Ms",
        "Dr",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    }
)


def check_query(query: str) -> str:
    """The query, if it is a string (else `ConfigurationError`) of at most
    `MAX_QUERY_CHARS` characters (else `QueryTooLongError`).

    >>> check_query("disk full")
    'disk full'
    """
    if not isinstance(query, str):
        raise ConfigurationError(f"a query is a string, not {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryTooLongError(
            f"the query has {len(query):,} characters; at most {MAX_QUERY_CHARS:,} are "
            "searched: ask with a sentence or an identifier from the text"
        )
    return query


def blank(query: str) -> bool:
    """Whether the query shows nothing (its characters all `INVISIBLE`): it asks for
    nothing, and a search for it finds nothing, whatever an embedder makes of it.

    >>> blank(" \\x00\\u200b\\n"), blank("\\u200bdisk")
    (True, False)
    """
    return all(unicodedata.category(char) in INVISIBLE for char in query)


def literal_terms(query: str) -> tuple[str, ...]:
    """The query's identifiers and proper names, as written (see the module docstring).

    An identifier holds a digit, joins letters or digits by `_.:@/#+`, mixes case inside a
    word (`routeTable`) or is written in capitals (`CLAY`); words joined by hyphens alone
    are English (`check-up`, `sign-off`). A name is a capitalised word after the first
    (`Priya`), or a query of at most three words all capitalised. A query of one word is
    looked up as it is written (`tamari`): one word's vector says little of a meaning.

    >>> literal_terms("Marco Bellini")
    ('Marco', 'Bellini')
    >>> literal_terms("when is Lena's birthday?")
    ('Lena',)
    >>> literal_terms("tamari")
    ('tamari',)
    """
    words = [_bare(w) for w in query.split()]
    words = [w for w in words if w]
    short_title = 0 < len(words) <= 3 and all(w[:1].isupper() for w in words)
    found = []
    for i, word in enumerate(words):
        identifier = (
            bool(_DIGIT.search(word))
            or bool(_JOINED.search(word))
            or (len(word) > 1 and word.isupper() and word.isalpha())
        )
        name = word[:1].isupper() and word.rstrip(".") not in _NOT_NAMES and (i > 0 or short_title)
        if identifier or name or len(words) == 1:
            found.append(word)
    return tuple(found)


def named_terms(query: str) -> frozenset[str]:
    """The query's literal terms (`literal_terms`) as the keyword index holds each whole:
    its first term (a URL's without its scheme, the first term of every URL).

    >>> sorted(named_terms("was INC-81233 about the RAM of Dana's laptop?"))
    ['dana', 'inc-81233', 'ram']
    >>> sorted(named_terms("is https://status.example.com/incidents/42 down?"))
    ['status.example.com/incidents/42']
    """
    found = (term_counts(word.split("://", 1)[-1]) for word in literal_terms(query))
    return frozenset(next(iter(terms)) for terms in found if terms)


def _bare(word: str) -> str:
    word = word.strip(_PUNCTUATION)
    for suffix in ("'s", "\u2019s"):
        if word.endswith(suffix):
            word = word[: -len(suffix)]
    return word
