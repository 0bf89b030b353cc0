"""The evaluation protocol of a task card (part of the card, so it lives in the catalog; the grader
reads it through `grading/types.py`).

A card names one protocol (`protocol: {...}`, called `default`) or several:

    default_protocol: autorl-bench
    protocols:
      autorl-bench:                  # the benchmark's own protocol, as AutoRL-Bench runs it
        about: one line saying what it is
        max_tokens: 512              # EvalProtocol fields
        data: {splits: {...}}        # optional: replaces these keys of the card's `data`
        scorer_options: {...}        # optional: merged over the card's scorer options
        description: other.md        # optional: the agent-visible description under this protocol
      ours: {...}

The chosen protocol's name is part of the card's protocol hash, the run spec, reports and exports.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

DEFAULT_NAME = "default"
OVERRIDE_KEYS = ("about", "data", "scorer_options", "description")
# Fields added after hashes were first recorded: left out of `to_dict` at their default, so the
# protocol hashes (and cached baselines) of cards that do not use them stay what they were.
_OPTIONAL_FIELDS = {"shots": None, "prompt_template": None}


@dataclass
class EvalProtocol:
    """How a model is evaluated on a task. Part of the task card; hashed for the baseline cache."""
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    max_tokens: int = 64
    max_steps: int | None = None      # interactive tasks
    prompt_format: str = "chat"       # chat: messages through the tokenizer's chat template; plain: raw text
    system_prompt: str | None = None
    batch_size: int = 64
    seed: int = 0
    stop: list[str] | None = None
    k: list[int] = field(default_factory=lambda: [1])   # pass@k values to report when n > 1
    # Few-shot turns put before each item's prompt (chat: alternating user/assistant messages;
    # plain: their contents joined), e.g. OpenCompass's 4-shot GSM8K prompt.
    shots: list[dict] | None = None
    # The item's prompt written into this template (`{prompt}`, or any field of the item by name).
    prompt_template: str | None = None

    @classmethod
    def from_dict(cls, data: dict | None) -> "EvalProtocol":
        data = dict(data or {})
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown protocol field(s) {unknown}; known: {sorted(known)}")
        shots = data.get("shots")
        if shots is not None and not (isinstance(shots, list) and all(
                isinstance(s, dict) and s.get("role") in ("user", "assistant") and isinstance(s.get("content"), str)
                for s in shots)):
            raise ValueError("shots must be a list of {role: user|assistant, content: TEXT} turns")
        return cls(**data)

    def to_dict(self) -> dict:
        out = asdict(self)
        for key, default in _OPTIONAL_FIELDS.items():
            if out.get(key) == default:
                out.pop(key)
        return out

    def build_prompt(self, item: dict):
        """The prompt sent for one item: its `prompt`, written into the template, after the shots."""
        prompt = item["prompt"]
        if self.prompt_template is not None:
            fields = {k: v for k, v in item.items() if isinstance(v, (str, int, float))}
            fields["prompt"] = prompt
            prompt = self.prompt_template.format_map(fields)
        if not self.shots:
            return prompt
        if self.prompt_format == "plain":
            return "".join(s["content"] for s in self.shots) + str(prompt)
        return [dict(s) for s in self.shots] + [{"role": "user", "content": prompt}]


@dataclass
class ProtocolChoice:
    """One named protocol of a card, with what it overrides in the card."""
    name: str
    protocol: EvalProtocol
    about: str = ""
    data: dict = field(default_factory=dict)
    scorer_options: dict = field(default_factory=dict)
    description: str | None = None


def card_protocols(raw: dict) -> tuple[dict[str, dict], str]:
    """The named protocols of a raw card ({name: raw fields}) and the default name. Raises
    ValueError for a malformed declaration."""
    if "protocols" in raw:
        if "protocol" in raw:
            raise ValueError("give either `protocol` (one protocol) or `protocols` (named ones), not both")
        named = raw["protocols"]
        if not isinstance(named, dict) or not named or not all(isinstance(v, dict) for v in named.values()):
            raise ValueError("`protocols` must map names to protocol mappings, e.g. protocols: {autorl-bench: {...}}")
        default = str(raw.get("default_protocol") or next(iter(named)))
        if default not in named:
            raise ValueError(f"default_protocol {default!r} is not one of the protocols: {', '.join(named)}")
        return {str(k): v for k, v in named.items()}, default
    if not isinstance(raw.get("protocol"), dict):
        raise ValueError("`protocol` must be a mapping of protocol fields")
    return {DEFAULT_NAME: raw["protocol"]}, DEFAULT_NAME


def choose_protocol(raw: dict, name: str | None) -> ProtocolChoice:
    """The protocol `name` of a raw card (its default when None). ValueError names the known ones."""
    named, default = card_protocols(raw)
    name = default if name is None else str(name)
    if name not in named:
        raise ValueError(f"no protocol {name!r}; this task's protocols: {', '.join(named)} (default {default})")
    fields = dict(named[name])
    overrides = {k: fields.pop(k) for k in OVERRIDE_KEYS if k in fields}
    for key in ("data", "scorer_options"):
        if not isinstance(overrides.get(key, {}), dict):
            raise ValueError(f"protocol {name}: `{key}` must be a mapping")
    return ProtocolChoice(name=name, protocol=EvalProtocol.from_dict(fields), about=str(overrides.get("about", "")),
                          data=dict(overrides.get("data") or {}), scorer_options=dict(overrides.get("scorer_options") or {}),
                          description=str(overrides["description"]) if overrides.get("description") else None)
