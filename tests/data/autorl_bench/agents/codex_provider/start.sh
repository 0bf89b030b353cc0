#!/bin/bash
# Written for the harness's tests in the shape of AutoRL-Bench's codex folder: the Codex CLI with a
# model provider the operator declares in ~/.codex/config.toml, its JSON trace through `tee`.
echo "=== Codex-shaped Agent ==="
CODEX_PROVIDER="${CODEX_PROVIDER:-litellm}"
CODEX_MODEL="${CODEX_MODEL:-gpt-5.2}"
PROMPT="Train $BASE_MODEL on $TASK and submit to $GRADING_SERVER_URL/submit."
timeout "${CODEX_TIMEOUT:-3600}" codex exec --json -m "$CODEX_MODEL" \
    -c "model_provider=\"${CODEX_PROVIDER}\"" --dangerously-bypass-approvals-and-sandbox \
    --skip-git-repo-check -C "$WORKSPACE" "$PROMPT" \
    2>&1 | tee "$WORKSPACE/agent.jsonl"
