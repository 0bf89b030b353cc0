"""What the submission checks refuse with, and the first check: that the agent's text can name a file."""

from __future__ import annotations


class SubmissionRejected(Exception):
    """The submission is not acceptable; the message tells the agent what to fix. HTTP 400."""

    def __init__(self, message: str, code: str = "invalid"):
        super().__init__(message)
        self.code = code


MAX_PATH_BYTES = 4096          # PATH_MAX
MAX_COMPONENT_BYTES = 255      # NAME_MAX


def check_model_path_text(model_path) -> None:
    """What the agent sent can name a file at all: a non-empty UTF-8 string without NUL or control
    characters, within the kernel's length limits. Checked before anything is recorded."""
    if not isinstance(model_path, str) or not model_path.strip():
        raise SubmissionRejected('give "model_path": a folder inside output/, e.g. {"model_path": "output/v1"}',
                                 "bad_request")
    shown = ascii(model_path[:80])
    try:
        encoded = model_path.encode("utf-8")
    except UnicodeEncodeError:
        raise SubmissionRejected(f"model_path {shown} is not valid Unicode (a lone surrogate escape such as "
                                 f"\\ud800): name the folder with plain characters", "bad_path") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in model_path):
        raise SubmissionRejected(f"model_path {shown} holds a NUL or control character: name the folder with "
                                 f"printable characters, e.g. output/v1", "bad_path")
    if len(encoded) > MAX_PATH_BYTES:
        raise SubmissionRejected(f"model_path is {len(encoded)} bytes long (the limit is {MAX_PATH_BYTES}): use a "
                                 f"shorter path such as output/v1", "bad_path")
    long = [part for part in encoded.split(b"/") if len(part) > MAX_COMPONENT_BYTES]
    if long:
        raise SubmissionRejected(f"a folder name in model_path is {len(long[0])} bytes long (the limit is "
                                 f"{MAX_COMPONENT_BYTES} per name): use shorter names, e.g. output/v1", "bad_path")
