import json
import shutil

import pytest

from autorl_tui.cli import main
from autorl_tui.catalog.model_builds import weights_hash

pytestmark = pytest.mark.subprocess   # builds and loads models (seconds each)


def test_models_list_on_a_fresh_home(home_dir, capsys):
    assert main(["--home", str(home_dir), "models", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [{"name": name, "builtin": True, "ready": False, "path": None, "bytes": 0}
                    for name in ("tiny", "tiny-alfworld", "tiny-dsqa", "tiny-webshop")]
    assert main(["--home", str(home_dir), "models", "list"]) == 0
    assert "models build tiny" in capsys.readouterr().out


def test_models_build_reuses_a_built_model_and_lists_it(home_dir, tiny_model_dir, capsys):
    shutil.copytree(tiny_model_dir, home_dir / "models" / "tiny")
    assert main(["--home", str(home_dir), "models", "build", "tiny"]) == 0
    assert weights_hash(tiny_model_dir)[:16] in capsys.readouterr().out
    assert main(["--home", str(home_dir), "models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["tiny"]["ready"] and rows["tiny"]["bytes"] > 1_000_000
    assert not rows["tiny-alfworld"]["ready"]


def test_models_build_tiny_alfworld(home_dir, capsys):
    assert main(["--home", str(home_dir), "models", "build", "tiny-alfworld"]) == 0
    out = capsys.readouterr().out
    path = home_dir / "models" / "tiny-alfworld"
    assert weights_hash(path)[:16] in out
    info = json.loads((path / "autorl_tui_build.json").read_text())
    assert info["name"] == "tiny-alfworld" and info["max_positions"] == 1024 and 1_000_000 < info["params"] < 4_000_000


def test_models_build_tiny_dsqa_is_deterministic(home_dir, tmp_path, capsys):
    assert main(["--home", str(home_dir), "models", "build", "tiny-dsqa"]) == 0
    path = home_dir / "models" / "tiny-dsqa"
    assert weights_hash(path)[:16] in capsys.readouterr().out
    info = json.loads((path / "autorl_tui_build.json").read_text())
    assert info["name"] == "tiny-dsqa" and info["max_positions"] == 1024 and 1_000_000 < info["params"] < 4_000_000
    from autorl_tui.tasks.deepsearchqa.tiny_model import build
    assert weights_hash(build(tmp_path / "again")) == weights_hash(path)


def test_models_build_unknown_name_is_a_usage_error(home_dir, capsys):
    assert main(["--home", str(home_dir), "models", "build", "gpt5"]) == 2
    assert "not a built-in model" in capsys.readouterr().err


def test_models_build_tiny_webshop_reads_and_writes_product_ids(home_dir, capsys):
    from transformers import AutoTokenizer

    assert main(["--home", str(home_dir), "models", "build", "tiny-webshop"]) == 0
    path = home_dir / "models" / "tiny-webshop"
    info = json.loads((path / "autorl_tui_build.json").read_text())
    assert info["pretrained"] is False and info["max_positions"] >= 1024
    tok = AutoTokenizer.from_pretrained(path)
    for text in ("click[b0zq7x9k2m]", "search[gluten free dark chocolate bar sea salt]", "[b0x7] Nuvio ; click[b0x7]"):
        assert tok.decode(tok(text)["input_ids"]) == text
    # a short id (a card's `id_chars: 2`) is one token; an Amazon-length one is not cut into one
    assert len(tok("[b0x7]")["input_ids"]) == 3 and tok.convert_ids_to_tokens(tok("[b0x7]")["input_ids"])[1] == "b0x7"
    assert "b0zq" not in tok.convert_ids_to_tokens(tok("click[b0zq7x9k2m]")["input_ids"])
