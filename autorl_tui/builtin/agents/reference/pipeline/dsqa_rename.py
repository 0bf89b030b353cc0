"""Renamed copies of the DeepSearchQA expert steps, so that a model trained from scratch learns to
copy names and document ids out of its prompt instead of memorizing them.

Trained on the shipped steps alone, a small model learns the train questions' answers by heart: its
first action on any question is `search[<a train name>]` and held-out questions get nothing. In a
renamed copy every entity name (the corpus titles) and every document id the example mentions is
mapped, consistently across the prompt and the action, to another title of the same shape (same
number of words, same last word when it is a company suffix) and to another id: the action is then
right only when it is read off the prompt, which is what a held-out question needs.

Reads the train split's sft_prompt_completion.jsonl and corpus.jsonl (titles only); writes the
copies (not the originals) to --out as prompt/completion jsonl.
"""
import argparse
import json
import random
import re

DOC_ID = re.compile(r"\b[Dd](\d{4})\b")


def load_jsonl(path):
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def renamer(titles):
    """A function (example, rng) -> renamed example over these titles. A title's shape: its number
    of words and its first and last words when several titles share them (a first name, `New`, a
    company suffix such as `Works`), so a company is renamed to a company and a person to a person."""
    multi = [t.split() for t in titles if len(t.split()) > 1]
    firsts, lasts = [w[0] for w in multi], [w[-1] for w in multi]
    shared_first = {w for w in firsts if firsts.count(w) >= 3}
    shared_last = {w for w in lasts if lasts.count(w) >= 3}

    def shape(title):
        words = title.split()
        if len(words) == 1:
            return (1, "", "")
        first = "New" if words[0] == "New" else "first name" if words[0] in shared_first else ""
        return len(words), first, words[-1] if words[-1] in shared_last else ""

    by_shape: dict = {}
    for t in titles:
        by_shape.setdefault(shape(t), []).append(t)
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, titles), key=len, reverse=True)) + r")\b", re.IGNORECASE)
    canon = {t.lower(): t for t in titles}
    # new ids from a range the size of the corpus's own (D0000-D0999 for a few hundred articles): a renamed
    # id reads like a real one, in the same tokens
    n_ids = min(10000, max(1000, 2 * len(titles)))

    def rename(row, rng):
        texts = [m["content"] for m in row["prompt"]] + [row["completion"][0]["content"]]
        joined = "\n".join(texts)
        names = sorted({canon[m.lower()] for m in pattern.findall(joined)})
        mapping, used = {}, set()
        for name in names:
            pool = [t for t in by_shape[shape(name)] if t not in used and t != name] or by_shape[shape(name)]
            mapping[name.lower()] = rng.choice(pool)
            used.add(mapping[name.lower()])
        ids = sorted(set(DOC_ID.findall(joined)))
        new_ids = rng.sample(range(n_ids), len(ids))
        id_map = {old: f"{new:04d}" for old, new in zip(ids, new_ids)}

        def sub(text):
            text = pattern.sub(lambda m: mapping[m.group(1).lower()], text)
            return DOC_ID.sub(lambda m: m.group(0)[0] + id_map[m.group(1)], text)

        out = [sub(t) for t in texts]
        return {"prompt": [dict(m, content=c) for m, c in zip(row["prompt"], out)],
                "completion": [dict(row["completion"][0], content=out[-1])]}

    def reword(row, rng, share):
        """The row with its question's wording varied (`share` of the rows): each word that is not
        part of a name dropped with probability 0.25, the rest shuffled half of the time (the names keeping their order), the names
        moved to the front half of the time. The names, the tool outputs and the action stay as they
        were. Held-out questions are worded in ways train never shows; a model that has only seen
        train's wordings learns where a name sits in them, not what a name is."""
        if rng.random() >= share:
            return row
        user = next(i for i, m in enumerate(row["prompt"]) if m["role"] == "user")
        text = row["prompt"][user]["content"]
        head, sep, rest = text.partition("\n\n")
        if not head.startswith("Question: "):
            return row
        question = head[len("Question: "):]
        spans = [(m.start(), m.end()) for m in pattern.finditer(question)]
        names = [question[a:b] for a, b in spans]
        words, last = [], 0
        for a, b in spans + [(len(question), len(question))]:
            words += [w for w in QWORD.findall(question[last:a]) if rng.random() >= 0.25]
            if a < len(question):
                words.append(question[a:b])
            last = b
        if rng.random() < 0.5:      # the names keep their order (a comparison's second name is searched second)
            others = [w for w in words if w not in names]
            rng.shuffle(others)
            slots = sorted(rng.sample(range(len(others) + len(names)), len(names)))
            it_names, it_others = iter(names), iter(others)
            words = [next(it_names) if i in slots else next(it_others) for i in range(len(others) + len(names))]
        if rng.random() < 0.5:
            words = names + [":"] + [w for w in words if w not in names]
        new = "Question: " + " ".join(words).replace(" ?", "?").replace(" ,", ",").replace(" .", ".")
        prompt = [dict(m) for m in row["prompt"]]
        prompt[user]["content"] = new + sep + rest
        return {"prompt": prompt, "completion": row["completion"]}

    rename.reword = reword
    return rename


QWORD = re.compile(r"[\w']+|[^\w\s]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="the expert's sft_prompt_completion.jsonl")
    ap.add_argument("--corpus", required=True, help="corpus.jsonl of the train split (its titles are the names)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reword", type=float, default=0.0, help="share of the copies whose question wording is varied")
    a = ap.parse_args()
    rows = load_jsonl(a.data)
    titles = sorted({d["title"] for d in load_jsonl(a.corpus)})
    rename = renamer(titles)
    rng = random.Random(f"dsqa-rename/{a.seed}")
    with open(a.out, "w") as fh:
        n = 0
        for row in rows:
            for _ in range(a.copies):
                fh.write(json.dumps(rename.reword(rename(row, rng), rng, a.reword)) + "\n")
                n += 1
    print(json.dumps({"stage": "rename", "examples": len(rows), "copies": n, "names": len(titles), "out": a.out}),
          flush=True)


if __name__ == "__main__":
    main()
