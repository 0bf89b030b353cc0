"""Size figures of the package for docs/ARCHITECTURE.md ("Sizes"): lines per package and the largest
classes. `python scripts/arch_figures.py [ROOT]` prints both as Markdown tables (ROOT: a checkout,
default this one). Lines are all lines of the package's .py files, blank and comment lines included."""
from __future__ import annotations

import ast
import sys
from pathlib import Path


def package_lines(pkg: Path) -> list[tuple[str, int, int]]:
    rows = []
    top_files = sorted(p for p in pkg.glob("*.py"))
    rows.append(("(top-level modules)", len(top_files), sum(len(p.read_text().splitlines()) for p in top_files)))
    for sub in sorted(p for p in pkg.iterdir() if p.is_dir() and p.name != "__pycache__"):
        files = [p for p in sub.rglob("*.py") if "__pycache__" not in p.parts]
        rows.append((f"{sub.name}/", len(files), sum(len(p.read_text().splitlines()) for p in files)))
    return rows


def largest_classes(pkg: Path, n: int = 8) -> list[tuple[str, int, int]]:
    found = []
    for path in pkg.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
                found.append((f"`{node.name}` ({path.relative_to(pkg.parent)})",
                              node.end_lineno - node.lineno + 1, methods))
    return sorted(found, key=lambda r: -r[1])[:n]


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    pkg = root / "autorl_tui"
    rows = package_lines(pkg)
    total = sum(r[2] for r in rows)
    print("| package | modules | lines | share |\n|---|---:|---:|---:|")
    for name, mods, lines in sorted(rows, key=lambda r: -r[2]):
        print(f"| {name} | {mods} | {lines:,} | {100 * lines / total:.0f} % |")
    print(f"| all | {sum(r[1] for r in rows)} | {total:,} | |\n")
    print("| class | lines | methods |\n|---|---:|---:|")
    for name, lines, methods in largest_classes(pkg):
        print(f"| {name} | {lines} | {methods} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
