"""WebShop's search ranks as its Lucene index ranks: our BM25 (autorl_tui/tasks/webshop/lucene.py)
against real Lucene on the same catalog.

tests/data/webshop/text_env_reference.json was produced by running WebShop's own code and Lucene for
real (`scripts/webshop_lucene_reference.py`, in a scratch venv outside the project holding WebShop's
pin pyserini==0.17.0, which bundles Anserini 0.14.3 on Lucene 8.11.0, with Debian's OpenJDK 17):
WebShop's `convert_product_file_format.py` and `run_indexing.sh`'s indexing of the official-format
catalog in tests/data/webshop/official_small/ (written by `scripts/webshop_official_fixture.py`),
then `LuceneSearcher('indexes_1k').search(query, k=50)` for 120 queries and Anserini's analyzer on
probe strings. Lucene reports scores rounded to 4 decimals; the order is by the exact float scores.
"""

import json
import math
import random
from pathlib import Path

import pytest

from autorl_tui.tasks.webshop import lucene as L
from autorl_tui.tasks.webshop.webagent import WebShopText

DATA = Path(__file__).parents[1] / "data" / "webshop"
REF = json.loads((DATA / "text_env_reference.json").read_text())


@pytest.fixture(scope="module")
def shop():
    return WebShopText.from_folder(DATA / "official_small")


def test_all_120_queries_rank_the_50_hits_in_lucene_s_order(shop):
    assert len(REF["rankings"]) == 120
    same_top10 = same_top50 = 0
    for r in REF["rankings"]:
        ours = shop.index.search(r["query"], k=50)
        same_top10 += [d for d, _ in ours[:10]] == [d for d, _ in r["hits"][:10]]
        same_top50 += [d for d, _ in ours] == [d for d, _ in r["hits"]]
        for (_, score), (_, lucene_score) in zip(ours, r["hits"]):
            assert score == pytest.approx(lucene_score, abs=1e-4), r["query"]
    assert (same_top10, same_top50) == (120, 120)


def test_the_queries_cover_ties_stop_words_unicode_and_repeats():
    queries = [r["query"] for r in REF["rankings"]]
    for q in ("the of and", "chocolate chocolate bar", "café crème", "★", "size:large", "u.s.a", "1,000 families",
              "zzzz unknownword", "customers' favorite"):
        assert q in queries
    assert not next(r for r in REF["rankings"] if r["query"] == "the of and")["hits"]
    # B0ZZTWIN01 and B00TWIN002 hold the same text (so equal scores), indexed in that order: Lucene lists
    # them by id, as Anserini sorts ties
    twins = [[d for d, _ in r["hits"] if d in ("B0ZZTWIN01", "B00TWIN002")] for r in REF["rankings"]]
    both = [t for t in twins if len(t) == 2]
    assert len(both) >= 3 and all(t == ["B00TWIN002", "B0ZZTWIN01"] for t in both)


def test_the_analyzer_gives_anserini_s_terms():
    for probe in REF["analyzer"]:
        assert L.analyze(probe["text"]) == probe["terms"], probe["text"]


def test_lengths_are_stored_lossily_as_lucene_s_one_byte_norms():
    assert [L.byte_length(L.length_byte(n)) for n in (1, 24, 25, 39, 40, 41, 42, 55, 56, 59, 60, 100)] == \
        [1, 24, 25, 39, 40, 40, 42, 54, 56, 56, 60, 96]
    assert all(L.byte_length(L.length_byte(n)) <= n for n in range(1, 5000))
    assert L.length_byte(2**31 - 1) == 255


def test_scores_follow_the_bm25_formula_worked_out_by_hand():
    # three documents; "red" in two of them, once each; lengths 2, 3 and 1 (stop words not counted)
    index = L.LuceneIndex([("a", "red shoes"), ("b", "the red running shoes"), ("c", "boots")])
    avgdl = 6 / 3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    expected = {doc: idf - idf / (1 + 1 / (0.9 * (0.6 + 0.4 * dl / avgdl))) for doc, dl in (("a", 2), ("b", 3))}
    ranked = index.search("red")
    assert [d for d, _ in ranked] == ["a", "b"]
    for doc, score in ranked:
        assert score == pytest.approx(expected[doc], rel=1e-6)
    assert [d for d, _ in index.search("red red")] == ["a", "b"]          # a repeated term doubles its weight
    assert index.search("red red")[0][1] == pytest.approx(2 * ranked[0][1], rel=1e-6)
    assert index.search("the of") == []
    tie = L.LuceneIndex([("z", "blue"), ("m", "blue"), ("q", "blue")])
    assert [d for d, _ in tie.search("blue")] == ["m", "q", "z"]       # equal scores: by docid


def test_tokens_split_and_join_as_the_standard_tokenizer():
    assert L.tokenize("U.S.A. 1,000.5 size:large e-mail don't ab. 1.a a.1 3.5\" x_y ★★ 中文") == \
        ["U.S.A", "1,000.5", "size:large", "e", "mail", "don't", "ab", "1", "a", "a", "1", "3.5", "x_y", "★", "★",
         "中", "文"]


def test_the_fast_paths_tokenize_as_the_character_rules():
    rng = random.Random(3)
    texts = [json.dumps(r) for r in json.loads((DATA / "official_small" / "items_shuffle_1000.json").read_text())]
    texts += ["".join(rng.choice("aB1_.,;:' -") for _ in range(rng.randint(0, 14))) for _ in range(20000)]
    texts += ["".join(rng.choice("aé1_.,:' \u0301\u2019★中\u202f") for _ in range(rng.randint(0, 14)))
              for _ in range(20000)]
    for text in texts:
        assert L.tokenize(text) == L.tokenize_unicode(text), text
