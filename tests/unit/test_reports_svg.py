"""The hand-written SVG charts: valid XML, axes with sensible ticks, gaps for missing values."""

import re
import xml.etree.ElementTree as ET

from autorl_tui.reports import svg

NS = "{http://www.w3.org/2000/svg}"


def parse(text):
    return ET.fromstring(text)


def test_nice_ticks_cover_the_range_with_round_steps():
    ticks = svg.nice_ticks(0.013, 0.987)
    assert ticks[0] <= 0.013 and ticks[-1] >= 0.987
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert steps == {0.2}
    assert svg.nice_ticks(5, 5)[0] <= 5  # a flat series still gets an axis


def test_line_chart_breaks_at_missing_values_and_escapes_labels():
    root = parse(svg.line_chart([{"label": "a<b", "points": [(0, 1.0), (1, None), (2, 3.0), (3, 2.0)]}],
                                title="x & y", markers=[{"x": 2, "label": "spike"}]))
    paths = [p.get("d") for p in root.iter(f"{NS}path") if p.get("stroke") == svg.PALETTE[0]]
    assert len(paths) == 1 and paths[0].count("M") == 2  # two pieces: before and after the gap
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "spike" in texts
    assert root.find(f"{NS}title").text == "x & y"


def test_line_chart_without_finite_values_says_so():
    root = parse(svg.line_chart([{"label": "nan", "points": [(0, None)]}]))
    assert "no finite values" in "".join(t.text or "" for t in root.iter(f"{NS}text"))


def test_score_timeline_marks_drops_and_the_selected_submission():
    subs = [{"seq": 1, "status": "scored", "score": 30.0, "t_s": 60.0, "is_best": False},
            {"seq": 2, "status": "rejected", "score": None, "t_s": 120.0, "is_best": False},
            {"seq": 3, "status": "scored", "score": 40.0, "t_s": 200.0, "is_best": True}]
    root = parse(svg.score_timeline(subs, baseline=25.0, budget_s=300))
    titles = [t.text for t in root.iter(f"{NS}title")]
    assert "#2 rejected" in titles and "#3 scored 40.0" in titles
    rings = [c for c in root.iter(f"{NS}circle") if c.get("fill") == "none"]
    assert len(rings) == 1


def test_radar_needs_three_axes_and_keeps_values_inside():
    assert svg.radar(["a", "b"], [{"label": "x", "values": [1, 2]}]) == ""
    root = parse(svg.radar(["a", "b", "c"], [{"label": "x", "values": [100, 0, None]}]))
    size = float(root.get("width"))
    for c in root.iter(f"{NS}circle"):
        assert 0 <= float(c.get("cx")) <= size


def test_time_axis_ticks_sit_at_round_durations_and_read_their_true_value():
    ticks = svg.time_ticks(0, 280, 6)
    assert ticks[:4] == [0, 60, 120, 180] and ticks[-1] >= 280
    assert [svg.fmt_duration(t) for t in (0, 59, 60, 150, 200, 250, 3600, 5430)] == \
        ["0s", "59s", "1m", "2m30s", "3m20s", "4m10s", "1h", "1h30m30s"]
    for lo, hi in ((0, 45), (0, 1740), (12, 7300), (0, 90000)):
        ticks = svg.time_ticks(lo, hi, 8)
        step = ticks[1] - ticks[0]
        assert step in svg.TIME_STEPS or step % 86400 == 0
        assert ticks[0] <= lo and ticks[-1] >= hi and len(ticks) <= 12
    chart = svg.score_timeline([{"seq": 1, "score": 50.0, "t_s": 150.0, "status": "scored", "selected": True}],
                               baseline=20.0, budget_s=300.0)
    labels = re.findall(r'text-anchor="middle">([^<]+)</text>', chart)
    assert {"1m", "2m", "3m", "4m", "5m"} <= set(labels), labels


def test_diff_lists_the_files_the_pipeline_ran_first_and_gives_them_the_line_budget():
    from autorl_tui.reports.diffs import diff_manifests, files_run

    blobs = {"a1": b"x = 1\n", "a2": b"x = 2\n", "n1": b"".join(b"note %d\n" % i for i in range(50)),
             "n2": b"".join(b"line %d\n" % i for i in range(50)), "t1": b"lr = 1\n", "t2": b"lr = 2\n"}
    old = {"aaa_notes.md": "n1", "helpers.py": "a1", "train.py": "t1"}
    new = {"aaa_notes.md": "n2", "helpers.py": "a2", "train.py": "t2"}
    ran = files_run(["[reference] wrote the pipeline: helpers.py, train.py", "[reference] running python code/train.py "
                     "--steps 10", "cat notes"], new.keys())
    assert ran == {"train.py"}
    d = diff_manifests(old, new, blobs.get, max_lines_per_file=200, max_lines_total=20, first=ran)
    assert [f["path"] for f in d["files"]] == ["train.py", "aaa_notes.md", "helpers.py"]
    assert d["files"][0]["ran"] and "+lr = 2" in d["files"][0]["diff"] and not d["files"][0]["truncated"]
    assert d["files"][1]["truncated"]          # the unrelated long file gets what is left
    assert files_run(["accelerate launch --num_processes 2 /ws/code/sub/sft.py", "bash run.sh", "python3 -u x.py",
                      "edited y.py"], ["sub/sft.py", "run.sh", "x.py", "y.py"]) == {"sub/sft.py", "run.sh", "x.py"}
