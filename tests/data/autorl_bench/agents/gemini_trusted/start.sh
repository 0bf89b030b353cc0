#!/bin/bash
# Written for the harness's tests in the shape of AutoRL-Bench's gemini folder: the Gemini CLI
# called through a variable, `--yolo` headless in the workspace (which Gemini obeys only in a
# folder the user trusts), its stream-json trace through `tee`.
GEMINI="${GEMINI_BIN:-gemini}"
GEMINI_MODEL="${GEMINI_MODEL:-gemini-2.5-pro}"
echo "=== Gemini-shaped Agent ==="
export GEMINI_SANDBOX="false"
PROMPT="Train $BASE_MODEL on $TASK and submit to $GRADING_SERVER_URL/submit."
cd "$WORKSPACE"
timeout "${GEMINI_TIMEOUT:-3600}" "$GEMINI" --yolo --model "$GEMINI_MODEL" --output-format stream-json \
    -p "$PROMPT" 2>&1 | tee "$WORKSPACE/agent.jsonl"
