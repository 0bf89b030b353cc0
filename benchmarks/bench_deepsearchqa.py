"""DeepSearchQA tool-loop throughput on this machine (local BM25 index, no model).

Prints: materialization time (world, corpus, questions, expert SFT data), search latency p50/p95
(BM25 over the card's corpus, queries from the questions' entities), and the deepsearchqa
scorer's episodes/s and tool steps/s with the reading expert. Model inference comes on top."""

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main():
    from autorl_tui.catalog.tasks import load_task_card, materialize
    from autorl_tui.grading.scorers import get_scorer
    from autorl_tui.grading.types import EvalProtocol, ScorerContext
    from autorl_tui.tasks.deepsearchqa.experts import ExpertPolicy
    from autorl_tui.tasks.deepsearchqa.search import LocalIndex

    tmp = Path(tempfile.mkdtemp(prefix="bench_dsqa_"))
    try:
        card = load_task_card(REPO / "autorl_tui" / "tasks" / "deepsearchqa-gen")
        card.data["params"]["source"] = "generated"
        t0 = time.perf_counter()
        train = materialize(card, "train", tmp)
        print(f"dsqa_materialize_train: {time.perf_counter() - t0:.2f} s (incl. expert SFT data)")
        test = materialize(card, "test", tmp)
        items = [json.loads(x) for x in (test / "items.jsonl").read_text().splitlines()]
        docs = [json.loads(x) for x in (test / "corpus.jsonl").read_text().splitlines()]
        t0 = time.perf_counter()
        index = LocalIndex(docs)
        print(f"dsqa_corpus: {len(docs)} articles, index built in {1000 * (time.perf_counter() - t0):.1f} ms")
        queries = [s for q in items for s in q["subjects"]] * 3
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            index.search(q, 5)
            lat.append(1000 * (time.perf_counter() - t0))
        lat.sort()
        print(f"dsqa_search_p50: {statistics.median(lat):.2f} ms")
        print(f"dsqa_search_p95: {lat[int(0.95 * (len(lat) - 1))]:.2f} ms ({len(lat)} queries)")
        protocol = EvalProtocol.from_dict(card.protocol.to_dict())
        ctx = ScorerContext(task_dir=card.dir, split="test", split_path=test, scratch_dir=tmp,
                            options=dict(card.scorer_options), log=lambda s: None)
        t0 = time.perf_counter()
        result = get_scorer(card.scorer).evaluate(ExpertPolicy(items), items, protocol, ctx)
        elapsed = time.perf_counter() - t0
        m = result.metrics
        print(f"dsqa_expert_accuracy: {result.score:.1f} % ({m['episodes']} test questions)")
        print(f"dsqa_episodes_per_s: {m['episodes'] / elapsed:.1f} episodes/s")
        print(f"dsqa_tool_steps_per_s: {m['env_steps'] / elapsed:.1f} steps/s ({m['env_steps']} steps)")
        del train
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
