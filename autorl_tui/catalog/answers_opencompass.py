"""GSM8K answers read and compared as AutoRL-Bench reads them: through OpenCompass's
`gsm8k_gen_1d7fe4` evaluation (opencompass/datasets/gsm8k.py, reproduced here from its source,
not imported: OpenCompass is not a light dependency).

The steps, in OpenCompass's order:
1. the model config's `extract-non-reasoning-content` (AutoRL-Bench sets `use_cot_postprocessor`
   by default): `<think>...</think>` sections are removed;
2. `gsm8k_postprocess`: the text is cut at the first "Question:" (a base model running on into a
   new question is scored on what came before it), and the answer is the LAST match of
   `-?\\d+\\.\\d+|-?\\d+`. QUIRK, reproduced on purpose: thousands separators are not understood,
   so "1,080" reads as "080" (and is wrong when the gold answer is 1080); "$5" reads "5"; "\\boxed{7}"
   reads "7"; "####" has no special meaning (a number written after it counts only if it is the last);
3. `gsm8k_dataset_postprocess` for the gold answer: what follows "#### ", commas removed;
4. `Gsm8kEvaluator.is_equal`: pred == gold as strings, or |float(pred) - int(gold)| < 1e-6
   (anything unparsable is wrong; "NULL" when no number was found).
"""

from __future__ import annotations

import re

_NUMBERS = re.compile(r"\-?\d+\.\d+|\-?\d+")
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def strip_reasoning(text: str) -> str:
    if "<think>" not in text and "</think>" in text:
        return text.split("</think>")[-1].strip()
    return _THINK.sub("", text).strip()


def extract(text: str) -> str:
    """The prediction OpenCompass reads from a model output ('NULL' when there is none)."""
    text = strip_reasoning(text).split("Question:")[0]
    numbers = _NUMBERS.findall(text)
    return numbers[-1] if numbers else "NULL"


def gold(answer: str) -> str:
    """The reference OpenCompass compares with: the text after '#### ', commas removed."""
    return answer.split("#### ")[1].replace(",", "") if "#### " in answer else answer.replace(",", "").strip()


def is_equal(pred: str, refer: str) -> bool:
    try:
        if pred == refer or abs(float(pred) - int(refer)) < 1e-6:
            return True
    except Exception:  # noqa: BLE001 - OpenCompass counts any failure to compare as wrong
        pass
    return False
