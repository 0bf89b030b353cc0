"""Test agent: probes the grading API's integrity rules and records what it was told."""

import json
import os
import shutil
import urllib.error
import urllib.request

api = os.environ["GRADING_SERVER_URL"]
ws = os.environ["WORKSPACE"]
out = os.environ["OUTPUT_DIR"]
model = os.environ["MODEL_PATH"]


def post(body: bytes):
    req = urllib.request.Request(f"{api}/submit", data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


results = {}
results["outside"] = post(json.dumps({"model_path": "models/" + os.environ["BASE_MODEL"]}).encode())
results["dotdot"] = post(json.dumps({"model_path": "output/../models/" + os.environ["BASE_MODEL"]}).encode())
os.symlink(model, os.path.join(out, "link"))
results["symlink"] = post(json.dumps({"model_path": "output/link"}).encode())
os.makedirs(os.path.join(out, "empty"))
results["empty"] = post(json.dumps({"model_path": "output/empty"}).encode())
os.makedirs(os.path.join(out, "lora"))
with open(os.path.join(out, "lora", "adapter_config.json"), "w") as fh:
    json.dump({"peft_type": "LORA", "r": 8}, fh)
with open(os.path.join(out, "lora", "adapter_model.safetensors"), "wb") as fh:
    fh.write(b"\0" * 64)
results["lora"] = post(json.dumps({"model_path": "output/lora"}).encode())
results["garbage"] = post(b"{not json")
results["no_path"] = post(json.dumps({"path": "output/v1"}).encode())
shutil.copytree(model, os.path.join(out, "v1"))
os.symlink("model.safetensors", os.path.join(out, "v1", "inner-link"))   # a link anywhere is refused
results["inner_link"] = post(json.dumps({"model_path": "output/v1"}).encode())
os.unlink(os.path.join(out, "v1", "inner-link"))
results["valid"] = post(json.dumps({"model_path": "output/v1"}).encode())
results["duplicate"] = post(json.dumps({"model_path": "output/v1"}).encode())
for name in ("health", "time", "submissions"):
    with urllib.request.urlopen(f"{api}/{name}", timeout=10) as r:
        results[name] = json.loads(r.read())
try:
    urllib.request.urlopen(api.rsplit("/", 1)[0] + "/wrong-token/health", timeout=10)
    results["wrong_token"] = 200
except urllib.error.HTTPError as e:
    results["wrong_token"] = e.code
results["env"] = dict(os.environ)
readable = {}
for path in filter(None, os.environ.get("PROBE_PATHS", "").split(":")):
    try:
        if os.path.isdir(path):
            readable[path] = os.listdir(path)
        else:
            with open(path, "rb") as fh:
                readable[path] = len(fh.read(100))
    except OSError as exc:
        readable[path] = f"error: {exc}"
results["readable"] = readable
results["uid"] = os.getuid()
with open(os.path.join(ws, "logs", "probe.json"), "w") as fh:
    json.dump(results, fh)
print("probe done")
