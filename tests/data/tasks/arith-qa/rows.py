"""arith-qa's rows: GSM8K's official shape, read as the gsm8k card's `autorl-bench` protocol reads
it (train stays {question, answer}; held-out rows gain an id and a prompt), ids under this task's name."""

from autorl_tui.tasks.gsm8k.normalize import normalize_official


def normalize(raw: dict, index: int, split: str) -> dict:
    row = normalize_official(raw, index, split)
    if "id" in row:
        row["id"] = f"arith-qa-{split}-{index:05d}"
    return row
