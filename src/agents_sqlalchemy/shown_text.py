"""Text shown to a person (a terminal, a page, a log): control characters escaped, so that
a value can neither act on where it is shown nor pass for another.

Example::

    clean("red\\x1b[31m")             # 'red\\\\x1b[31m': no colour change on a terminal
    one_line("alice\\nforged\\u202e")  # 'alice\\\\x0aforged\\\\u202e': one line, no reversal
    one_id("a\\\\b")                   # 'a\\\\\\\\b': an id's backslash doubled
"""

from __future__ import annotations

import re

#: C0/C1 controls but newline and tab, and the bidirectional overrides.
UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
#: The same, newline and tab, and the characters that show nothing (a zero-width space):
#: for values shown on one line (ids, owners, metadata), which two must not look alike.
UNSAFE_LINE = re.compile(f"[\n\t\u200b-\u200d\u2060\ufeff{UNSAFE.pattern[1:-1]}]")


def clean(text: str) -> str:
    """`text` with control characters escaped, safe to print to a terminal.

    >>> clean("red\\x1b[31m")
    'red\\\\x1b[31m'
    """
    return UNSAFE.sub(escaped, text)


def one_line(text: str) -> str:
    """`text` with every control character escaped, newline and tab too: one line that
    cannot pass for another or turn the text after it around.

    >>> one_line("alice\\nSession   forged\\u202e")
    'alice\\\\x0aSession   forged\\\\u202e'
    """
    return UNSAFE_LINE.sub(escaped, text)


def one_id(text: str) -> str:
    r"""An id (a session's, a user's) as `one_line` shows it, its backslashes doubled: the
    id of the four characters `\x00` and the id holding a NUL then look different.

    >>> print(one_id(r"nul\x00id"), one_id("nul\x00id"))
    nul\\x00id nul\x00id
    """
    return one_line(text.replace("\\", "\\\\"))


def escaped(match: re.Match[str]) -> str:
    """A character as `\\xNN` if ASCII, else `\\uNNNN`: as bash's `$'...'` reads it back too
    (there `\\xNN` is a byte, and a C1 control, U+0080 to U+009F, is not one)."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"
