"""The built-in `tiny-dsqa` base model, sized for DeepSearchQA turns.

`tiny` (512-token arithmetic BPE, 256 positions) cannot read a DeepSearchQA turn (rules, the
question, four tool results: 1,000-2,500 characters). This one can:

- Tokenizer: WordPiece, lower-cased. Whole words: the fixed text of the prompts, the tools' output
  and the article templates (names taken out), every two-syllable stem a generated name is built
  on and every document id up to D0999; word pieces: the syllables, suffixes and digits every
  generated name and number is made of (`Halgriora` = halgri ##ora, `Joss Tulo` = joss tulo,
  `[D0039]` = [ d0039 ], `1914` = 1 ##9 ##1 ##4). Built from the generator's word lists, never from
  a split, so nothing held out leaks. Version 1 had no stems nor ids: a name was 3-5 pieces, and a
  model trained from scratch within a test's budget did not learn to copy them.
- Model: Llama-style, hidden 192, 4 layers, 1,024 positions (a turn is 380 tokens median, 650 at most),
  randomly initialized, not pretrained:
  its baseline is the floor and every point comes from the run's own post-training.

Deterministic and atomic like `tiny` (catalog/model_builds.py).
"""

from __future__ import annotations

import re
import string
import time
from pathlib import Path

from autorl_tui.catalog.model_builds import CHAT_TEMPLATE, SPECIAL_TOKENS, build_atomically, save_untrained_llama

NAME = "tiny-dsqa"
VERSION = "2"
MAX_POSITIONS = 1024
HIDDEN, LAYERS, HEADS, KV_HEADS = 192, 4, 6, 3
UNK = "[UNK]"
WORD_RE = re.compile(r"\w+|[^\w\s]")


def _fixed_texts() -> tuple[list[str], set[str]]:
    """Texts of the prompts, tools and articles, and the words that are generated names."""
    from autorl_tui.tasks.deepsearchqa import corpus as C
    from autorl_tui.tasks.deepsearchqa import prompts as P
    from autorl_tui.tasks.deepsearchqa import env as E

    world = C.build_world(seed=987654)        # a world no card uses: only its template words are kept
    docs = C.build_corpus(world, seed=987654)
    fixed = {w.lower() for w in WORD_RE.findall(" ".join([*C.FIRST, *C.SUFFIX["company"], "Group International Trust New Minor Vale"]))}
    names = {w.lower() for e in world.entities.values() for w in WORD_RE.findall(e.name)} - fixed
    texts = [P.SYSTEM_PROMPT, P.INVALID_FEEDBACK, P.THOUGHT_FEEDBACK, "Question: Step of . Your action: "
             "earlier step(s) not shown No results for Empty query: write search[some words]. Bad page No document "
             "Use a document id from the search results, e.g. open[D0001]. has page(s). page of ; for more "
             "Answer recorded. think: unknown", *[d["text"] for d in docs], *C.NOISE,
             *[t for group in C.TEMPLATES.values() for t in group], " ".join(C.FIRST), " ".join(C.CURRENCIES),
             " ".join(C.INDUSTRIES), " ".join(C.SUFFIX["company"]), "Group International Trust New Minor Vale",
             E.__doc__ or "", string.punctuation,
             P.build_messages("Who?", [("search[a]", "b")] * 6, step=7, max_steps=12)[1]["content"]]
    return texts, names


def vocabulary() -> list[str]:
    from autorl_tui.tasks.deepsearchqa import corpus as C
    texts, names = _fixed_texts()
    words = {w.lower() for t in texts for w in WORD_RE.findall(t)}
    words = {w for w in words if w not in names and not w.isdigit()}
    pieces = {s for s in C.SYL} | {"ia", "land", "stan", "ora", "burg", "ton", "mouth", "holm", "son", "a", "er", "d", "w"}
    pieces |= {f.lower() for f in C.FIRST}
    digits = [str(i) for i in range(10)]
    out = set(words) | pieces | set(digits) | {f"##{p}" for p in pieces | set(digits)}
    # version 2: every two-syllable stem a name is built on (`tulo`, `kazan`) and every document id
    # up to D0999 (`d0039`) as one word, so that copying a name or an id out of the prompt is copying
    # one or two tokens (a person is `joss tulo`, a city `kazan ##ton`)
    out |= {a + b for a in C.SYL for b in C.SYL} | {f"d{i:04d}" for i in range(1000)}
    return sorted(out)


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + [UNK])}
    for word in vocabulary():
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=UNK, max_input_chars_per_word=64))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()     # words, and each punctuation mark alone
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>", bos_token=None, unk_token=UNK,
        additional_special_tokens=["<|endoftext|>", "<|im_start|>"], model_max_length=MAX_POSITIONS,
        padding_side="left", chat_template=CHAT_TEMPLATE)


def _build_into(folder: Path, seed: int) -> dict:
    started = time.time()
    return save_untrained_llama(folder, build_tokenizer(), name=NAME, version=VERSION, seed=seed,
                                shape=(HIDDEN, LAYERS, HEADS, KV_HEADS), max_positions=MAX_POSITIONS, max_new_tokens=48,
                                started=started)


def build(out_dir: Path | str, seed: int = 0, force: bool = False) -> Path:
    """The `tiny-dsqa` built-in model (registry kind `models`)."""
    return build_atomically(out_dir, lambda tmp: _build_into(tmp, seed), force)
