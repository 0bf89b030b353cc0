"""The built-in `tiny-webshop` base model: `tiny`'s sibling sized for WebShop prompts.

`tiny` (tasks/arith/tiny_model.py) has a 512-token arithmetic BPE and 256 positions; a WebShop
results page (ten listings, their product ids, the available actions) is several hundred words.
This model can read one:

- Tokenizer: byte-level BPE (digits one per token, so any product id can be read and written),
  trained on text of the store's own kind: a catalog generated with a seed no split uses
  (titles, features, options), instructions for it, the prompt's fixed text and actions. No split
  goes in. Plus one token per short id (`b0` and two characters, a card's `id_chars: 2`; version
  3): the product is then clicked by copying one token off the page. ChatML chat template, eos
  `<|im_end|>`, left padding, like `tiny`.
- Model: Llama-style, hidden 128, 2 layers (0.8 M parameters with version 3's 3,204 tokens; version
  1 was hidden 192 x 4 layers, four times the FLOPs per token), 8,192 positions (version 5; 1,024
  before), fp32, randomly initialized and not pretrained: its WebShop baseline is the floor, and what
  it learns comes from the run's own post-training.
- Positions: the `webshop` card's AutoRL-Bench prompt (system message, rules, the available actions,
  5 pages of history, the page) is 1,400-2,100 tokens on the expert's episodes and up to 3,600 on a
  random walk through sub-pages (the official-format test catalog, whose titles, 62 characters on
  average, are shorter than Amazon's), plus 100 reply tokens: past 1,024, where the grader left the model no room to
  act. Rotary positions cost no parameters or compute (a prompt costs its own length whatever the
  limit), so 8,192 (the GPU placement's `max_model_len` cap) leaves room for the real catalog's longer
  pages (tests/unit/test_tiny_webshop_positions.py).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from autorl_tui.catalog.model_builds import CHAT_TEMPLATE, SPECIAL_TOKENS, build_atomically, save_untrained_llama

NAME = "tiny-webshop"
VERSION = "5"          # 5: 8,192 positions (AutoRL-Bench's WebShop prompt fits); 4: phrase tokens
VOCAB_SIZE = 2048
MAX_POSITIONS = 8192
HIDDEN, LAYERS, HEADS, KV_HEADS = 128, 2, 4, 2
TOKENIZER_SEED = 987_654     # the catalog seed of the tokenizer's corpus; the card uses others


def corpus() -> list[str]:
    from autorl_tui.tasks.webshop import catalog as C
    from autorl_tui.tasks.webshop import prompts

    products = C.generate_products(TOKENIZER_SEED, per_type=40)
    texts = [prompts.SYSTEM_PROMPT, prompts.INVALID_FEEDBACK,
             prompts.user_message("Instruction: x\n[Search]", ["search[x]"], ["search[...]"]),
             "[Back to Search] [< Prev] [Next >] Page 1 (Total results: 50) Price: $ Rating: "
             "[Description] [Features] [Reviews] [Buy Now] (selected: ) No products match your search."]
    for p in products:
        texts.append(f"[{p['asin']}] {p['title']} | ${p['price']:.2f} click[{p['asin'].lower()}]")
        texts += p["features"] + [p["description"]]
        texts += [f"{g}: " + " ".join(f"[{v}]" for v in vals) + " " + ", ".join(f"click[{v}]" for v in vals)
                  for g, vals in p["options"].items()]
    rng = random.Random(TOKENIZER_SEED)
    for g in C.make_goals(products, 2000, TOKENIZER_SEED, "tok"):
        texts.append(g["instruction"])
        texts.append(f"search[{g['instruction']}]".lower())
    rng.shuffle(texts)
    return texts


def short_id_tokens():
    """Every short product id ("b0" and two characters, `params.id_chars: 2`) as one token, as the
    prompt writes it (lower-case), matched only as a whole word: on such a card a product is clicked
    by copying one token off the page. Amazon-length ids (8 characters) are not affected."""
    from tokenizers import AddedToken

    from autorl_tui.tasks.webshop.catalog import ID_CHARS

    chars = ID_CHARS.lower()
    return [AddedToken(f"b0{a}{b}", single_word=True, normalized=False) for a in chars for b in chars]


def phrase_tokens():
    """Every product type, attribute and option value of the generated catalog's vocabulary (catalog.TYPES),
    lower-case as the instructions, the option lists and the click actions write them, as one token each
    (whole words only; the longest match wins, so `12 fl oz (pack of 2)` is one token and `pack of 2`
    another; values that are bare numbers, such as shoe sizes, keep their digit tokens). Choosing an
    option is then copying one token of the instruction that the page lists, and a query is a few
    tokens. A pretrained model reads such phrases as units; a model trained from scratch in minutes
    needs them handed over, as the short ids are (version 4)."""
    from tokenizers import AddedToken

    from autorl_tui.tasks.webshop.catalog import TYPES

    phrases = set()
    for name, spec in TYPES.items():
        phrases.add(name)
        phrases.update(spec["attrs"])
        for values in spec["options"].values():
            phrases.update(values)
    return [AddedToken(p, single_word=True, normalized=False) for p in sorted(phrases) if not p.isdigit()]


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_tokens(short_id_tokens())
    tok.add_tokens(phrase_tokens())
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>", bos_token=None, unk_token=None,
        additional_special_tokens=["<|endoftext|>", "<|im_start|>"], model_max_length=MAX_POSITIONS,
        padding_side="left", chat_template=CHAT_TEMPLATE)


def _build_into(folder: Path, seed: int) -> dict:
    started = time.time()
    return save_untrained_llama(folder, build_tokenizer(), name=NAME, version=VERSION, seed=seed,
                                shape=(HIDDEN, LAYERS, HEADS, KV_HEADS), max_positions=MAX_POSITIONS,
                                started=started)


def build(out_dir: Path | str, seed: int = 0, force: bool = False) -> Path:
    """Build `tiny-webshop` into `out_dir` unless it is already there (or `force`). Returns `out_dir`."""
    return build_atomically(out_dir, lambda tmp: _build_into(tmp, seed), force,
                            version=VERSION)
