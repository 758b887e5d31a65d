"""Owner keys in a cloud KMS: erasing a user schedules the deletion of that user's KMS key.

    python examples/kms_owner_keys.py

`KmsOwnerKeys` adapts any client with the AWS KMS call shape (the boto3 `kms` client, or a
compatible one) to `agents_sqlalchemy.OwnerKeyStore`::

    import boto3
    store = SessionStore(url, key=store_key, owner_keys=KmsOwnerKeys(boto3.client("kms")))

Each owner key (a user's, or a session's without one) gets a KMS key of its own, found
again by its alias: the key id, never the owner, since an owner holds two keys while a
rotation replaces one and `destroy` must take the old one alone. The owner's 32-byte key is
encrypted under it, and the database keeps only that ciphertext: a copy of the database (a
backup, a replica, WAL) holds nothing that opens an owner's items once the owner's KMS keys
are gone. `destroy` schedules the KMS key's deletion (AWS waits 7 to 30 days), and the
erasure receipt says "scheduled" and when.

The KMS is reached when an owner's key is made, once per owner when a store first opens its
items, and at erasure; never per item. boto3 is blocking: the library runs these plain
methods in a worker thread.

`LocalKmsStandIn` imitates that client in memory. It is a STAND-IN FOR DEMOS AND TESTS:
its keys live in this process, so they protect nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agents_sqlalchemy import Destruction, OwnerKeyStore, SessionStore

PENDING_DAYS = 7  # AWS KMS's shortest deletion window


class KmsClient(Protocol):
    """The calls of the AWS KMS API that the adapter uses (boto3 spelling)."""

    def create_key(self, *, Description: str) -> dict[str, Any]: ...

    def create_alias(self, *, AliasName: str, TargetKeyId: str) -> dict[str, Any]: ...

    def encrypt(
        self, *, KeyId: str, Plaintext: bytes, EncryptionContext: dict[str, str]
    ) -> dict[str, Any]: ...

    def decrypt(
        self, *, CiphertextBlob: bytes, KeyId: str, EncryptionContext: dict[str, str]
    ) -> dict[str, Any]: ...

    def schedule_key_deletion(self, *, KeyId: str, PendingWindowInDays: int) -> dict[str, Any]: ...


class KmsOwnerKeys:
    """`OwnerKeyStore` over a KMS: a KMS key per owner key, named `alias/<prefix><key id>`."""

    def __init__(self, client: KmsClient, prefix: str = "agents-owner-") -> None:
        self._client = client
        self._prefix = prefix
        self.calls = 0  # for the demo: how often the KMS was reached

    def _alias(self, key_id: str) -> str:
        return f"alias/{self._prefix}{key_id}"

    def keep(self, key_id: str, owner: str, material: bytes) -> bytes:
        alias = self._alias(key_id)
        self.calls += 1
        made = self._client.create_key(Description="agents-sqlalchemy owner key")
        self._client.create_alias(AliasName=alias, TargetKeyId=made["KeyMetadata"]["KeyId"])
        return self._encrypt(alias, key_id, owner, material)

    def _encrypt(self, alias: str, key_id: str, owner: str, material: bytes) -> bytes:
        self.calls += 1
        response = self._client.encrypt(
            KeyId=alias, Plaintext=material, EncryptionContext=_context(key_id, owner)
        )
        return bytes(response["CiphertextBlob"])

    def fetch(self, key_id: str, owner: str, kept: bytes | None) -> bytes | None:
        if kept is None:
            return None
        self.calls += 1
        try:
            response = self._client.decrypt(
                CiphertextBlob=kept,
                KeyId=self._alias(key_id),
                EncryptionContext=_context(key_id, owner),
            )
        except (NotFoundException, KmsInvalidStateException):
            return None  # the owner's KMS key is deleted, or pending deletion
        return bytes(response["Plaintext"])

    def destroy(self, key_id: str, owner: str, kept: bytes | None) -> Destruction:
        self.calls += 1
        try:
            response = self._client.schedule_key_deletion(
                KeyId=self._alias(key_id), PendingWindowInDays=PENDING_DAYS
            )
        except (NotFoundException, KmsInvalidStateException):  # gone or going already
            return Destruction("scheduled", datetime.now(timezone.utc))
        return Destruction("scheduled", response["DeletionDate"])


def _context(key_id: str, owner: str) -> dict[str, str]:
    # KMS authenticates the encryption context: a blob made for one owner key opens for no
    # other, and the owner's id shows in the KMS's audit log (a hash, never a user id).
    return {"purpose": "agents-sqlalchemy owner key", "key_id": key_id, "owner": owner}


class NotFoundException(Exception):
    """KMS: no such key or alias."""


class KmsInvalidStateException(Exception):
    """KMS: the key is pending deletion (or disabled)."""


class LocalKmsStandIn:
    """An in-memory imitation of a KMS client: keys, aliases, AES-256-GCM, deletion.

    FOR DEMOS AND TESTS ONLY: the keys live in this process's memory.
    """

    def __init__(self) -> None:
        self._keys: dict[str, AESGCM] = {}
        self._aliases: dict[str, str] = {}
        self.pending: dict[str, datetime] = {}

    def _key(self, name: str) -> tuple[str, AESGCM]:
        key_id = self._aliases.get(name, name)
        if key_id not in self._keys:
            raise NotFoundException(name)
        if key_id in self.pending:
            raise KmsInvalidStateException(f"{name} is pending deletion")
        return key_id, self._keys[key_id]

    def create_key(self, *, Description: str) -> dict[str, Any]:
        key_id = os.urandom(8).hex()
        self._keys[key_id] = AESGCM(AESGCM.generate_key(bit_length=256))
        return {"KeyMetadata": {"KeyId": key_id, "Description": Description}}

    def create_alias(self, *, AliasName: str, TargetKeyId: str) -> dict[str, Any]:
        self._aliases[AliasName] = TargetKeyId
        return {}

    def encrypt(
        self, *, KeyId: str, Plaintext: bytes, EncryptionContext: dict[str, str]
    ) -> dict[str, Any]:
        key_id, key = self._key(KeyId)
        nonce = os.urandom(12)
        return {
            "CiphertextBlob": nonce + key.encrypt(nonce, Plaintext, _aad(key_id, EncryptionContext))
        }

    def decrypt(
        self, *, CiphertextBlob: bytes, KeyId: str, EncryptionContext: dict[str, str]
    ) -> dict[str, Any]:
        key_id, key = self._key(KeyId)
        try:
            plaintext = key.decrypt(
                CiphertextBlob[:12], CiphertextBlob[12:], _aad(key_id, EncryptionContext)
            )
        except InvalidTag:
            raise NotFoundException("the ciphertext is not from this key") from None
        return {"Plaintext": plaintext}

    def schedule_key_deletion(self, *, KeyId: str, PendingWindowInDays: int) -> dict[str, Any]:
        key_id, _ = self._key(KeyId)
        when = datetime.now(timezone.utc) + timedelta(days=PendingWindowInDays)
        self.pending[key_id] = when
        return {"KeyId": key_id, "DeletionDate": when}


def _aad(key_id: str, context: dict[str, str]) -> bytes:
    return json.dumps([key_id, context], sort_keys=True).encode()


async def main() -> None:
    kms = LocalKmsStandIn()
    owner_keys = KmsOwnerKeys(kms)
    assert isinstance(owner_keys, OwnerKeyStore)
    store_key = os.urandom(32)
    with tempfile.TemporaryDirectory() as folder:
        url = f"{folder}/agent.db"
        async with SessionStore(
            url, create_tables=True, key=store_key, owner_keys=owner_keys
        ) as store:
            for user in ("alice", "bob"):
                session = store.session(f"{user}-chat", user_id=user)
                await session.add_items(
                    [{"role": "user", "content": f"{user}'s message {n}"} for n in range(100)]
                )
        print(f"sealed 200 items of 2 users; KMS calls: {owner_keys.calls}")

        # A backup taken now holds alice's items and her owner key, encrypted by the KMS.
        backup = await asyncio.to_thread(Path(url).read_bytes)

        async with SessionStore(url, key=store_key, owner_keys=KmsOwnerKeys(kms)) as store:
            receipt = await store.erase_user("alice")
            print(
                f"erased alice: {receipt.sessions} session, {receipt.items} items, "
                f"{receipt.owner_keys_destroyed} owner key {receipt.owner_key_status} "
                f"(kept in {receipt.owner_keys_kept})"
            )
            bob = await store.session("bob-chat").get_items(limit=1)
            print(f"bob reads on: {bob[0]['content']}")
            await store.rotate_owner_keys()  # bob's key replaced; his old KMS key scheduled
            bob = await store.session("bob-chat").get_items(limit=1)
            print(f"bob reads on after a rotation of the owner keys: {bob[0]['content']}")

        # Restore the backup: alice's items are there, and nothing opens them any more.
        await asyncio.to_thread(Path(url).write_bytes, backup)
        async with SessionStore(url, key=store_key, owner_keys=KmsOwnerKeys(kms)) as store:
            try:
                await store.session("alice-chat").get_items()
            except Exception as exc:
                print(f"alice's items from the backup: refused, as expected ({type(exc).__name__})")
            else:
                raise SystemExit("alice's items opened from the backup: they should not have")


if __name__ == "__main__":
    asyncio.run(main())
