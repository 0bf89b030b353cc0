"""BM25 search over the catalog (bm25s), as WebShop's search engine: the top 50 products."""

from __future__ import annotations

import bm25s

MAX_RESULTS = 50


def document(product: dict) -> str:
    return " ".join([product.get("title", ""), product.get("name", ""), " ".join(product.get("attributes") or []),
                     " ".join(product.get("features") or []), product.get("product_category", "")])


class SearchEngine:
    def __init__(self, products: list[dict]):
        self.products = products
        self.retriever = bm25s.BM25()
        tokens = bm25s.tokenize([document(p) for p in products], stopwords="en", show_progress=False)
        self.retriever.index(tokens, show_progress=False)

    def search(self, query: str, k: int = MAX_RESULTS) -> list[str]:
        """The asins of the best-matching products (score > 0), best first."""
        q = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        if not q or not q[0]:
            return []
        k = min(k, len(self.products))
        docs, scores = self.retriever.retrieve(q, k=k, show_progress=False)
        return [self.products[int(d)]["asin"] for d, s in zip(docs[0], scores[0]) if s > 0]
