"""Test agent: attacks the grading API and the grader the way issue 24 found them broken, and
records every answer in logs/probe.json for the test to judge."""

import http.client
import json
import os
import shutil
import socket
import threading
import time
import urllib.parse

api = urllib.parse.urlsplit(os.environ["GRADING_SERVER_URL"])
ws, out, model = os.environ["WORKSPACE"], os.environ["OUTPUT_DIR"], os.environ["MODEL_PATH"]
LOOP = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{{ messages[0]['content'] }}")


def request(method: str, name: str, body: bytes | None = None, timeout: float = 300):
    conn = http.client.HTTPConnection(api.hostname, api.port, timeout=timeout)
    t0 = time.time()
    try:
        conn.request(method, f"{api.path}/{name}", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = {"not_json": raw[:200].decode(errors="replace")}
        return [resp.status, payload, round(time.time() - t0, 2)]
    finally:
        conn.close()


def submit(body: bytes):
    return request("POST", "submit", body)


results = {}
bad = {
    "nul": b'{"model_path": "output/v1\\u0000x"}',
    "surrogate": b'{"model_path": "output/\\ud800"}',
    "long_name": json.dumps({"model_path": "output/" + "a" * 300}).encode(),
    "deep_json": b'{"model_path": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "deep_object": b'{"a": ' * 3000 + b"1" + b"}" * 3000,
    "not_json": b"\xff\xfe not json at all",
    "number": b'{"model_path": 5}',
    "null": b'{"model_path": null}',
    "list": b'{"model_path": ["output/v1"]}',
    "array_body": b'["output/v1"]',
    "too_big": json.dumps({"model_path": "output/v1", "pad": "x" * 100_000}).encode(),
}
# Twice the task's cap of 10: had any of these counted, the valid submissions below would get 429.
for round_ in range(2):
    for name, body in bad.items():
        results[f"{name}{round_}"] = submit(body)

# A slow partial request: the request line one byte at a time. The server must close it within
# its header timeout, and answer others meanwhile.
sock = socket.create_connection((api.hostname, api.port))
line = f"POST {api.path}/submit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
t0 = time.time()
closed_after = None
answers = []


def others():
    while closed_after is None and time.time() - t0 < 60:
        answers.append(request("GET", "time", timeout=30)[0])


watcher = threading.Thread(target=others)
watcher.start()
sock.settimeout(0.5)
for i in range(10_000):
    try:
        sock.send(line[i % len(line):i % len(line) + 1])
        if sock.recv(1) == b"":
            closed_after = time.time() - t0
            break
    except socket.timeout:
        pass
    except OSError:
        closed_after = time.time() - t0
        break
    if time.time() - t0 > 60:
        break
watcher.join()
results["slowloris"] = {"closed_after_s": closed_after, "others": answers}

# A model whose chat template loops.
loop_dir = os.path.join(out, "loop")
shutil.copytree(model, loop_dir)
if os.path.exists(os.path.join(loop_dir, "chat_template.jinja")):
    with open(os.path.join(loop_dir, "chat_template.jinja"), "w") as fh:
        fh.write(LOOP)
config_path = os.path.join(loop_dir, "tokenizer_config.json")
with open(config_path) as fh:
    config = json.load(fh)
if "chat_template" in config or not os.path.exists(os.path.join(loop_dir, "chat_template.jinja")):
    config["chat_template"] = LOOP
    with open(config_path, "w") as fh:
        json.dump(config, fh)
results["loop"] = submit(json.dumps({"model_path": "output/loop"}).encode())

# The same content twice at once: graded once, the second answered as its duplicate.
for name in ("c1", "c2"):
    shutil.copytree(model, os.path.join(out, name))
pair = {}
threads = [threading.Thread(target=lambda n=n: pair.__setitem__(n, submit(json.dumps({"model_path": f"output/{n}"}).encode())))
           for n in ("c1", "c2")]
for t in threads:
    t.start()
for t in threads:
    t.join()
results["concurrent"] = pair
results["submissions"] = request("GET", "submissions")[1]
with open(os.path.join(ws, "logs", "probe.json"), "w") as fh:
    json.dump(results, fh)
print("probe done")
