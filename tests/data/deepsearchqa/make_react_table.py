"""Writes react_reference.json: AutoRL-Bench's own DeepSearchQA ReAct loop run on scripted model
outputs (how tests/unit/test_deepsearchqa_react.py's reference table was made; not run by the tests).

    python tests/data/deepsearchqa/make_react_table.py RD_AGENT_CHECKOUT > tests/data/deepsearchqa/react_reference.json

RD_AGENT_CHECKOUT: a checkout of microsoft/RD-Agent (the table: commit 471eb30). Its
`benchmarks/deepsearchqa/eval.py` is loaded as it is; only what it imports and cannot have here is
stood in for: `rdagent.log`'s logger, `core.evaluator.BaseEvaluator` (an empty base class), the LLM
judge (`rdagent.oai.llm_utils.APIBackend` raises, so its `_string_match` fallback decides, as with no
judge) and vLLM: `SamplingParams` keeps its arguments and the LLM answers each `generate` call with
the case's next scripted output, cut at the first of the call's stop strings as vLLM cuts it. The
search tool answers `Abstract about <query>.` (what its DuckDuckGo tool returns for a reply whose
AbstractText is that text). Per case the table holds every call (prompt, stop, max_tokens, the
scripted output), the searches, the predicted answer and the fallback verdict.
"""

import importlib.util
import json
import sys
import types
from pathlib import Path

BENCH = "rdagent/scenarios/rl/autorl_bench/benchmarks/deepsearchqa"
# (question, answer type, gold, the model's outputs in call order)
CASES = [
    ("Which city hosts the Eiffel Tower?", "Single Answer", "Paris",
     [" I should look it up. Action: search[Eiffel Tower city]\nObservation: made up",
      " The abstract names it. Action: answer[Paris]"]),
    ("Which city hosts the Louvre?", "Single Answer", "Paris",
     ["I will search for it.\nAction: search[Louvre city]", "Paris] trailing words"]),
    ("Name the capital of Italy.", "Single Answer", "Rome",
     ["Action: answer[your final answer]", "I know it now. Action: answer[ Rome ]"]),
    ("Name the capital of Spain.", "Single Answer", "Madrid",
     ["no action here", "your final answer]", " Still thinking. Action: search[Spain capital]",
      "Found it. Action: answer[Madrid]"]),
    ("Which rivers cross Paris and Lyon?", "Set Answer", "Seine, Rhone, Saone",
     [f"Step {i}. Action: search[river {i}] then later Action: answer[Seine, Rhone{', Saone' if i == 4 else ''}]"
      for i in range(6)]),
    ("Which planets have rings?", "Set Answer", "Saturn, Jupiter, Uranus, Neptune",
     [f"Searching more. Action: search[planet rings {i}]" for i in range(6)]),
    ("Who wrote Hamlet?", "Single Answer", "William Shakespeare",
     ["thinking\naction: search[hamlet author]", "Shakespeare"]),
    ("Which colours are on the French flag?", "Set Answer", "Blue, White, Red",
     ["I recall it. Action: answer[Blue,\nWhite and Red]"]),
    ("What is the capital of Peru?", "Single Answer", "Lima",
     ["Action: answer[] Lima]"]),
    ("What is the capital of Chile?", "Single Answer", "Santiago",
     ["", "]"]),
    ("Which companies did Ada Lovelace found?", "Set Answer", "None",
     ["Let me check. Action: search[Ada Lovelace companies]\nThought: nothing\nAction: answer[x]",
      "Action: Search[again]", "your final answer"]),
    ("How many moons has Mars?", "Single Answer", "2",
     ["Action:search[Mars moons]", "Action: answer[two]\nThought: done", ]),
]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def stand_ins():
    class Logger:
        def info(self, *a, **k):
            pass
        warning = info

    for name in ("rdagent", "rdagent.scenarios", "rdagent.scenarios.rl", "rdagent.scenarios.rl.autorl_bench",
                 "rdagent.scenarios.rl.autorl_bench.benchmarks", "rdagent.scenarios.rl.autorl_bench.core",
                 "rdagent.oai"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["rdagent.log"] = types.SimpleNamespace(rdagent_logger=Logger())
    sys.modules["rdagent.scenarios.rl.autorl_bench.core.evaluator"] = types.SimpleNamespace(BaseEvaluator=object)

    class APIBackend:
        def build_messages_and_create_chat_completion(self, **kw):
            raise RuntimeError("no judge")
    sys.modules["rdagent.oai.llm_utils"] = types.SimpleNamespace(APIBackend=APIBackend)

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw
    sys.modules["vllm"] = types.SimpleNamespace(SamplingParams=SamplingParams, LLM=object)
    return SamplingParams


class ScriptedLLM:
    def __init__(self, outputs):
        self.outputs = list(outputs)
        self.calls = []

    def generate(self, prompts, params):
        (prompt,) = prompts
        raw = self.outputs.pop(0) if self.outputs else ""
        stops = [s for s in params.kw.get("stop") or [] if raw.find(s) >= 0]
        text = raw[:min(raw.find(s) for s in stops)] if stops else raw
        self.calls.append({"prompt": prompt, "stop": params.kw.get("stop"), "max_tokens": params.kw.get("max_tokens"),
                           "output": raw})
        return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=text)])]


def main(checkout: Path) -> None:
    sampling = stand_ins()
    load(checkout / BENCH / "data.py", "rdagent.scenarios.rl.autorl_bench.benchmarks.deepsearchqa.data")
    ev = load(checkout / BENCH / "eval.py", "rdagent.scenarios.rl.autorl_bench.benchmarks.deepsearchqa.eval")
    evaluator = ev.DeepSearchQAEvaluator.__new__(ev.DeepSearchQAEvaluator)
    evaluator.eval_config = {}
    # as run_eval builds them
    params = sampling(temperature=0.0, max_tokens=256, stop=["\nAction:", "\nThought:", "\nObservation:"])
    rows = []
    for question, answer_type, gold, outputs in CASES:
        llm, searches = ScriptedLLM(outputs), []

        def search(q, searches=searches):
            searches.append(q)
            return f"Abstract about {q}."
        predicted = evaluator._react_loop(llm, params, search, question, answer_type)
        rows.append({"question": question, "answer_type": answer_type, "gold": gold, "outputs": outputs,
                     "calls": llm.calls, "searches": searches, "predicted": predicted,
                     "verdict": evaluator._judge_answer(predicted, gold, answer_type)})
    json.dump({"source": "microsoft/RD-Agent " + BENCH + "/eval.py (_react_loop, _judge_answer -> _string_match)",
               "cases": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
