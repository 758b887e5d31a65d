"""Items and state to stored rows and back: JSON text, or sealed under per-item keys.

`PlainCodec` stores compact JSON that plain SQL can query; `SealedCodec` stores each item
sealed with AES-256-GCM under its own data key, bound to its session and position.

Example::

    codec = PlainCodec()
    rows = codec.rows(key, [encode_item(item)], first_seq=1)
    item = codec.item(key, stored_row)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import lru_cache, partial
from typing import Any, Protocol, TypeVar

from pydantic_core import from_json, to_json
from sqlalchemy import null

from .caches import RELEASE_PAUSE, Weighed, lengths, release
from .candidate_cache import CandidateCache
from .crypto import (
    SEALED_OVERHEAD,
    KeyEncryptionKey,
    OwnerKey,
    Place,
    Wrapper,
    item_opener,
    open_item,
    open_state,
    seal_items,
    seal_state,
    state_kek_id,
    term_hasher,
    unwrap_data_key,
)
from .errors import (
    AgentsSQLAlchemyError,
    CorruptItemError,
    ItemError,
    KeyringError,
    OwnerKeyError,
    TamperedItemError,
)
from .search import forget_terms
from .search.postings import term_id
from .search.vocabulary import Vocabulary
from .telemetry import current
from .types import (
    KEK_ID,
    Candidates,
    IndexEntry,
    NewItem,
    SessionKey,
    StoredItem,
    is_owner_key_id,
)
from .validation import check_json
from .whole_reads import WholeReads

# Opened vectors a sealed store keeps in memory per model (a byte per dimension: 256 bytes
# each for the default embedder, 3,072 for the largest of OpenAI's), and their bytes.
VECTOR_CACHE = 100_000
VECTOR_BYTES = 64 * 2**20
# Plaintexts of opened items a sealed store keeps in memory, each with its ciphertext: at
# most this many, and this many bytes of both in all (an app's items may be megabytes).
PLAINTEXT_CACHE = 20_000
PLAINTEXT_BYTES = 64 * 2**20
# Rows of whole reads a sealed store keeps in memory (`WholeReads`: each row's ciphertext
# and its plaintext), and their bytes in all.
WHOLE_READ_ROWS = 20_000
WHOLE_READ_BYTES = 64 * 2**20
# What the plaintext cache keeps of an item, by its wrapped key: the ciphertext, session and
# place that authenticated the plaintext, the plaintext, and the id of the key that wrapped
# the data key (a row naming another is refused, as a store that never saw it refuses it).
_Opened = tuple[bytes, str, int, bytes, str | None]
# Terms whose keyed hash a sealed store keeps in memory.
TERM_CACHE = 50_000
# Items parsed in one call, as one JSON array (bounds the joined text a big read holds).
PARSE_CHUNK = 1000


def _index_row(entry: IndexEntry, vector: bytes | None) -> NewItem:
    return NewItem(terms=entry.terms, vector=vector, model_id=entry.model_id)


def encode_item(item: Any, what: str = "item") -> str:
    """Serialise one item, a JSON object, to compact JSON text.

    pydantic-core's serialiser, once `check_json` has made sure it reads back unchanged.

    >>> encode_item({"role": "user", "content": "héllo"})
    '{"role":"user","content":"héllo"}'
    """
    if not isinstance(item, Mapping):
        raise ItemError(f"{what} is a {type(item).__name__}, not a JSON object (a dict)")
    check_json(item, what)
    try:
        return to_json(item).decode()
    except ValueError as exc:  # lone surrogates: no database stores them
        if "surrogates not allowed" in str(exc):
            raise ItemError(
                f"{what} holds text that is not valid Unicode (a lone surrogate), which no "
                "database stores"
            ) from exc
        raise ItemError(f"{what} is not JSON-serialisable: {exc}") from exc


#: The JSON one `add_items` call writes at most, in bytes of UTF-8: more is refused before
#: anything is written (a call is one transaction, held whole in memory).
MAX_BATCH_BYTES = 256 * 2**20


def json_size(texts: Iterable[str]) -> int:
    """The bytes of these JSON texts in UTF-8: what telemetry counts as an item's size, the
    same written and read, sealed or not."""
    return sum(map(utf8_size, texts))


def counted(payloads: Sequence[str]) -> None:
    """Telemetry: the current operation wrote these items (once they are stored)."""
    if (operation := current()) is not None:
        operation.wrote(len(payloads), json_size(payloads))


def utf8_size(text: str) -> int:
    """The bytes of `text` in UTF-8 (an ASCII text is counted without encoding it)."""
    return len(text) if text.isascii() else len(text.encode())


def encode_items(items: Iterable[Any]) -> list[str]:
    """Serialise a batch; the first bad item, or going past `MAX_BATCH_BYTES`, raises
    before anything is written."""
    payloads, size = [], 0
    for index, item in enumerate(items):
        payloads.append(text := encode_item(item, f"item {index}"))
        size += utf8_size(text)
        if size > MAX_BATCH_BYTES:
            raise ItemError(
                f"the batch is over {MAX_BATCH_BYTES // 2**20} MiB of JSON by item {index}: "
                "split it into several add_items calls (each is all-or-nothing); nothing "
                "was written"
            )
    return payloads


def decode_item(text: str | bytes, key: SessionKey, seq: int | None) -> Any:
    """Parse one stored item (or state); one that is not a JSON object is `CorruptItemError`,
    as is NaN or Infinity (changed outside the library: it writes neither).

    pydantic-core's parser: the same values as `json.loads`, three times as fast.
    """
    try:
        item = from_json(text, allow_inf_nan=False)
    except (TypeError, ValueError) as exc:
        raise CorruptItemError(f"stored {where(key, seq)} is not valid JSON: {exc}") from exc
    if not isinstance(item, dict):
        raise CorruptItemError(f"stored {where(key, seq)} is not a JSON object")
    return item


def parse_objects(texts: Sequence[bytes]) -> list[Any]:
    """Parse JSON objects a chunk at a time, each chunk as one array: one parser call per
    chunk, not per item. Anything but one JSON object per text raises (`ValueError` or
    `CorruptItemError`); the caller then parses them one by one to name the bad one.

    Only for texts this library wrote and authenticated (sealed items): each is one
    compact JSON object, so joining them with commas cannot change where one ends.
    """
    items: list[Any] = []
    for start in range(0, len(texts), PARSE_CHUNK):
        chunk = texts[start : start + PARSE_CHUNK]
        parsed = from_json(b"[" + b",".join(chunk) + b"]")
        if len(parsed) != len(chunk):
            raise CorruptItemError("a stored item is not one JSON object")
        items += parsed
    if not all(type(item) is dict for item in items):
        raise CorruptItemError("a stored item is not a JSON object")
    return items


def where(key: SessionKey, seq: int | None) -> str:
    """How errors name an item (by its sequence number) or a state, and its session."""
    what = "state" if seq is None else f"item #{seq}"
    return f"{what} of session {key.session_id[:80]!r}"


T = TypeVar("T")


def noting_keys(
    decode: Callable[[SessionKey, StoredItem], T], removed: list[bytes]
) -> Callable[[SessionKey, StoredItem], T]:
    """`decode` for a removal, which notes each sealed item's wrapped key in `removed`: what
    `SealedCodec.forget_keys` then drops from memory, and nothing else."""

    def decode_noting(key: SessionKey, stored: StoredItem) -> T:
        item = decode(key, stored)
        if stored.wrapped_key is not None:
            removed.append(bytes(stored.wrapped_key))
        return item

    return decode_noting


class Codec(Protocol):
    """Turns JSON text into stored rows and back, for items, their index and session state."""

    state_columns: tuple[str, ...]
    #: Whether `vectors` answers from memory, so search reads candidates without vectors.
    caches_vectors: bool
    #: What indexing has tokenised (a sealed codec forgets it with its keys).
    vocabulary: Vocabulary
    #: The candidates of the large scopes searched lately (a sealed codec forgets them at
    #: any removal, and its services when data keys are wrapped anew).
    kept: CandidateCache
    #: How many removals it has forgotten: a reader notes it before fetching rows, and what
    #: they open stays in memory only if no removal came since (`items(since=...)`).
    removals: int

    @property
    def kek_id(self) -> str | None:
        """The id of the key-encryption key that wraps new items' keys (None: plaintext)."""
        ...

    def rows(
        self, key: SessionKey, payloads: list[str], first_seq: int, sealer: Wrapper | None = None
    ) -> list[NewItem]:
        """New rows for these items, numbered from `first_seq` (sealing binds them there),
        their data keys wrapped by `sealer` (the session owner's key)."""
        ...

    def item(self, key: SessionKey, stored: StoredItem, since: int | None = None) -> Any:
        """One stored item; `since` as for `items`."""
        ...

    def items(
        self,
        key: SessionKey,
        rows: Sequence[Sequence[Any]],
        usual_kek: str | None = None,
        *,
        whole: bool = False,
        since: int | None = None,
        counted: bool = True,
    ) -> list[Any]:
        """The items of rows laid out as `StoredItem` (seq, body, ...), in order. A row
        whose kek_id is None was wrapped by `usual_kek` (by default the store's key).
        `whole`: the rows are the session's whole main line (a sealed codec keeps them, to
        answer the next whole read: `WholeReads`). `since`: `removals` before the rows were
        fetched (a removal since then may have forgotten some of them: nothing is kept).
        `counted`: the operation's telemetry counts them as read (not the library's own
        reads: indexing, a line's turns looked up for a pop or a new branch)."""
        ...

    def reindexed(self, key: SessionKey, stored: StoredItem, entry: IndexEntry) -> NewItem: ...

    def term_id(self, term: str) -> int:
        """The 64-bit id the index packs for a term."""
        ...

    def term_ids(self, counts: Mapping[str, int]) -> dict[int, int]:
        """`{term: count}` as the index packs it: `{64-bit term id: count}`."""
        ...

    def vectors(
        self, candidates: Candidates, model_id: str, since: int | None = None
    ) -> list[bytes | None]:
        """Each candidate's plain vector; None where it is neither read nor cached. `since`:
        `removals` before the candidates were fetched, as for `items`."""
        ...

    def state_values(
        self, key: SessionKey, state: dict[str, Any], sealer: Wrapper | None = None
    ) -> dict[str, Any]: ...

    def state(self, key: SessionKey, row: Any) -> dict[str, Any]: ...


class PlainCodec:
    """Items as compact JSON text; state as a JSON column."""

    state_columns: tuple[str, ...] = ("state",)
    caches_vectors = False
    kek_id = None
    removals = 0

    def __init__(self) -> None:
        self.vocabulary = Vocabulary()
        self.kept = CandidateCache()

    def rows(
        self, key: SessionKey, payloads: list[str], first_seq: int, sealer: Wrapper | None = None
    ) -> list[NewItem]:
        return [NewItem(payload=payload) for payload in payloads]

    def reindexed(self, key: SessionKey, stored: StoredItem, entry: IndexEntry) -> NewItem:
        return _index_row(entry, entry.vector)

    def term_id(self, term: str) -> int:
        return term_id(term)

    def term_ids(self, counts: Mapping[str, int]) -> dict[int, int]:
        return {term_id(term): count for term, count in counts.items()}

    def vectors(
        self, candidates: Candidates, model_id: str, since: int | None = None
    ) -> list[bytes | None]:
        return list(candidates.vectors)

    def items(
        self,
        key: SessionKey,
        rows: Sequence[Sequence[Any]],
        usual_kek: str | None = None,
        *,
        whole: bool = False,
        since: int | None = None,
        counted: bool = True,
    ) -> list[Any]:
        if counted and (operation := current()) is not None:
            operation.read(len(rows), json_size(row[1] or "" for row in rows))
        try:  # the whole batch at once; a row that fails is named by `item`, below
            items = [from_json(row[1], allow_inf_nan=False) for row in rows]
            if all(type(item) is dict for item in items):
                return items
        except (TypeError, ValueError):
            pass
        return [self.item(key, StoredItem(*row)) for row in rows]

    def item(self, key: SessionKey, stored: StoredItem, since: int | None = None) -> Any:
        if stored.body is None:
            raise CorruptItemError(
                f"stored {where(key, stored.seq)} is sealed: open the store with its key"
            )
        return decode_item(stored.body, key, stored.seq)

    def state_values(
        self, key: SessionKey, state: dict[str, Any], sealer: Wrapper | None = None
    ) -> dict[str, Any]:
        return {"state": state}

    def state(self, key: SessionKey, row: Any) -> dict[str, Any]:
        return dict(row.state or {})


class MissingOwnerKeys(OwnerKeyError):
    """Rows wrapped by owner keys this codec has not opened yet: load them, then retry."""

    def __init__(self, key_ids: Iterable[str]) -> None:
        self.key_ids = frozenset(key_ids)
        super().__init__(f"owner keys not opened yet: {sorted(self.key_ids)}")


class SealedCodec:
    """Items sealed under a fresh data key each, wrapped by their owner's key (`OwnerKey`,
    opened into `owner_keys` by the services) or, as written before owner keys, by the
    store's key-encryption key."""

    state_columns: tuple[str, ...] = ("sealed_state",)
    caches_vectors = True

    def __init__(self, kek: KeyEncryptionKey) -> None:
        self.kek = kek
        # While this store rotates its key: the new one, which keeps the owner keys the
        # rotation made (this store's writes meanwhile seal under those).
        self.next_kek: KeyEncryptionKey | None = None
        # Owner keys opened so far, by id (`services.owners` fills it, a reader looks).
        self.owner_keys: dict[str, OwnerKey] = {}
        # Keyed hashes of the terms seen lately: an HMAC and two Unicode normalisations
        # cost ~3 us a term, a vocabulary repeats, and the indexer hashes every new item.
        self._hash_term = lru_cache(maxsize=TERM_CACHE)(term_hasher(kek))
        # Opened vectors, oldest first, by model and wrapped data key: a wrapped key is
        # random, so it names one item (a reused row id never hits a stale entry).
        self._opened: dict[str, Weighed[bytes | None, bytes]] = {}
        self._opened_lock = threading.Lock()
        # Plaintexts of the items read, by wrapped key (random: one per item), kept with
        # what authenticated them: only the same ciphertext at the same place is a hit
        # (anything moved or altered is opened again, and fails, as if never seen). An
        # agent reads its whole history every turn; `forget_keys` drops them all.
        self._plaintexts = Weighed[bytes, _Opened](PLAINTEXT_CACHE, PLAINTEXT_BYTES, _weights)
        # Each session's last whole read with its plaintexts, answered again while its rows
        # come back the same, byte for byte.
        self._whole = WholeReads(WHOLE_READ_ROWS, PARSE_CHUNK, WHOLE_READ_BYTES)
        # Caches `forget_keys` set aside whole, for `forget_text` to free.
        self._held: list[dict[Any, Any]] = []
        # The wrapped keys of items popped since, for `forget_text` to find in `kept`.
        self._popped: set[bytes] = set()
        self.vocabulary = Vocabulary()
        self.kept = CandidateCache()
        self.kek_id = kek.kek_id
        self.removals = 0

    def wrapper(
        self,
        kek_id: str | None,
        owner: str | None = None,
        named: str | Callable[[], str] = "an item",
    ) -> Wrapper:
        """The key that wrapped a row's data key: by the row's `kek_id`. An owner key must
        belong to `owner` (the session's owner, as its row says), when that is given;
        `named` names the row in the error if not (a callable: only then)."""
        if kek_id is None or kek_id == self.kek_id:
            return self.kek
        if not kek_id:
            raise TamperedItemError(
                f"{named() if callable(named) else named} names no key that wrapped its data "
                "key: its kek_id was cleared outside the library"
            )
        found = self.owner_keys.get(kek_id)
        if found is None:
            if is_owner_key_id(kek_id):
                raise MissingOwnerKeys([kek_id])
            raise KeyringError(
                f"{named() if callable(named) else named} is wrapped by key-encryption key "
                f"{kek_id!r}, not the store's {self.kek_id!r}: a key rotation is unfinished "
                "(run it again to finish it), this store holds a key that was rotated away "
                "(open it again with the new key), or the row's kek_id was changed outside "
                "the library"
            )
        if owner is not None and found.owner != owner:
            raise TamperedItemError(
                f"{named() if callable(named) else named} is sealed for another owner than its "
                "session's row names: the session's user_id was changed, or the item moved, "
                "outside the library"
            )
        return found

    def _missing(self, kek_ids: Iterable[str | None]) -> None:
        """Raise `MissingOwnerKeys` for the owner keys among `kek_ids` not opened yet."""
        missing = {
            kek_id
            for kek_id in kek_ids
            if is_owner_key_id(kek_id) and kek_id not in self.owner_keys
        }
        if missing:
            raise MissingOwnerKeys(missing)  # type: ignore[arg-type]

    def _may_keep(self, since: int | None) -> bool:
        """Whether what rows fetched at `since` (`removals` then; None: not known) open may
        be kept in memory: no removal came after. Ask holding `_opened_lock`."""
        return since is None or since == self.removals

    def _remember(self, opened: Mapping[bytes, _Opened], since: int | None = None) -> None:
        """Keep these plaintexts (the oldest go past the cache's bounds), unless a removal
        came after their rows were fetched (`since`)."""
        with self._opened_lock:
            if self._may_keep(since):
                self._plaintexts.add(opened)

    def forget_keys(self, removed: Collection[bytes] | None = None) -> None:
        """At a removal, drop the plaintexts and opened vectors it made stale, at once. With
        `removed` (the wrapped keys of the only items removed, as by a pop), theirs only:
        the other items' stay, and the search candidates kept of the scopes that did not
        hold them (`forget_text` finds those that did). Without, all of them, and every
        scope's candidates, set aside whole for `forget_text` to free. Every whole read goes
        in any case. The rest of what a removal leaves in memory, `forget_text` drops just
        after.
        """
        with self._opened_lock:
            self.removals += 1  # what reads fetched before now opens is not kept
            self._held.append(self._whole.forget())  # any removal: every whole read
            if removed is None:
                self._held.append(self.kept.forget())
                self._held.append(self._plaintexts.take())
                self._held += [vectors.take() for vectors in self._opened.values()]
            else:
                self.kept.outdate()  # searches reading now keep nothing
                self._popped.update(removed)
            for wrapped_key in removed or ():
                self._plaintexts.pop(wrapped_key)
                for vectors in self._opened.values():
                    vectors.pop(wrapped_key)

    async def forget_text(self) -> None:
        """After a removal, off the caller's path (`Opener.scrubbing` has the worker run it;
        `flush()` waits for it): drop what the removed items may have left in memory and
        `forget_keys` did not, nor anything their destroyed keys opened: the caches it set
        aside, the keyed hashes of terms, the words indexing tokenised, and the search
        layer's process-wide caches (`search.forget_terms`). One cache at a time, the big
        ones a slice at a time (`caches.release`): all at once, on the caller's path, a
        pop after 5,000 items were indexed held the event loop for 79 ms."""
        with self._opened_lock:
            held, self._held = self._held, []
            popped, self._popped = self._popped, set()
        held.append(self.kept.drop_holding(popped))  # scopes that held a popped item
        self._hash_term.cache_clear()  # the terms of removed items too
        await asyncio.sleep(RELEASE_PAUSE)
        self.vocabulary = Vocabulary()  # the old one is freed here
        await asyncio.sleep(RELEASE_PAUSE)
        for cache in held:
            await release(cache)
        await forget_terms()

    def rows(
        self, key: SessionKey, payloads: list[str], first_seq: int, sealer: Wrapper | None = None
    ) -> list[NewItem]:
        wrapper = sealer or self.kek
        plaintexts = [payload.encode() for payload in payloads]
        sealed = seal_items(wrapper, plaintexts, key.hash, first_seq)
        kek_id = wrapper.kek_id
        rows = [NewItem(ciphertext=c, wrapped_key=w, kek_id=kek_id) for c, w in sealed]
        sealed_here = {
            wrapped: (ciphertext, key.hash, seq, plaintext, kek_id)
            for seq, ((ciphertext, wrapped), plaintext) in enumerate(
                zip(sealed, plaintexts, strict=True), first_seq
            )
        }
        # What was just sealed reads back from memory (the indexer reads it right away),
        # under the same rule as what was opened: only these very bytes at this place.
        self._remember(sealed_here)
        return rows

    def reindexed(self, key: SessionKey, stored: StoredItem, entry: IndexEntry) -> NewItem:
        place = Place(key.hash, stored.seq)
        if stored.wrapped_key is None:
            raise CorruptItemError(f"stored {where(key, stored.seq)} has no data key")
        data_key = unwrap_data_key(
            self.wrapper(stored.kek_id, named=where(key, stored.seq)),
            stored.wrapped_key,
            place,
            where=where(key, stored.seq),
        )
        # Terms as keyed hashes, the vector sealed with the item's own data key.
        vector = entry.vector
        if vector is not None:
            vector = data_key.seal(vector, place.for_purpose(f"embedding:{entry.model_id}"))
        return _index_row(entry, vector)

    def term_id(self, term: str) -> int:
        return self._hash_term(term)

    def term_ids(self, counts: Mapping[str, int]) -> dict[int, int]:
        hashed: dict[int, int] = {}
        for term, count in counts.items():
            digest = self._hash_term(term)
            hashed[digest] = hashed.get(digest, 0) + count
        return hashed

    def vectors(
        self, candidates: Candidates, model_id: str, since: int | None = None
    ) -> list[bytes | None]:
        # A search asks for every candidate's vector: the cached ones are looked up at once,
        # and only the others are gone over one by one.
        with self._opened_lock:
            kept = self._opened[model_id].kept if model_id in self._opened else {}
            cached = list(map(kept.get, candidates.wrapped_keys))
        out = [v if flag else None for v, flag in zip(cached, candidates.has_vector, strict=True)]
        missing = [i for i, v in enumerate(out) if v is None and candidates.has_vector[i]]
        self._missing(candidates.kek_ids[i] for i in missing if candidates.vectors[i] is not None)
        opened: dict[bytes | None, bytes] = {}
        for i in missing:
            wrapped_key, sealed = candidates.wrapped_keys[i], candidates.vectors[i]
            if wrapped_key is None:
                raise CorruptItemError(f"vector of item #{candidates.seqs[i]} has no data key")
            if sealed is not None:
                place = Place(candidates.session_hashes[i], candidates.seqs[i])
                named = (  # a search's candidates know their session by its hash only
                    f"the vector of item #{candidates.seqs[i]} of the session whose hash "
                    f"starts {candidates.session_hashes[i][:16]}"
                )
                wrapper = self.wrapper(candidates.kek_ids[i], named=named)
                data_key = unwrap_data_key(wrapper, wrapped_key, place, where=named)
                purpose = place.for_purpose(f"embedding:{model_id}")
                out[i] = opened[wrapped_key] = data_key.open(sealed, purpose, where=named)
        if opened:
            with self._opened_lock:
                if self._may_keep(since):
                    if model_id not in self._opened:
                        self._opened[model_id] = Weighed(VECTOR_CACHE, VECTOR_BYTES, lengths)
                    self._opened[model_id].add(opened)
        return out

    def items(
        self,
        key: SessionKey,
        rows: Sequence[Sequence[Any]],
        usual_kek: str | None = None,
        *,
        whole: bool = False,
        since: int | None = None,
        counted: bool = True,
    ) -> list[Any]:
        if counted and (operation := current()) is not None:
            # The JSON inside each sealed item: its sealed form less the version, nonce and tag.
            sealed = (len(row[1] or b"") - SEALED_OVERHEAD for row in rows)
            operation.read(len(rows), sum(size for size in sealed if size > 0))
        under = (key.owner, usual_kek)
        recalled = self._whole.recall(key.hash, under, rows) if whole else None
        try:  # the whole batch at once; a row that fails is named by `item`, below
            start = recalled.count if recalled is not None else 0
            opened = self._plaintexts_of(key, rows, usual_kek, start, since)
            items = parse_objects(opened)
            if recalled is None:
                return items
            if recalled.count:
                items = recalled.items + items
            with self._opened_lock:  # no removal between the check and the keeping
                if since is not None and self._may_keep(since):
                    self._whole.keep(key.hash, under, rows, recalled, opened)
            return items
        except OwnerKeyError:
            raise
        except (AgentsSQLAlchemyError, TypeError, ValueError):
            pass
        stored = (StoredItem(*row) for row in rows)
        return [
            self.item(key, row._replace(kek_id=usual_kek) if row.kek_id is None else row, since)
            for row in stored
        ]

    def _plaintexts_of(
        self,
        key: SessionKey,
        rows: Sequence[Sequence[Any]],
        usual_kek: str | None = None,
        start: int = 0,
        since: int | None = None,
    ) -> list[bytes]:
        """The plaintexts of `rows[start:]`, in order: from memory where the very same
        ciphertext at the same place was opened before, else unwrapped and opened (any
        failure raises) and kept in memory (unless a removal came `since`).

        Every key the rows name is checked first, once, those of the rows before `start`
        too (it must belong to the session's owner, and be opened: else `MissingOwnerKeys`
        names all that are not)."""
        named = {row[KEK_ID] for row in rows}
        self._missing({usual_kek if kek_id is None else kek_id for kek_id in named})
        wrappers = {
            kek_id: self.wrapper(
                usual_kek if kek_id is None else kek_id,
                key.owner,
                partial(_first_named, key, rows, kek_id),
            )
            for kek_id in named
        }
        session_hash, seen_before = key.hash, self._plaintexts.kept.get
        texts: list[bytes] = []
        missed: list[int] = []
        for seq, ciphertext, wrapped, kek_id in rows[start:] if start else rows:
            seen = seen_before(wrapped)
            if (
                seen
                and seen[2] == seq
                and seen[0] == ciphertext
                and seen[1] == session_hash
                and seen[4] == (kek_id or usual_kek)
            ):
                texts.append(seen[3])
            else:
                missed.append(len(texts))
                texts.append(b"")
        if missed:
            openers = {kek_id: item_opener(w, session_hash) for kek_id, w in wrappers.items()}
            opened = {}
            for i in missed:
                seq, ciphertext, wrapped, kek_id = rows[start + i]
                texts[i] = openers[kek_id](ciphertext, wrapped, seq)
                opened[wrapped] = (ciphertext, session_hash, seq, texts[i], kek_id or usual_kek)
            self._remember(opened, since)
        return texts

    def item(self, key: SessionKey, stored: StoredItem, since: int | None = None) -> Any:
        if stored.body is None or isinstance(stored.body, str) or stored.wrapped_key is None:
            raise CorruptItemError(f"stored {where(key, stored.seq)} is not sealed")
        ciphertext, wrapped = bytes(stored.body), bytes(stored.wrapped_key)
        row = (stored.seq, ciphertext, wrapped, stored.kek_id)
        try:
            [plaintext] = self._plaintexts_of(key, [row], since=since)
        except OwnerKeyError:
            raise
        except AgentsSQLAlchemyError:
            # Rare: open it step by step for the error that says what, naming the item.
            place, named = Place(key.hash, stored.seq), where(key, stored.seq)
            open_item(
                self.wrapper(stored.kek_id, named=named), ciphertext, wrapped, place, where=named
            )
            raise
        return decode_item(plaintext, key, stored.seq)

    def state_values(
        self, key: SessionKey, state: dict[str, Any], sealer: Wrapper | None = None
    ) -> dict[str, Any]:
        blob = seal_state(sealer or self.kek, encode_item(state, "state").encode(), key.hash)
        return {"sealed_state": blob, "state": null()}  # SQL NULL, not JSON null

    def state(self, key: SessionKey, row: Any) -> dict[str, Any]:
        if row.sealed_state is None:
            return {}
        kek_id = state_kek_id(row.sealed_state)
        self._missing([kek_id])
        wrapper = self.wrapper(kek_id, key.owner, where(key, None))
        plaintext = open_state(wrapper, row.sealed_state, key.hash, where=where(key, None))
        return dict(decode_item(plaintext.decode("utf-8"), key, None))


def _weights(opened: Iterable[_Opened]) -> list[int]:
    """What items kept in the plaintext cache weigh: each its ciphertext and its plaintext."""
    return [len(ciphertext) + len(plaintext) for ciphertext, _, _, plaintext, _ in opened]


def _first_named(key: SessionKey, rows: Sequence[Sequence[Any]], kek_id: str | None) -> str:
    """How errors name the first of `rows` whose data key `kek_id` wraps."""
    return where(key, next(row[0] for row in rows if row[KEK_ID] == kek_id))
