"""What of an SDK item is searchable, and how text becomes keyword terms.

`item_text` projects an item onto plain text: message text (a string or `input_text`,
`output_text`, `text`, `refusal` parts), reasoning summaries, tool names and arguments, tool
outputs, shell commands, search queries. Ids, statuses, images, files and encrypted blobs are
left out. The item itself is only read, never changed.

`term_counts` turns text into `{term: count}`: lowercase, Latin letters without their
accents (`café` and `cafe` are one term, as `Zürich` and `zurich`; other scripts are left
as they are), Unicode word splitting, a small English stopword list and a light suffix
stemmer. Identifiers survive whole *and* in parts:
`ERR-4411` gives `err-4411`, `err`, `4411`; `user_42` gives `user_42`, `user`, `42`; Chinese
and Japanese runs give character bigrams. Terms are plain strings of at most 64 characters,
so a repository can store them as they are or as keyed hashes.

Example::

    text = item_text({"type": "function_call", "name": "get_logs",
                      "arguments": '{"service": "checkout-api"}', "call_id": "c1"})
    text                      # 'get_logs\\nservice: checkout-api'
    term_counts("ERR-4411: the disk was full")
    # {'err-4411': 1, 'err': 1, '4411': 1, 'disk': 1, 'full': 1}
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from itertools import chain
from typing import Any

from pydantic_core import from_json

#: Bump when tokenising changes: stored terms made by another version no longer match, so
#: the index names its rows by it (`embedders.index_id`) and `reindex` moves them.
TOKENIZER_VERSION = 2
#: The longest term `term_counts` returns (longer ones are cut).
MAX_TERM_CHARS = 64
#: `item_text` stops after this many characters by default: what an embedder is given.
MAX_TEXT_CHARS = 16_000
#: Keyword terms come from up to this many characters of an item (a long tool output's
#: error is often near its end); more than any model's context takes, and about 0.4 s of
#: tokenising on the worker thread.
MAX_INDEXED_CHARS = 1_000_000
#: A piece of text between separators up to this long has its terms kept once found (65,536
#: pieces at most, process-wide): a longer one (a hash, a blob, a run of CJK text) seldom
#: comes again, and 5,000 pieces of 16,000 characters held 78 MiB.
CACHED_CHUNK_CHARS = 64

# Keys whose values hold searchable text, at any depth of an item.
_TEXT_KEYS = frozenset(
    {
        "content",
        "text",
        "refusal",
        "summary",
        "name",
        "arguments",
        "input",
        "output",
        "outputs",
        "logs",
        "error",
        "action",
        "query",
        "queries",
        "command",
        "commands",
        "code",
        "stdout",
        "stderr",
        "results",
        "filename",
        "operation",
        "path",
        "diff",
        "server_label",
    }
)
# Keys whose string values are often JSON (tool arguments and outputs): flattened to text.
_JSON_KEYS = frozenset({"arguments", "input", "output"})
# Items with nothing a person would search for.
_SKIP_TYPES = frozenset({"item_reference", "mcp_list_tools", "compaction"})


def item_text(item: Mapping[str, Any], *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """The plain text of an SDK item to index; `""` means there is nothing to index.

    >>> item_text({"role": "user", "content": [{"type": "input_text", "text": "hi there"}]})
    'hi there'
    """
    if item.get("type") in _SKIP_TYPES:
        return ""
    pieces: list[str] = []
    try:  # noqa: SIM105 - contextlib.suppress costs as much as a short item's walk
        _walk(item, None, pieces, [max_chars])
    except _Full:
        pass
    return "\n".join(pieces)[:max_chars]


class _Full(Exception):
    """`max_chars` collected: the walk stops."""


def _add(piece: str, pieces: list[str], room: list[int]) -> None:
    piece = piece.strip()
    if piece:
        pieces.append(piece)
        room[0] -= len(piece) + 1
        if room[0] <= 0:
            raise _Full


def _walk(value: Any, key: str | None, pieces: list[str], room: list[int]) -> None:
    """Append the searchable strings under `value` (one pass, no generator per level;
    the exact `dict` and `list` types, what `from_json` gives, are checked first)."""
    if isinstance(value, str):
        if key in _JSON_KEYS and value[:1] in ("{", "["):
            try:
                parsed = _parse_json(value)
                _flatten_json(parsed, None, pieces, room)
                return
            except (ValueError, RecursionError):
                pass
        if not _is_blob(value):
            _add(value, pieces, room)
        return
    kind = type(value)
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        for k, v in value.items():
            if k in _TEXT_KEYS:
                _walk(v, k, pieces, room)
    elif kind is list or isinstance(value, tuple):
        for v in value:
            _walk(v, key, pieces, room)


def _parse_json(text: str) -> Any:
    """pydantic-core's parser, and the standard library's where it refuses lone surrogates;
    ValueError for JSON nested deeper than pydantic-core reads (200 levels): that is text."""
    try:
        return from_json(text)
    except ValueError as exc:
        if str(exc).startswith("recursion limit"):
            raise
        try:
            return json.loads(text)
        except RecursionError as deep:
            raise ValueError("JSON nested too deeply") from deep


def _flatten_json(value: Any, key: str | None, pieces: list[str], room: list[int]) -> None:
    """Tool data as `key: value` lines: keys are often the only words around a number."""
    if isinstance(value, str):
        if not _is_blob(value):
            _add(f"{key}: {value}" if key else value, pieces, room)
    elif type(value) is dict:
        for k, v in value.items():
            _flatten_json(v, k, pieces, room)
    elif type(value) is list:
        for v in value:
            _flatten_json(v, key, pieces, room)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _add(f"{key}: {value}" if key else str(value), pieces, room)


# A space of any kind (what `str.isspace` says of a character).
_SPACE = re.compile(r"\s")


def _is_blob(text: str) -> bool:
    """Data URLs and long unbroken runs (base64, hashes) are not worth indexing."""
    return text.startswith("data:") or (len(text) > 200 and _SPACE.search(text) is None)


# English words too common to search for; kept small on purpose.
STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just me
    more most my myself no nor not now of on once only or other our ours over own same she
    should so some such than that the their theirs them then there these they this those
    through to too until up very was we were what when where which while who whom why will
    with would you your yours im ive id youre youve dont doesnt didnt isnt wasnt cant wont
    lets please thanks thank ok okay hi hey also us""".split()  # noqa: SIM905
)

# A word, or words joined by connectors: `err-4411`, `v2.3.1`, `a@b.com`, `/var/lib`.
_TOKEN = re.compile(r"[^\W_]+(?:[-_.+/:@#][^\W_]+)*")
_SEGMENT_SEP = re.compile(r"[/:@#]")
_PART_SEP = re.compile(r"[-_.+/:@#]")
_APOSTROPHE_S = re.compile(r"['\u2019]s\b")
_APOSTROPHE = re.compile(r"['\u2019]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_VOWELS = frozenset("aeiouy")
# ASCII characters no term holds (all but letters, digits, `_`, connectors, apostrophes).
_SPLIT = {code: " " for code in range(128) if not (chr(code).isalnum() or chr(code) in "_-.+/:@#'")}
# Latin letters that are no accented ASCII letter, as search engines fold them (U+0131 is
# the dotless i).
_LATIN_LETTERS = {
    **{"æ": "ae", "ð": "d", "ø": "o", "þ": "th", "đ": "d", "ħ": "h", "\u0131": "i"},
    **{"ł": "l", "œ": "oe", "ŧ": "t"},
}


def _unaccented(char: str) -> str | None:
    """A Latin letter in lowercase ASCII (`é` -> `e`, `ǿ` -> `o`, `æ` -> `ae`), or None."""
    decomposed = unicodedata.normalize("NFD", char.casefold())
    base, marks = decomposed[0], decomposed[1:]
    if any(not unicodedata.combining(mark) for mark in marks):
        return None
    if base.isascii() and base.isalpha():
        return base if marks else None
    return _LATIN_LETTERS.get(base)


# The Latin blocks (Latin-1 to Extended-B, Extended Additional) folded to ASCII letters.
_FOLD = {
    code: plain
    for block in (range(0xC0, 0x250), range(0x1E00, 0x1F00))
    for code in block
    if (plain := _unaccented(chr(code))) is not None
}
# Accents left on an ASCII letter that no precomposed letter holds (`İ` casefolds to `i̇`).
_LATIN_MARKS = re.compile(r"(?<=[a-z])[\u0300-\u036f]+")


@lru_cache(maxsize=1)
def _token_with_marks() -> re.Pattern[str]:
    """`_TOKEN` whose words hold combining marks: Devanagari's vowel signs, Thai's vowels,
    Hebrew's points are part of the word (`\\w` has no mark). Built on first use, from
    every mark below U+20000 (about 20 ms): ASCII text never needs it."""
    marks: list[list[int]] = []
    for code in range(0x300, 0x20000):
        if unicodedata.category(chr(code)).startswith("M"):
            if marks and marks[-1][1] == code - 1:
                marks[-1][1] = code
            else:
                marks.append([code, code])
    mark = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in marks)
    word = rf"(?:[^\W_][{mark}]*)+"
    return re.compile(rf"{word}(?:[-_.+/:@#]{word})*")


_WORD = re.compile(r"\w(?:[\w'\u2019.@/+-]*\w)?")


def content_words(text: str) -> str:
    """The words of `text` without stopwords and punctuation; `text` if nothing is left.

    For embedders that average token vectors (static models): function words and
    punctuation pull every question towards every other question.

    >>> content_words("What's the name of my dog (a shiba)?")
    'name dog shiba'
    """
    kept = [
        word
        for word in _WORD.findall(text)
        if _APOSTROPHE.sub("", _APOSTROPHE_S.sub("", word.casefold())) not in STOPWORDS
    ]
    return " ".join(kept) or text


def tokenize(text: str) -> list[str]:
    """The terms of `text` in order, with repeats (single ASCII characters are dropped).

    >>> tokenize("Deploys failed: v2.3.1")
    ['deploy', 'fail', 'v2.3.1', 'v2']
    >>> tokenize("Le café à Zürich, Łódź")
    ['le', 'caf', 'zurich', 'lodz']
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    # Split where no term can reach (spaces, ASCII punctuation but connectors and
    # apostrophes): the same terms as tokenising the whole text, and the pieces repeat
    # ("paris,", "the") so that each is tokenised once (`chunk_terms`).
    return list(chain.from_iterable(map(chunk_terms, text.translate(_SPLIT).split())))


def term_counts(text: str) -> dict[str, int]:
    """`{term: count}` of `text`: what the keyword index stores per item, and the query terms.

    >>> term_counts("user_42 and user_42")
    {'user_42': 2, 'user': 2, '42': 2}
    """
    return dict(Counter(tokenize(text)))


def chunk_terms(chunk: str) -> tuple[str, ...]:
    """The terms of one piece of text between separators, kept if it is short (`_chunk_terms`).

    >>> chunk_terms("deploys")
    ('deploy',)
    """
    return _chunk_terms(chunk) if len(chunk) <= CACHED_CHUNK_CHARS else _terms_of_chunk(chunk)


def _terms_of_chunk(chunk: str) -> tuple[str, ...]:
    chunk = _APOSTROPHE.sub("", _APOSTROPHE_S.sub("", chunk))
    if not chunk.isascii():  # Latin letters lose their accents; other scripts keep marks
        chunk = _LATIN_MARKS.sub("", chunk.translate(_FOLD))
    token = _TOKEN if chunk.isascii() else _token_with_marks()
    return tuple(chain.from_iterable(map(_token_terms, token.findall(chunk))))


_chunk_terms = lru_cache(maxsize=65536)(_terms_of_chunk)


def _token_terms(token: str) -> tuple[str, ...]:
    if not _PART_SEP.search(token):
        return _word_terms(token)
    terms = [token[:MAX_TERM_CHARS]]
    segments = _SEGMENT_SEP.split(token)
    if len(segments) > 1:
        terms.extend(s[:MAX_TERM_CHARS] for s in segments if _PART_SEP.search(s))
    for part in _PART_SEP.split(token):
        terms.extend(_word_terms(part))
    return tuple(terms)


def _word_terms(word: str) -> tuple[str, ...]:
    if _CJK.search(word):
        out: list[str] = []
        for piece in re.split(f"({_CJK.pattern})", word):
            if _CJK.fullmatch(piece):
                out.extend(piece[i : i + 2] for i in range(max(1, len(piece) - 1)))
            elif piece:
                out.extend(_word_terms(piece))
        return tuple(out)
    if word in STOPWORDS or (len(word) == 1 and word.isascii()):
        return ()
    return (stem(word)[:MAX_TERM_CHARS],)


def stem(word: str) -> str:
    """A light English stemmer: plurals, -ing, -ed, -ment, -ation and a final -e.

    Index and query go through the same function, so only consistency matters.

    >>> [stem(w) for w in ["deployments", "released", "release", "stopped", "entries"]]
    ['deploy', 'releas', 'releas', 'stop', 'entry']
    """
    if len(word) <= 3 or not (word.isascii() and word.isalpha()):
        return word
    w = word
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ation", "ment", "ing", "ed"):
        if w.endswith(suffix):
            rest = w[: -len(suffix)]
            if len(rest) >= 3 and _VOWELS.intersection(rest):
                w = rest
                doubled = len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz"
                if suffix in ("ing", "ed") and doubled:
                    w = w[:-1]
            break
    if w.endswith("e") and len(w) >= 4:
        w = w[:-1]
    return w
