"""Scorer `env_success`: the submitted model plays the split's episodes in a real interactive
environment and scores the share it wins.

The environment is a plugin named by `scorer_options.env` (registry kind `environments`,
interface in grading/environments.py; `alfworld` is built in), or a class of the task's own folder
(`module:Class`). The policy is the model, greedy by the protocol, for at most `protocol.max_steps`
steps per episode. Episodes advance together (the generic runner, grading/episodes.py): one
`policy.generate` call per step over all live episodes (up to `batch_size`). Every episode's full
trajectory is stored in its SampleResult.

Options (task card `scorer_options`): env (default `alfworld`), batch_size (live episodes; default
protocol.batch_size), plus the environment's own (ALFWorld: few_shot, history_len, match_threshold).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from autorl_tui import registry
from autorl_tui.scores import ENV_SUMMARY
from autorl_tui.grading import context_budget
from autorl_tui.grading.environments import InteractiveEnvironment
from autorl_tui.grading.types import EvalProtocol, EvalResult, Policy, SampleResult, ScorerContext

SCORER_OPTIONS = {"env", "batch_size"}
DEFAULT_MAX_STEPS = 30


def load_environment(name: str, task_dir=None) -> InteractiveEnvironment:
    """A registered environment, or the task folder's own class (`environment:MyEnv` for
    `environment.py` beside the card)."""
    return registry.resolve("environments", name, task_dir)()


class EnvSuccessScorer:
    name = "env_success"
    version = "1"

    def options_for(self, opts: dict | None) -> dict:
        """The scorer options as this scorer plays them (a subclass may fix its environment)."""
        return dict(opts or {})

    def validate_options(self, opts: dict, task_dir=None) -> list[tuple[str, str]]:
        """Problems with scorer_options as (what is wrong, how to fix it); used by `tasks validate`."""
        name = str(opts.get("env", "alfworld"))
        if name not in registry.entries("environments") and ":" not in name:
            return [(f"env_success: unknown env {name!r}",
                     f"set scorer_options.env to one of: {', '.join(registry.names('environments'))}, "
                     "or to a class of the task's folder as module:Class")]
        try:
            env = load_environment(name, task_dir)
        except Exception as exc:  # noqa: BLE001 - a broken environment module is a problem to report
            return [(f"env_success: env {name!r} failed to load: {type(exc).__name__}: {exc}",
                     "fix the module (or install its dependencies); module:Class names a file of the task's folder "
                     "or an importable module")]
        problems = []
        unknown = sorted(set(opts) - SCORER_OPTIONS - env.options)
        if unknown:
            problems.append((f"env_success: unknown scorer option(s) {unknown}",
                             f"use only {sorted(SCORER_OPTIONS | env.options)}"))
        return problems + env.validate_options(opts)

    def evaluate(self, policy: Policy, items: list[dict], protocol: EvalProtocol, ctx: ScorerContext) -> EvalResult:
        opts = dict(ctx.options or {})
        problems = self.validate_options(opts, ctx.task_dir)
        if problems:
            raise ValueError("; ".join(f"{what} ({fix})" for what, fix in problems))
        env = load_environment(str(opts.get("env", "alfworld")), ctx.task_dir)
        games = env.episodes(items, Path(ctx.split_path))
        if not games:
            raise ValueError(f"env_success: no games in {ctx.split_path} (expected items.jsonl with gamefile entries)")
        max_steps = int(protocol.max_steps or DEFAULT_MAX_STEPS)

        def generate(prompts: list[list[dict]], *, stop: list[str] | None = None, max_tokens: int | None = None):
            """The policy's replies; `stop` and `max_tokens` replace the protocol's for this call
            (DeepSearchQA's AutoRL-Bench loop completes a forced answer so)."""
            if protocol.prompt_format == "plain":
                prompts = [env.to_text(p) for p in prompts]
            outs = policy.generate(prompts, n=1, temperature=protocol.temperature, top_p=protocol.top_p,
                                   max_tokens=protocol.max_tokens if max_tokens is None else max_tokens,
                                   stop=protocol.stop if stop is None else stop)
            return [o[0] for o in outs]

        t0 = time.time()
        ctx.progress(0, len(games), "episodes")
        results = env.run_episodes(generate, games, max_steps=max_steps,
                                   batch_size=int(opts.get("batch_size") or protocol.batch_size or 16),
                                   options=opts, log=ctx.log,
                                   on_progress=lambda done, total: ctx.progress(done, total, "episodes"))
        elapsed = time.time() - t0
        samples = [to_sample(r, g) for r, g in zip(results, games)]
        metrics = summarize(results)
        metrics["episodes_per_s"] = len(results) / elapsed if elapsed > 0 else None
        metrics["max_steps"] = max_steps
        summary = env_summary(env, results)
        if summary:
            metrics[ENV_SUMMARY] = summary
        return EvalResult(score=metrics["success_rate"], metrics=metrics, samples=samples,
                          timings={"episodes_s": elapsed})


def env_summary(env, results) -> dict:
    """The environment's own summary figures over the records (its optional `summary_metrics`)."""
    hook = getattr(env, "summary_metrics", None)
    if hook is None:
        return {}
    return {str(k): float(v) for k, v in dict(hook(results)).items()}


def to_sample(r, game: dict) -> SampleResult:
    trajectory = [{k: v for k, v in step.items() if k not in ("prompt", "admissible")}
                  | {"n_admissible": len(step.get("admissible") or [])} for step in r.trajectory]
    if r.trajectory:
        trajectory[0]["prompt"] = r.trajectory[0].get("prompt")
    if r.won:
        failure = None
    elif r.error and r.trajectory and r.trajectory[-1].get("refused"):
        failure = context_budget.REFUSED
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
        data={"task_type": r.task_type, "won": r.won, "reward": r.reward, "steps": r.steps, "invalid_steps": r.invalid_steps,
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
