"""The "identifiers" set: questions only keywords answer, where meaning misleads.

Three long transcripts made of many near-identical records: an on-call shift (alerts on
hosts, with incident ids and error codes), a support desk (orders, SKUs, customers with
the same complaints) and a sales pipeline (contacts at companies asking for the same
things). Within a transcript every record reads alike, so a model that knows meaning sees
them all as equally close to a question; what tells them apart is an identifier, an error
code, a host, a person's or a company's name. 66 questions, each naming one of them (bare,
or inside a sentence), answered by the record's tool output and the assistant's summary.

Generated from a fixed seed; written for the fusion's cross-validation and not tuned on.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .queries import Query
from .transcripts import Conversation

_FIRST = (
    "Amara",
    "Okonkwo",
    "Bartholomew",
    "Lindqvist",
    "Chiara",
    "Vescovi",
    "Dmitri",
    "Antonov",
    "Eun-ji",
    "Park",
    "Fionnuala",
    "Brennan",
    "Gustavo",
    "Pereira",
    "Hyacinth",
    "Moreau",
    "Ingrid",
    "Solberg",
    "Jaroslav",
    "Novak",
    "Keziah",
    "Mensah",
    "Leopold",
    "Hartmann",
    "Marisol",
    "Quintero",
    "Nnamdi",
    "Eze",
    "Oona",
    "Lehtinen",
    "Pavel",
    "Dvorak",
    "Quentin",
    "Marchetti",
    "Rosalind",
    "Achterberg",
    "Siddharth",
    "Venkataraman",
    "Thandiwe",
    "Khumalo",
    "Ulrike",
    "Baumgartner",
    "Valentina",
    "Russo",
    "Wilhelmina",
    "Dekker",
    "Xiomara",
    "Castillo",
    "Yusuf",
    "Demir",
    "Zofia",
    "Kowalczyk",
    "Anselm",
    "Grunewald",
    "Beatriz",
    "Figueiredo",
    "Cormac",
    "Gallagher",
    "Delphine",
    "Aubert",
)
PEOPLE = [f"{a} {b}" for a, b in zip(_FIRST[::2], _FIRST[1::2], strict=True)]
COMPANIES = (
    "Brightwater Logistics",
    "Kestrel Analytics",
    "Tamarind Foods",
    "Ironbark Mining",
    "Halcyon Dental",
    "Quillon Press",
    "Verdant Robotics",
    "Obsidian Freight",
    "Marlowe Insurance",
    "Corvid Security",
    "Lumen Optics",
    "Fennimore Textiles",
    "Saffron Hotels",
    "Tidewater Energy",
    "Galena Pharma",
    "Wrenfield Schools",
    "Juniper Telecom",
    "Ostrava Steelworks",
    "Pemberton Legal",
    "Nimbus Aviation",
    "Rookery Games",
    "Sable Outdoor",
)
_HOST_KINDS = ("db-node", "api-gw", "cache", "worker", "ingest", "search-shard")
_ALERTS = (
    ("disk usage above 90%", "E4012"),
    ("memory pressure, OOM kills", "E5120"),
    ("connection pool exhausted", "E3307"),
    ("p99 latency over budget", "E2290"),
    ("replication lag over 30 s", "E6031"),
    ("certificate expires in 7 days", "E7004"),
)
_CAUSES = (
    "a runaway log file from a debug flag",
    "a batch job started outside its window",
    "a client retrying without backoff",
    "a slow query after the last deploy",
    "a noisy neighbour on the same hypervisor",
    "an index rebuild that never finished",
)
_FIXES = (
    "rotated the logs and turned the flag off",
    "moved the job back to 02:00",
    "rate-limited the client at the gateway",
    "rolled back the deploy",
    "migrated the VM to another host",
    "restarted the rebuild with more memory",
)
_PRODUCTS = (
    ("kettle", "KT"),
    ("desk lamp", "DL"),
    ("office chair", "OC"),
    ("monitor arm", "MA"),
    ("coffee grinder", "CG"),
    ("standing desk", "SD"),
)
_COMPLAINTS = (
    ("arrived damaged", "a replacement is on its way"),
    ("is late", "the courier promises delivery tomorrow"),
    ("is the wrong colour", "a return label was emailed"),
    ("stopped working after a week", "a full refund was issued"),
    ("is missing a part", "the part ships today"),
    ("was charged twice", "the duplicate charge was reversed"),
)
_ASKS = (
    ("a demo of the reporting module", "booked for Tuesday 10:00"),
    ("a quote for 50 seats", "sent at 42 pounds a seat"),
    ("a security questionnaire", "returned with the SOC 2 report"),
    ("a pilot of the API", "started with a 30-day key"),
    ("a discount for a three-year term", "approved at 12%"),
    ("single sign-on support", "confirmed on the enterprise plan"),
)


def _unique(rng: random.Random, used: set[str], prefix: str, low: int, high: int) -> str:
    """`prefix` and a number from `low` to `high`, not drawn before."""
    while (value := f"{prefix}{rng.randint(low, high)}") in used:
        pass
    used.add(value)
    return value


def _oncall(rng: random.Random, ask: Callable[..., None]) -> Conversation:
    c, used = Conversation("oncall"), set[str]()
    c.user("Starting my on-call shift. Walk me through every open alert, one at a time.")
    for i in range(22):
        kind = _HOST_KINDS[i % len(_HOST_KINDS)]
        host = _unique(rng, used, f"{kind}-", 10, 99)
        alert, code = _ALERTS[rng.randrange(len(_ALERTS))]
        code = f"{code[:3]}{rng.randint(10, 99)}"
        incident = _unique(rng, used, "INC-", 10000, 99999)
        cause, fix = _CAUSES[i % 6], _FIXES[i % 6]
        c.user("Next alert please.")
        c.call("get_incident", {"id": incident})
        c.output(
            {
                "id": incident,
                "host": host,
                "alert": alert,
                "code": code,
                "cause": cause,
                "action": fix,
            },
            ref=f"{incident}-out",
        )
        c.assistant(
            f"{incident} on {host}: {alert} ({code}). Cause: {cause}; we {fix}.",
            ref=f"{incident}-sum",
        )
        refs = (f"{incident}-out", f"{incident}-sum")
        form = i % 3
        if form == 0:
            ask(c.name, "identifier", incident, *refs)
        elif form == 1:
            ask(c.name, "identifier", f"what was the cause of {incident}?", *refs)
        else:
            ask(c.name, "identifier", f"what happened on {host}?", *refs)
    return c


def _support(rng: random.Random, ask: Callable[..., None]) -> Conversation:
    c, used = Conversation("helpdesk"), set[str]()
    c.user("Help me clear today's support queue: summarise each ticket and what we did.")
    people = rng.sample(PEOPLE, 22)
    for i, person in enumerate(people):
        product, prefix = _PRODUCTS[i % len(_PRODUCTS)]
        complaint, resolution = _COMPLAINTS[rng.randrange(len(_COMPLAINTS))]
        order = _unique(rng, used, "ORD-", 100000, 999999)
        sku = _unique(rng, used, f"{prefix}-", 1000, 9999)
        c.user("Next ticket.")
        c.call("get_ticket", {"queue": "today", "position": i + 1})
        c.output(
            f"Customer: {person}. Order {order}, item {sku} ({product}). "
            f"Complaint: the {product} {complaint}.",
            ref=f"{order}-out",
        )
        c.assistant(
            f"{person}'s {product} ({sku}, order {order}) {complaint}: {resolution}.",
            ref=f"{order}-sum",
        )
        refs = (f"{order}-out", f"{order}-sum")
        form = i % 3
        if form == 0:
            ask(c.name, "identifier", order, *refs)
        elif form == 1:
            ask(c.name, "name", f"what did we do for {person}?", *refs)
        else:
            ask(c.name, "identifier", f"what was wrong with {sku}?", *refs)
    return c


def _sales(rng: random.Random, ask: Callable[..., None]) -> Conversation:
    c, used = Conversation("sales"), set[str]()
    c.user("Go through the pipeline with me: every lead that wrote in this week.")
    people = rng.sample(PEOPLE, 22)
    for i, (person, company) in enumerate(zip(people, COMPANIES, strict=True)):
        request, outcome = _ASKS[rng.randrange(len(_ASKS))]
        deal = _unique(rng, used, "OPP-", 1000, 9999)
        c.user("Who's next?")
        c.call("crm_lookup", {"opportunity": deal})
        c.output(
            {"opportunity": deal, "contact": person, "company": company, "asked_for": request},
            ref=f"{deal}-out",
        )
        c.assistant(f"{person} from {company} ({deal}) asked for {request}: {outcome}.", ref=deal)
        refs = (f"{deal}-out", deal)
        form = i % 3
        if form == 0:
            ask(c.name, "name", f"what did {company} ask for?", *refs)
        elif form == 1:
            ask(c.name, "name", person, *refs)
        else:
            ask(c.name, "identifier", f"status of {deal}", *refs)
    return c


def _build() -> tuple[list[Conversation], list[Query]]:
    rng = random.Random(20261203)
    queries: list[Query] = []

    def ask(conversation: str, kind: str, text: str, *answers: str) -> None:
        queries.append(Query(conversation, text, answers, kind))

    convs = [_oncall(rng, ask), _support(rng, ask), _sales(rng, ask)]
    return convs, queries


def conversations() -> list[Conversation]:
    """An on-call shift, a support desk's queue, a week's sales pipeline."""
    return _build()[0]


QUERIES: list[Query] = _build()[1]
