#!/bin/bash
# Written for the harness's tests in the shape of AutoRL-Bench's openhands folder: a `.env` in the
# working folder loaded if present, OPENAI_API_KEY and LLM_API_KEY mapped onto each other, the model
# from LLM_MODEL or CHAT_MODEL, LLM_BASE_URL from OPENAI_API_BASE, TRAINING_PYTHON expected, then
# the pipeline checkout's main.py run from inside it with OPENHANDS_PYTHON.
echo "=== OpenHands-shaped Agent ==="
echo "Task: $TASK"
echo "Workspace: $WORKSPACE"
if [ -f .env ]; then
    export $(grep -v '^#' .env | xargs)
    echo "Loaded .env"
fi
if [ -z "$OPENAI_API_KEY" ] && [ -n "$LLM_API_KEY" ]; then
    export OPENAI_API_KEY="$LLM_API_KEY"
fi
if [ -z "$LLM_API_KEY" ] && [ -n "$OPENAI_API_KEY" ]; then
    export LLM_API_KEY="$OPENAI_API_KEY"
fi
if [ -z "$LLM_API_KEY" ] && [ -z "$OPENAI_API_KEY" ]; then
    echo "ERROR: LLM_API_KEY or OPENAI_API_KEY required"
    exit 2
fi
export LLM_MODEL="${LLM_MODEL:-${CHAT_MODEL:-gpt-5}}"
export LLM_BASE_URL="${OPENAI_API_BASE}"
if [ -z "$TRAINING_PYTHON" ]; then
    echo "WARNING: TRAINING_PYTHON not set, using python3 from PATH"
    export TRAINING_PYTHON="$(command -v python3)"
fi
echo "Training Python: $TRAINING_PYTHON"

cd "${OPENHANDS_RL_ROOT:-$HOME/openhands-rl}"
OPENHANDS_PYTHON="${OPENHANDS_PYTHON:-python}"
"$OPENHANDS_PYTHON" main.py --benchmark "$TASK" --base-model "$BASE_MODEL" --workspace "$WORKSPACE" \
    --max-iterations ${MAX_ITERATIONS:-10} --training-timeout ${TRAINING_TIMEOUT:-7200} \
    --max-agent-steps ${MAX_AGENT_STEPS:-50}
