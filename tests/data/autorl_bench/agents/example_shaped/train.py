"""GRPO on the task's train rows as GSM8K lays them out ({question, answer}), then one
submission: what AutoRL-Bench's example_agent does, at the tests' size (written for the harness's
tests; a few steps on CPU, no saving during training, no reporting)."""

import json
import os
import re

import requests
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer


def number(text):
    found = re.findall(r"-?\d[\d,]*\.?\d*", str(text))
    return float(found[-1].replace(",", "")) if found else None


def reward(completions, answer, **kwargs):
    return [1.0 if number(c) is not None and number(c) == number(a) else -1.0 for c, a in zip(completions, answer)]


rows = []
with open(os.path.join(os.environ["DATA_PATH"], "train.jsonl")) as fh:
    for line in fh:
        item = json.loads(line)
        rows.append({"prompt": f"Question: {item['question']}\n\nSolution:", "answer": item["answer"]})
out = os.path.join(os.environ["OUTPUT_DIR"], "grpo")
config = GRPOConfig(output_dir=out, max_steps=int(os.environ.get("TRAIN_STEPS", "4")), per_device_train_batch_size=4,
                    num_generations=4, max_completion_length=16, logging_steps=1, save_strategy="no",
                    report_to="none", use_cpu=True, bf16=False, gradient_checkpointing=False)
trainer = GRPOTrainer(model=os.environ["MODEL_PATH"], reward_funcs=reward, args=config,
                      train_dataset=Dataset.from_list(rows[:64]))
trainer.train()
trainer.save_model(out)
result = requests.post(f"{os.environ['GRADING_SERVER_URL']}/submit", json={"model_path": out}, timeout=600).json()
print(f"Score: {result.get('score')}")
