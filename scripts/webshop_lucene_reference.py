"""Produce tests/data/webshop/text_env_reference.json by running WebShop itself: its pyserini (Lucene)
index and searcher, and its `WebAgentTextEnv(observation_mode="text", num_products=1000)` as
AutoRL-Bench builds it, over the official-format catalog of tests/data/webshop/official_small/.

Run it OUTSIDE the project, in a scratch environment holding WebShop's pins, against a checkout of
princeton-nlp/WebShop (64fa2a5) and a JDK 11 or newer (`java` on PATH; Debian 12's
openjdk-17-jdk-headless does):

    python -m venv /tmp/wsref && /tmp/wsref/bin/pip install --no-deps pyserini==0.17.0
    /tmp/wsref/bin/pip install pyjnius pandas 'beautifulsoup4==4.11.1' 'flask==2.2.5' 'Werkzeug==2.2.3' \\
        'gym==0.24.0' 'cleantext==1.1.4' 'rank_bm25==0.2.2' rich 'thefuzz==0.19.0' spacy tqdm numpy
    /tmp/wsref/bin/python scripts/webshop_lucene_reference.py /path/to/WebShop \\
        tests/data/webshop/official_small tests/data/webshop/text_env_reference.json \\
        /path/to/RD-Agent/rdagent/scenarios/rl/autorl_bench/benchmarks/webshop/eval.py

What it does, in a scratch copy of the checkout (the checkout is not changed):
1. places the three catalog files in `data/`, runs WebShop's `search_engine/convert_product_file_format.py`
   and indexes `resources_1k` exactly as `search_engine/run_indexing.sh` does (pyserini's
   IndexCollection: JsonCollection, DefaultLuceneDocumentGenerator, 1 thread, positions, docvectors, raw);
2. runs every query of `queries()` through `LuceneSearcher('indexes_1k').search(q, k=50)` (WebShop's
   call) and records (docid, score) per hit, and Anserini's analyzer's terms for probe strings;
3. builds `WebAgentTextEnv(observation_mode="text", num_products=1000)` after `random.seed(PRICE_SEED)`
   (WebShop draws prices of ranges and price bounds from the global random state while building it;
   the seed makes those draws the ones our environment makes with `random.Random(PRICE_SEED)`),
   records the first 100 goals (AutoRL-Bench's sessions 0-99) and plays scripted episodes, recording
   each step's observation, available actions, reward and done;
4. builds, with AutoRL-Bench's own `_format_available_actions` and `build_react_prompt` (read from its
   eval.py and executed; the rest of that module needs RD-Agent installed), the prompt its evaluator
   sends before each step of those episodes (history window 5), recorded with the episode.

pyserini 0.17's package imports its dense searchers (torch, transformers, faiss) and WebShop's text
environment imports torch for image features; neither is used by the Lucene path or text mode, so
those modules are replaced by empty stand-ins here. goal.py loads spaCy's `en_core_web_sm`; without
it a blank English pipeline stands in (recorded; it changes only the type reward of a purchase).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import random
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

PRICE_SEED = 0
SESSIONS = 100
STUBBED = ("torch", "transformers", "faiss", "onnxruntime", "nmslib", "lightgbm", "sentencepiece", "sklearn",
           "scipy", "tokenizers", "selenium")
PROBES = ["The Women's U.S.A. 12oz 1,000.5 size:large e-mail running runs café don't 5'11 ™ ® x_y ABC's",
          "★★★★★ ✔ ½ lb 12.5\" x 8.25\" 24/7 It’s you’ll “simply” — crème de la crème",
          "a.b.c. ab. 1.a a.1 a1.2b 12:00 3.5-inch #1 a&b a@b.com http://x.com/a ab''cd 1..2 _1_ a_1",
          "Customers' favorite TEAS teas tea's generalizations relational conditional rational valenci",
          "hopefully caresses ponies ties cats feed agreed plastered motoring sing conflated troubled sized hopping",
          "tanned falling hissing fizzed failing filing happy sky triplicate formative formalize electriciti "
          "electrical hopeful goodness revival allowance inference airliner gyroscopic adjustable defensible "
          "irritant replacement adjustment dependent adoption homologou communism activate angulariti homologous "
          "effective bowdlerize probate rate cease controll roll archaeology apology logi bli sensibility"]


class _Anything:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Anything()
    def __getattr__(self, name): return _Anything()
    def __mro_entries__(self, bases): return (object,)


class _Stub(types.ModuleType):
    __path__: list = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec): return _Stub(spec.name)
    def exec_module(self, module): pass


def load_spacy() -> str:
    import spacy
    try:
        spacy.load("en_core_web_sm")
        return "en_core_web_sm"
    except OSError:
        blank = spacy.blank("en")
        spacy.load = lambda *a, **k: blank
        return "blank English pipeline (en_core_web_sm not installed)"


def prepare(webshop: Path, catalog: Path, work: Path) -> Path:
    repo = work / "WebShop"
    shutil.copytree(webshop / "web_agent_site", repo / "web_agent_site")
    shutil.copytree(webshop / "search_engine", repo / "search_engine")
    (repo / "data").mkdir()
    for f in catalog.glob("*.json"):
        shutil.copy(f, repo / "data" / f.name)
    se = repo / "search_engine"
    for d in ("resources", "resources_100", "resources_1k", "resources_100k", "indexes"):
        (se / d).mkdir(exist_ok=True)
    code = ("import sys; sys.path.insert(0, %r); sys.argv = ['x']\n" % str(Path(__file__).resolve().parent)
            + "import webshop_lucene_reference as R; R.load_spacy(); sys.meta_path.insert(0, R._StubFinder())\n"
            + "exec(open('convert_product_file_format.py').read())\n")
    subprocess.run([sys.executable, "-c", code], cwd=se, check=True, stdout=subprocess.DEVNULL)
    code = ("import sys; sys.path.insert(0, %r)\n" % str(Path(__file__).resolve().parent)
            + "import webshop_lucene_reference as R; sys.meta_path.insert(0, R._StubFinder())\n"
            + "sys.argv = ['x', '--collection', 'JsonCollection', '--input', 'resources_1k', '--index', 'indexes_1k',"
            + " '--generator', 'DefaultLuceneDocumentGenerator', '--threads', '1', '--storePositions',"
            + " '--storeDocvectors', '--storeRaw']\n"
            + "import runpy; runpy.run_module('pyserini.index.lucene', run_name='__main__')\n")
    subprocess.run([sys.executable, "-c", code], cwd=se, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return repo


def queries(docs: list[dict]) -> list[str]:
    """Queries over the catalog: titles' words, type words with options and attributes, synthetic
    instructions, single words, repeated words, stop words only, unknown words, punctuation."""
    rng = random.Random(5)
    out = ["dark chocolate bar sea salt", "shampoo tea tree", "the of and", "chocolate chocolate bar", "x",
           "café crème", "women's running shoes size 8", "3.5 ounce pack of 6", "1,000 families", "u.s.a",
           "zzzz unknownword", "machine washable cotton t-shirt", "Award-Winning Formula™", "★", "size:large",
           "customers' favorite", "pack  |  pack", "gluten free", "keto", "NON GMO Organic"]
    for d in rng.sample(docs, 60):
        words = d["contents"].split()
        start = rng.randrange(max(1, len(words) - 6))
        out.append(" ".join(words[start:start + rng.randint(1, 6)]))
    for d in rng.sample(docs, 40):
        product = d["product"]
        parts = [product["query"]] + rng.sample(product.get("Attributes") or [], min(2, len(product.get("Attributes") or [])))
        for values in list((product.get("options") or {}).values())[:1]:
            parts.append(rng.choice(values))
        out.append(" ".join(parts))
    return out


def run_search(repo: Path, qs: list[str]) -> tuple[list[dict], list[dict]]:
    from pyserini.search.lucene import LuceneSearcher
    from pyserini.analysis import Analyzer, get_lucene_analyzer
    searcher = LuceneSearcher(str(repo / "search_engine" / "indexes_1k"))
    rankings = [{"query": q, "hits": [[h.docid, float(h.score)] for h in searcher.search(q, k=50)]} for q in qs]
    analyzer = Analyzer(get_lucene_analyzer())
    return rankings, [{"text": p, "terms": list(analyzer.analyze(p))} for p in PROBES]


def episode_scripts(env) -> list[tuple[int, list]]:
    """(session, actions) to play; an action is a string, or a callable picking one from the env."""
    def nth_product(n):
        def pick(e):
            listed = [c for c in e.get_available_actions()["clickables"] if c.startswith("b0")]
            return f"click[{listed[min(n, len(listed) - 1)]}]" if listed else "click[back to search]"
        return pick

    def goal_options(session):
        def pick(e):
            goal = e.server.goals[session]
            return [f"click[{v}]" for v in goal["goal_options"].values()]
        return pick

    scripts = []
    for s in range(0, 12):
        goal = env.server.goals[s]
        words = goal["instruction_text"].split(", and price")[0]
        scripts.append((s, [f"search[{words}]", nth_product(0), goal_options(s), "click[description]", "click[< prev]",
                            "click[features]", "click[< prev]", "click[reviews]", "click[< prev]", "click[buy now]"]))
    scripts.append((12, ["click[search]", "search[]", "choose[x]", "search[Throw  PILLOW cover]", "click[next >]",
                         "click[next >]", "click[< prev]", nth_product(3), "click[attributes]", "click[< prev]",
                         "click[next >]", "click[back to search]", "click[buy now]", "search[boho velvet]",
                         nth_product(1), "search[socks]", nth_product(0), "click[Buy Now]"]))
    scripts.append((13, ["search[x]", "click[b0zzzzzzzz]", "click[next >]", "click[next >]", "click[next >]",
                         "click[next >]", "click[next >]", "click[next >]", "click[< prev]", "click[back to search]",
                         "search[the of and]", "click[next >]", "search[unknownword]", "click[next >]"]))
    for s in (14, 57, 99):
        scripts.append((s, [f"search[{env.server.goals[s]['query']}]", nth_product(1), goal_options(s), "click[buy now]"]))
    return scripts


def autorl_bench_prompt_builder(eval_py: Path):
    """AutoRL-Bench's two prompt functions, executed from its eval.py."""
    import ast
    from typing import Callable, Dict, List, Tuple
    tree = ast.parse(eval_py.read_text())
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name in ("_format_available_actions", "build_react_prompt")]
    namespace = {"List": List, "Tuple": Tuple, "Dict": Dict, "Callable": Callable}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(eval_py), "exec"), namespace)
    return namespace["_format_available_actions"], namespace["build_react_prompt"]


def autorl_bench_system_message(eval_py: Path) -> str:
    """The chat system message of AutoRL-Bench's api backend (`system_msg` in its create_llm_fn)."""
    import ast
    for node in ast.walk(ast.parse(eval_py.read_text())):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "system_msg" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"no system_msg in {eval_py}")


def add_prompts(episode: dict, eval_py: Path) -> None:
    """The prompt AutoRL-Bench's webshop_run builds before each step of the episode."""
    fmt, build = autorl_bench_prompt_builder(eval_py)
    history, prompts = [], []
    for before, after in zip(episode["steps"], episode["steps"][1:]):
        prompts.append(build(episode["instruction"], history, before["observation"],
                             available_actions=fmt(before["available"]), history_window=5))
        history.append((after["action"], after["observation"]))
    episode["autorl_bench_prompts"] = prompts


def play(env, session: int, actions: list) -> dict:
    obs, _ = env.reset(session=session)
    instruction = env.get_instruction_text()
    steps = [{"action": None, "observation": obs, "available": env.get_available_actions(), "reward": 0, "done": False}]
    queue = list(actions)
    played = []
    while queue:
        a = queue.pop(0)
        if callable(a):
            a = a(env)
            if isinstance(a, list):
                queue = a + queue
                continue
        played.append(a)
        obs, reward, done, _ = env.step(a)
        steps.append({"action": a, "observation": obs, "available": env.get_available_actions(), "reward": reward,
                      "done": done})
    return {"session": session, "instruction": instruction, "actions": played, "steps": steps}


def main(webshop: str, catalog: str, out: str, eval_py: str | None = None) -> None:
    parser = load_spacy()
    sys.meta_path.insert(0, _StubFinder())
    with tempfile.TemporaryDirectory() as tmp:
        repo = prepare(Path(webshop).resolve(), Path(catalog).resolve(), Path(tmp))
        docs = [json.loads(x) for x in (repo / "search_engine/resources_1k/documents.jsonl").read_text().splitlines()]
        rankings, probes = run_search(repo, queries(docs))
        sys.path.insert(0, str(repo))
        from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv
        random.seed(PRICE_SEED)
        env = WebAgentTextEnv(observation_mode="text", num_products=1000)
        goals = [{k: g[k] for k in ("asin", "instruction_text", "attributes", "goal_options", "price_upper")}
                 for g in env.server.goals[:SESSIONS]]
        prices = {a: p for a, p in env.server.product_prices.items()}
        episodes = [play(env, s, acts) for s, acts in episode_scripts(env)]
        for episode in episodes[:4] if eval_py else []:
            add_prompts(episode, Path(eval_py))
    doc = {"produced_with": {"pyserini": "0.17.0 (Anserini 0.14.3, Lucene 8.11.0)", "spacy": parser,
                             "price_seed": PRICE_SEED, "webshop": "princeton-nlp/WebShop 64fa2a5"},
           "n_goals": len(env.server.goals), "goals": goals, "prices": prices, "rankings": rankings,
           "analyzer": probes, "episodes": episodes,
           "autorl_bench_system": autorl_bench_system_message(Path(eval_py)) if eval_py else None}
    Path(out).write_text(json.dumps(doc, ensure_ascii=False, indent=0) + "\n")
    print(f"{len(rankings)} rankings, {len(episodes)} episodes, {len(goals)} goals written to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
