"""Report templates: the repository's top-level templates/, found by one rule installed or in a
checkout (the package's `templates`, a link here, a copy when installed; issue 33)."""
from pathlib import Path

from autorl_tui.reports import render

REPO = Path(__file__).resolve().parents[2]


def test_the_package_s_templates_are_the_repository_s(monkeypatch):
    monkeypatch.delenv("AUTORL_TEMPLATES", raising=False)
    assert render.template_dirs() == [render.PACKAGE_TEMPLATES]
    assert render.PACKAGE_TEMPLATES.resolve() == (REPO / "templates").resolve()
    assert render.environment().get_template("run.html.j2").filename == str(render.PACKAGE_TEMPLATES / "run.html.j2")


def test_a_user_s_folder_is_searched_first(tmp_path, monkeypatch):
    (tmp_path / "run.html.j2").write_text("mine")
    monkeypatch.setenv("AUTORL_TEMPLATES", str(tmp_path))
    assert render.template_dirs() == [tmp_path, render.PACKAGE_TEMPLATES]
    assert render.environment().get_template("run.html.j2").render() == "mine"
