"""The generic episode runner under the name `api.py` imports it by (`.episodes`): in the
package it is the grader's `autorl_tui/grading/episodes.py`; in the agent's workspace the
provider copies that file itself to `deepsearchqa_api/episodes.py`."""

from autorl_tui.grading.episodes import EpisodeRecord, EpisodeState, Generate, Parsed, run_episodes

__all__ = ["EpisodeRecord", "EpisodeState", "Generate", "Parsed", "run_episodes"]
