"""The expert: a reader that searches for each hop with the fact it needs (`search[Joss Tulo born]`),
reads that fact off the snippet of the article titled exactly so (the search returns each hit's
sentence that best matches the query), and opens the article (every page) only when the snippet
does not hold it; the fact names the next hop, and the last one is the answer. It never looks at
the gold answer: what it answers is what it read through the tools, so its success checks the
corpus and the tool loop.

Snippets first because that is how a searcher reads (and it keeps episodes short: a two-hop
question takes three tool steps, where opening every article took five to seven); every fact a
question needs is one sentence of an article.

`expert_script(item)` is a generator: it yields action strings and is sent each action's tool
output. `ExpertPolicy` drives one script per question from the grader's prompts (standard library
only; the workspace gets a copy for its own rollouts).
"""

from __future__ import annotations

import re

_PERSON = {"born_in": re.compile(r"born in the city of (.+?) in \d{4}\.|\(born \d{4}\) is a person from (.+?)\."),
           "birth_year": re.compile(r"\(born (\d{4})\)"), "employer": re.compile(r"works for (.+?)\.")}
_COMPANY = {"founded_year": re.compile(r"was founded in (\d{4}) by"), "founder": re.compile(r"was founded in \d{4} by (.+?)\."),
            "headquarters": re.compile(r"company headquartered in (.+?)\."),
            "employees": re.compile(r"Notable employees of .+?: (.+?)\.")}
_CITY = {"country": re.compile(r"is a city in (.+?)\."), "population": re.compile(r"has a population of ([\d,]+)\."),
         "companies": re.compile(r"Companies headquartered in .+?: (.+?)\.")}
_COUNTRY = {"currency": re.compile(r"The currency of .+? is the (\w+)\.")}
# the words searched beside a name for each fact: the sentence holding the fact shares them
KEYWORDS = {"born_in": "born", "birth_year": "born", "employer": "works for", "founded_year": "founded",
            "founder": "founded", "headquarters": "headquartered", "employees": "notable employees",
            "country": "city", "population": "population", "companies": "headquartered", "currency": "currency"}
_HIT = re.compile(r"^\[(\S+)\] (.+?): (.*)$", re.M)
_MORE = re.compile(r"open\[(\S+?)#(\d+)\] for more")
_FOOTER = re.compile(r"\n\(page \d+ of \d+[^)]*\)$")


def _find(pattern: re.Pattern, text: str) -> str | None:
    m = pattern.search(text)
    return next((g for g in m.groups() if g), None) if m else None


def read(name: str, fact: str, pattern: re.Pattern):
    """The fact about `name`: search[name keywords]; the snippet of the hit titled exactly `name`
    when it holds the fact, else that article opened (every page). None when neither has it."""
    hits = yield f"search[{name} {KEYWORDS[fact]}]"
    hit = next(((doc, snip) for doc, title, snip in _HIT.findall(hits) if title == name), None)
    if hit is None:
        return None
    found = _find(pattern, hit[1])
    if found:
        return found
    page = yield f"open[{hit[0]}]"
    text = _FOOTER.sub("", page)
    more = _MORE.search(page)
    while more:
        page = yield f"open[{more.group(1)}#{more.group(2)}]"
        text += " " + _FOOTER.sub("", page)
        more = _MORE.search(page)
    return _find(pattern, text)


def expert_script(item: dict):
    qtype, subjects = item["question_type"], item["subjects"]
    x = subjects[0]
    answer = None
    if qtype == "founder_birth_country":
        founder = yield from read(x, "founder", _COMPANY["founder"])
        city = founder and (yield from read(founder, "born_in", _PERSON["born_in"]))
        answer = city and (yield from read(city, "country", _CITY["country"]))
    elif qtype == "employer_founded_year":
        employer = yield from read(x, "employer", _PERSON["employer"])
        answer = employer and (yield from read(employer, "founded_year", _COMPANY["founded_year"]))
    elif qtype == "hq_currency":
        city = yield from read(x, "headquarters", _COMPANY["headquarters"])
        country = city and (yield from read(city, "country", _CITY["country"]))
        answer = country and (yield from read(country, "currency", _COUNTRY["currency"]))
    elif qtype == "birth_city_population":
        city = yield from read(x, "born_in", _PERSON["born_in"])
        answer = city and (yield from read(city, "population", _CITY["population"]))
    elif qtype in ("older_company", "older_person"):
        fact, key = ("founded_year", _COMPANY["founded_year"]) if qtype == "older_company" else ("birth_year", _PERSON["birth_year"])
        years = []
        for name in subjects:
            years.append((yield from read(name, fact, key)))
        if all(years):
            answer = subjects[0] if int(years[0]) < int(years[1]) else subjects[1]
    elif qtype == "city_employees":
        listed = yield from read(x, "companies", _CITY["companies"])
        people = []
        for company in (listed or "").split(", "):
            if company:
                staff = yield from read(company, "employees", _COMPANY["employees"])
                people += (staff or "").split(", ")
        answer = "; ".join(p for p in people if p) or None
    yield f"answer[{answer or 'unknown'}]"


class ExpertPolicy:
    """Answers the grader's prompts with the expert's next action: one script per question, fed
    the tool output shown as the last step of each prompt. Step 1 (re)starts a question's script."""

    def __init__(self, items: list[dict]):
        self.items = {it["question"]: it for it in items}
        self.scripts: dict[str, object] = {}
        self.calls = 0

    @staticmethod
    def _parts(prompt) -> tuple[str, str | None, bool]:
        text = prompt if isinstance(prompt, str) else next(m["content"] for m in prompt if m["role"] == "user")
        question = text.split("Question: ", 1)[1].split("\n\n", 1)[0]
        blocks = text.split("\n\n> ")
        last = blocks[-1].split("\n", 1)[1].rsplit("\n\nStep ", 1)[0] if len(blocks) > 1 else None
        return question, last, bool(re.search(r"\n\nStep 1 of \d+\.", text))

    def next_action(self, prompt) -> str:
        question, last, first = self._parts(prompt)
        item = self.items.get(question)
        if item is None:
            return "answer[unknown]"
        try:
            if first or question not in self.scripts:
                self.scripts[question] = expert_script(item)
                return next(self.scripts[question])
            return self.scripts[question].send(last or "")
        except StopIteration:
            return "answer[unknown]"

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_tokens=64, stop=None):
        self.calls += 1
        from types import SimpleNamespace
        out = []
        for p in prompts:
            text = self.next_action(p)
            out.append([SimpleNamespace(text=text, tokens=len(text.split()), finish_reason="stop")] * n)
        return out


def write_sft_files(out_dir, questions: list[dict], docs: list[dict], options: dict, *, max_steps: int) -> dict:
    """Play the expert through the real tool loop on every question; write its steps as SFT data
    (only answered-right episodes) in the grader's prompt format. Returns counts."""
    import json
    from pathlib import Path

    from .api import run_episodes
    from .prompts import SYSTEM_PROMPT
    from .search import LocalIndex
    out_dir = Path(out_dir)
    policy = ExpertPolicy(questions)
    results = run_episodes(lambda ps: [o[0] for o in policy.generate(ps)], questions, backend=LocalIndex(docs),
                           max_steps=max_steps, history_len=int(options.get("history_len", 4)),
                           k=int(options.get("top_k", 5)), page_chars=int(options.get("page_chars", 400)))
    steps = 0
    with open(out_dir / "sft_chat.jsonl", "w") as chat, open(out_dir / "sft_prompt_completion.jsonl", "w") as pc, \
            open(out_dir / "expert_trajectories.jsonl", "w") as raw:
        for r in results:
            raw.write(json.dumps(r.to_dict()) + "\n")
            if not r.won:
                continue
            for s in r.trajectory:
                steps += 1
                prompt = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": s["prompt"]}]
                chat.write(json.dumps({"id": r.game_id, "step": s["step"],
                                       "messages": prompt + [{"role": "assistant", "content": s["raw_output"]}]}) + "\n")
                pc.write(json.dumps({"id": r.game_id, "step": s["step"], "prompt": prompt,
                                     "completion": [{"role": "assistant", "content": s["raw_output"]}]}) + "\n")
    return {"episodes": len(results), "won": sum(r.won for r in results), "steps": steps}
