"""`autorl-tui models build tiny|tiny-alfworld [--force] [--seed N]` and `autorl-tui models list [--json]`."""

from __future__ import annotations

import json
import time

from autorl_tui.exitcodes import UsageError


def register(subparsers) -> None:
    parser = subparsers.add_parser("models", help="build and list base models")
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION")
    build = sub.add_parser("build", help="build a built-in model into the home (no downloads)")
    build.add_argument("name", help="built-in model name (tiny, tiny-alfworld)")
    build.add_argument("--force", action="store_true", help="rebuild even if it is already built")
    build.add_argument("--seed", type=int, default=0, help="seed of the build (default 0)")
    build.set_defaults(func=cmd_build)
    lst = sub.add_parser("list", help="list built-in models and models in the home")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.set_defaults(func=cmd_list)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def cmd_build(args) -> int:
    from autorl_tui.catalog.models import builtin_models, build_builtin
    from autorl_tui.home import Home

    if args.name not in builtin_models():
        raise UsageError(f"{args.name!r} is not a built-in model; built-in: {', '.join(builtin_models())}. "
                         f"Other models are used from a local Hugging Face folder (give its path)")
    from autorl_tui.catalog.model_builds import weights_hash

    home = Home.open(getattr(args, "home", None))
    target = home.models / args.name
    t0 = time.time()
    path = build_builtin(args.name, target, seed=args.seed, force=args.force)
    print(f"{args.name}: {path} (weights sha256 {weights_hash(path)[:16]}, {time.time() - t0:.1f}s)")
    return 0


def cmd_list(args) -> int:
    from autorl_tui.catalog.models import builtin_models, is_hf_model_dir
    from autorl_tui.home import Home

    home = Home.open(getattr(args, "home", None))
    rows = []
    names = set(builtin_models()) | {p.name for p in home.models.iterdir() if p.is_dir() and not p.name.startswith(".")}
    for name in sorted(names):
        path = home.models / name
        built = is_hf_model_dir(path)
        size = sum(f.stat().st_size for f in path.iterdir() if f.is_file()) if built else 0
        rows.append({"name": name, "builtin": name in builtin_models(), "ready": built,
                     "path": str(path) if built else None, "bytes": size})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        state = f"ready  {r['bytes'] / 1e6:6.1f} MB  {r['path']}" if r["ready"] else (
            f"not built (autorl-tui models build {r['name']})" if r["builtin"] else "incomplete")
        print(f"{r['name']:<16} {'built-in' if r['builtin'] else 'local':<9} {state}")
    return 0
