"""Value types shared by the layers: how a session is found, and items on their way in and out.

They hold data only: the repository reads and writes them, the codec fills and opens them,
the services pass them along. Nothing here does I/O.

Example::

    key = SessionKey.of("chat-1", user_id="alice")
    key.hash          # the SHA-256 of the id: how the session row is found
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple


@lru_cache(maxsize=4096)  # every sealed read asks, for the few sessions a process serves
def owner_of(user_id: str | None, session_hash: str) -> str:
    """The owner of a session, as hex: its user, or the session itself when it has none.

    Each owner has its own key (see `crypto.owner_keys`); a branch's companion row belongs
    to the owner of the session it branches (pass that session's hash).
    """
    subject = f"user\x00{user_id}" if user_id is not None else f"session\x00{session_hash}"
    return hashlib.sha256(subject.encode("utf-8")).hexdigest()


def is_owner_key_id(kek_id: str | None) -> bool:
    """Whether an item's `kek_id` names an owner key (else the store's key wraps it)."""
    return kek_id is not None and kek_id.startswith("o")


@dataclass(frozen=True)
class SessionKey:
    """How a session is found: the SDK id and its SHA-256, plus values for its first write."""

    session_id: str
    hash: str
    user_id: str | None = None
    metadata: dict[str, Any] | None = None
    # A sealed store's reads: the session's owner as its row says (`owner_of`), which the
    # items' owner key must belong to; None: not looked up.
    owner: str | None = field(default=None, compare=False)
    # A sealed store's writes: the id of the owner key they seal under, which the write's
    # first statement locks and checks (`Schema.claim`); None: a plaintext write.
    sealing: str | None = field(default=None, compare=False)

    @classmethod
    def of(cls, session_id: str, **first_write: Any) -> SessionKey:
        digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()
        return cls(session_id, digest, **first_write)

    def owned_by(self, user_id: str | None) -> SessionKey:
        """This key with the owner of a session whose row names `user_id` (built directly:
        `dataclasses.replace` costs more than a sealed tail read's own work on an item)."""
        owner = owner_of(user_id, self.hash)
        return SessionKey(
            self.session_id, self.hash, self.user_id, self.metadata, owner, self.sealing
        )

    def sealed_under(self, key_id: str, owner: str | None = None) -> SessionKey:
        """This key for a write that seals under owner key `key_id` (of `owner`, if given:
        the owner the write then expects of what it reads)."""
        owner = self.owner if owner is None else owner
        return SessionKey(self.session_id, self.hash, self.user_id, self.metadata, owner, key_id)


@dataclass(frozen=True)
class IndexEntry:
    """What search keeps of one item: its packed terms (`pack_terms`, with the codec's term
    ids) and its plain vector under one model (None: the item has no terms, no text; or no
    vector, one its embedder failed on)."""

    terms: bytes | None
    vector: bytes | None
    model_id: str


class NewItem(NamedTuple):
    """One item as it will be stored: JSON text, or ciphertext with its wrapped data key.

    A named tuple, as `StoredItem`: an append makes one per item.
    """

    payload: str | None = None
    ciphertext: bytes | None = None
    wrapped_key: bytes | None = None
    kek_id: str | None = None
    # What search needs, deleted with the item: its packed terms and one embedding.
    terms: bytes | None = None
    vector: bytes | None = None
    model_id: str | None = None


class StoredItem(NamedTuple):
    """One item as read back: its place and its body, the JSON text; in an encrypted store
    the ciphertext, with its wrapped data key and the id of the key that wrapped it.

    A named tuple: reads make one per row, and a frozen dataclass costs three times as much.
    A store reads one body column, its own: an encrypted row carries no always-empty JSON
    text (on SQLite, a column more in every row of a 1,200-item read cost 68 us).
    """

    seq: int
    body: str | bytes | None
    wrapped_key: bytes | None = None
    kek_id: str | None = None


#: Where a row laid out as `StoredItem` holds its place, and its kek_id (sealed rows only).
SEQ = StoredItem._fields.index("seq")
KEK_ID = StoredItem._fields.index("kek_id")


@dataclass(frozen=True)
class Tail:
    """The latest live items of a session as a compaction read them, and whether nothing
    older was there (`complete`). A replacement checks their numbers are still the tail's:
    a `seq` is never handed out twice (row ids can be, on SQLite).

    Its rows are laid out as `StoredItem`, as plain tuples: the garbage collector stops
    following a tuple of numbers, text and bytes, never a named tuple (200,000 of them, the
    whole history the SDK's compaction reads, brought its full collections).
    """

    stored: list[tuple[Any, ...]]
    complete: bool


@dataclass(frozen=True)
class Scope:
    """Which items a search looks at: one session, one user's sessions, or all."""

    session: SessionKey | None = None
    user_id: str | None = None

    @property
    def key(self) -> tuple[str | None, str | None]:
        """The scope as a hashable key: its session's hash, or its user (None: all)."""
        return (None if self.session is None else self.session.hash, self.user_id)


#: A prime under 2**31: `ScopeStamp.mix` keeps each factor below it.
MIX_MODULUS = 2_147_483_647
#: What `ScopeStamp.mix` multiplies an item's session row id by before adding its number.
MIX_FACTOR = 1_000_003


@dataclass(frozen=True)
class ScopeStamp:
    """A scope's live items on its main lines (what search indexes), in a few numbers: how
    many there are, and the sums of their row ids, sequence numbers and session row ids,
    and of a mix of the three per item (`mix`); with them `newest`, the largest row id
    (0: none), up to which a search catches up.

    A session never hands out a sequence number twice, nor a database a session row id: an
    item written, removed or expired in the scope changes the stamp, short of changes that
    cancel out in all five numbers at once (a write and a removal in the same session
    never do: the written item's number is larger). The first four alone did, SQLite
    giving a removed last row's id again: two items popped from one session, and one
    appended in each of two others, which took the popped ids, at numbers summing to theirs.
    """

    live: int
    sums: tuple[int, ...]
    newest: int = 0

    def plus(self, added: ScopeStamp) -> ScopeStamp:
        """This stamp with the items of `added` (a stamp of items newer than its newest)."""
        sums = tuple(a + b for a, b in zip(self.sums, added.sums, strict=True))
        return ScopeStamp(self.live + added.live, sums, max(self.newest, added.newest))

    @staticmethod
    def mix(item_id: int, seq: int, session_pk: int) -> int:
        """What an item adds to the stamp's last sum, besides its id, number and session:
        its id times a number of its place, each modulo `MIX_MODULUS` (the SQL of
        `SearchIndex.stamp` computes the same), so that the products stay in 63 bits and a
        sum of them in 64 for 2**32 items.

        >>> ScopeStamp.mix(7, 3, 2)
        14000063
        """
        m = MIX_MODULUS
        return (session_pk % m * MIX_FACTOR + seq % m) % m * (item_id % m) % m

    def may_follow(self, older: ScopeStamp) -> bool:
        """Whether items may only have been added since `older` (more of them, and a
        newer newest): then `older.plus(the stamp of those after older.newest)` tells."""
        return self.live > older.live and self.newest > older.newest


@dataclass
class Candidates:
    """Items that search may rank, column by column: where each is, its packed terms, and
    whether it has a vector of the model searched with (that vector, sealed or not, if read).

    `positions` order them by age: the `seq` within a session, `created_at` in epoch seconds
    across sessions. Terms are None where the item has none (or they were not read), a
    vector None where it was not read, a wrapped key (and the id of the key
    that wrapped it) None in a plaintext store.
    """

    item_pks: list[int]
    session_hashes: list[str]
    seqs: list[int]
    positions: list[float]
    terms: list[bytes | None]
    has_vector: list[bool]
    vectors: list[bytes | None]
    wrapped_keys: list[bytes | None]
    kek_ids: list[str | None]

    @classmethod
    def of(cls, columns: dict[str, list[Any]]) -> Candidates:
        """From a list per field, by name: one row per item with terms or a vector, that
        of the model searched with where there are two (an item indexed for another model
        too, until `reindex` drops the other). Rows with neither (an item without text) are
        left out."""
        found = cls(**columns)
        if None in found.terms:  # rare, unless terms were not read
            kept = [i for i, t in enumerate(found.terms) if t is not None or found.has_vector[i]]
            found = found.take(kept, None)
        if len(set(found.item_pks)) == len(found.item_pks):
            return found
        row: dict[int, int] = {}
        for i, (pk, flag) in enumerate(zip(found.item_pks, found.has_vector, strict=True)):
            if pk not in row or flag:
                row[pk] = i
        return found.take(sorted(row.values()), None)

    def __len__(self) -> int:
        return len(self.item_pks)

    def plus(self, newer: Candidates) -> Candidates:
        """These candidates, then `newer`'s (items added since these were read)."""
        return Candidates(*(getattr(self, f.name) + getattr(newer, f.name) for f in fields(self)))

    def take(self, indexes: Iterable[int], vectors: Sequence[bytes | None] | None) -> Candidates:
        """The candidates at `indexes`, with these vectors (None: their own)."""
        at = list(indexes)
        return Candidates(
            [self.item_pks[i] for i in at],
            [self.session_hashes[i] for i in at],
            [self.seqs[i] for i in at],
            [self.positions[i] for i in at],
            [self.terms[i] for i in at],
            [self.has_vector[i] for i in at],
            [self.vectors[i] for i in at] if vectors is None else list(vectors),
            [self.wrapped_keys[i] for i in at],
            [self.kek_ids[i] for i in at],
        )


@dataclass(frozen=True)
class Appended:
    """Items just written to a session's main line, for search to index: from `first_seq`
    on (0: where is not known), and, from a plaintext store's append, the session's row and
    the items' JSON, so that they are indexed without being read back (a tuple: the
    garbage collector stops tracking it, so the many that wait for the indexer are never
    promoted to its oldest generation, whose collections stop every thread)."""

    key: SessionKey
    first_seq: int = 0
    session_pk: int | None = None
    payloads: tuple[str, ...] | None = None


#: A limit that reads a whole history (the SDK's compaction reads "all" the same way).
WHOLE = 2**31 - 1

#: What a store calls after a write with the items it added (to have them indexed).
Written = Callable[[Appended], None]


@dataclass(frozen=True)
class Unindexed:
    """A live item that has no vector of the current embedding model yet."""

    item_pk: int
    session_pk: int
    key: SessionKey
    stored: StoredItem


class LineItems(NamedTuple):
    """A line's live items in order, as read back: a list per column, so a long history
    makes one object per item (its row) where the garbage collector's full collections,
    which hold every thread, would otherwise walk several.

    Item `i` is `rows[i]`, laid out like `StoredItem`; `turns[i]`, its user turn;
    `users[i]`, whether it opens that turn (a user message); `created[i]`, when it was
    written."""

    rows: list[tuple[Any, ...]]
    turns: list[int]
    users: list[bool]
    created: list[datetime]

    def only_users(self) -> LineItems:
        """The user messages alone."""
        return self.picked([i for i, user in enumerate(self.users) if user])

    def picked(self, kept: Iterable[int]) -> LineItems:
        """The items at places `kept`, in that order."""
        rows, turns, users, created = self
        line = LineItems([], [], [], [])
        for i in kept:
            line.rows.append(rows[i])
            line.turns.append(turns[i])
            line.users.append(users[i])
            line.created.append(created[i])
        return line


@dataclass(frozen=True)
class BranchSummary:
    """A branch that holds items: how many, how many user turns, since when."""

    name: str
    items: int
    user_turns: int
    created_at: datetime


@dataclass(frozen=True)
class Beyond:
    """What the SDK's `AdvancedSQLiteSession` holds of a session beyond its main line: its
    other branches (name, items, items not on main) and its rows of usage per turn."""

    branches: tuple[tuple[str, int, int], ...] = ()
    turn_usage: int = 0
