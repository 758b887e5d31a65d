"""Hybrid search over transcripts: embedders, text projection and terms, signals and fusion.

This layer knows nothing of SQL or keys. A repository uses it in two places:

On write, per batch of items::

    texts = [item_text(item) for item in items]  # "" -> index nothing for that item
    table = vocabulary.table(texts)              # term_counts of each, as one TermTable
    blobs = table.packed(term_id)                # pack_terms of each (or keyed hashes)
    vectors = await embed_documents(embedder, [t for t in texts if t])  # the same rows

On search, over the candidates (the items in scope with an index row)::

    rows, term_ids, counts = postings(blobs, query_term_ids)
    keyword = bm25_postings(rows, term_ids, counts, size=n, doc_count=n)   # coverage
    vector = cosine_scores(await embed_query(embedder, query), blobs)      # NaN: no vector
    calibration = await calibrate(embedder)        # measured once per model
    # Does some candidate hold a name or identifier of the query (`named_terms`)?
    literal = any(query_term_ids[t] in named_term_ids for t in term_ids)
    hits = fuse(keys, vector=vector, keyword=keyword, recency=recency_scores(positions),
                vector_weight=calibration.weight, vector_floor=calibration.floor,
                literal=literal, limit=5)

How `fuse` ranks (details and measurements in `fusion.py`): keyword evidence is BM25 as
coverage of the query; vector evidence is how far an item stands out in the query's own
cosine distribution, in nats. A query naming identifiers or names (`literal_terms`) that
some candidate holds is ranked by keywords first; any other by coverage to the 4th power
plus the embedder's weight (`fusion_weight`; when it declares none, a capable or a weak
model's as `calibrate` measures) times the vector evidence. Only hits with evidence are
returned (a keyword, or a cosine that stands out and clears the model's noise floor), or
those reaching `min_score`; a query holds at most `MAX_QUERY_CHARS` characters
(`check_query`). The constants are fitted by cross-validation on tests/search_eval (314
questions, five sets).
"""

import asyncio

from ..caches import RELEASE_PAUSE, release
from ..errors import EmbedderError, MissingExtraError, QueryTooLongError, SearchError
from .builtin import BUILTIN_EMBEDDERS, builtin_for, builtin_indexing_as, embedder_by_name
from .calibration import Calibration, calibrate
from .embedders import (
    MAX_MODEL_ID_CHARS,
    Embedder,
    call_failed,
    check_embedder,
    check_model_id,
    check_real,
    embed_alone,
    embed_documents,
    embed_query,
    embed_texts,
    index_id,
    normalize,
    pack_vectors,
    unpack_vectors,
)
from .fusion import (
    DEFAULT_VECTOR_WEIGHT,
    SEARCH_MODES,
    WEAK_VECTOR_WEIGHT,
    Evidence,
    Fusion,
    Hit,
    SearchMode,
    evidence,
    fuse,
    fused_scores,
    fusion_weight,
    has_evidence,
)
from .hashing import HashingEmbedder, forget_features
from .minilm import MiniLMEmbedder
from .model2vec_embedder import Model2VecEmbedder
from .openai_embedder import OpenAIEmbedder
from .postings import pack_terms, postings, term_id
from .query import MAX_QUERY_CHARS, blank, check_query, literal_terms, named_terms
from .ranking import bm25_postings, cosine_scores, recency_scores
from .sentence_transformers_embedder import SentenceTransformerEmbedder
from .text import (
    MAX_INDEXED_CHARS,
    MAX_TERM_CHARS,
    MAX_TEXT_CHARS,
    STOPWORDS,
    TOKENIZER_VERSION,
    _chunk_terms,
    content_words,
    item_text,
    stem,
    term_counts,
    tokenize,
)

__all__ = [
    "BUILTIN_EMBEDDERS",
    "DEFAULT_VECTOR_WEIGHT",
    "MAX_INDEXED_CHARS",
    "MAX_MODEL_ID_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_TERM_CHARS",
    "MAX_TEXT_CHARS",
    "SEARCH_MODES",
    "STOPWORDS",
    "TOKENIZER_VERSION",
    "WEAK_VECTOR_WEIGHT",
    "Calibration",
    "Embedder",
    "EmbedderError",
    "Evidence",
    "Fusion",
    "HashingEmbedder",
    "Hit",
    "MiniLMEmbedder",
    "MissingExtraError",
    "Model2VecEmbedder",
    "OpenAIEmbedder",
    "QueryTooLongError",
    "SearchError",
    "SearchMode",
    "SentenceTransformerEmbedder",
    "blank",
    "bm25_postings",
    "builtin_for",
    "builtin_indexing_as",
    "calibrate",
    "call_failed",
    "check_embedder",
    "check_model_id",
    "check_query",
    "check_real",
    "content_words",
    "cosine_scores",
    "embed_alone",
    "embed_documents",
    "embed_query",
    "embed_texts",
    "embedder_by_name",
    "evidence",
    "forget_terms",
    "fuse",
    "fused_scores",
    "fusion_weight",
    "has_evidence",
    "index_id",
    "item_text",
    "literal_terms",
    "named_terms",
    "normalize",
    "pack_terms",
    "pack_vectors",
    "postings",
    "recency_scores",
    "stem",
    "term_counts",
    "term_id",
    "tokenize",
    "unpack_vectors",
]


async def forget_terms() -> None:
    """Drop what this layer caches process-wide of any text: tokenised pieces, term ids and
    the hashing embedder's term features (an encrypted store does after a removal, off the
    caller's path). One cache at a time, and the features a slice at a time
    (`caches.release`): emptied at once, they held the event loop for tens of ms.

    >>> import asyncio; asyncio.run(forget_terms())
    """
    for cache in (_chunk_terms, term_id):
        cache.cache_clear()
        await asyncio.sleep(RELEASE_PAUSE)
    await release(forget_features())
