"""Questions a user (or an agent's memory tool) would ask of each transcript, with the items
that answer them.

`answers` lists every item that answers the question on its own; a hit on any of them counts.
`kind` says what the query tests:

- paraphrase: the answer is phrased in other words than the question;
- identifier: an exact id, version, error code, email, SKU...;
- name: a person, place or product name;
- recent: the fact changed during the conversation and the newest value is wanted;
- old: the fact changed and the earlier value is wanted;
- topic: plain keyword-ish lookups ("postmortem summary").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Query:
    conversation: str
    text: str
    answers: tuple[str, ...]
    kind: str


def _q(conversation: str, kind: str, text: str, *answers: str) -> Query:
    return Query(conversation, text, answers, kind)


QUERIES: list[Query] = [
    # incident
    _q(
        "incident",
        "paraphrase",
        "why did the release break?",
        "err-output",
        "diagnosis",
        "postmortem",
    ),
    _q("incident", "identifier", "ERR-4411", "err-output", "diagnosis", "postmortem"),
    _q(
        "incident",
        "paraphrase",
        "what was the DNS problem on that runner last month?",
        "inc-dns",
        "dns-answer",
    ),
    _q("incident", "paraphrase", "how much disk space did we free up?", "prune", "live"),
    _q("incident", "recent", "which version is running in production now?", "live", "retry-ok"),
    _q(
        "incident",
        "paraphrase",
        "how do I revert checkout-api to the previous version?",
        "rollback",
    ),
    _q("incident", "identifier", "v2.2.9", "rollback", "rollback-q"),
    _q("incident", "identifier", "ALRT-903", "alert", "alert-confirm"),
    _q(
        "incident",
        "paraphrase",
        "what threshold triggers the disk usage alert?",
        "alert-confirm",
        "alert",
        "alert-q",
    ),
    _q(
        "incident", "paraphrase", "when does the automatic docker cleanup happen?", "cron", "cron-q"
    ),
    _q("incident", "paraphrase", "who was on call during the outage?", "oncall", "oncall-answer"),
    _q("incident", "name", "Marco Bellini", "oncall", "oncall-answer"),
    _q("incident", "identifier", "INC-2291", "inc-dns", "dns-answer"),
    _q("incident", "topic", "postmortem summary", "postmortem"),
    # personal
    _q("personal", "paraphrase", "what's my dog called?", "intro", "intro-ack"),
    _q("personal", "recent", "where do I live now?", "move", "move-ack"),
    _q("personal", "old", "what was my address before the move?", "intro", "intro-ack"),
    _q("personal", "paraphrase", "when is Mochi getting her shots?", "vet-confirm"),
    _q("personal", "identifier", "RCAC-77120", "vet-booking", "vet-confirm"),
    _q("personal", "paraphrase", "do I have any food allergies?", "allergy", "allergy-ack"),
    _q("personal", "paraphrase", "present ideas for my sister", "gift", "lena"),
    _q("personal", "name", "when is Lena's birthday?", "lena"),
    _q(
        "personal",
        "paraphrase",
        "where are we eating on friday?",
        "lunch",
        "lunch-confirm",
        "lunch-res",
    ),
    _q("personal", "identifier", "TP-3391", "lunch-res", "lunch-confirm"),
    _q("personal", "recent", "phone number of the new vet", "seattle-vet-phone", "seattle-vet"),
    _q("personal", "name", "Dr. Lindqvist", "seattle-vet", "seattle-vet-ack"),
    _q("personal", "paraphrase", "which days do I work out?", "gym", "gym-q"),
    # travel
    _q(
        "travel",
        "paraphrase",
        "what's the confirmation code for my flight?",
        "flight-confirm",
        "flight-booking",
        "flight-change-confirm",
        "flight-change",
    ),
    _q(
        "travel",
        "identifier",
        "QX7Z2L",
        "flight-booking",
        "flight-confirm",
        "flight-change",
        "flight-change-confirm",
    ),
    _q(
        "travel",
        "recent",
        "which seat do I have on the plane now?",
        "flight-change-confirm",
        "flight-change",
    ),
    _q("travel", "old", "what seat did I originally get?", "flight-confirm", "flight-booking"),
    _q("travel", "recent", "when does my flight leave?", "flight-change-confirm", "flight-change"),
    _q(
        "travel",
        "paraphrase",
        "how much was the cheapest flight option?",
        "flight-summary",
        "flight-options",
    ),
    _q(
        "travel",
        "paraphrase",
        "where am I staying in Kyoto?",
        "hotel-confirm",
        "hotel-booking",
        "ryokan-options",
    ),
    _q("travel", "paraphrase", "dietary restrictions", "veg", "hotel-confirm"),
    _q("travel", "paraphrase", "best way to get from Tokyo to Kyoto by train", "shinkansen"),
    _q(
        "travel",
        "paraphrase",
        "how much did it cost to rebook the flight?",
        "flight-change-confirm",
        "flight-change",
    ),
    _q("travel", "paraphrase", "will I arrive in time to check in at the ryokan?", "checkin"),
    _q("travel", "paraphrase", "should I bring a raincoat?", "weather"),
    _q("travel", "identifier", "RY-20241017-88", "hotel-booking", "hotel-confirm"),
    # support
    _q(
        "support",
        "identifier",
        "what happened with order A-55821?",
        "order",
        "order-ack",
        "complaint",
    ),
    _q("support", "identifier", "1Z999AA10123456784", "order"),
    _q(
        "support",
        "identifier",
        "RMA-60217",
        "rma",
        "refund-info",
        "refund-status",
        "refund-delay",
        "refund-call",
    ),
    _q("support", "recent", "when will I get my money back?", "refund-delay", "refund-status"),
    _q("support", "paraphrase", "how do I send the broken blender back?", "refund-info"),
    _q(
        "support",
        "identifier",
        "user_42",
        "email-change",
        "email-ack",
        "order",
        "email-call",
        "order-call",
    ),
    _q("support", "recent", "what's my email address now?", "email-ack", "email-change", "email-q"),
    _q("support", "paraphrase", "which blender is good for nut butter?", "recommend"),
    _q(
        "support",
        "paraphrase",
        "order number of the replacement blender",
        "new-order-ack",
        "new-order",
    ),
    _q("support", "paraphrase", "how long is the guarantee?", "warranty", "recommend"),
    _q("support", "paraphrase", "why was the refund late?", "refund-delay", "refund-status"),
    _q("support", "identifier", "alex.m@oldmail.com", "email-q"),
    # coding
    _q("coding", "identifier", "KeyError user_id", "keyerror", "keyerror-advice", "camel"),
    _q(
        "coding",
        "paraphrase",
        "why did requests from the phone app fail?",
        "camel",
        "keyerror-advice",
        "keyerror",
    ),
    _q("coding", "identifier", "test_checkout_total", "test-fail", "test-q", "pydantic-fix"),
    _q(
        "coding",
        "paraphrase",
        "why does comparing the price break after the library upgrade?",
        "pydantic-fix",
        "test-fail",
        "test-reasoning",
    ),
    _q("coding", "paraphrase", "how did we speed up the slow orders query?", "index-fix"),
    _q("coding", "identifier", "orders_customer_created_idx", "index-fix"),
    _q("coding", "paraphrase", "which python version for the docker image?", "python-version"),
    _q("coding", "paraphrase", "caching pip in github actions", "ci-cache"),
    _q(
        "coding",
        "paraphrase",
        "why does the background worker crash at night?",
        "oom-fix",
        "metrics",
        "oom",
    ),
    _q("coding", "identifier", "worker_max_tasks_per_child", "oom-fix"),
    _q("coding", "paraphrase", "how many rows did postgres throw away?", "explain", "index-fix"),
    # finance
    _q("finance", "recent", "what was Q3 revenue?", "restated-ack", "restated", "bullets"),
    _q("finance", "old", "revenue figure before it was restated", "q3-summary", "q3-sheet"),
    _q("finance", "paraphrase", "why are we over budget on cloud?", "cloud-why", "billing"),
    _q("finance", "paraphrase", "who is responsible for the analytics export?", "owner"),
    _q("finance", "name", "when am I meeting Priya?", "priya-mtg-ack", "priya-mtg", "priya-call"),
    _q("finance", "name", "who is Priya Raman?", "owner", "priya-mtg-ack"),
    _q("finance", "paraphrase", "terms of the Acme contract", "acme-ack", "acme"),
    _q("finance", "name", "Tom Becker", "acme", "acme-ack"),
    _q(
        "finance", "paraphrase", "how much notice to cancel the logistics deal?", "acme-ack", "acme"
    ),
    _q("finance", "topic", "travel spending", "q3-summary", "q3-sheet", "bullets"),
    _q("finance", "identifier", "mtg_8841", "priya-mtg"),
    _q("finance", "paraphrase", "talking points for the budget meeting", "bullets"),
]
