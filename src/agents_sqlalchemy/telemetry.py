"""OpenTelemetry spans and metrics for every operation of a store and its sessions.

With the `[otel]` extra (`opentelemetry-api`) installed and a tracer or meter provider set
(by the application, which chooses the SDK and the exporters), each public operation is a
span of kind CLIENT following OpenTelemetry's database conventions, and feeds a few
metrics. Without the API, with no provider set, or with `Telemetry(enabled=False)`, an
operation costs one check of the providers and nothing else.

Spans
-----
Named `"{db.operation.name} {db.collection.name}"` (`"append agents_items"`), nested under
the caller's current span (an app's request, a traced `Runner.run`); the work a write
leaves for the store's worker thread (`index`, `scrub`, `forget`) nests under the write's
span. Each carries `db.system.name` (`sqlite`, `postgresql`, `mariadb`, `mysql`),
`db.operation.name`, `db.collection.name`, `db.namespace` and `server.address`/
`server.port` (servers only; never a user, password or URL query), `error.type` (the
exception's class) on failure, and:

====================================  ==================================================
`agents_sqlalchemy.items`              items written, read or removed for the caller
`agents_sqlalchemy.bytes`              their JSON text in UTF-8, sealed or not
`agents_sqlalchemy.search.mode`        `hybrid`, `vector` or `keyword`
`agents_sqlalchemy.search.candidates`  items ranked by a search
`agents_sqlalchemy.search.hits`        items a search returned
`agents_sqlalchemy.lock.wait`          seconds spent waiting for a lock (see below)
`agents_sqlalchemy.retries`            units of work run again (deadlock, lost connection)
`agents_sqlalchemy.session.id`         the session id, per the `ids` option
`agents_sqlalchemy.user.id`            the owner's id, per the `ids` option
`agents_sqlalchemy.sealed`             whether the store has a key
====================================  ==================================================

No span, event, attribute or metric carries an item, a state or metadata value, a query,
a branch name or key material; exception messages are not recorded (only `error.type`).
Session and user ids are hashed by default (`Telemetry(ids="hashed")`: HMAC-SHA256 with
`salt`, the first 16 hex digits), or given as they are (`"plain"`), or left out (`"none"`).

Lock wait is the time spent for an in-process lock (the schema check, one indexer at a
time), the time of a SQLite unit of work that met the file locked and waited for it in a
worker thread, and for a write that gave up (`SessionBusyError`) the time it took (about
`lock_timeout`; on MySQL and MariaDB, whose lock waits are whole seconds, at least one).

Metrics
-------
=========================================  ===================  ==========  =================
name                                       instrument           unit        attributes
=========================================  ===================  ==========  =================
`db.client.operation.duration`             histogram            `s`         db.*, error.type
`agents_sqlalchemy.items.written`          counter              `{item}`    db.*
`agents_sqlalchemy.items.read`             counter              `{item}`    db.*
`agents_sqlalchemy.bytes.written`          counter              `By`        db.*
`agents_sqlalchemy.bytes.read`             counter              `By`        db.*
`agents_sqlalchemy.search.duration`        histogram            `s`         db.*, search.mode
`agents_sqlalchemy.search.candidates`      histogram            `{item}`    db.*, search.mode
`agents_sqlalchemy.lock.wait`              histogram            `s`         db.*
`agents_sqlalchemy.session.busy`           counter              `{error}`   db.*
`agents_sqlalchemy.retries`                counter              `{retry}`   db.*, retry.reason
`agents_sqlalchemy.background.backlog`     observable up-down   `{job}`     db.*, job
`agents_sqlalchemy.background.wait`        histogram            `s`         db.*, job
`agents_sqlalchemy.index.items`            counter              `{item}`    db.*
`db.client.connection.count`               observable up-down   `{connection}`  db.*, state
=========================================  ===================  ==========  =================

`db.*` is `db.system.name`, `db.operation.name`, `db.collection.name`, `db.namespace`,
`server.address`, `server.port`; no metric carries an id. The background backlog counts the
sessions waiting to be indexed (`job=index`), the scrubs waiting to run (`job=scrub`) and
the removals of an encrypted store whose traces in memory wait to be dropped
(`job=forget`); the background wait is how long a job waited from its write to its start.

Loggers
-------
`agents_sqlalchemy` (background jobs that failed, a search that left items unindexed),
`agents_sqlalchemy.session` (branch switches), `agents_sqlalchemy.advanced` (usage not
stored): messages name ids, branches, counts and exception classes, never an item; the
store's engines hide a failed statement's parameters (`hide_parameters=True`).

`db.system.name` is what the URL says: a `mysql://` URL is `mysql`, MariaDB included.

Example::

    from agents_sqlalchemy import SessionStore, Telemetry

    store = SessionStore("agent.db", telemetry=Telemetry(ids="hashed", salt=b"app secret"))
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import hmac
import inspect
import threading
import time
import weakref
from collections.abc import Callable, Collection, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

from . import aio
from .errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


T = TypeVar("T")
IdPolicy = Literal["hashed", "plain", "none"]
ID_POLICIES = ("hashed", "plain", "none")
SCOPE = "agents_sqlalchemy"
PREFIX = "agents_sqlalchemy."
DEFAULT_SALT = b"agents_sqlalchemy"
_LOCK = threading.RLock()


@dataclass(frozen=True)
class Telemetry:
    """How a store reports itself to OpenTelemetry (the `telemetry=` option of a store).

    `ids`: session and user ids on spans hashed (default), `"plain"`, or `"none"`; `salt`
    keys the hash (HMAC-SHA256), so that ids guessed outside cannot be confirmed.
    `tracer_provider`/`meter_provider`: providers of this store's own (default: the global
    ones the application set). `enabled=False`: nothing at all.

    Example::

        store = SessionStore("agent.db", telemetry=Telemetry(ids="none"))
        store = SessionStore("agent.db", telemetry=Telemetry(tracer_provider=provider))
    """

    ids: IdPolicy = "hashed"
    salt: bytes | str | None = field(default=None, repr=False)  # a secret: not in logs
    enabled: bool = True
    tracer_provider: Any = None
    meter_provider: Any = None

    def __post_init__(self) -> None:
        if self.ids not in ID_POLICIES:
            raise ConfigurationError(f"ids must be one of {ID_POLICIES}, got {self.ids!r}")
        if self.salt is not None and not isinstance(self.salt, (bytes, str)):
            raise ConfigurationError(f"salt must be bytes or str, got {type(self.salt).__name__}")
        if not isinstance(self.enabled, bool):
            raise ConfigurationError(f"enabled must be True or False, got {self.enabled!r}")
        given = self.tracer_provider is not None or self.meter_provider is not None
        if given and self.enabled and not _Api.load():
            raise MissingExtraError(
                "a tracer or meter provider needs OpenTelemetry's API: "
                "pip install 'openai-agents-sqlalchemy[otel]'"
            )
        for name, method in (("tracer_provider", "get_tracer"), ("meter_provider", "get_meter")):
            provider = getattr(self, name)
            if provider is not None and not callable(getattr(provider, method, None)):
                raise ConfigurationError(
                    f"{name} must be an OpenTelemetry provider (with {method}), "
                    f"got {provider!r:.80}"
                )

    def identify(self, value: object) -> str | None:
        """What spans show of an id: its keyed hash, itself, or nothing.

        >>> Telemetry(ids="plain").identify("chat-1"), Telemetry(ids="none").identify("chat-1")
        ('chat-1', None)
        >>> len(Telemetry().identify("chat-1") or "")
        16
        """
        if not isinstance(value, str) or self.ids == "none":
            return None  # None, or what the call itself refuses (an id of another type)
        try:
            text = value.encode()
        except UnicodeEncodeError:  # a lone surrogate, which the call refuses too
            return None
        if self.ids == "plain":
            return value
        salt = self.salt.encode() if isinstance(self.salt, str) else self.salt
        return hmac.new(salt or DEFAULT_SALT, text, hashlib.sha256).hexdigest()[:16]


def telemetry_option(value: Telemetry | bool | None) -> Telemetry:
    """A store's `telemetry=`: a `Telemetry`, True/None (the defaults), or False (off)."""
    if value is None or value is True:
        return Telemetry()
    if value is False:
        return Telemetry(enabled=False)
    if not isinstance(value, Telemetry):
        raise ConfigurationError(f"telemetry must be a Telemetry or a bool, got {value!r}")
    return value


# -- the OpenTelemetry API, imported once, when first needed -----------------------------------


class _Api:
    """The `opentelemetry` modules, or None when the `[otel]` extra is not installed.

    The global providers are read from where the API keeps them, when it does: its public
    getters look an environment variable up on every call (microseconds, per operation).
    """

    loaded = False
    trace: Any = None
    metrics: Any = None
    context: Any = None
    _trace_globals: Any = None
    _metrics_globals: Any = None

    @classmethod
    def load(cls) -> bool:
        """Import the API (once per process); False when it is not installed."""
        if cls.loaded:
            return cls.trace is not None
        with _LOCK:
            if not cls.loaded:
                cls._import()
                cls.loaded = True
        return cls.trace is not None

    @classmethod
    def _import(cls) -> None:
        try:
            from opentelemetry import context, metrics, trace
            from opentelemetry.metrics import _internal as metrics_globals
        except ImportError:
            return
        cls.trace, cls.metrics, cls.context = trace, metrics, context
        if hasattr(trace, "_TRACER_PROVIDER"):
            cls._trace_globals = trace
        if hasattr(metrics_globals, "_METER_PROVIDER"):
            cls._metrics_globals = metrics_globals
        # A provider named by the environment is made by the first getter call.
        trace.get_tracer_provider()
        metrics.get_meter_provider()

    @classmethod
    def tracer_provider(cls) -> Any:
        """The provider the app set globally, or None (none set, or a no-op one)."""
        if cls._trace_globals is not None:
            provider = cls._trace_globals._TRACER_PROVIDER
        else:
            provider = cls.trace.get_tracer_provider()
        if provider is None or isinstance(
            provider, (cls.trace.ProxyTracerProvider, cls.trace.NoOpTracerProvider)
        ):
            return None
        return provider

    @classmethod
    def meter_provider(cls) -> Any:
        """The meter provider the app set globally, or None (none set, or a no-op one)."""
        if cls._metrics_globals is not None:
            provider = cls._metrics_globals._METER_PROVIDER
        else:
            provider = cls.metrics.get_meter_provider()
        if provider is None or isinstance(provider, cls.metrics.NoOpMeterProvider):
            return None
        if type(provider).__name__ == "_ProxyMeterProvider":
            return None
        return provider


# -- per provider: the tracer and the instruments ----------------------------------------------


class _Instruments:
    """One meter's instruments, and the stores whose gauges it observes."""

    def __init__(self, meter: Any) -> None:
        self.probes: weakref.WeakSet[Probe] = weakref.WeakSet()
        histogram, counter = meter.create_histogram, meter.create_counter
        self.duration = histogram(
            "db.client.operation.duration", unit="s", description="Duration of an operation."
        )
        self.items_written = counter(PREFIX + "items.written", unit="{item}")
        self.items_read = counter(PREFIX + "items.read", unit="{item}")
        self.bytes_written = counter(PREFIX + "bytes.written", unit="By")
        self.bytes_read = counter(PREFIX + "bytes.read", unit="By")
        self.search_duration = histogram(PREFIX + "search.duration", unit="s")
        self.search_candidates = histogram(PREFIX + "search.candidates", unit="{item}")
        self.lock_wait = histogram(PREFIX + "lock.wait", unit="s")
        self.busy = counter(PREFIX + "session.busy", unit="{error}")
        self.retries = counter(PREFIX + "retries", unit="{retry}")
        self.background_wait = histogram(PREFIX + "background.wait", unit="s")
        self.indexed = counter(PREFIX + "index.items", unit="{item}")
        meter.create_observable_up_down_counter(
            PREFIX + "background.backlog", callbacks=[self._backlog], unit="{job}"
        )
        meter.create_observable_up_down_counter(
            "db.client.connection.count", callbacks=[self._connections], unit="{connection}"
        )

    def _backlog(self, options: Any) -> Iterator[Any]:
        observation = _Api.metrics.Observation
        for probe in list(self.probes):
            counts = {"index": 0, "scrub": 0, "forget": 0}
            if probe.backlog is not None:
                counts.update(probe.backlog())
            for job, count in counts.items():
                yield observation(count, {**probe.attributes, PREFIX + "job": job})

    def _connections(self, options: Any) -> Iterator[Any]:
        observation = _Api.metrics.Observation
        for probe in list(self.probes):
            if probe.pools is None:
                continue
            for name, used, idle in probe.pools():
                attributes = {**probe.attributes, "db.client.connection.pool.name": name}
                yield observation(used, {**attributes, "db.client.connection.state": "used"})
                yield observation(idle, {**attributes, "db.client.connection.state": "idle"})


_instruments: weakref.WeakKeyDictionary[Any, _Instruments] = weakref.WeakKeyDictionary()
_tracers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _instruments_of(provider: Any) -> _Instruments:
    found = _instruments.get(provider)
    if found is None:
        with _LOCK:  # one set of instruments per provider, whichever thread comes first
            found = _instruments.get(provider)
            if found is None:
                found = _instruments[provider] = _Instruments(provider.get_meter(SCOPE))
    return found


def _tracer_of(provider: Any) -> Any:
    found = _tracers.get(provider)
    if found is None:
        with _LOCK:
            found = _tracers.get(provider)
            if found is None:
                found = _tracers[provider] = provider.get_tracer(SCOPE)
    return found


# -- a store's probe ---------------------------------------------------------------------------


def server_attributes(url: URL) -> dict[str, Any]:
    """The conventions' attributes of a database URL: never its user, password or query.

    >>> from sqlalchemy.engine import make_url
    >>> server_attributes(make_url("postgresql+asyncpg://app:pw@db.internal:6432/chat?x=1"))
    {'db.system.name': 'postgresql', 'db.namespace': 'chat', 'server.address': 'db.internal', \
'server.port': 6432}
    >>> server_attributes(make_url("sqlite+aiosqlite:////srv/data/agent.db"))
    {'db.system.name': 'sqlite', 'db.namespace': 'agent.db'}
    """
    system = url.get_backend_name()
    attributes: dict[str, Any] = {"db.system.name": system}
    if system == "sqlite":
        if url.database and url.database != ":memory:":
            attributes["db.namespace"] = Path(url.database).name  # the file's name, no path
        return attributes
    if url.database:
        attributes["db.namespace"] = url.database
    if url.host:
        attributes["server.address"] = url.host
    if url.port:
        attributes["server.port"] = url.port
    return attributes


Pools = Callable[[], Iterable[tuple[str, int, int]]]


class Probe:
    """A store's link to OpenTelemetry: spans and metrics of its operations.

    Example::

        probe = Probe(Telemetry(), make_url("sqlite:///agent.db"))
        with probe.operation("append", session_id="chat-1") as op:
            op.wrote(2, 120)
    """

    def __init__(self, option: Telemetry, url: URL) -> None:
        self.option = option
        self.attributes = server_attributes(url)
        self.items_table: str | None = None
        self.sessions_table: str | None = None
        self.sealed = False
        # Set by the store's parts: gauges read them when a meter asks.
        self.backlog: Callable[[], dict[str, int]] | None = None
        self.pools: Pools | None = None
        self._watched: set[int] = set()
        self._off = not option.enabled or not _Api.load()
        self._own = option.tracer_provider is not None or option.meter_provider is not None
        self._found: tuple[Any, Any] | None = None

    def describe(
        self,
        *,
        items_table: str,
        sessions_table: str,
        sealed: bool,
        backlog: Callable[[], dict[str, int]] | None = None,
        pools: Pools | None = None,
    ) -> None:
        """What the store's spans name (its tables) and its gauges read (set once, built)."""
        self.items_table, self.sessions_table = items_table, sessions_table
        self.sealed, self.backlog, self.pools = sealed, backlog, pools

    def listening(self) -> tuple[Any, Any] | None:
        """(tracer provider, meter provider), either None; None when nothing listens.

        What every operation asks first, so it is kept cheap: a store's own providers, or
        the global ones once both are set (the API sets each once), are remembered.
        """
        if self._found is not None:
            return self._found
        if self._off:
            return None
        if not self._own:  # the common case: the API's two globals read, nothing made
            tracing, metering = _Api._trace_globals, _Api._metrics_globals
            if (
                tracing is not None
                and metering is not None
                and tracing._TRACER_PROVIDER is None
                and metering._METER_PROVIDER is None
            ):
                return None
        tracing = self.option.tracer_provider or _Api.tracer_provider()
        metering = self.option.meter_provider or _Api.meter_provider()
        if tracing is None and metering is None:
            return None
        if tracing is not None and metering is not None:
            self._found = (tracing, metering)
        return tracing, metering

    def operation(
        self,
        name: str,
        *,
        collection: str | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        providers: tuple[Any, Any] | None = None,
    ) -> Operation:
        """A span (and metrics) around one operation; a no-op when nothing listens."""
        providers = providers or self.listening()
        if providers is None or _CURRENT.get() is _NOTHING:  # nothing listens, or `detached`
            return _NOTHING
        tracing, metering = providers
        instruments = None
        if metering is not None:
            instruments = _instruments_of(metering)
            if id(instruments) not in self._watched:
                self._watched.add(id(instruments))
                instruments.probes.add(self)
        table = collection or self.items_table
        attributes = {**self.attributes, "db.operation.name": name}
        if table:
            attributes["db.collection.name"] = table
        return Operation(
            self,
            f"{name} {table}" if table else name,
            attributes,
            _tracer_of(tracing) if tracing is not None else None,
            instruments,
            self.option.identify(session_id),
            self.option.identify(user_id),
        )

    def background(
        self, kind: str, job: Callable[[], Coroutine[Any, Any, T]]
    ) -> Callable[[], Coroutine[Any, Any, T]]:
        """`job` to run later on the worker thread, under the caller's current span, as an
        operation `kind` of its own; `job` itself when nothing listens."""
        if _CURRENT.get() in (None, _NOTHING):
            return job
        parent = _Api.context.get_current()
        submitted = time.perf_counter()

        async def carried() -> T:
            token = _Api.context.attach(parent)
            try:
                with self.operation(kind) as op:
                    op.waited_in_queue(time.perf_counter() - submitted)
                    return await job()
            finally:
                _Api.context.detach(token)

        return carried


class Operation:
    """One operation under way: its span, and what it counted (`current()` finds it)."""

    def __init__(
        self,
        probe: Probe | None,
        name: str,
        attributes: dict[str, Any],
        tracer: Any,
        instruments: _Instruments | None,
        session_id: str | None = None,
        user_id: str | None = None,
    ) -> None:
        self._probe = probe
        self._name = name
        self.attributes = attributes
        self._tracer = tracer
        self._instruments = instruments
        self._own: dict[str, Any] = {}
        # A search's mode, on the search metrics only (`searching`).
        self._search: dict[str, Any] = {}
        if session_id is not None:
            self._own[PREFIX + "session.id"] = session_id
        if user_id is not None:
            self._own[PREFIX + "user.id"] = user_id
        if probe is not None:
            self._own[PREFIX + "sealed"] = probe.sealed
        self._span: Any = None
        self._tokens: tuple[Any, Any] | None = None
        self._started = 0.0
        self.items_written = self.bytes_written = self.items_read = self.bytes_read = 0
        self.items_removed = 0
        self.lock_wait = 0.0
        self.retries = 0

    def __enter__(self) -> Operation:
        if self._probe is None:
            return self
        if self._tracer is not None:
            self._span = self._tracer.start_span(
                self._name,
                kind=_Api.trace.SpanKind.CLIENT,
                attributes={**self.attributes, **self._own},
            )
            context = _Api.trace.set_span_in_context(self._span)
            self._tokens = (_Api.context.attach(context), _CURRENT.set(self))
        else:
            self._tokens = (None, _CURRENT.set(self))
        self._started = time.perf_counter()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        if self._probe is None:
            return
        elapsed = time.perf_counter() - self._started
        assert self._tokens is not None
        otel_token, token = self._tokens
        _CURRENT.reset(token)
        # A failed operation counts nothing read (a read may have counted the rows it had
        # fetched before one failed to open), and what it wrote or removed for good (the
        # batches an import or a purge committed before the one that failed); its class
        # goes on the span and the duration.
        failed = None if exc_type is None else _error_type(exc_type)
        if failed is not None:
            self.items_read = self.bytes_read = 0
        if self._span is not None:
            self._span.set_attributes(self._counts())
            if failed is not None:
                self._span.set_attribute("error.type", failed)
                # The status says only the class: an exception's message may quote content.
                self._span.set_status(_Api.trace.StatusCode.ERROR)
            self._span.end()
            _Api.context.detach(otel_token)
        if self._instruments is not None:
            self._record(self._instruments, elapsed, failed)

    def _counts(self) -> dict[str, Any]:
        counts: dict[str, Any] = {}
        items = self.items_written + self.items_read + self.items_removed
        if items:
            counts[PREFIX + "items"] = items
        if self.bytes_written + self.bytes_read:
            counts[PREFIX + "bytes"] = self.bytes_written + self.bytes_read
        if self.lock_wait:
            counts[PREFIX + "lock.wait"] = self.lock_wait
        if self.retries:
            counts[PREFIX + "retries"] = self.retries
        return counts

    def _record(self, instruments: _Instruments, elapsed: float, failed: str | None) -> None:
        attributes = self.attributes
        failure = {} if failed is None else {"error.type": failed}
        instruments.duration.record(elapsed, {**attributes, **failure})
        if self.items_written:
            instruments.items_written.add(self.items_written, attributes)
            instruments.bytes_written.add(self.bytes_written, attributes)
        if self.items_read:
            instruments.items_read.add(self.items_read, attributes)
            instruments.bytes_read.add(self.bytes_read, attributes)
        if self.lock_wait:
            instruments.lock_wait.record(self.lock_wait, attributes)
        if self._search and failed is None:
            instruments.search_duration.record(elapsed, {**attributes, **self._search})

    def set(self, **values: Any) -> None:
        """Attributes of ours (`search_mode="hybrid"` is `agents_sqlalchemy.search.mode`)."""
        if self._probe is None:
            return
        for name, value in values.items():
            attribute = PREFIX + name.replace("_", ".")
            if name == "search_mode":
                self._search[attribute] = value  # on the search metrics too
            if self._span is not None:
                self._span.set_attribute(attribute, value)

    def wrote(self, items: int, size: int) -> None:
        """`items` items of `size` bytes (or characters of JSON) written."""
        self.items_written += items
        self.bytes_written += size

    def read(self, items: int, size: int) -> None:
        """`items` items of `size` bytes (or characters of JSON) read."""
        self.items_read += items
        self.bytes_read += size

    def removed(self, items: int) -> None:
        """`items` items removed (with their keys)."""
        self.items_removed += items

    def candidates(self, count: int) -> None:
        """A search ranked `count` items."""
        self.set(search_candidates=count)
        if self._instruments is not None:
            self._instruments.search_candidates.record(count, {**self.attributes, **self._search})

    def indexed(self, count: int) -> None:
        """`count` items were indexed for search."""
        if self._span is not None:
            self._span.set_attribute(PREFIX + "index.items", count)
        if self._instruments is not None:
            self._instruments.indexed.add(count, self.attributes)

    def waited(self, seconds: float) -> None:
        """The operation waited `seconds` for a lock."""
        self.lock_wait += seconds

    def waited_in_queue(self, seconds: float) -> None:
        """A background job started `seconds` after its write asked for it."""
        if self._instruments is not None:
            job = {**self.attributes, PREFIX + "job": self.attributes["db.operation.name"]}
            self._instruments.background_wait.record(seconds, job)

    def retried(self, reason: str) -> None:
        """A unit of work runs again (`deadlock`, `disconnect`, `creator`)."""
        if self._probe is None:
            return
        self.retries += 1
        if self._span is not None:
            self._span.add_event("retry", {PREFIX + "retry.reason": reason})
        if self._instruments is not None:
            attributes = {**self.attributes, PREFIX + "retry.reason": reason}
            self._instruments.retries.add(1, attributes)

    def busy(self, waited: float) -> None:
        """A write gave up waiting for a lock (`SessionBusyError`)."""
        self.waited(waited)
        if self._instruments is not None:
            self._instruments.busy.add(1, self.attributes)


_NOTHING = Operation(None, "", {}, None, None)
_CURRENT: contextvars.ContextVar[Operation | None] = contextvars.ContextVar(
    "agents_sqlalchemy_operation", default=None
)


def current() -> Operation | None:
    """The operation under way in this context, if anything listens (else None)."""
    return _CURRENT.get()


@contextlib.contextmanager
def detached() -> Iterator[None]:
    """Work of the operation under way that is neither an operation of its own nor counted:
    a public method the library calls for itself (the turns a branch made from content
    looks up)."""
    token = _CURRENT.set(_NOTHING)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _lock_waited(seconds: float) -> None:
    """A wait for one of the store's own in-process locks (`aio.FairLock`), on the operation."""
    if (operation := _CURRENT.get()) is not None:
        operation.waited(seconds)


aio.lock_waited = _lock_waited


def in_context(function: Callable[..., T]) -> Callable[..., T]:
    """`function`, to run on another thread in this context (the current span's), when an
    operation is traced; `function` itself otherwise."""
    if _CURRENT.get() is None:
        return function
    return functools.partial(contextvars.copy_context().run, function)


def _error_type(exc_type: type[BaseException]) -> str:
    module = exc_type.__module__
    return exc_type.__qualname__ if module == "builtins" else f"{module}.{exc_type.__qualname__}"


# -- decorating a façade's methods -------------------------------------------------------------

P = ParamSpec("P")
Method = Callable[P, Coroutine[Any, Any, T]]


def traced(
    name: str,
    *,
    sessions: bool = False,
    user_argument: str | None = None,
    session_argument: str | None = None,
    search: Collection[str] = (),
    removed: Callable[[Any], int] | None = None,
) -> Callable[[Method[P, T]], Method[P, T]]:
    """Make an async method of a store or session an operation `name`.

    The object has `_services` (whose `db.telemetry` is the probe); a session also `_key`.
    `sessions`: the operation is on the sessions table; `user_argument`,
    `session_argument`: the parameters that name a user, a session; `search`: the search
    modes of which the `mode` parameter is recorded (another is refused by the call: no
    value of the caller's is kept); `removed(result)`: how many items the operation removed.
    """

    def decorate(method: Method[P, T]) -> Method[P, T]:
        signature = inspect.signature(method)
        names = list(signature.parameters)[1:]  # after self

        def argument(name: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if name is None:
                return None
            if name in kwargs:
                return kwargs[name]
            position = names.index(name)
            return args[position] if len(args) > position else None

        async def traced_call(providers: tuple[Any, Any], args: Any, kwargs: Any) -> T:
            self = args[0]
            args = args[1:]
            probe: Probe = self._services.db.telemetry
            key = getattr(self, "_key", None)
            session = argument(session_argument, args, kwargs)
            user = argument(user_argument, args, kwargs)
            with probe.operation(
                name,
                collection=probe.sessions_table if sessions else None,
                session_id=key.session_id if key is not None else session,
                # The call's user if it takes one (set_user_id(None): no owner), else the
                # session's.
                user_id=user if user_argument is not None or key is None else key.user_id,
                providers=providers,
            ) as op:
                if search:
                    mode = argument("mode", args, kwargs)
                    mode = signature.parameters["mode"].default if mode is None else mode
                    if mode in search:  # another is refused by the call
                        op.set(search_mode=mode)
                result = await method(self, *args, **kwargs)
                if removed is not None:
                    op.removed(removed(result))
                return result

        @functools.wraps(method)
        def operation(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, T]:
            providers = args[0]._services.db.telemetry.listening()  # type: ignore[attr-defined]
            if providers is None:
                return method(*args, **kwargs)
            return traced_call(providers, args, kwargs)

        # A coroutine function as the inspect and asyncio modules tell, as the SDK's methods
        # are (mocks made with autospec are then awaitable, retry libraries await it). From
        # Python 3.12, `operation` marked as one: when nothing listens it hands back the
        # method's own coroutine, and costs no coroutine of its own (half a microsecond).
        if hasattr(inspect, "markcoroutinefunction"):
            inspect.markcoroutinefunction(operation)
            return operation

        @functools.wraps(method)
        async def awaited(*args: P.args, **kwargs: P.kwargs) -> T:
            return await operation(*args, **kwargs)

        return awaited

    return decorate


__all__ = ["Operation", "Probe", "Telemetry", "current", "in_context", "traced"]
