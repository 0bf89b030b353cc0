"""Search backends for the tool loop (no harness imports; copied into the agent's workspace).

- `LocalIndex`: BM25 (the `bm25s` library) over the corpus's articles; the default, offline.
- `SerpApiSearch` (with a key) and `DuckDuckGoSearch` (instant answers): the web searches
  AutoRL-Bench's evaluator uses, snippets only (their endpoints can be pointed elsewhere, e.g. a
  local server speaking the same protocol).
- `HttpSearch`: a search endpoint the user names that speaks SearXNG's JSON API
  (`GET <url>/search?q=...&format=json` -> {"results": [{"url", "title", "content"}]}); `open`
  fetches the result's page and strips its markup. Result URLs get short doc ids ("W1", ...).

Both answer `search(query, k) -> [{"doc_id", "title", "snippet"}]` and `get(doc_id) -> text | None`.
"""

from __future__ import annotations

import html
import json
import re
import threading
import urllib.parse
import urllib.request

_WORD = re.compile(r"\w+")
_SENT = re.compile(r"(?<=[.!?])\s+")
SNIPPET_CHARS = 200


def snippet(text: str, query: str, limit: int = SNIPPET_CHARS) -> str:
    """The sentence sharing the most words with the query (the first on ties), cut to `limit`."""
    q = {w.lower() for w in _WORD.findall(query)}
    best, best_hits = "", -1
    for sent in _SENT.split(text):
        hits = len(q & {w.lower() for w in _WORD.findall(sent)})
        if hits > best_hits:
            best, best_hits = sent, hits
    return best if len(best) <= limit else best[:limit - 3] + "..."


class LocalIndex:
    name = "bm25"

    def __init__(self, docs: list[dict]):
        import bm25s
        self._bm25s = bm25s
        self.docs = {d["doc_id"]: d for d in docs}
        self._order = [d["doc_id"] for d in docs]
        self._retriever = bm25s.BM25()
        self._retriever.index(self._tokenize([f"{d['title']}. {d['title']}. {d['text']}" for d in docs]),
                              show_progress=False)
        self._lock = threading.Lock()

    def _tokenize(self, texts):
        return self._bm25s.tokenize(texts, stopwords="en", show_progress=False)

    def search(self, query: str, k: int = 5) -> list[dict]:
        tokens = self._tokenize([query])
        if not tokens.vocab:      # only stop words or punctuation: nothing to look up
            return []
        k = min(k, len(self._order))
        with self._lock:
            idx, scores = self._retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        out = []
        for i, s in zip(idx[0], scores[0]):
            if s <= 0:
                continue
            d = self.docs[self._order[int(i)]]
            out.append({"doc_id": d["doc_id"], "title": d["title"], "snippet": snippet(d["text"], query)})
        return out

    def get(self, doc_id: str) -> str | None:
        d = self.docs.get(doc_id)
        return None if d is None else f"{d['title']}\n{d['text']}"


_TAGS = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S | re.I)


def html_to_text(raw: str) -> str:
    return " ".join(html.unescape(_TAGS.sub(" ", raw)).split())


class HttpSearch:
    """A SearXNG-style JSON search endpoint. Errors become the tool's feedback, not a crash."""
    name = "http"

    def __init__(self, url: str, timeout_s: float = 10.0, max_page_chars: int = 20000):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_page_chars = max_page_chars
        self._ids: dict[str, str] = {}       # doc id -> url
        self._by_url: dict[str, str] = {}
        self._lock = threading.Lock()

    def _id_for(self, url: str) -> str:
        with self._lock:
            if url not in self._by_url:
                doc_id = f"W{len(self._ids) + 1}"
                self._ids[doc_id], self._by_url[url] = url, doc_id
            return self._by_url[url]

    def search(self, query: str, k: int = 5) -> list[dict]:
        q = urllib.parse.urlencode({"q": query, "format": "json"})
        with urllib.request.urlopen(f"{self.url}/search?{q}", timeout=self.timeout_s) as resp:
            payload = json.loads(resp.read().decode("utf-8", "replace"))
        out = []
        for r in (payload.get("results") or [])[:k]:
            if r.get("url"):
                out.append({"doc_id": self._id_for(r["url"]), "title": str(r.get("title") or r["url"]),
                            "snippet": str(r.get("content") or "")[:SNIPPET_CHARS]})
        return out

    def get(self, doc_id: str) -> str | None:
        url = self._ids.get(doc_id)
        if url is None:
            return None
        with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
            raw = resp.read(4 * self.max_page_chars).decode("utf-8", "replace")
        return html_to_text(raw)[: self.max_page_chars]


def _get_json(url: str, params: dict, timeout_s: float) -> dict:
    with urllib.request.urlopen(f"{url}?{urllib.parse.urlencode(params)}", timeout=timeout_s) as resp:
        return json.loads(resp.read().decode("utf-8", "replace"))


class SnippetSearch:
    """A web search API answering with text snippets only (nothing to open), as AutoRL-Bench uses
    them: `search` gives hits whose snippets its tool joins with " | "."""
    name = "snippets"

    def __init__(self, url: str, timeout_s: float = 10.0):
        self.url = url
        self.timeout_s = timeout_s

    def get(self, doc_id: str) -> str | None:
        return None


class SerpApiSearch(SnippetSearch):
    """SerpAPI (`GET https://serpapi.com/search?q=..&api_key=..&num=3`): the top 3 organic results'
    snippets. The key is read from $SERPAPI_KEY (or the variable `key_env` names)."""
    name = "serpapi"
    URL = "https://serpapi.com/search"

    def __init__(self, key: str, url: str | None = None, timeout_s: float = 10.0):
        super().__init__(url or self.URL, timeout_s)
        self.key = key

    def search(self, query: str, k: int = 3) -> list[dict]:
        data = _get_json(self.url, {"q": query, "api_key": self.key, "num": 3}, self.timeout_s)
        hits = (data.get("organic_results") or [])[:3]
        return [{"doc_id": f"S{i + 1}", "title": str(r.get("title") or ""), "snippet": str(r.get("snippet") or "")}
                for i, r in enumerate(hits)]


class DuckDuckGoSearch(SnippetSearch):
    """DuckDuckGo's instant answers (`GET https://api.duckduckgo.com/?q=..&format=json&no_html=1`):
    the abstract when there is one, else the first two related topics' texts."""
    name = "duckduckgo"
    URL = "https://api.duckduckgo.com/"

    def __init__(self, url: str | None = None, timeout_s: float = 10.0):
        super().__init__(url or self.URL, timeout_s)

    def search(self, query: str, k: int = 2) -> list[dict]:
        data = _get_json(self.url, {"q": query, "format": "json", "no_html": 1}, self.timeout_s)
        abstract = str(data.get("AbstractText") or "")
        if abstract:
            return [{"doc_id": "A1", "title": str(data.get("Heading") or ""), "snippet": abstract}]
        related = [r for r in (data.get("RelatedTopics") or [])[:2] if isinstance(r, dict)]
        return [{"doc_id": f"R{i + 1}", "title": "", "snippet": str(r.get("Text") or "")} for i, r in enumerate(related)]
