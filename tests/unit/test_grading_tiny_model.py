"""The built-in tiny model: deterministic, atomic, locked, loadable by transformers."""

import json
import subprocess
import sys

import pytest

from autorl_tui.catalog.model_builds import BUILD_INFO, build_atomically, is_built, weights_hash
from autorl_tui.tasks.arith.tiny_model import build_tiny_model
from tests.conftest import REPO


@pytest.mark.subprocess
def test_tiny_model_is_a_small_llama_with_a_chat_tokenizer(tiny_model_dir):
    from transformers import AutoConfig, AutoTokenizer

    cfg = AutoConfig.from_pretrained(tiny_model_dir, local_files_only=True)
    assert cfg.model_type == "llama"
    info = json.loads((tiny_model_dir / BUILD_INFO).read_text())
    assert 0.8e6 < info["params"] < 1.5e6
    assert list(tiny_model_dir.glob("*.safetensors"))
    tok = AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|pad|>" and tok.padding_side == "left"
    pieces = tok.convert_ids_to_tokens(tok("#### 1234", add_special_tokens=False)["input_ids"])
    assert [p for p in pieces if p.strip("Ġ").isdigit()] == ["1", "2", "3", "4"]   # one digit a token
    text = tok.apply_chat_template([{"role": "user", "content": "Tom has 3 apples."}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == "<|im_start|>user\nTom has 3 apples.<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


@pytest.mark.subprocess
def test_same_seed_same_weights_other_seed_other_weights(tmp_path):
    a = build_tiny_model(tmp_path / "a", seed=3, pretrain_steps=3, pretrain_docs=300)
    b = build_tiny_model(tmp_path / "b", seed=3, pretrain_steps=3, pretrain_docs=300)
    c = build_tiny_model(tmp_path / "c", seed=4, pretrain_steps=3, pretrain_docs=300)
    assert weights_hash(a) == weights_hash(b)
    assert weights_hash(a) != weights_hash(c)


@pytest.mark.subprocess
def test_existing_model_is_reused_unless_forced(tmp_path):
    out = build_tiny_model(tmp_path / "m", seed=0, pretrain_steps=2, pretrain_docs=300)
    stamp = (out / BUILD_INFO).stat().st_mtime_ns
    build_tiny_model(out, seed=0, pretrain_steps=2, pretrain_docs=300)
    assert (out / BUILD_INFO).stat().st_mtime_ns == stamp
    build_tiny_model(out, seed=1, pretrain_steps=2, pretrain_docs=300, force=True)
    assert json.loads((out / BUILD_INFO).read_text())["seed"] == 1
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == ["m"]   # no temp leftovers


def test_a_folder_built_by_another_version_is_built_again(tmp_path):
    calls = []

    def build_into(folder, version):
        calls.append(version)
        (folder / "model.safetensors").write_bytes(b"w")
        (folder / BUILD_INFO).write_text(json.dumps({"name": "m", "version": version}))

    out = tmp_path / "m"
    build_atomically(out, lambda tmp: build_into(tmp, "2"), version="2")
    build_atomically(out, lambda tmp: build_into(tmp, "2"), version="2")
    assert calls == ["2"] and is_built(out, "2")
    build_atomically(out, lambda tmp: build_into(tmp, "3"), version="3")      # the code moved on: rebuilt
    assert calls == ["2", "3"] and json.loads((out / BUILD_INFO).read_text())["version"] == "3"
    assert not is_built(out, "2") and is_built(out)


@pytest.mark.subprocess
def test_two_processes_building_at_once_do_not_collide(tmp_path):
    code = ("import sys; from autorl_tui.tasks.arith.tiny_model import build_tiny_model; "
            "build_tiny_model(sys.argv[1], seed=0, pretrain_steps=2, pretrain_docs=300); print('ok')")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "m")], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert is_built(tmp_path / "m")
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in ("m", ".m.lock")]
    assert leftovers == []


@pytest.mark.subprocess
def test_half_built_model_never_visible(tmp_path, monkeypatch):
    from autorl_tui.tasks.arith import tiny_model as tiny

    def explode(folder, seed, steps, docs):
        (folder / "config.json").write_text("{}")
        raise RuntimeError("killed mid-build")

    monkeypatch.setattr(tiny, "_build_into", explode)
    with pytest.raises(RuntimeError):
        build_tiny_model(tmp_path / "m")
    assert not (tmp_path / "m").exists()
    assert [p.name for p in tmp_path.iterdir()] == [".m.lock"]


@pytest.mark.subprocess
def test_fast_chatml_matches_the_chat_template(tiny_model_dir):
    from transformers import AutoTokenizer

    from autorl_tui.catalog.model_builds import chatml

    tok = AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True)
    msgs = [{"role": "user", "content": "Tom has 3 apples."}, {"role": "assistant", "content": "#### 3"}]
    assert chatml(msgs) == tok.apply_chat_template(msgs, tokenize=False)
