"""Report scale: a run with 100,000 events and 50,000 metric points, written through the Store
API, then reported (analytics + JSON + HTML). Prints the render time and the HTML size."""

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autorl_tui.reports.analytics import Analytics  # noqa: E402
from autorl_tui.reports.run_report import build_run_report, render_run_html  # noqa: E402
from autorl_tui.store.db import Store  # noqa: E402
from tests.support.run_writer import write_bulk_run  # noqa: E402

N_EVENTS, N_METRICS = 100_000, 50_000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        t = time.perf_counter()
        store = Store(db)
        write_bulk_run(store, "r-bulk", n_events=N_EVENTS, n_metric_points=N_METRICS)
        n_ev = store.one("SELECT count(*) n FROM events")["n"]
        n_me = store.one("SELECT count(*) n FROM metrics")["n"]
        store.close()
        print(f"reports_store_events: {n_ev} rows")
        print(f"reports_store_metric_points: {n_me} rows")
        print(f"reports_store_build: {time.perf_counter() - t:.2f} s")
        t = time.perf_counter()
        cpu = time.process_time()
        with Analytics(db) as a:
            report = build_run_report(a, "r-bulk")
        t_json = time.perf_counter() - t
        html = render_run_html(report)
        total = time.perf_counter() - t
        cpu = time.process_time() - cpu
        out = Path(tmp) / "report.html"
        out.write_text(html)
        print(f"reports_run_report_json: {t_json:.2f} s")
        print(f"reports_run_report_render: {total:.2f} s")
        print(f"reports_run_report_render_cpu: {cpu:.2f} s")
        print(f"reports_run_report_html_size: {out.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
