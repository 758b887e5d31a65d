"""A key provider for a cloud KMS, with an offline stand-in so that this file runs anywhere.

    python examples/kms_key_provider.py

`KmsKeyProvider` adapts any client with the AWS KMS `encrypt`/`decrypt` call shape (the
boto3 `kms` client, or a compatible one) to `agents_sqlalchemy.crypto.KeyProvider`::

    import boto3
    provider = KmsKeyProvider(boto3.client("kms"), "arn:aws:kms:eu-west-1:111122223333:key/...")
    store = SessionStore(url, key=provider)

The KMS is called when the database's keyring is created and once each time a store opens
it, never per item: it guards the keyring secrets, which wrap the items' keys locally.
boto3 is blocking; the library runs plain `wrap`/`unwrap` methods in a worker thread, and
awaits them directly if they are `async def` (as with an async client).

`LocalKmsStandIn` imitates that client in memory. It is a STAND-IN FOR DEMOS AND TESTS:
its key lives in this process, so it protects nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agents_sqlalchemy import KeyProvider, SessionStore
from agents_sqlalchemy.errors import KeyProviderError, WrongKeyError

# KMS authenticates the encryption context: a blob made for this purpose opens for no other.
CONTEXT = {"purpose": "agents-sqlalchemy keyring"}


class KmsClient(Protocol):
    """The two calls of the AWS KMS API that the adapter uses (boto3 spelling)."""

    def encrypt(
        self, *, KeyId: str, Plaintext: bytes, EncryptionContext: dict[str, str]
    ) -> dict[str, Any]: ...

    def decrypt(
        self, *, CiphertextBlob: bytes, KeyId: str, EncryptionContext: dict[str, str]
    ) -> dict[str, Any]: ...


class KmsKeyProvider:
    """`KeyProvider` over a KMS key: `kek_id` is the key's ARN (stable, not secret)."""

    def __init__(self, client: KmsClient, key_id: str) -> None:
        self._client = client
        self._key_id = key_id
        self.calls = 0  # for the demo: how often the KMS was reached

    @property
    def kek_id(self) -> str:
        return self._key_id

    def wrap(self, data_key: bytes) -> bytes:
        self.calls += 1
        response = self._client.encrypt(
            KeyId=self._key_id, Plaintext=data_key, EncryptionContext=CONTEXT
        )
        return bytes(response["CiphertextBlob"])

    def unwrap(self, wrapped: bytes) -> bytes:
        self.calls += 1
        response = self._client.decrypt(
            CiphertextBlob=wrapped, KeyId=self._key_id, EncryptionContext=CONTEXT
        )
        return bytes(response["Plaintext"])


class InvalidCiphertextException(Exception):
    """What KMS raises when a blob is not from this key or its context differs."""


class LocalKmsStandIn:
    """An in-memory imitation of a KMS client: AES-256-GCM under keys it makes up per id.

    FOR DEMOS AND TESTS ONLY: the keys live in this process's memory.
    """

    def __init__(self) -> None:
        self._keys: dict[str, AESGCM] = {}

    def _key(self, key_id: str) -> AESGCM:
        return self._keys.setdefault(key_id, AESGCM(AESGCM.generate_key(bit_length=256)))

    def encrypt(
        self, *, KeyId: str, Plaintext: bytes, EncryptionContext: dict[str, str]
    ) -> dict[str, Any]:
        nonce = os.urandom(12)
        sealed = self._key(KeyId).encrypt(nonce, Plaintext, _aad(KeyId, EncryptionContext))
        return {"CiphertextBlob": nonce + sealed, "KeyId": KeyId}

    def decrypt(
        self, *, CiphertextBlob: bytes, KeyId: str, EncryptionContext: dict[str, str]
    ) -> dict[str, Any]:
        nonce, sealed = CiphertextBlob[:12], CiphertextBlob[12:]
        try:
            plaintext = self._key(KeyId).decrypt(nonce, sealed, _aad(KeyId, EncryptionContext))
        except InvalidTag:
            raise InvalidCiphertextException("the ciphertext is not from this key") from None
        return {"Plaintext": plaintext, "KeyId": KeyId}


def _aad(key_id: str, context: dict[str, str]) -> bytes:
    return json.dumps([key_id, context], sort_keys=True).encode()


async def main() -> None:
    kms = LocalKmsStandIn()
    provider = KmsKeyProvider(kms, "alias/agents-demo")
    assert isinstance(provider, KeyProvider)
    with tempfile.TemporaryDirectory() as folder:
        url = f"{folder}/agent.db"

        # First use of a database: a new keyring row, its secrets wrapped by the KMS key.
        async with SessionStore(url, create_tables=True, key=provider) as store:
            session = store.session("user-123")
            await session.add_items(
                [{"role": "user", "content": f"message {n}"} for n in range(1, 1001)]
            )
        print(f"sealed 1000 items; KMS calls so far: {provider.calls}")

        # Another process opens the same database: one KMS call, then local unwraps.
        reopened = KmsKeyProvider(kms, "alias/agents-demo")
        async with SessionStore(url, key=reopened) as store:
            [first] = await store.session("user-123").get_items(limit=1)
        print(f"reopened, last item = {first}; KMS calls: {reopened.calls}")

        # The check that matters: a store given the wrong KMS key must be refused before it
        # reads anything. Both refusals below are the expected outcome, not a failure.
        wrong = {
            "another key of the same KMS": KmsKeyProvider(kms, "alias/someone-else"),
            "the same alias in another KMS": KmsKeyProvider(LocalKmsStandIn(), "alias/agents-demo"),
        }
        for what, other in wrong.items():
            async with SessionStore(url, key=other) as store:
                try:
                    await store.session("user-123").get_items()
                except (WrongKeyError, KeyProviderError) as exc:
                    print(f"{what} ({other.kek_id}): refused, as expected ({type(exc).__name__})")
                else:
                    raise SystemExit(f"{what} opened the database: it should not have")


if __name__ == "__main__":
    asyncio.run(main())
