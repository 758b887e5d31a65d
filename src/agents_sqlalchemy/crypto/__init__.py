"""Encryption at rest: key providers, KDF, data keys, AES-GCM sealing, wrapping, rotation.

Pure functions and small objects over bytes; nothing here knows SQL. Modules: `kdf`
(scrypt, HKDF), `providers` (the `KeyProvider` protocol), `keys` (keyring rows and
key-encryption keys), `owner_keys` (a key per owner, and where owner keys are kept),
`sealing` (items, state, rewrapping), `terms` (keyed term hashes).

How a store uses it::

    key = validate_key(key)                          # in __init__: bad forms fail at once
    kek = await open_kek(key, record)                # once per store, before any read/write
    #   record: KeyringRecord.from_row(row._mapping) of the keyring row whose retired_at is
    #   NULL; with no row yet, kek = await create_kek(key) and insert kek.record.as_row().
    #   Two processes may race to create it: insert only if still no active row, else
    #   re-read and open the winner.
    #   Guard the call with a lock per store; the KEK is loop- and thread-independent.

    # add: after claiming the sequence numbers, in the write transaction
    sealed = seal_item(kek, payload.encode(), Place(key.hash, seq))
    # a batch: [(ciphertext, wrapped_key), ...] = seal_items(kek, plaintexts, key.hash, seq)
    #   items.ciphertext = sealed.ciphertext
    #   items (kek_id, wrapped_key) = sealed.kek_id, sealed.wrapped_key (the same row)
    # read / pop: every row either opens or raises TamperedItemError, never skipped
    payload = open_item(kek, ciphertext, wrapped_key, Place(key.hash, seq),
                        kek_id=row_kek_id, where=f"#{seq} of session {session_id!r}").decode()
    # clear / pop: deleting the item's row destroys its key; nothing to call here
    # state
    blob = seal_state(kek, state_json.encode(), key.hash)
    state_json = open_state(kek, blob, key.hash).decode()
    # search terms and embeddings
    hasher = term_hasher(kek)                         # cache per store
    vector = sealed.data_key.seal(raw_vector, Place(key.hash, seq, f"embedding:{model}"))
    # rotate: insert new.record and retire the old row, then walk the items, re-wrapping their keys
    new = await create_kek(new_key, previous=kek)     # keeps the term-hash secret
    rewrapped = rewrap_many([r.wrapped_key for r in page], kek, new)   # where kek_id = old
    blob = rewrap_state(blob, kek, new)               # idempotent, so resumable
    # when no row refers to the old kek_id any more, delete its keyring row

A key rotation makes deleted keys unrecoverable only once the old key itself is gone (the
old passphrase forgotten, the old KMS key destroyed): the old keyring row lives on in
backups, WAL and PostgreSQL's dead tuples until vacuumed.
"""

from .kdf import ScryptParams, derive_passphrase_key, derive_passphrase_key_async
from .keys import (
    Key,
    KeyEncryptionKey,
    KeyringRecord,
    create_kek,
    open_kek,
    same_key,
    validate_key,
)
from .owner_keys import (
    Destruction,
    InDatabase,
    KeyDirectory,
    OwnerKey,
    OwnerKeyStore,
    call_store,
    new_key_id,
)
from .providers import KeyProvider
from .sealing import (
    SEALED_OVERHEAD,
    DataKey,
    Place,
    SealedItem,
    Wrapper,
    check_state_key,
    item_opener,
    open_item,
    open_state,
    rewrap,
    rewrap_many,
    rewrap_state,
    seal_item,
    seal_items,
    seal_state,
    state_kek_id,
    unwrap_data_key,
)
from .terms import TermHasher, normalise_term, term_hasher

__all__ = [
    "SEALED_OVERHEAD",
    "DataKey",
    "Destruction",
    "InDatabase",
    "Key",
    "KeyDirectory",
    "KeyEncryptionKey",
    "KeyProvider",
    "KeyringRecord",
    "OwnerKey",
    "OwnerKeyStore",
    "Place",
    "ScryptParams",
    "SealedItem",
    "TermHasher",
    "Wrapper",
    "call_store",
    "check_state_key",
    "create_kek",
    "derive_passphrase_key",
    "derive_passphrase_key_async",
    "item_opener",
    "new_key_id",
    "normalise_term",
    "open_item",
    "open_kek",
    "open_state",
    "rewrap",
    "rewrap_many",
    "rewrap_state",
    "same_key",
    "seal_item",
    "seal_items",
    "seal_state",
    "state_kek_id",
    "term_hasher",
    "unwrap_data_key",
    "validate_key",
]
