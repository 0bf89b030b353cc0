"""Shared helpers of the reference pipeline: train data, answer checking, saving."""
import json
import os
import random
import re
import sys

ANSWER_RE = re.compile(r"####\s*(-?[\d,]*\.?\d+)")


def setup_threads():
    import warnings

    import datasets
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(int(os.environ.get("PIPELINE_THREADS", "2")))
    datasets.disable_progress_bars()          # keep the agent log readable
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)


def trainer_device():
    """Where the trainers run: the run's GPU when it has one (the harness sets CUDA_VISIBLE_DEVICES
    to the run's GPUs), in bf16 mixed precision where the card supports it; else the CPU.
    Returns (TrainingArguments fields, a label for the stage's summary line)."""
    import torch

    if torch.cuda.is_available():
        bf16 = bool(torch.cuda.is_bf16_supported())
        label = f"cuda:{torch.cuda.current_device()} {torch.cuda.get_device_name()}" + (" bf16" if bf16 else " fp32")
        return {"use_cpu": False, "bf16": bf16}, label
    if os.environ.get("CUDA_VISIBLE_DEVICES", "").strip():
        print(f"warning: the run has GPU(s) (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}) but torch "
              f"sees none (torch {torch.__version__}, CUDA build {torch.version.cuda}): training on the CPU",
              file=sys.stderr, flush=True)
    return {"use_cpu": True, "bf16": False}, "cpu"


def load_train(path):
    if os.path.isdir(path):
        path = os.path.join(path, "train.jsonl")
    with open(path) as fh:
        return [as_item(json.loads(line)) for line in fh if line.strip()]


def as_item(row):
    """A benchmark's own row shape (GSM8K: {question, answer: "...#### N"}) as the pipeline's
    {prompt, answer: N, solution}; rows already in that shape unchanged."""
    if "prompt" in row or "question" not in row:
        return row
    solution = str(row.get("answer", ""))
    final = ANSWER_RE.findall(solution)
    return {**row, "prompt": row["question"], "solution": solution,
            "answer": final[-1].replace(",", "") if final else solution}


def final_answer(text):
    m = ANSWER_RE.findall(text or "")
    if not m:
        return None
    value = m[-1].replace(",", "")
    try:
        return float(value)
    except ValueError:
        return None


def is_correct(text, answer):
    got = final_answer(text)
    try:
        return got is not None and abs(got - float(str(answer).replace(",", ""))) < 1e-6
    except ValueError:
        return False


def chat(question):
    return [{"role": "user", "content": question}]


def demonstration(item, rng, teacher_share):
    """The SFT target: the cheap teacher's worked solution with probability `teacher_share`, else the
    reference solution. The teacher is imperfect on purpose; RL on the final answers fixes it later."""
    teacher, gold = item.get("teacher_solution"), item.get("solution")
    if teacher and (gold is None or rng.random() < teacher_share):
        return teacher
    return gold or f"#### {item['answer']}"


def sft_dataset(items, seed, teacher_share):
    from datasets import Dataset

    rng = random.Random(seed)
    return Dataset.from_list([{"prompt": chat(x["prompt"]),
                               "completion": [{"role": "assistant", "content": demonstration(x, rng, teacher_share)}]}
                              for x in items])


def rl_dataset(items):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": chat(x["prompt"]), "answer": str(x["answer"])} for x in items])


def exact_match_reward(completions, answer, **kwargs):
    """1.0 when the completion's `#### N` equals the gold answer, else 0.0."""
    texts = [c[-1]["content"] if isinstance(c, list) and c else (c if isinstance(c, str) else "") for c in completions]
    return [1.0 if is_correct(t, a) else 0.0 for t, a in zip(texts, answer)]


def lora_config(r):
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.0, task_type="CAUSAL_LM", target_modules="all-linear")


def save_full_model(trainer, tokenizer, out_dir, lora):
    """Save a full (merged) model + tokenizer: the grading API refuses LoRA-only folders."""
    model = trainer.model
    if lora:
        model = model.merge_and_unload()
    tmp = out_dir.rstrip("/") + ".partial"
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    os.replace(tmp, out_dir)


def make_generate(model_path, max_new_tokens=24):
    """A greedy batched `generate(chat prompts) -> replies` over a saved model, as the grader plays."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    model.eval()

    def generate(prompts):
        texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        return [tok.decode(row[enc["input_ids"].shape[1]:], skip_special_tokens=True) for row in out]

    return generate
