"""The built-in `tiny-dsqa` base model, sized for DeepSearchQA turns.

`tiny` (512-token arithmetic BPE, 256 positions) cannot read a DeepSearchQA turn (rules, the
question, four tool results: 1,000-2,500 characters). This one can:

- Tokenizer: WordPiece, case-preserving. Whole words: the fixed text of the prompts (the harness's
  and AutoRL-Bench's ReAct loop's), the tools' output and the article templates (names taken out),
  every two-syllable stem a generated name is built on and every document id up to D0999, each
  lower-case and capitalized; word pieces: the syllables, suffixes and digits every generated name
  and number is made of, and every ASCII letter, digit and punctuation mark, so any ASCII word can
  be spelled (`Halgriora` = Halgri ##ora, `Joss Tulo` = Joss Tulo, `[D0039]` = [ D0039 ##],
  `1914` = 1 ##9 ##1 ##4). Built from the generator's word lists and the prompts, never from a
  split, so nothing held out leaks. Version 1 had no stems nor ids: a name was 3-5 pieces, and a
  model trained from scratch within a test's budget did not learn to copy them. Version 3 keeps
  case and glues punctuation to the word before it (a pre-token is a word with the punctuation
  that follows it, `##:`), so the model can write the ReAct loop's `Action: search[...]`
  (version 2 lower-cased and spaced its output: `action : search [`, which the loop never reads).
  Decoding puts one space between words and none before glued punctuation; whitespace runs and
  line breaks are not kept (`search[Joss Tulo]` decodes as `search[ Joss Tulo]`, which the loops
  read alike).
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
VERSION = "3"     # 3: case-preserving, punctuation glued (ReAct syntax)
MAX_POSITIONS = 1024
HIDDEN, LAYERS, HEADS, KV_HEADS = 192, 4, 6, 3
UNK = "[UNK]"
WORD_RE = re.compile(r"\w+|[^\w\s]")
# a pre-token: a word (inner apostrophes, commas, points and hyphens between word characters kept: `don't`,
# `1,914`) with the punctuation glued after it, or a run of punctuation after a space
PRE_TOKEN = r"\w+(?:['’.,-]\w+)*[^\w\s]*|[^\w\s]+"


def _fixed_texts() -> tuple[list[str], set[str]]:
    """Texts of the prompts, tools and articles, and the words that are generated names."""
    from autorl_tui.tasks.deepsearchqa import corpus as C
    from autorl_tui.tasks.deepsearchqa import prompts as P
    from autorl_tui.tasks.deepsearchqa import tool_loop as E
    from autorl_tui.tasks.deepsearchqa import react as R

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
             P.build_messages("Who?", [("search[a]", "b")] * 6, step=7, max_steps=12)[1]["content"],
             # AutoRL-Bench's ReAct loop (react.py): its prompt, feedback and the words a thought needs
             R.first_prompt("Who?", "Single Answer"), "Set Answer", R.RETRY, R.NO_ANSWER, E.PLACEHOLDER_FEEDBACK,
             "Observation: No results found. Search error: I know the answer to this question. I need to search "
             "for more information about it first. The answer is"]
    return texts, names


def vocabulary() -> list[str]:
    from autorl_tui.tasks.deepsearchqa import corpus as C
    texts, names = _fixed_texts()
    cased = {w for t in texts for w in WORD_RE.findall(t) if w.lower() not in names and not w.isdigit()}
    words = {w.lower() for w in cased}
    pieces = {s for s in C.SYL} | {"ia", "land", "stan", "ora", "burg", "ton", "mouth", "holm", "son", "a", "er", "d", "w"}
    pieces |= {f.lower() for f in C.FIRST}
    digits = [str(i) for i in range(10)]
    out = set(words) | pieces | set(digits) | {f"##{p}" for p in pieces | set(digits)}
    # version 2: every two-syllable stem a name is built on (`tulo`, `kazan`) and every document id
    # up to D0999 (`d0039`) as one word, so that copying a name or an id out of the prompt is copying
    # one or two tokens (a person is `joss tulo`, a city `kazan ##ton`)
    out |= {a + b for a in C.SYL for b in C.SYL} | {f"d{i:04d}" for i in range(1000)}
    # version 3: case kept (every word also capitalized, and as the texts write it: `Joss Tulo`,
    # `[D0039]`, `Action`), every ASCII letter, digit and punctuation mark alone and as a piece
    # (any ASCII word can be spelled; `Action:` is Action ##:)
    out |= {w[:1].upper() + w[1:] for w in out if not w.startswith("##")} | cased
    chars = set(string.ascii_letters + string.digits + string.punctuation + "’")
    out |= chars | {f"##{c}" for c in chars}
    return sorted(out)


def build_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + [UNK])}
    for word in vocabulary():
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=UNK, max_input_chars_per_word=64))
    tok.normalizer = normalizers.NFC()
    # words with the punctuation glued after them; whitespace separates pre-tokens and is dropped
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Split(Regex(PRE_TOKEN), behavior="isolated")])
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
    return build_atomically(out_dir, lambda tmp: _build_into(tmp, seed), force,
                            version=VERSION)
