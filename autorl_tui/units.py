"""Human-readable sizes, shared by the console and the reports (binary units: 1 KiB = 1024 B)."""


def fmt_bytes(n, missing: str = "-") -> str:
    if n is None:
        return missing
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
