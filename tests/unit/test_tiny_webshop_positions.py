"""`tiny-webshop` has room to act under the prompt its `webshop` card ships: the longest AutoRL-Bench
WebShop prompt the grader builds (react_prompt.py: the system message, the rules, the available
actions, the last 5 pages and actions, the page), rendered by the model's own chat template and
tokenized as the grader tokenizes it, plus the protocol's reply budget (100 tokens), fits the model's
positions. The grader gives a prompt only the positions left over (grading/inference.py), so with 1,024
positions these prompts (1,400-2,100 tokens) left the model no reply at all.

Measured over two kinds of episodes on the official-format test catalog (tests/data/webshop/official_small/,
the card's environment): the expert's on sessions 0-99 (the card's test split; what a trained agent
imitates), and a seeded random walk over each page's available actions (an untrained model's: result
pages past the first, description, features and review pages, whose text the history repeats)."""

import random

import pytest

from autorl_tui.catalog.tasks import load_task_card
from autorl_tui.tasks.webshop import api, tiny_model
from autorl_tui.tasks.webshop.experts import expert_generate
from autorl_tui.tasks.webshop.react_prompt import read_prompt
from autorl_tui.tasks.webshop.webagent import WebShopText
from tests.support.harness import REPO

pytestmark = pytest.mark.slow      # the tokenizer is trained (3 s) and 120 episodes are played (10-20 s)

CARD = REPO / "autorl_tui" / "tasks" / "webshop" / "task.yaml"
OFFICIAL = REPO / "tests" / "data" / "webshop" / "official_small"


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_model.build_tokenizer()


@pytest.fixture(scope="module")
def shop():
    return WebShopText.from_folder(OFFICIAL)


def random_walk(seed: int):
    """A `generate` that picks one of the page's available actions at random (a search names the
    instruction's words)."""
    rng = random.Random(seed)

    def generate(prompts):
        replies = []
        for messages in prompts:
            page, _, admissible = read_prompt(messages[-1]["content"])
            action = rng.choice(admissible)
            if action == "search[<your query>]":
                action = f"search[{page.split(' [SEP] ')[2]}]"
            replies.append(action)
        return replies
    return generate


def prompt_lengths(tokenizer, shop, monkeypatch, policy, sessions: int) -> list[int]:
    """The token count of every prompt the grader's runner sends while `policy` plays the sessions
    under the card's protocol (50 steps, AutoRL-Bench's prompt, its history of 5)."""
    card = load_task_card(CARD)
    monkeypatch.setattr(api, "shop_at", lambda *a, **k: shop)
    lengths: list[int] = []

    def counted(prompts):
        for messages in prompts:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            lengths.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
        return policy(prompts)

    items = [{"id": f"session-{i}", "session": i, "shop": "x"} for i in range(sessions)]
    api.run_episodes(counted, items, max_steps=card.protocol.max_steps, batch_size=card.protocol.batch_size,
                     history_len=card.scorer_options["history_len"], prompt=card.scorer_options["prompt"])
    return lengths


def test_the_longest_autorl_bench_prompt_and_its_reply_fit_tiny_webshop(tokenizer, shop, monkeypatch):
    budget = load_task_card(CARD).protocol.max_tokens
    assert budget == 100 and tokenizer.model_max_length == tiny_model.MAX_POSITIONS
    expert = prompt_lengths(tokenizer, shop, monkeypatch, expert_generate, 100)
    walk = prompt_lengths(tokenizer, shop, monkeypatch, random_walk(0), 20)
    assert len(expert) > 300 and len(walk) > 300          # steps of many pages each (the expert: 4-5 an episode)
    # the old 1,024 positions left no room: most prompts were longer than that on their own
    assert sorted(expert)[len(expert) // 2] > 1024
    longest = max(expert + walk)
    assert longest + budget <= tiny_model.MAX_POSITIONS, (max(expert), max(walk), tiny_model.MAX_POSITIONS)
    print(f"expert: {len(expert)} prompts, longest {max(expert)}; random walk: {len(walk)}, longest {max(walk)}")
