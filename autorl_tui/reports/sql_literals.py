"""Named query parameters written into the SQL text as typed literals, instead of bound by DuckDB.

Two reasons. Binding any Python value through DuckDB's Python client imports pandas (and numpy),
about half a second of a short `compare` or `report`, which never needs them. And a table function
(`sqlite_query`, which sends one run's filter to SQLite and its indexes: reports/pushdown.py) takes
constants only, so a run id given to it must be a literal of the SQL text.
"""

from __future__ import annotations

import math
import re
from typing import Any

_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def literal(value: Any) -> str:
    """A DuckDB literal of the value, typed as DuckDB binds the same Python value."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"({value})" if value < 0 else str(value)
    if isinstance(value, float):
        text = repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else
                                                       ("inf" if value > 0 else "-inf"))
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"no SQL literal for a {type(value).__name__} parameter")


def inline(sql: str, params: dict[str, Any]) -> str:
    """The SQL with each `$name` of params replaced by its literal (other `$...` left as written:
    JSON paths such as '$.kind' are not names)."""
    if not params:
        return sql
    return _PARAM.sub(lambda m: literal(params[m.group(1)]) if m.group(1) in params else m.group(0), sql)
