"""Hybrid search over transcripts: embedders, text projection and terms, ranking.

This layer knows nothing of SQL or keys. A repository uses it in two places:

On write, per item::

    text = item_text(item)                      # "" -> index nothing for this item
    terms = term_counts(text)                   # {term: count} -> terms rows (or keyed hashes)
    [vector] = await embed_documents(embedder, [text])   # bytes -> embeddings row (model_id)

On search::

    query_terms = term_counts(query)            # hash them like the stored terms
    query_vector = await embed_query(embedder, query)
    hits = rank(keys, positions=seqs, query_vector=query_vector, vectors=blobs,
                query_terms=query_terms, term_freqs=tf_by_key,
                stats=CorpusStats(doc_count=items_in_scope), limit=5)
    [(hit.key, hit.score) for hit in hits]

`MemoryIndex` does exactly this in memory; read it as the reference.
"""

from ..errors import EmbedderError, MissingExtraError, SearchError
from .builtin import BUILTIN_EMBEDDERS, builtin_for, embedder_by_name
from .embedders import (
    Embedder,
    embed_documents,
    embed_query,
    embed_texts,
    normalize,
    pack_vectors,
    unpack_vectors,
)
from .hashing import HashingEmbedder
from .memory import IndexedItem, MemoryIndex
from .minilm import MiniLMEmbedder
from .model2vec_embedder import Model2VecEmbedder
from .openai_embedder import OpenAIEmbedder
from .ranking import (
    DEFAULT_PARAMS,
    SEARCH_MODES,
    CorpusStats,
    Fusion,
    Hit,
    RankParams,
    SearchMode,
    bm25_postings,
    bm25_scores,
    cosine_scores,
    fuse,
    rank,
    recency_scores,
)
from .sentence_transformers_embedder import SentenceTransformerEmbedder
from .text import (
    MAX_TERM_CHARS,
    MAX_TEXT_CHARS,
    STOPWORDS,
    TOKENIZER_VERSION,
    content_words,
    item_text,
    stem,
    term_counts,
    tokenize,
)

__all__ = [
    "BUILTIN_EMBEDDERS",
    "DEFAULT_PARAMS",
    "MAX_TERM_CHARS",
    "MAX_TEXT_CHARS",
    "SEARCH_MODES",
    "STOPWORDS",
    "TOKENIZER_VERSION",
    "CorpusStats",
    "Embedder",
    "EmbedderError",
    "Fusion",
    "HashingEmbedder",
    "Hit",
    "IndexedItem",
    "MemoryIndex",
    "MiniLMEmbedder",
    "MissingExtraError",
    "Model2VecEmbedder",
    "OpenAIEmbedder",
    "RankParams",
    "SearchError",
    "SearchMode",
    "SentenceTransformerEmbedder",
    "bm25_postings",
    "bm25_scores",
    "builtin_for",
    "content_words",
    "cosine_scores",
    "embed_documents",
    "embed_query",
    "embed_texts",
    "embedder_by_name",
    "fuse",
    "item_text",
    "normalize",
    "pack_vectors",
    "rank",
    "recency_scores",
    "stem",
    "term_counts",
    "tokenize",
    "unpack_vectors",
]
