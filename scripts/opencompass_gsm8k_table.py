"""Build tests/data/gsm8k_opencompass/verdicts.json: OpenCompass's own verdicts on realistic GSM8K
model outputs, for the agreement test of the `autorl-bench` protocol (tests/unit/test_gsm8k_opencompass.py).

OpenCompass is not a light dependency (it pins torch, datasets, mmengine, ...), so this script
runs its code from a checkout instead of an install: it takes `gsm8k_postprocess`,
`gsm8k_dataset_postprocess`, `Gsm8kEvaluator.is_equal` (opencompass/datasets/gsm8k.py) and
`extract_non_reasoning_content` (opencompass/utils/text_postprocessors.py) out of the checkout's
source with `ast`, executes exactly those definitions, and applies them in OpenCompass's order
(the model's pred_postprocessor, then the dataset's; openicl_eval.py).

    python scripts/opencompass_gsm8k_table.py OPENCOMPASS_CHECKOUT [--commit SHA]

Inputs: tests/data/gsm8k_opencompass/outputs.json ([{"case", "gold", "output"}]).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "tests" / "data" / "gsm8k_opencompass"


def _definitions(source: str, names: set[str]) -> str:
    tree = ast.parse(source)
    keep = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    for n in keep:
        n.decorator_list = []
        if isinstance(n, ast.ClassDef):
            n.bases = []
            n.body = [b for b in n.body if isinstance(b, ast.FunctionDef) and b.name == "is_equal"]
    return ast.unparse(ast.Module(body=keep, type_ignores=[]))


def load_opencompass(checkout: Path) -> dict:
    ns: dict = {"re": re}
    exec(_definitions((checkout / "opencompass/datasets/gsm8k.py").read_text(),  # noqa: S102 - OpenCompass's code
                      {"gsm8k_postprocess", "gsm8k_dataset_postprocess", "Gsm8kEvaluator"}), ns)
    exec(_definitions((checkout / "opencompass/utils/text_postprocessors.py").read_text(),  # noqa: S102
                      {"extract_non_reasoning_content"}), ns)
    return ns


def main(argv: list[str]) -> int:
    checkout = Path(argv[0])
    commit = argv[argv.index("--commit") + 1] if "--commit" in argv else "unknown"
    oc = load_opencompass(checkout)
    evaluator = oc["Gsm8kEvaluator"]()
    rows = []
    for case in json.loads((HERE / "outputs.json").read_text()):
        pred = oc["gsm8k_postprocess"](oc["extract_non_reasoning_content"](case["output"]))
        refer = oc["gsm8k_dataset_postprocess"](case["gold"])
        rows.append({**case, "opencompass_pred": pred, "opencompass_refer": refer,
                     "opencompass_correct": bool(evaluator.is_equal(pred, refer))})
    out = {"source": f"open-compass/opencompass@{commit}: opencompass/datasets/gsm8k.py, "
                     f"opencompass/utils/text_postprocessors.py (run by scripts/opencompass_gsm8k_table.py)",
           "rows": rows}
    (HERE / "verdicts.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(rows)} verdicts, {sum(r['opencompass_correct'] for r in rows)} correct")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
