"""SFT rows for DeepSearchQA's ReAct loop when the train split ships none (the official questions:
no corpus, no expert trajectories): each train question answered in one step, in the loop's own
text, read from the workspace's `deepsearchqa_api` (the grader's code).

prompt = the text the grader has the model complete first (`react.first_prompt`: its system text,
the question, the answer type, "Thought:"), completion = " <a thought> Action: answer[<gold>]" on
the thought's line (the loop stops at "\\nAction:", so an action on a line of its own never counts).
The gold is the CSV's answer as written (`answer_raw`; a set answer's items separated by commas,
as the loop's rules ask), else the parsed answers joined by ", ".

What it teaches: the loop's syntax and when to answer. The web search the loop offers cannot be
imitated offline (no expert searched), so no row searches.

Prints one JSON line {"stage": "dsqa_answers", "examples": N, ...}."""
import argparse
import json
import os
import sys
import time

THOUGHT = "I know the answer to this question."


def gold(item):
    raw = str(item.get("answer_raw") or "").strip()
    if raw:
        return raw
    answers = item.get("answers") or item.get("answer") or []
    return ", ".join(map(str, answers)) if isinstance(answers, list) else str(answers)


def label(item):
    return item.get("answer_type_label") or ("Set Answer" if item.get("answer_type") == "list" else "Single Answer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "data"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    t0 = time.time()
    sys.path.insert(0, os.path.abspath(a.data))
    from deepsearchqa_api import list_questions
    from deepsearchqa_api.react import first_prompt

    n = 0
    tmp = a.out + ".partial"
    with open(tmp, "w") as fh:
        for item in list_questions(a.data):
            answer = gold(item).replace("]", ")")       # "]" ends the action
            if not answer or not str(item.get("question") or "").strip():
                continue
            fh.write(json.dumps({"id": item.get("id"), "prompt": first_prompt(item["question"], label(item)),
                                 "completion": f" {THOUGHT} Action: answer[{answer}]"}) + "\n")
            n += 1
    os.replace(tmp, a.out)
    print(json.dumps({"stage": "dsqa_answers", "examples": n, "total_s": round(time.time() - t0, 2), "out": a.out}),
          flush=True)


if __name__ == "__main__":
    main()
