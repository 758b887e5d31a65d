"""Whole reads of sealed sessions, kept: the next read of the same rows parses again what
the last one opened, instead of looking up each item.

An agent reads its whole history every turn. A sealed store answers each row from its
plaintexts in memory (`SealedCodec`) only after comparing the row with what authenticated
the plaintext: a dictionary lookup and three compares per item, over memory spread across
the process, then a join of the plaintexts. On the benchmark's 1,200-item read that took
about 500 of the ~1,000 µs an encrypted read cost more than a plaintext one.

`WholeReads` keeps each session's last whole read as it came: its rows (place, ciphertext,
wrapped key, key id) and their plaintexts, joined into JSON arrays. A read whose first rows
equal those byte for byte, under the same owner and usual key, gets their items by one
comparison of the lists and one parse per array; rows after them (turns appended since)
go the per-item way, and extend the read kept. Anything else is not recalled: a row moved,
altered or gone makes the read go the per-item way, and fail there as it would have.

Example::

    reads = WholeReads(rows=20_000, chunk=1000, budget=64 * 2**20)
    recalled = reads.recall(session_hash, (owner, usual_kek), rows)  # count 0: none
    others = open_each(rows[recalled.count:])
    items = recalled.items + parse(others)
    reads.keep(session_hash, (owner, usual_kek), rows, recalled, others)
    held = reads.forget()  # at a removal: nothing is recalled any more
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from pydantic_core import from_json


@dataclass(frozen=True, slots=True)
class _Read:
    under: Hashable  # what the rows were checked against: the session's owner, the usual key
    rows: list[Sequence[Any]]
    arrays: tuple[tuple[int, bytes], ...]  # (items, their plaintexts as one JSON array)
    weight: int  # bytes of the rows' ciphertexts and of the arrays


@dataclass(frozen=True, slots=True)
class Recalled:
    """The first `count` rows of a read, as the read kept `read` has them: their `items`."""

    count: int
    items: list[Any]
    read: _Read | None


class WholeReads:
    """The last whole read of the sessions read lately, `rows` rows and `budget` bytes of
    ciphertexts and plaintexts at most in all (the oldest read goes first; a read bigger
    than that is not kept), their plaintexts joined `chunk` items to an array (each parse
    holds the GIL for one array). Safe to use from several threads."""

    def __init__(self, rows: int, chunk: int, budget: int) -> None:
        self._size, self._chunk, self._budget = rows, chunk, budget
        self._reads: dict[str, _Read] = {}
        self._kept = self._weight = 0  # rows and bytes kept in all
        self._lock = threading.Lock()

    def recall(self, session: str, under: Hashable, rows: Sequence[Sequence[Any]]) -> Recalled:
        """The first of `rows` that equal the session's read kept, all of its rows, and
        their items (new objects: the caller may change them); a count of 0 if they differ."""
        with self._lock:
            read = self._reads.pop(session, None)
            if read is not None:
                self._reads[session] = read  # read lately: evicted last
        if read is None or read.under != under:
            return Recalled(0, [], None)
        count = len(read.rows)
        if len(rows) < count or rows[:count] != read.rows:
            return Recalled(0, [], None)
        items: list[Any] = []
        for _, array in read.arrays:
            items += from_json(array)
        return Recalled(count, items, read)

    def keep(
        self,
        session: str,
        under: Hashable,
        rows: Sequence[Sequence[Any]],
        recalled: Recalled,
        plaintexts: Sequence[bytes],
    ) -> None:
        """After a whole read of `rows`, whose first were `recalled` and the others opened
        into `plaintexts`: keep it for the next read (unless the read kept changed since)."""
        if not plaintexts:
            return  # nothing new: the read kept is this one, or there is none to keep
        with self._lock:
            old = self._reads.get(session)
            if recalled.read is not None and old is not recalled.read:
                return  # another read replaced it meanwhile, or a removal forgot it
            if old is not None:
                self._drop(session)
            if len(rows) > self._size:
                return
            before = recalled.read
            ciphertexts = map(itemgetter(1), rows[recalled.count :])
            weight = sum(map(len, ciphertexts)) + sum(map(len, plaintexts))
            if before is not None:
                weight += before.weight
            if weight > self._budget:
                return
            arrays = self._joined(list(before.arrays) if before is not None else [], plaintexts)
            self._reads[session] = _Read(under, list(rows), arrays, weight)
            self._kept += len(rows)
            self._weight += weight
            while self._kept > self._size or self._weight > self._budget:
                self._drop(next(iter(self._reads)))

    def _drop(self, session: str) -> None:
        read = self._reads.pop(session)
        self._kept -= len(read.rows)
        self._weight -= read.weight

    def _joined(
        self, arrays: list[tuple[int, bytes]], plaintexts: Sequence[bytes]
    ) -> tuple[tuple[int, bytes], ...]:
        """`arrays` followed by `plaintexts`: the last array filled up first."""
        rest = list(plaintexts)
        if arrays and arrays[-1][0] < self._chunk and rest:
            count, array = arrays.pop()
            head, rest = rest[: self._chunk - count], rest[self._chunk - count :]
            arrays.append((count + len(head), array[:-1] + b"," + b",".join(head) + b"]"))
        for start in range(0, len(rest), self._chunk):
            part = rest[start : start + self._chunk]
            arrays.append((len(part), b"[" + b",".join(part) + b"]"))
        return tuple(arrays)

    def forget(self) -> dict[str, Any]:
        """Keep nothing from now on; what was kept, for the caller to free (`release`)."""
        with self._lock:
            held, self._reads, self._kept, self._weight = self._reads, {}, 0, 0
        return held
