"""The reports' JSON schemas as committed files: reports/schemas/NAME.schema.json, generated from the
typed sections (reports/typed_json.py). `python -m autorl_tui.reports.schema_files` writes them after a
section changes; tests/unit/test_report_schemas.py checks that the committed files equal them."""

from __future__ import annotations

from pathlib import Path

from autorl_tui.reports.sections_compare import CompareReport
from autorl_tui.reports.sections_run import RunReport
from autorl_tui.reports.typed_json import Document, schema_text

SCHEMAS_DIR = Path(__file__).resolve().parent / "schemas"
DOCUMENTS: dict[str, type[Document]] = {"run_report": RunReport, "compare_report": CompareReport}


def schema_path(name: str, folder: Path = SCHEMAS_DIR) -> Path:
    return folder / f"{name}.schema.json"


def write_schemas(folder: Path = SCHEMAS_DIR) -> list[Path]:
    """Writes every document's schema into `folder`."""
    written = []
    for name, cls in DOCUMENTS.items():
        path = schema_path(name, folder)
        path.write_text(schema_text(cls))
        written.append(path)
    return written


if __name__ == "__main__":
    for written in write_schemas():
        print(written)
