"""The control agent: copy the base model to output/v1 unchanged and submit it once.

Uses only the workspace contract (MODEL_PATH, OUTPUT_DIR, GRADING_SERVER_URL)."""

import json
import os
import shutil
import sys
import urllib.error
import urllib.request


def post(url: str, payload: dict, timeout: float) -> dict:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return {"error": exc.read().decode(errors="replace"), "status": exc.code}


def main() -> int:
    model, output, api = os.environ["MODEL_PATH"], os.environ["OUTPUT_DIR"], os.environ["GRADING_SERVER_URL"]
    target = os.path.join(output, "v1")
    print(f"copying the base model {model} -> {target}", flush=True)
    shutil.copytree(model, target)
    remaining = float(os.environ.get("RUN_DEADLINE", "0")) - __import__("time").time()
    result = post(f"{api}/submit", {"model_path": "output/v1"}, timeout=max(5.0, remaining))
    print(f"submitted output/v1: {json.dumps(result)}", flush=True)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
