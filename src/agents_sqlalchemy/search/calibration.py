"""How much an embedder's cosines mean, measured once per model on pairs of its own.

`fuse` needs two numbers about an embedder: how much its vector evidence weighs against
keywords, and the cosine below which a hit with no keyword is noise. A model's cosine
scale is its own, so neither can be one constant for every model. `calibrate` measures
both on `PAIRS`: forty questions, each with the item that answers it in other words, on
forty unrelated topics (none from the evaluation sets). Each question is embedded as a
query and each answer as a document, and:

- the *noise floor* is the cosine that 95% of the cosines between a question and another
  question's answer stay under (`SIGNIFICANCE`): above it, a cosine is evidence at the 5%
  level;
- the *recall* is the share of questions whose own answer clears that floor. A model that
  reaches `CAPABLE_RECALL` tells meaning from noise: a hybrid hit without a keyword then
  needs a cosine above the floor (besides standing out among the query's own), and an
  embedder that declares no `fusion_weight` gets a capable model's weight. A model below
  it gets no floor (its answers lie in the noise too) and, declaring none, the weak
  weight: its vectors order what words leave open, no more;
- an embedder may declare `lexical = True`: its vectors are made of the words themselves
  (the hashing embedder's hashed word pieces), so a cosine above its floor means shared
  word pieces, whatever it knows of paraphrases, and its floor applies too.

Measured (tests/search_eval, `python -m tests.search_eval.evaluate`, which prints each
built-in model's calibration): all-MiniLM-L6-v2 has floor 0.21 and recall 0.95, the
bundled static model 0.29 and 0.25, the hashing embedder 0.11 and 0.15. With MiniLM's
floor, a question searched in a transcript where nothing answers it gets 3.1 hits on
vectors alone instead of 11.3, and nothing at all for 30% of the questions instead of 1%,
for a worst row 0.004 lower; with the hashing embedder's, 2.9 instead of 10.9 and 15%
instead of none, for rows at most 0.007 lower. The static model's floor would cost its
rows up to 0.025 (topical, per session) and take paraphrases per session from -0.038 to
-0.048 below its better signal: its answers lie in its noise. Through the protocol the
static model used to get a capable model's weight, and its worst row was 0.19 below its
better signal.

The measurement is cached per `model_id` for the process: the first hybrid search with a
model embeds these 80 short texts once (two calls, for a remote model). An embedder that
returns no vector for some of them (a NaN, the wrong shape) is asked for each alone, and
measured on the pairs it embeds both texts of, if that is at least `MIN_PAIRS`; with fewer
it is not measured (`Calibration.measured`): not capable, no floor, and that is cached
too. A call that fails (a model down) raises `EmbedderError` saying it was the
calibration, and the next hybrid search measures again.

Example::

    calibration = await calibrate(embedder_by_name("minilm"))
    calibration.floor, calibration.weight      # (0.21..., 2.0)
    fuse(keys, vector=cosines, keyword=coverage, vector_weight=calibration.weight,
         vector_floor=calibration.floor)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import EmbedderError
from .embedders import Embedder, Matrix, call_failed, embed_alone, embed_texts
from .fusion import fusion_weight

logger = logging.getLogger("agents_sqlalchemy")

#: A question and the item that answers it in other words, each pair on a topic of its own.
PAIRS: tuple[tuple[str, str], ...] = (
    ("when is my dentist appointment?", "Booked the check-up with Dr. Okafor for Tuesday at 9:30."),
    (
        "how much did the flights cost?",
        "The two return tickets to Lisbon came to 412 euros in total.",
    ),
    (
        "what did the doctor say about my knee?",
        "The physio thinks it is a strained ligament; rest it for three weeks.",
    ),
    (
        "why did the deploy fail last night?",
        "The release job stopped because the build server ran out of disk space.",
    ),
    (
        "which wine goes with the fish?",
        "A chilled Albarino or a dry Riesling pairs well with grilled sea bass.",
    ),
    (
        "what's the wifi password at the cabin?",
        "Network: lakeside-guest, passphrase is on the fridge magnet: pinecone42.",
    ),
    (
        "did the landlord fix the heating?",
        "The radiator technician came on Monday and replaced the valve.",
    ),
    (
        "how do I reset the router?",
        "Hold the small button at the back for ten seconds until the lights blink.",
    ),
    (
        "what are we cooking for the party?",
        "Menu: slow-roasted lamb shoulder, couscous salad and a lemon tart.",
    ),
    (
        "who is picking up the kids on friday?",
        "Grandma will collect Mia and Leo from school at three.",
    ),
    (
        "what's the plan for the quarterly review?",
        "Slides due Wednesday; Priya presents revenue, I cover hiring.",
    ),
    ("is my passport still valid?", "Your travel document expires in March 2031, so you are fine."),
    ("how many steps did I walk yesterday?", "The tracker logged 11,240 steps on Sunday."),
    (
        "what time does the gym open?",
        "The fitness centre opens at 6 am on weekdays and 8 on weekends.",
    ),
    (
        "why is the test suite so slow?",
        "Most of the time goes into starting a fresh database container per test.",
    ),
    (
        "what book should I read next?",
        "You liked the Ishiguro novel, so try The Remains of the Day.",
    ),
    ("how do I water the orchid?", "Soak the roots once a week and let them drain completely."),
    ("when does the car insurance renew?", "The motor policy runs until the 14th of August."),
    (
        "what did the customer complain about?",
        "The client said the invoice charged them twice for the same order.",
    ),
    ("how do I say thank you in Japanese?", "Arigatou gozaimasu is the polite form."),
    ("what's the score of the match?", "City won 3-1 after two late goals."),
    ("can the cat eat tuna?", "A little canned fish is fine for felines as an occasional treat."),
    ("where did I park?", "Level 3 of the multi-storey, bay C17, next to the lifts."),
    ("what is the mortgage rate now?", "The bank offered a fixed 3.9% for five years."),
    (
        "which laptop should I buy for video editing?",
        "Get one with 32 GB of RAM and a dedicated GPU for rendering.",
    ),
    ("what's the weather tomorrow?", "Expect rain in the morning and 14 degrees by the afternoon."),
    ("how long do I boil an egg?", "Seven minutes gives a jammy yolk."),
    ("who won the election?", "The opposition party took the majority of seats."),
    (
        "how do I fix the leaking tap?",
        "Replace the washer inside the faucet head; turn off the water supply first.",
    ),
    ("what's my blood pressure reading?", "Measured 128 over 82 this morning."),
    (
        "when is the team offsite?",
        "The retreat is planned for the second week of June in the mountains.",
    ),
    (
        "why was the payment declined?",
        "The card issuer flagged the transaction as unusual and blocked it.",
    ),
    (
        "what should I pack for the hike?",
        "Bring layers, a rain shell, two litres of water and snacks.",
    ),
    ("how do I cancel the subscription?", "Go to account settings, billing, and choose end plan."),
    (
        "what did the vet prescribe?",
        "Antibiotics twice a day for the dog's ear infection, for ten days.",
    ),
    ("is the museum open on Monday?", "The gallery is closed at the start of the week."),
    ("how much should I tip?", "Around ten percent is customary at restaurants there."),
    ("what's the name of the new manager?", "Our new head of the department is Tomasz Kowalczyk."),
    (
        "how do I merge two branches?",
        "Check out main and run git merge feature, then resolve conflicts.",
    ),
    ("which plants survive in shade?", "Ferns, hostas and ivy do well without direct sun."),
)
#: The noise floor is this quantile of the cosines between questions and unrelated answers.
SIGNIFICANCE = 0.95
#: A model whose noise floor at least this share of the true answers clears is capable.
CAPABLE_RECALL = 0.8
#: The fewest pairs a model is measured on (those it embeds both texts of).
MIN_PAIRS = len(PAIRS) // 2


@dataclass(frozen=True)
class Calibration:
    """What `fuse` takes from an embedder: its vector `weight`, and `floor`, the cosine a
    hybrid hit without a keyword needs: the measured `noise_floor` if the model is
    `capable` (`recall`, the share of true answers above it, reaches `CAPABLE_RECALL`) or
    declares itself `lexical`, else None (see the module docstring). A model that embedded
    too few pairs is not `measured`: its `noise_floor` is None and its `recall` 0.

    Example::

        calibration = await calibrate(MiniLMEmbedder())
        calibration.capable, calibration.weight, calibration.floor   # True, 2.0, 0.21...
    """

    weight: float
    noise_floor: float | None
    recall: float
    lexical: bool = False

    @property
    def measured(self) -> bool:
        """Whether the model embedded enough of the pairs (`MIN_PAIRS`) to be measured."""
        return self.noise_floor is not None

    @property
    def capable(self) -> bool:
        """Whether the model's cosines tell answers from unrelated texts."""
        return self.recall >= CAPABLE_RECALL

    @property
    def floor(self) -> float | None:
        """The cosine a hybrid hit without a keyword needs (None: no floor)."""
        return self.noise_floor if self.capable or self.lexical else None


_measured: dict[str, tuple[float | None, float]] = {}


async def calibrate(embedder: Embedder) -> Calibration:
    """The embedder's calibration, measured once per `model_id` in the process; a declared
    `fusion_weight` is kept, and a declared `lexical = True` (see the module docstring).
    A call of the embedder that fails raises `EmbedderError`, and nothing is cached."""
    model_id = embedder.model_id
    if model_id not in _measured:
        try:
            queries = await _embedded(embedder, [q for q, _ in PAIRS], queries=True)
            documents = await _embedded(embedder, [a for _, a in PAIRS], queries=False)
        except EmbedderError as failure:
            raise EmbedderError(
                f"calibrating the embedder {model_id!r} for hybrid search failed: "
                f"{type(failure.__cause__).__name__} (the embedder's own exception is this "
                "one's __cause__)"
            ) from failure.__cause__
        _measured[model_id] = _measure_embedded(model_id, queries, documents)
    noise_floor, recall = _measured[model_id]
    weight = fusion_weight(embedder, capable=recall >= CAPABLE_RECALL)
    lexical = getattr(embedder, "lexical", False) is True
    return Calibration(weight=weight, noise_floor=noise_floor, recall=recall, lexical=lexical)


def measure(queries: Matrix, documents: Matrix) -> tuple[float, float]:
    """(noise floor, recall) from unit rows, the i-th document answering the i-th query.

    >>> measure(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32))
    (0.0, 1.0)
    """
    cosines = np.asarray(queries @ documents.T, dtype=np.float64)
    unrelated = cosines[~np.eye(len(cosines), dtype=bool)]
    floor = float(np.quantile(unrelated, SIGNIFICANCE))
    return floor, float((np.diag(cosines) > floor).mean())


async def _embedded(
    embedder: Embedder, texts: list[str], *, queries: bool
) -> list[npt.NDArray[np.float32] | None]:
    """The unit vector of each text, or None where the embedder returned none: the texts
    in one call, or, where what it returned for them is no vectors, each alone
    (`embed_alone`). A call that fails raises (`call_failed`)."""
    try:
        return list(await embed_texts(embedder, texts, queries=queries))
    except EmbedderError as failure:
        if call_failed(failure):
            raise
    return await embed_alone(embedder, texts, queries=queries)


def _measure_embedded(
    model_id: str,
    queries: list[npt.NDArray[np.float32] | None],
    documents: list[npt.NDArray[np.float32] | None],
) -> tuple[float | None, float]:
    """`measure` on the pairs whose texts both embedded, if at least `MIN_PAIRS`; else
    (None, 0.0): not measured. Pairs left out are logged."""
    pairs = [(q, d) for q, d in zip(queries, documents, strict=True) if q is not None is not d]
    if len(pairs) < len(PAIRS):
        logger.warning(
            "the embedder %r returned no vector for %d of the %d calibration texts: %s",
            model_id,
            sum(vector is None for vector in queries + documents),
            2 * len(PAIRS),
            f"measured on {len(pairs)} pairs of {len(PAIRS)}"
            if len(pairs) >= MIN_PAIRS
            else "not measured (hybrid search gives its vectors no floor and, unless it "
            "declares a fusion_weight, the weak weight)",
        )
    if len(pairs) < MIN_PAIRS:
        return None, 0.0
    return measure(np.stack([q for q, _ in pairs]), np.stack([d for _, d in pairs]))
