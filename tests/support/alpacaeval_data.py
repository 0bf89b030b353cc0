"""AlpacaEval 2.0's official files in their published layout, with made-up content, for tests:
`alpaca_eval_gpt4_baseline.json` (instruction, output, generator, dataset), `df_gamed.csv` (alpaca-
eval's gamed-baseline annotations: model, index, preference, std_delta_len, instruction_difficulty,
not_gamed_baseline) and tatsu-lab/alpaca's parquet (instruction, input, output, text)."""

from __future__ import annotations

import io
import json
import random


def eval_set(n: int) -> list[dict]:
    rng = random.Random(7)
    topics = ["photosynthesis", "the French revolution", "binary search", "a sonnet about rain", "tax brackets",
              "sourdough bread", "black holes", "a polite complaint letter", "the Pythagorean theorem", "jazz"]
    return [{"instruction": f"Instruction {i}: explain {topics[i % len(topics)]} (variant {i})",
             "output": f"Reference answer {i}. " + "Detail. " * rng.randint(3, 40),
             "generator": "gpt4_turbo", "dataset": ["helpful_base", "koala", "oasst", "selfinstruct", "vicuna"][i % 5]}
            for i in range(n)]


def model_outputs(instructions: list[dict], seed: int = 3) -> list[str]:
    """Candidate answers of varied length, some marked GOOD (the stand-in judge's preference)."""
    rng = random.Random(seed)
    return [("GOOD " if rng.random() < 0.35 else "") + f"My answer {i}. " + "More words. " * rng.randint(0, 60)
            for i, _ in enumerate(instructions)]


def df_gamed_csv(n_instructions: int = 805) -> bytes:
    rng = random.Random(11)
    difficulty = [rng.gauss(0, 1) for _ in range(n_instructions)]
    lines = ["model,index,preference,std_delta_len,instruction_difficulty,not_gamed_baseline"]
    for model, bias in (("gpt4_1106_preview_verbose", 0.8), ("gpt4_1106_preview_concise", -0.8)):
        for i in range(n_instructions):
            d = rng.gauss(bias, 0.7)
            p = 1 / (1 + pow(2.718281828, -(0.9 * d - 0.4 * difficulty[i])))
            lines.append(f"{model},{i},{p:.6f},{d:.6f},{difficulty[i]:.6f},False")
    return ("\n".join(lines) + "\n").encode()


def alpaca_parquet(n: int) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = [{"instruction": f"Alpaca task {i}: list {i % 7 + 2} facts about number {i}",
             "input": "" if i % 3 else f"Context {i}", "output": f"Facts about {i}: " + "fact; " * (i % 5 + 1),
             "text": f"### Instruction {i}"} for i in range(n)]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def publish(hub, n_eval: int, n_alpaca: int) -> list[dict]:
    """Publish the three files on a HubServer as the card names them; returns the card's entries."""
    return [hub.publish("huggingface", "tatsu-lab/alpaca_eval", "main", "alpaca_eval_gpt4_baseline.json",
                        json.dumps(eval_set(n_eval), indent=2).encode(), "alpaca_eval_gpt4_baseline.json"),
            hub.publish("huggingface", "tatsu-lab/alpaca_eval", "main", "df_gamed.csv", df_gamed_csv(), "df_gamed.csv"),
            hub.publish("huggingface", "tatsu-lab/alpaca", "main", "data/train-00000-of-00001-a09b74b3ef9c3b56.parquet",
                        alpaca_parquet(n_alpaca), "alpaca_train.parquet")]
