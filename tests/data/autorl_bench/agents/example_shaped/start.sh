#!/bin/bash
# Written for the harness's tests in the shape of AutoRL-Bench's example_agent: a TRL GRPO script
# beside it that reads the task's data in GSM8K's own rows ({question, answer}).
echo "=== Example-shaped Agent ==="
echo "Task: $TASK"
echo "Model: $BASE_MODEL"
python3 "$(dirname "$0")/train.py"
