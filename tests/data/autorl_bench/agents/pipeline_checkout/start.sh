#!/bin/bash
# Written for the harness's tests in the shape of AutoRL-Bench's opencode/openhands folders: an
# external pipeline checkout named by a variable, its own Python and LLM endpoint from variables.
echo "=== Pipeline-shaped Agent ==="
if [ -z "$LLM_API_KEY" ]; then echo "ERROR: LLM_API_KEY required"; exit 2; fi
export LLM_BASE_URL="${OPENAI_API_BASE}"
cd "${PIPELINE_RL_ROOT:-$HOME/pipeline-rl}"
"${PIPELINE_PYTHON:-python3}" main.py --benchmark "$TASK" --workspace "$WORKSPACE" \
    --max-iterations ${MAX_ITERATIONS:-2}
