"""Score vocabulary shared by the grader (which writes it into sample results) and the reports
(which read it back from the store): neither imports the other."""

FAILURE_KINDS = ("wrong_answer", "format_error", "truncated", "empty", "runtime_error", "timeout")
