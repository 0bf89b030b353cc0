"""A task's own figures beside its score (`metrics["env_summary"]`, written by env_success from an
environment's `summary_metrics`): how the report and the console state them."""

from autorl_tui.reports.render import environment
from autorl_tui.scores import env_summary_text

METRICS = {"success_rate": 25.0, "env_summary": {"mean_reward": 61.25, "reward_ge_0.5": 50.0},
           "test": {"success_rate": 12.5, "env_summary": {"mean_reward": 40.0, "reward_ge_0.5": 37.5}}}


def test_dev_and_test_figures_are_stated_in_order():
    assert env_summary_text(METRICS) == ("dev: mean_reward 61.2, reward_ge_0.5 50.0; "
                                         "test: mean_reward 40.0, reward_ge_0.5 37.5")
    assert env_summary_text({k: v for k, v in METRICS.items() if k != "test"}) == \
        "dev: mean_reward 61.2, reward_ge_0.5 50.0"


def test_scores_without_figures_say_nothing():
    assert env_summary_text({"success_rate": 10.0}) == ""
    assert env_summary_text(None) == "" and env_summary_text("{}") == ""


def test_the_report_template_has_the_filter():
    html = environment().from_string("{{ m | env_summary }}").render(m=METRICS)
    assert "test: mean_reward 40.0" in html
