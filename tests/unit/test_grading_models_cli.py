import json
import shutil

from autorl_tui.cli import main
from autorl_tui.catalog.tiny import weights_hash


def test_models_list_on_a_fresh_home(home_dir, capsys):
    assert main(["--home", str(home_dir), "models", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [{"name": "tiny", "builtin": True, "ready": False, "path": None, "bytes": 0}]
    assert main(["--home", str(home_dir), "models", "list"]) == 0
    assert "models build tiny" in capsys.readouterr().out


def test_models_build_reuses_a_built_model_and_lists_it(home_dir, tiny_model_dir, capsys):
    shutil.copytree(tiny_model_dir, home_dir / "models" / "tiny")
    assert main(["--home", str(home_dir), "models", "build", "tiny"]) == 0
    assert weights_hash(tiny_model_dir)[:16] in capsys.readouterr().out
    assert main(["--home", str(home_dir), "models", "list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["ready"] and row["bytes"] > 1_000_000


def test_models_build_unknown_name_is_a_usage_error(home_dir, capsys):
    assert main(["--home", str(home_dir), "models", "build", "gpt5"]) == 2
    assert "not a built-in model" in capsys.readouterr().err
