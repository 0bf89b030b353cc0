"""Scorer `env_success`: the submitted model plays the split's games in the real environment.

The policy is the model, prompted ReAct-style (see tasks_impl/alfworld/prompts.py), greedy by the
protocol, for at most `protocol.max_steps` steps per game. Its reply is mapped to the closest
admissible command. Episodes advance together: one `policy.generate` call per step over all live
episodes (up to `batch_size`). Every episode's full trajectory is stored in its SampleResult.

Options (task card `scorer_options`): env (only `alfworld` today), few_shot (bool), history_len
(steps shown in the prompt), match_threshold (0..1 similarity to accept a non-exact command),
batch_size (live episodes; default protocol.batch_size).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from autorl_tui.grading.types import EvalProtocol, EvalResult, Policy, SampleResult, ScorerContext

KNOWN_OPTIONS = {"env", "few_shot", "history_len", "match_threshold", "batch_size"}
DEFAULT_MAX_STEPS = 30


class EnvSuccessScorer:
    name = "env_success"
    version = "1"

    def validate_options(self, opts: dict, task_dir=None) -> list[tuple[str, str]]:
        """Problems with scorer_options as (what is wrong, how to fix it); used by `tasks validate`."""
        problems = []
        unknown = sorted(set(opts) - KNOWN_OPTIONS)
        if unknown:
            problems.append((f"env_success: unknown scorer option(s) {unknown}", f"use only {sorted(KNOWN_OPTIONS)}"))
        if opts.get("env", "alfworld") != "alfworld":
            problems.append((f"env_success: unknown env {opts['env']!r}", "set scorer_options.env: alfworld"))
        threshold = opts.get("match_threshold", 0.6)
        if not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            problems.append((f"env_success: match_threshold {threshold!r} is not in [0, 1]",
                             "use a similarity ratio such as 0.6 (1 = exact commands only)"))
        return problems

    def evaluate(self, policy: Policy, items: list[dict], protocol: EvalProtocol, ctx: ScorerContext) -> EvalResult:
        opts = dict(ctx.options or {})
        problems = self.validate_options(opts)
        if problems:
            raise ValueError("; ".join(f"{what} ({fix})" for what, fix in problems))
        from autorl_tui.tasks_impl.alfworld.api import list_games, run_episodes
        from autorl_tui.tasks_impl.alfworld.prompts import messages_to_text

        games = resolve_games(items, Path(ctx.split_path), list_games)
        if not games:
            raise ValueError(f"env_success: no games in {ctx.split_path} (expected items.jsonl with gamefile entries)")
        max_steps = int(protocol.max_steps or DEFAULT_MAX_STEPS)

        def generate(prompts: list[list[dict]]):
            if protocol.prompt_format == "plain":
                prompts = [messages_to_text(p) for p in prompts]
            outs = policy.generate(prompts, n=1, temperature=protocol.temperature, top_p=protocol.top_p,
                                   max_tokens=protocol.max_tokens, stop=protocol.stop)
            return [o[0] for o in outs]

        t0 = time.time()
        ctx.progress(0, len(games), "episodes")
        results = run_episodes(generate, games, max_steps=max_steps,
                               batch_size=int(opts.get("batch_size") or protocol.batch_size or 16),
                               few_shot=bool(opts.get("few_shot", False)), history_len=int(opts.get("history_len", 5)),
                               match_threshold=float(opts.get("match_threshold", 0.6)), log=ctx.log,
                               on_progress=lambda done, total: ctx.progress(done, total, "episodes"))
        elapsed = time.time() - t0
        samples = [to_sample(r, g) for r, g in zip(results, games)]
        metrics = summarize(results)
        metrics["episodes_per_s"] = len(results) / elapsed if elapsed > 0 else None
        metrics["max_steps"] = max_steps
        return EvalResult(score=metrics["success_rate"], metrics=metrics, samples=samples,
                          timings={"episodes_s": elapsed})


def resolve_games(items: list[dict], split_path: Path, list_games) -> list[dict]:
    """Items carry gamefile paths relative to the split folder; without items, read its index."""
    if not items or not all("gamefile" in it for it in items):
        return list_games(split_path)
    games = []
    for it in items:
        g = dict(it)
        path = Path(g["gamefile"])
        g["gamefile"] = str(path if path.is_absolute() else (split_path / path).resolve())
        games.append(g)
    return games


def to_sample(r, game: dict) -> SampleResult:
    trajectory = [{k: v for k, v in step.items() if k not in ("prompt", "admissible")}
                  | {"n_admissible": len(step.get("admissible") or [])} for step in r.trajectory]
    if r.trajectory:
        trajectory[0]["prompt"] = r.trajectory[0].get("prompt")
    if r.won:
        failure = None
    elif r.error:
        failure = "runtime_error"
    elif r.trajectory and all(not (s.get("raw_output") or "").strip() for s in r.trajectory):
        failure = "empty"
    elif r.trajectory and all(s.get("action") is None for s in r.trajectory):
        failure = "format_error"
    else:
        failure = "wrong_answer"
    return SampleResult(
        sample_id=r.game_id, prompt=r.task, output="\n".join(s.get("action") or f"?{s.get('command_text')}"
                                                             for s in r.trajectory),
        extracted=None, expected="\n".join(game.get("expert_actions") or []) or None, correct=r.won,
        score=1.0 if r.won else 0.0, tokens=r.tokens, failure_kind=failure, error=r.error,
        data={"task_type": r.task_type, "won": r.won, "steps": r.steps, "invalid_steps": r.invalid_steps,
              "unmatched_steps": r.unmatched_steps, "thought_steps": r.thought_steps,
              "outcome": "won" if r.won else ("error" if r.error else "max_steps"),
              "gamefile": r.gamefile, "trajectory": trajectory})


def summarize(results) -> dict:
    n = len(results)
    won = [r for r in results if r.won]
    steps = sum(r.steps for r in results)
    by_type: dict[str, list] = defaultdict(list)
    for r in results:
        by_type[r.task_type].append(r)
    metrics = {
        "success_rate": 100.0 * len(won) / n if n else 0.0,
        "episodes": n,
        "env_steps": steps,
        "mean_steps": steps / n if n else 0.0,
        "mean_steps_to_success": (sum(r.steps for r in won) / len(won)) if won else None,
        "invalid_action_rate": 100.0 * sum(r.invalid_steps for r in results) / steps if steps else 0.0,
        "unmatched_action_rate": 100.0 * sum(r.unmatched_steps for r in results) / steps if steps else 0.0,
        "thought_rate": 100.0 * sum(r.thought_steps for r in results) / steps if steps else 0.0,
        "errors": sum(1 for r in results if r.error),
    }
    for tt, rs in sorted(by_type.items()):
        metrics[f"success_rate/{tt}"] = 100.0 * sum(r.won for r in rs) / len(rs)
        metrics[f"episodes/{tt}"] = len(rs)
    return metrics
