"""The grading API as the hostile test agents call it (shared by output_link.py and hostile_files.py,
which run as scripts in this folder, so it is on their path inside the sandbox and the container)."""

import json
import os
import urllib.error
import urllib.request


def submit(folder: str):
    """POST /submit for `folder`: (HTTP status, JSON answer), refusals included."""
    req = urllib.request.Request(f"{os.environ['GRADING_SERVER_URL']}/submit", method="POST",
                                 data=json.dumps({"model_path": folder}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
