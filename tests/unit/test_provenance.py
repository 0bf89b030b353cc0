"""Model provenance on real tiny models: a fine-tune of the built-in `tiny` model is derived from
it; a same-architecture model trained from another seed, and the base with every tensor
re-initialised, are not. Every model here is trained for real (torch, CPU) and saved with
save_pretrained; the comparison reads the saved safetensors."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from autorl_tui.grading import provenance


def _lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        out.append(f"<|im_start|>user\nWhat is {a} plus {b}?<|im_end|>\n<|im_start|>assistant\n#### {a + b}<|im_end|>")
    return out


def _train(model, tok, steps: int, lr: float, seed: int) -> None:
    """A plain causal-LM fine-tune loop (what an agent's SFT does), real gradient steps on CPU."""
    import torch

    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    texts = _lines(steps * 8, seed)
    model.train()
    for step in range(steps):
        batch = tok(texts[step * 8:(step + 1) * 8], return_tensors="pt", padding=True)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()


def _save(model, tok, folder: Path) -> Path:
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def models(tiny_model_dir, tmp_path_factory):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("provenance")
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tuned = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    _train(tuned, tok, steps=60, lr=1e-3, seed=5)           # 50x TRL's default learning rate
    other = AutoModelForCausalLM.from_config(tuned.config)
    torch.manual_seed(1)
    other = AutoModelForCausalLM.from_config(tuned.config)  # same architecture, another seed...
    _train(other, tok, steps=60, lr=1e-3, seed=1)           # ...trained the same way
    reinit = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    torch.manual_seed(2)
    with torch.no_grad():
        for p in reinit.parameters():                       # every tensor drawn again at its own scale
            p.copy_(torch.randn_like(p) * p.std().clamp_min(1e-3) + p.mean())
    return {"base": tiny_model_dir, "tuned": _save(tuned, tok, root / "tuned"),
            "other": _save(other, tok, root / "other"), "reinit": _save(reinit, tok, root / "reinit")}


@pytest.mark.subprocess
def test_a_fine_tune_is_derived_from_its_base(models):
    rec = provenance.compare_models(models["base"], models["tuned"])
    assert rec["verdict"] == "derived", rec["summary"]
    assert rec["n_changed"] == rec["n_tensors"] > 10
    assert 0 < rec["median_rel"] < provenance.FAR_REL / 2 and rec["max_rel"] < provenance.FAR_REL
    assert rec["min_cos"] > 0.8 > provenance.FAR_COS
    assert not rec["low_rank_change"]          # a full fine-tune's change is not low-rank


@pytest.mark.subprocess
def test_a_model_trained_from_another_seed_is_not_derived(models):
    rec = provenance.compare_models(models["base"], models["other"])
    assert rec["verdict"] == "not_derived"
    assert rec["far_share"] > 0.9 and rec["median_rel"] > 1.0
    assert rec["furthest"][0]["rel"] > 1.0 and rec["furthest"][0]["cos"] < 0.5
    assert "fine-tune" in rec["summary"] and rec["reference"]


@pytest.mark.subprocess
def test_the_base_reinitialised_is_not_derived(models):
    rec = provenance.compare_models(models["base"], models["reinit"])
    assert rec["verdict"] == "not_derived"
    assert rec["far_share"] > 0.9


@pytest.mark.subprocess
def test_a_merged_low_rank_change_is_recognised(models, tmp_path):
    """The base plus a rank-4 update on every 2-D tensor (what merging a LoRA adapter gives)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(models["base"])
    torch.manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                a, b = torch.randn(p.shape[0], 4), torch.randn(4, p.shape[1])
                p.add_(a @ b * (0.05 * p.norm() / (a @ b).norm()))
    folder = _save(model, AutoTokenizer.from_pretrained(models["base"]), tmp_path / "merged")
    rec = provenance.compare_models(models["base"], folder)
    assert rec["verdict"] == "derived" and rec["low_rank_change"], rec


@pytest.mark.subprocess
def test_a_different_architecture_is_not_derived(models, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(models["base"])
    cfg = base.config
    cfg.num_hidden_layers = 2
    folder = _save(AutoModelForCausalLM.from_config(cfg), AutoTokenizer.from_pretrained(models["base"]),
                   tmp_path / "smaller")
    rec = provenance.compare_models(models["base"], folder)
    assert rec["verdict"] == "not_derived" and "missing" in rec["summary"] and rec["missing"]


@pytest.mark.subprocess
def test_the_worker_writes_a_record_and_reports_unreadable_weights(models, tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "autorl_tui.grading.provenance", str(models["base"]),
                           str(models["tuned"]), str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["verdict"] == "derived"
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run([sys.executable, "-m", "autorl_tui.grading.provenance", str(models["base"]), str(empty),
                    str(out)], check=True, timeout=300)
    rec = json.loads(out.read_text())
    assert rec["ok"] is False and "safetensors" in rec["error"]
