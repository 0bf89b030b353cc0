"""The built-in `tiny-alfworld` base model: `tiny`'s sibling sized for ALFWorld prompts.

`tiny` (tasks/arith/tiny_model.py) has a 512-token BPE vocabulary learned from arithmetic text and 256
positions; an ALFWorld turn (rules, room, the last steps, the available commands) is 300-450
words, about 1,500 of its tokens, so it cannot even read one. This model can:

- Tokenizer: word level, lower-cased, one token per word, number and punctuation mark. The
  vocabulary is the text of the ALFWorld engine itself, read from the installed `alfworld`
  package (the `alfred.twl2` grammar that writes every observation, the `alfred.pddl` domain, the
  goal templates, the object and receptacle classes), numbers 0-99 and the prompt's fixed text (prompts.py). Nothing
  of any game split goes in, so the held-out rooms cannot leak through it. An ALFWorld turn is
  about 400 tokens. ChatML chat template, eos `<|im_end|>`, left padding, like `tiny`.
- Model: a Llama-style config of about 1.8 M parameters (hidden 192, 4 layers), 1024 positions,
  fp32, randomly initialized and not pretrained: its ALFWorld baseline is the floor (0%), and
  everything it learns comes from the run's own post-training.

Deterministic and atomic like `tiny`.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from autorl_tui.exitcodes import UsageError
from autorl_tui.catalog.model_builds import CHAT_TEMPLATE, SPECIAL_TOKENS, build_atomically, save_untrained_llama

NAME = "tiny-alfworld"
VERSION = "1"
MAX_POSITIONS = 1024
HIDDEN, LAYERS, HEADS, KV_HEADS = 192, 4, 6, 3
UNK = "<unk>"
WORD_RE = re.compile(r"\w+|[^\w\s]")


class AlfworldMissing(RuntimeError):
    pass


def _alfworld_sources() -> list[str]:
    try:
        import alfworld
        from alfworld.gen import constants as C
    except ImportError as exc:
        raise AlfworldMissing(
            "building tiny-alfworld needs the alfworld package (its vocabulary is the engine's text): "
            "install the project's `tasks` extra, e.g. `pip install -e '.[tasks]'`") from exc
    data = Path(alfworld.__file__).resolve().parent / "data"
    texts = [(data / name).read_text() for name in ("alfred.twl2", "alfred.pddl")]
    texts += [" ".join(C.OBJECTS), " ".join(C.RECEPTACLES), " ".join(getattr(C, "OBJECTS_PLURAL", []))]
    import alfworld.gen.goal_library as goals

    texts += [t for g in goals.gdict.values() for t in g["templates"]]
    return texts


def _prompt_sources() -> list[str]:
    from autorl_tui.tasks.alfworld import prompts

    texts = [prompts.SYSTEM_PROMPT, prompts.THOUGHT_FEEDBACK, prompts.INVALID_FEEDBACK, *prompts.FEW_SHOT.values(),
             prompts.user_message("You are in the middle of a room. Looking quickly around you, you see nothing.",
                                  [("look", "")] * 7, ["look"], history_len=5)]
    return texts


def vocabulary() -> list[str]:
    """Sorted words of the engine's and the prompt's text (split like the tokenizer splits)."""
    words: set[str] = set()
    for text in _alfworld_sources() + _prompt_sources():
        words.update(w.lower() for w in WORD_RE.findall(text))
    words.update(str(i) for i in range(100))
    return sorted(words)


def build_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + [UNK])}
    for word in vocabulary():
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()     # \w+|[^\w\s]+, as WORD_RE
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>", bos_token=None, unk_token=UNK,
        additional_special_tokens=["<|endoftext|>", "<|im_start|>"], model_max_length=MAX_POSITIONS,
        padding_side="left", chat_template=CHAT_TEMPLATE)


def _build_into(folder: Path, seed: int) -> dict:
    started = time.time()
    return save_untrained_llama(folder, build_tokenizer(), name=NAME, version=VERSION, seed=seed,
                                shape=(HIDDEN, LAYERS, HEADS, KV_HEADS), max_positions=MAX_POSITIONS,
                                started=started)


def build_tiny_alfworld_model(out_dir: Path | str, seed: int = 0, force: bool = False) -> Path:
    """Build `tiny-alfworld` into `out_dir` unless it is already there (or `force`). Returns `out_dir`."""
    return build_atomically(out_dir, lambda tmp: _build_into(tmp, seed), force,
                            version=VERSION)


def build(out_dir: Path | str, seed: int = 0, force: bool = False) -> Path:
    """The `tiny-alfworld` built-in model (registry kind `models`): a missing ALFWorld is a usage
    error saying what to install."""
    try:
        return build_tiny_alfworld_model(out_dir, seed=seed, force=force)
    except AlfworldMissing as exc:
        raise UsageError(str(exc)) from exc
