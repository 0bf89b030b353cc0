#!/bin/bash
# Written for the harness's tests in the shape of AutoRL-Bench's opencode folder: a `.env` in the
# working folder loaded if present, an external pipeline checkout named by OPENCODE_RL_ROOT, the
# model from OPENCODE_MODEL or CHAT_MODEL, the training Python's bin/ put on PATH, an opencode
# config (provider `openai` at OPENAI_API_BASE) written INTO the checkout, then the checkout's
# main.py exec'd from inside it.
echo "=== OpenCode-shaped Agent ==="
echo "Task: $TASK"
echo "Workspace: $WORKSPACE"
if [ -f .env ]; then
    export $(grep -v '^#' .env | xargs)
    echo "Loaded .env"
fi
OPENCODE_RL_ROOT="${OPENCODE_RL_ROOT:-$HOME/opencode-rl}"
export OPENCODE_MODEL="${OPENCODE_MODEL:-${CHAT_MODEL:-gpt-5}}"
export PYTHONUNBUFFERED=1
export PATH="$HOME/.opencode/bin:$PATH"
if [ -n "$TRAINING_PYTHON" ]; then
    export PATH="$(dirname "$TRAINING_PYTHON"):$PATH"
    echo "Training env bin: $(dirname "$TRAINING_PYTHON")"
fi
PYTHON="${OPENCODE_PYTHON:-python3}"

export XDG_CONFIG_HOME="${OPENCODE_RL_ROOT}/.opencode-config"
mkdir -p "$XDG_CONFIG_HOME/opencode"
cat > "$XDG_CONFIG_HOME/opencode/opencode.json" <<EOCFG
{
  "provider": {
    "openai": {
      "npm": "@ai-sdk/openai",
      "name": "Auto-configured",
      "options": {"baseURL": "${OPENAI_API_BASE}", "apiKey": "${OPENAI_API_KEY}"},
      "models": {"${OPENCODE_MODEL}": {"name": "${OPENCODE_MODEL}"}}
    }
  }
}
EOCFG

cd "$OPENCODE_RL_ROOT"
exec "$PYTHON" main.py --benchmark "$TASK" --base-model "$BASE_MODEL" --run-dir "$WORKSPACE" \
    --max-iterations ${MAX_ITERATIONS:-5}
