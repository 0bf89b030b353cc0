#!/bin/bash
# An agent in AutoRL-Bench's format (written for the harness's tests, in the style of its
# example agents): it reads the contract's environment, trains nothing, copies the base model to
# output/, submits it, reads the answer, resubmits the same folder, and records what it saw in
# $WORKSPACE/probe.json. It exits non-zero when the API breaks the contract it relies on.
set -u
echo "=== Probe Agent ==="
echo "Task: $TASK"
echo "Model: $BASE_MODEL"
echo "Workspace: $WORKSPACE"
echo "Grading Server: $GRADING_SERVER_URL"

fail() { echo "PROBE FAILED: $*"; exit 1; }
post() { curl -s -X POST "$GRADING_SERVER_URL/submit" -H 'Content-Type: application/json' -d "$1"; }
code_of() { curl -s -o /dev/null -w '%{http_code}' -X POST "$GRADING_SERVER_URL/submit" -H 'Content-Type: application/json' -d "$1"; }

[ "$MODEL_PATH" = "$WORKSPACE/models/$BASE_MODEL" ] || fail "MODEL_PATH is $MODEL_PATH"
[ "$DATA_PATH" = "$WORKSPACE/data" ] || fail "DATA_PATH is $DATA_PATH"
[ "$OUTPUT_DIR" = "$WORKSPACE/output" ] || fail "OUTPUT_DIR is $OUTPUT_DIR"

health=$(curl -sf "$GRADING_SERVER_URL/health") || fail "no /health"
[ "$(echo "$health" | jq -r .status)" = "ok" ] || fail "health: $health"

# "Training": a copy of the base model.
cp -r "$MODEL_PATH" "$OUTPUT_DIR/v1"

first=$(post "{\"model_path\": \"$OUTPUT_DIR/v1\"}")
score=$(echo "$first" | jq -r .score)
best=$(echo "$first" | jq -r .best.score)
improvement=$(echo "$first" | jq -r .improvement)
echo "score=$score best=$best improvement=$improvement"
[ "$score" != "null" ] || fail "no score in $first"

remaining=$(curl -sf "$GRADING_SERVER_URL/time" | jq -r .remaining)
echo "remaining=$remaining"

again=$(post "{\"model_path\": \"$OUTPUT_DIR/v1\"}")
id1=$(echo "$first" | jq -r .submission_id)
id2=$(echo "$again" | jq -r .submission_id)
[ "$id1" = "$id2" ] || fail "resubmitting the same folder gave submission $id2, not $id1"

# A model that cannot be evaluated: AutoRL-Bench answers 200 with score 0.0 and an error.
mkdir -p "$OUTPUT_DIR/broken"
cp "$MODEL_PATH"/config.json "$MODEL_PATH"/tokenizer* "$OUTPUT_DIR/broken/"
echo "not weights" > "$OUTPUT_DIR/broken/model.safetensors"
broken_code=$(curl -s -o "$WORKSPACE/broken.json" -w '%{http_code}' -X POST "$GRADING_SERVER_URL/submit" \
  -H 'Content-Type: application/json' -d "{\"model_path\": \"$OUTPUT_DIR/broken\"}")

missing=$(post '{}')
missing_code=$(code_of '{}')
bad_gpu=$(post "{\"model_path\": \"$OUTPUT_DIR/v1\", \"gpu\": \"7\"}")
bad_gpu_code=$(code_of "{\"model_path\": \"$OUTPUT_DIR/v1\", \"gpu\": \"7\"}")
scores_before=$(cat "$WORKSPACE/scores.json")

# The mirror is ours to read, not to grade by: forging it changes nothing in the ledger.
chmod u+w "$WORKSPACE/scores.json" 2>/dev/null
echo '[{"submission_id": 1, "score": 100.0}]' > "$WORKSPACE/scores.json" 2>/dev/null \
  || { rm -f "$WORKSPACE/scores.json" && echo '[{"submission_id": 1, "score": 100.0}]' > "$WORKSPACE/scores.json"; }

jq -n --argjson first "$first" --argjson again "$again" --argjson health "$health" \
  --argjson time "$(curl -sf "$GRADING_SERVER_URL/time")" --argjson broken "$(cat "$WORKSPACE/broken.json")" \
  --arg broken_code "$broken_code" --argjson missing "$missing" --arg missing_code "$missing_code" \
  --argjson bad_gpu "$bad_gpu" --arg bad_gpu_code "$bad_gpu_code" --argjson scores "$scores_before" \
  --arg note "${PROBE_NOTE:-}" --arg task "$TASK" --arg remaining "$remaining" \
  '{first: $first, again: $again, health: $health, time: $time, broken: $broken, broken_code: $broken_code,
    missing: $missing, missing_code: $missing_code, bad_gpu: $bad_gpu, bad_gpu_code: $bad_gpu_code,
    scores: $scores, note: $note, task: $task, remaining: $remaining}' > "$WORKSPACE/probe.json" \
  || fail "could not write probe.json"
echo "probe done"
exit 0
