"""Score vocabulary shared by the grader (which writes it into sample results) and the reports
(which read it back from the store): neither imports the other."""

FAILURE_KINDS = ("wrong_answer", "format_error", "truncated", "empty", "runtime_error", "timeout",
                 "prompt_too_long")

# A task's own figures beside its score: the `env_success` scorer records what an environment's
# `summary_metrics` returns under this key of a grading's metrics (WebShop: mean_reward,
# reward_ge_0.5); the selected submission's held-out grading is under metrics["test"].
ENV_SUMMARY = "env_summary"


def env_summary_text(metrics) -> str:
    """"dev: mean_reward 42.5, reward_ge_0.5 50.0; test: ..." from a submission's metrics, or ""."""
    if not isinstance(metrics, dict):
        return ""
    parts = []
    for split, m in (("dev", metrics), ("test", metrics.get("test"))):
        figures = m.get(ENV_SUMMARY) if isinstance(m, dict) else None
        if figures:
            parts.append(f"{split}: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, (int, float)) else f"{k} {v}"
                                                  for k, v in figures.items()))
    return "; ".join(parts)
