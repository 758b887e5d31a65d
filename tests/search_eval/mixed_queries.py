"""Questions asked of the multi-topic transcripts (`work_transcripts.py`,
`home_transcripts.py`), with every item that answers each; kinds as in `queries.py`.

Written with the transcripts, before any ranking was tuned on them, and not changed since.
Most have distractors: items of another topic of the same transcript that hold the
question's words ("lag" of replicas for consumer lag, "renewal" of insurance for a
passport, a "return" of goods for the VAT return).
"""

from __future__ import annotations

from .queries import Query, _q

QUERIES: list[Query] = [
    # platform
    _q("platform", "recent", "when is the database upgrade happening?", "pg-move"),
    _q(
        "platform", "old", "when was the postgres upgrade first scheduled?", "pg-plan", "pg-runbook"
    ),
    _q(
        "platform",
        "paraphrase",
        "how do we undo the upgrade if it fails?",
        "pg-plan",
        "pg-runbook",
    ),
    _q("platform", "identifier", "snap-0f3a9c", "pg-plan", "pg-runbook"),
    _q(
        "platform",
        "paraphrase",
        "why didn't the certificate renew automatically?",
        "cert-diagnosis",
        "cert-error",
    ),
    _q(
        "platform",
        "identifier",
        "route53:ChangeResourceRecordSets",
        "cert-diagnosis",
        "cert-error",
    ),
    _q(
        "platform", "paraphrase", "until when is the new TLS cert valid?", "cert-ok", "cert-renewed"
    ),
    _q("platform", "name", "Dana Whitfield", "dana-panel", "dana-feedback", "dana-panel-q"),
    _q(
        "platform",
        "paraphrase",
        "what did the interviewers think of the SRE candidate?",
        "dana-feedback",
        "dana-notes",
    ),
    _q(
        "platform",
        "paraphrase",
        "why are invoices going out hours late?",
        "lag-cause",
        "lag-stats",
    ),
    _q("platform", "identifier", "max.poll.interval.ms", "lag-cause", "lag-fix"),
    _q("platform", "paraphrase", "has the consumer backlog drained?", "lag-cleared"),
    _q("platform", "recent", "what are the dates of the team offsite?", "offsite-moved"),
    _q(
        "platform",
        "name",
        "which hotel are we staying at in Lisbon?",
        "offsite-booked",
        "offsite-moved",
        "offsite-hotel-options",
    ),
    _q("platform", "identifier", "MA-55190", "offsite-booked", "offsite-moved"),
    _q("platform", "paraphrase", "how long did the postgres 16 migration take?", "pg-result"),
    _q(
        "platform", "paraphrase", "which extension broke during the upgrade?", "pg-result", "pg-log"
    ),
    _q("platform", "paraphrase", "why did the NAT gateway cost go up?", "nat-cause"),
    _q("platform", "topic", "jet lag advice", "jetlag"),
    # research
    _q(
        "research",
        "paraphrase",
        "why did my training run blow up overnight?",
        "nan-diagnosis",
        "nan-log",
    ),
    _q("research", "identifier", "rn-5521", "nan-diagnosis", "nan-log", "nan-q"),
    _q(
        "research",
        "paraphrase",
        "what learning rate did we switch to?",
        "relaunch",
        "nan-diagnosis",
    ),
    _q("research", "paraphrase", "what accuracy did the rerun reach?", "result", "result-log"),
    _q("research", "recent", "when is the ICVR paper due?", "deadline-ext"),
    _q("research", "old", "what was the original paper submission deadline?", "deadline"),
    _q("research", "paraphrase", "when do I register the abstract?", "deadline", "deadline-ext"),
    _q(
        "research",
        "paraphrase",
        "what additional experiments does my advisor want?",
        "helen-summary",
        "helen-comments",
    ),
    _q("research", "name", "Helen Okafor", "helen-summary", "helen-comments"),
    _q("research", "paraphrase", "why was my cluster job killed?", "preempt", "preempt-status"),
    _q("research", "identifier", "884213", "preempt", "preempt-status", "relaunch"),
    _q("research", "paraphrase", "when do I give my fingerprints for the visa?", "visa-appt"),
    _q("research", "paraphrase", "what paperwork do I bring to the visa centre?", "visa-docs"),
    _q(
        "research", "paraphrase", "how many papers do I have to review?", "reviews", "reviews-email"
    ),
    _q("research", "paraphrase", "what am I presenting at reading group?", "rg"),
    _q("research", "identifier", "PO-77812", "po", "po-status"),
    _q("research", "paraphrase", "when will my new SSD arrive?", "po", "po-status"),
    # household
    _q("household", "paraphrase", "which builder did we hire for the kitchen?", "kowalski"),
    _q(
        "household",
        "paraphrase",
        "how much was the cheaper renovation quote?",
        "quotes-compare",
        "quotes",
    ),
    _q("household", "recent", "when does the kitchen work start?", "kitchen-delay"),
    _q("household", "old", "what start date did we first agree with Kowalski?", "kowalski"),
    _q("household", "paraphrase", "what flooring did we choose?", "tiles", "tiles-note"),
    _q("household", "paraphrase", "when is the car going to the garage?", "car-service"),
    _q("household", "recent", "who insures the car now?", "ins-switched"),
    _q("household", "identifier", "LI-448201", "ins-notice", "ins-summary", "ins-switched"),
    _q("household", "paraphrase", "when do I meet Emma's teacher?", "ptm", "ptm-email"),
    _q("household", "name", "Mr. Duarte", "ptm", "ptm-email"),
    _q("household", "paraphrase", "how much does the school outing cost?", "trip", "trip-email"),
    _q("household", "paraphrase", "when is Leo seeing the dentist?", "dentist"),
    _q("household", "paraphrase", "whose passport is about to expire?", "passport", "passports"),
    _q("household", "paraphrase", "which medicine did I need refilled?", "rx"),
    _q("household", "paraphrase", "what is Emma allergic to?", "allergy"),
    # shop
    _q("shop", "paraphrase", "how many speckled mugs do we have left?", "stock", "stock-answer"),
    _q("shop", "identifier", "MUG-SPK-350", "stock", "stock-answer", "reorder"),
    _q(
        "shop",
        "paraphrase",
        "why is the supplier shipment late?",
        "supplier-delay",
        "supplier-email",
    ),
    _q("shop", "recent", "when will the new mugs arrive?", "supplier-delay", "supplier-email"),
    _q(
        "shop",
        "paraphrase",
        "what did we do for the customer whose platter broke?",
        "broken-fix",
    ),
    _q("shop", "name", "Hannah Price", "broken-q", "broken-options", "broken-fix"),
    _q("shop", "identifier", "CLAY20", "bf", "bf-result"),
    _q(
        "shop",
        "paraphrase",
        "how well did the black friday email perform?",
        "bf-result",
        "bf-report",
    ),
    _q("shop", "paraphrase", "why could customers not pay this morning?", "checkout-cause"),
    _q("shop", "recent", "did we win the chargeback?", "cb-won"),
    _q("shop", "identifier", "10391", "cb-evidence", "cb-submitted", "cb-won", "cb-q"),
    _q("shop", "paraphrase", "how much VAT do we owe for Q3?", "vat", "vat-report"),
    _q("shop", "paraphrase", "when is the tax return due?", "vat", "vat-report"),
    _q("shop", "recent", "which courier ships our EU parcels now?", "ship-switched"),
    _q("shop", "old", "what did DHL charge per parcel?", "ship-q", "ship-compare"),
    _q("shop", "paraphrase", "what hourly wage does the packer get?", "job", "jonas"),
]
