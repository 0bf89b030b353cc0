"""docs/ARCHITECTURE.md is true: every repository file or folder it names exists."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "ARCHITECTURE.md"
PACKAGE = REPO / "autorl_tui"
# A path is resolved against the repository, the package, each of the package's folders (the
# document says `executors/local.py` inside the engine's paragraph), tests/, tests/support/, docs/
# and data/plans/ (the package tree lists their files by name under the folder's line).
BASES = [REPO, PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"),
         REPO / "tests", REPO / "tests" / "support", REPO / "docs", REPO / "data" / "plans"]
TOKEN = re.compile(r"(?<![\w/.$-])((?:[\w.-]+/)*[\w.-]+\.(?:py|md|sql|yaml|toml|ini|j2|css|tcss|txt|json|sh)"
                   r"|(?:[\w.-]+/)+)(?![\w/])")
# Named by the document but made at run time, not in the repository: the grader's request and
# result, a run's log folder, the workspace's folders and files (DESIGN §3), a column path.
RUNTIME = {"REQUEST.json", "RESULT.json", "exit.json", "docker-logs.json", "control/", "progress.json",
           "code/", "output/", "logs/", "models/", "workspace/", "runs/", "instructions.md", "prompt.md",
           "runs.tokens_in/tokens_out/", "description.md", "run_meta.json", "scores.json", "data/"}


def named_paths(text: str) -> list[str]:
    tokens = []
    for m in TOKEN.finditer(text):
        tok = m.group(1)
        if any(c in tok for c in "<>*") or tok.startswith("../") or tok in RUNTIME:
            continue
        tokens.append(tok)
    return tokens


def exists(tok: str) -> bool:
    if "/" not in tok.rstrip("/"):
        if tok.endswith("/"):
            return any((b / tok).is_dir() for b in BASES)
        return any((b / tok).exists() for b in BASES)
    return any((b / tok).exists() for b in BASES)


def test_every_path_the_architecture_names_exists():
    tokens = named_paths(DOC.read_text())
    assert len(tokens) > 100          # the document is read, not skipped
    missing = sorted({t for t in tokens if not exists(t)})
    assert missing == [], f"docs/ARCHITECTURE.md names what does not exist: {missing}"


def test_the_check_catches_a_removed_file():
    assert named_paths("see engine/gone_module.py and catalog/tiny.py") == ["engine/gone_module.py", "catalog/tiny.py"]
    assert not exists("engine/gone_module.py") and not exists("catalog/tiny.py")
    assert exists("engine/run_api.py") and exists("executors/local_shim.py") and exists("tests/support/")
