#!/bin/bash
# Written for the harness's tests in the shape of AutoRL-Bench's claude folder: the Claude Code CLI
# named by a variable, a key check, AGENTS.md copied into the workspace, a timer script written
# there, a prompt built from the workspace's files (a sample of the data included), the CLI in
# print mode with its stream-json trace through `tee`, diagnostics after it, and the pipeline's
# status (tee's) as the exit code.
CLAUDE="${CLAUDE_BIN:-claude}"
CLAUDE_MODEL="${CLAUDE_MODEL:-claude-sonnet-4-6}"
CLAUDE_TIMEOUT="${CLAUDE_TIMEOUT:-3600}"
echo "=== Claude-shaped Agent ==="
echo "Task: $TASK"
echo "Model: $BASE_MODEL"
if [ -z "$ANTHROPIC_API_KEY" ] && [ -z "$CLAUDE_CODE_OAUTH_TOKEN" ]; then
    echo "ERROR: set ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN"
    exit 1
fi
START_EPOCH=$(date +%s)
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ -f "$HERE/AGENTS.md" ]; then
    cp "$HERE/AGENTS.md" "$WORKSPACE/AGENTS.md"
fi
cat > "$WORKSPACE/timer.sh" <<TIMER
#!/bin/bash
echo "Remaining: \$(( $START_EPOCH + $CLAUDE_TIMEOUT - \$(date +%s) )) s"
TIMER
chmod +x "$WORKSPACE/timer.sh"

PROMPT="You are doing RL post-training of $BASE_MODEL on the task $TASK.
## Description
$(cat "$WORKSPACE/description.md" 2>/dev/null)
## Instructions
$(cat "$WORKSPACE/instructions.md" 2>/dev/null)
## Data sample
$(head -3 "$WORKSPACE/data/"*.jsonl 2>/dev/null || echo "no data files")
Save models under $OUTPUT_DIR (v1, v2, ...) and submit each to $GRADING_SERVER_URL/submit."
echo "Prompt length: ${#PROMPT} chars"

cd "$WORKSPACE"
timeout "$CLAUDE_TIMEOUT" "$CLAUDE" --print --verbose --model "$CLAUDE_MODEL" --output-format stream-json \
    --dangerously-skip-permissions "$PROMPT" 2>&1 | tee "$WORKSPACE/agent.jsonl"
EXIT_CODE=$?

echo "--- DIAGNOSTICS ---"
echo "exit_code: $EXIT_CODE"
echo "elapsed: $(( $(date +%s) - START_EPOCH )) s"
echo "model_files: $(ls "$OUTPUT_DIR/" 2>/dev/null | wc -l) dirs in output/"
echo "--- END DIAGNOSTICS ---"
exit $EXIT_CODE
