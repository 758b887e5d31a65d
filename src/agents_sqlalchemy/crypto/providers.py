"""`KeyProvider`: the protocol a KMS or secret manager implements to guard a database's keys.

A provider wraps and unwraps a 64-byte key bundle (the keyring secrets, never an item's
data key): once when a keyring row is created, once when a store opens it. Items are then
wrapped locally, in microseconds, so a remote KMS is never on the per-item path.

`wrap` and `unwrap` may be plain or `async` methods. A plain method runs in a worker thread
(`asyncio.to_thread`), so a blocking SDK such as boto3 does not stall the event loop; an
`async` one is awaited. `call_wrap`/`call_unwrap` are the one place that difference is
handled. A provider should raise on a wrong key; whatever it raises becomes
`KeyProviderError`.

`kek_id` names the provider's key (a KMS key ARN, a Vault key name). It is stored in the
keyring row in the clear, so it must not be secret, and it must be stable: opening a
database with a provider whose `kek_id` differs is refused as a wrong key.

Example::

    class VaultTransit:
        kek_id = "transit/keys/agents"

        async def wrap(self, data_key: bytes) -> bytes:
            return await vault.encrypt("agents", data_key)

        async def unwrap(self, wrapped: bytes) -> bytes:
            return await vault.decrypt("agents", wrapped)

    store = SessionStore(url, key=VaultTransit())
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

from ..errors import KeyProviderError


@runtime_checkable
class KeyProvider(Protocol):
    """A key held elsewhere (KMS, HSM, secret manager) that wraps and unwraps key bytes.

    Example::

        from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap

        class LocalProvider:          # a stand-in: keeps the key in process memory
            kek_id = "local-demo"

            def __init__(self, key: bytes) -> None:
                self._key = key       # 32 bytes

            def wrap(self, data_key: bytes) -> bytes:
                return aes_key_wrap(self._key, data_key)

            def unwrap(self, wrapped: bytes) -> bytes:
                return aes_key_unwrap(self._key, wrapped)

        store = SessionStore("agent.db", key=LocalProvider(bytes.fromhex(os.environ["KEY"])))
    """

    @property
    def kek_id(self) -> str:
        """A stable, non-secret name of the provider's key (at most a few hundred chars)."""
        ...

    def wrap(self, data_key: bytes) -> bytes | Awaitable[bytes]:
        """Encrypt `data_key` (64 bytes) under the provider's key; return opaque bytes."""
        ...

    def unwrap(self, wrapped: bytes) -> bytes | Awaitable[bytes]:
        """Return the bytes `wrap` was given; raise if `wrapped` is not from this key."""
        ...


async def call_wrap(provider: KeyProvider, data_key: bytes) -> bytes:
    """`provider.wrap(data_key)`, sync or async, its failures as `KeyProviderError`."""
    return await _call(provider, "wrap", data_key)


async def call_unwrap(provider: KeyProvider, wrapped: bytes) -> bytes:
    """`provider.unwrap(wrapped)`, sync or async, its failures as `KeyProviderError`."""
    return await _call(provider, "unwrap", wrapped)


async def _call(provider: KeyProvider, verb: str, data: bytes) -> bytes:
    method = getattr(provider, verb)
    try:
        if inspect.iscoroutinefunction(method):
            result = await method(data)
        else:
            result = await asyncio.to_thread(method, data)
            if inspect.isawaitable(result):
                result = await result
    except Exception as exc:
        raise KeyProviderError(
            f"key provider {provider_name(provider)} failed to {verb} the keyring secrets: "
            f"{type(exc).__name__}: {exc}. Check that it is reachable, that this process may "
            "use the key, and that it is the key this database was created with"
        ) from exc
    if not isinstance(result, (bytes, bytearray, memoryview)) or not result:
        raise KeyProviderError(
            f"key provider {provider_name(provider)}.{verb} returned "
            f"{type(result).__name__}, expected non-empty bytes"
        )
    return bytes(result)


def provider_name(provider: KeyProvider) -> str:
    """`ClassName('kek-id')` for messages; never raises."""
    try:
        kek_id = str(provider.kek_id)
    except Exception:
        kek_id = "?"
    return f"{type(provider).__name__}({kek_id[:200]!r})"
