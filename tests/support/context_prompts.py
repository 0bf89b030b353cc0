"""Plain prompts of an exact token length, for the context-budget tests (grading/context_budget.py)."""


def prompt_of(tokenizer, n_tokens: int) -> str:
    """A plain prompt of exactly n_tokens tokens of `tokenizer` (no special tokens added)."""
    def length(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    text = ""
    while length(text) < n_tokens:
        text += "Tom has 3 apples. "
    while length(text) > n_tokens:
        text = text[:-1]
    if length(text) != n_tokens:
        raise AssertionError(f"no prompt of exactly {n_tokens} tokens from this tokenizer")
    return text
