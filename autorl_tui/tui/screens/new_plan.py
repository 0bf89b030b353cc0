"""New plan: pick tasks, agents, models, seeds, budget, executor and GPUs from the engine's catalog
(or load a plan YAML), see the plan validated as you type, and enqueue it.

The form writes the plan YAML shown on the right; the YAML (as edited) is what gets enqueued."""

from __future__ import annotations

from pathlib import Path

import yaml
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Input, Label, Select, SelectionList, Static, TextArea

from autorl_tui.catalog.plans import DEFAULT_EXECUTOR, form_executors, parse_plan
from autorl_tui.exitcodes import UsageError
from autorl_tui.tui.widgets.footer import console_footer
from autorl_tui.tui.actions import bindings
from autorl_tui.tui.widgets.checklist import CheckList


def plan_yaml(name: str, tasks, agents, models, seeds: str, budget: str, executor: str, gpus: str,
              priority: str) -> str:
    """The plan the form describes (numbers parsed where they are numbers; parse_plan judges)."""
    def num(text: str):
        text = text.strip()
        try:
            return int(text)
        except ValueError:
            return text
    seed_list = [num(s) for s in seeds.replace(" ", ",").split(",") if s.strip()]
    plan = {"name": name.strip() or "console-plan", "tasks": list(tasks), "agents": list(agents),
            "models": list(models) or ["tiny"], "seeds": seed_list or [0], "budget": budget.strip() or "10m",
            "executor": executor}
    if gpus.strip() not in ("", "0"):
        plan["gpus_per_run"] = num(gpus)
    if priority.strip() not in ("", "0"):
        plan["priority"] = num(priority)
    return yaml.safe_dump(plan, sort_keys=False)


# plan keys the form has a field for; others survive only while the YAML is not rewritten from the form
FORM_KEYS = {"name", "tasks", "agents", "models", "seeds", "budget", "executor", "gpus_per_run", "priority"}


class NewPlanScreen(Screen):
    SCOPE = "new_plan"
    BINDINGS = bindings("new_plan")

    def __init__(self):
        super().__init__()
        self.catalog: dict = {}
        self._writing = False

    def compose(self) -> ComposeResult:
        yield Static("New plan: space toggles, tab moves, ctrl+s enqueues, ctrl+o loads a plan file, esc goes back",
                     classes="status-bar")
        with Horizontal(id="plan-body"):
            with Vertical(id="plan-form"):
                with Horizontal(id="pickers"):
                    with Vertical():
                        yield Label("Tasks")
                        yield CheckList(id="tasks")
                    with Vertical():
                        yield Label("Agents")
                        yield CheckList(id="agents")
                    with Vertical():
                        yield Label("Models")
                        yield CheckList(id="models")
                with Horizontal(classes="field-row"):
                    yield Label("Seeds", classes="field-label")
                    yield Input("0", id="seeds", placeholder="0,1,2")
                    yield Label("Budget", classes="field-label")
                    yield Input("10m", id="budget", placeholder="10m, 1h30m")
                with Horizontal(classes="field-row"):
                    yield Label("Executor", classes="field-label")
                    yield Select([(name, name) for name in form_executors()], value=DEFAULT_EXECUTOR, allow_blank=False,
                                 id="executor")
                    yield Label("GPUs/run", classes="field-label")
                    yield Input("0", id="gpus", type="integer")
                with Horizontal(classes="field-row"):
                    yield Label("Priority", classes="field-label")
                    yield Input("0", id="priority", type="integer")
                    yield Label("Name", classes="field-label")
                    yield Input("console-plan", id="name")
                with Horizontal(classes="field-row"):
                    yield Label("Plan file", classes="field-label")
                    yield Input(placeholder="path/to/plan.yaml (ctrl+o loads it)", id="path")
            with Vertical(id="plan-preview"):
                yield Label("Plan YAML (what will be enqueued)")
                yield TextArea(id="yaml", soft_wrap=False)
                yield Static(id="verdict")
        yield console_footer()

    def on_mount(self) -> None:
        self.load_catalog()
        self.query_one("#tasks").focus()

    @work(exclusive=True, group="catalog")
    async def load_catalog(self) -> None:
        try:
            self.catalog = await self.app.client.catalog()
        except Exception as exc:  # noqa: BLE001 - shown to the operator
            self.notify(f"could not read the engine's catalog: {exc}", severity="error")
            return
        tasks = self.query_one("#tasks", SelectionList)
        for t in self.catalog.get("tasks", []):
            tasks.add_option((f"{t['id']}  L{t['level']}  ({t['default_budget']})", t["id"]))
        agents = self.query_one("#agents", SelectionList)
        for a in self.catalog.get("agents", []):
            agents.add_option((a["name"], a["name"]))
        models = self.query_one("#models", SelectionList)
        for i, m in enumerate(self.catalog.get("models", [])):
            models.add_option((m, m, i == 0))
        for picker in (tasks, agents, models):
            if picker.option_count:
                picker.highlighted = 0          # space selects the first entry right away
        gpus = self.catalog.get("gpus") or []
        if not gpus:
            self.query_one("#gpus", Input).tooltip = "this engine has no GPUs: runs take CPU slots"
        self.write_yaml()

    # ------------------------------------------------------------------ form -> YAML -> verdict
    def form_yaml(self) -> str:
        q = self.query_one
        return plan_yaml(q("#name", Input).value, q("#tasks", SelectionList).selected,
                         q("#agents", SelectionList).selected, q("#models", SelectionList).selected,
                         q("#seeds", Input).value, q("#budget", Input).value, str(q("#executor", Select).value),
                         q("#gpus", Input).value, q("#priority", Input).value)

    def write_yaml(self, text: str | None = None) -> None:
        self._writing = True
        self.query_one("#yaml", TextArea).text = self.form_yaml() if text is None else text
        self._writing = False
        self.validate()

    def validate(self) -> bool:
        text = self.query_one("#yaml", TextArea).text
        verdict = self.query_one("#verdict", Static)
        try:
            plan = parse_plan(text, "in the form")
        except UsageError as exc:
            verdict.update(f"[red]✗ {exc}[/red]")
            return False
        known_tasks = {t["id"] for t in self.catalog.get("tasks", [])}
        known_agents = {a["name"] for a in self.catalog.get("agents", [])}
        unknown = sorted({r.task for r in plan.runs if r.task not in known_tasks} |
                         {r.agent for r in plan.runs if r.agent not in known_agents})
        if self.catalog and unknown:
            verdict.update(f"[yellow]! not in this engine's catalog: {', '.join(unknown)}[/yellow]")
            return True
        verdict.update(f"[green]✓ {len(plan.runs)} run(s): {len({r.task for r in plan.runs})} task(s) × "
                       f"{len({r.agent for r in plan.runs})} agent(s) × {len({r.model for r in plan.runs})} model(s) × "
                       f"{len({r.seed for r in plan.runs})} seed(s), {plan.runs[0].budget_s:.0f}s each[/green]")
        return True

    def on_selection_list_selected_changed(self, event) -> None:
        self.write_yaml()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "path":
            self.write_yaml()

    def on_select_changed(self, event) -> None:
        self.write_yaml()

    def on_text_area_changed(self, event) -> None:
        if not self._writing:
            self.validate()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "path":
            self.action_load_plan()

    # ------------------------------------------------------------------ actions
    def action_load_plan(self) -> None:
        box = self.query_one("#path", Input)
        raw = box.value.strip()
        if not raw:
            box.focus()
            self.notify("type the plan file's path, then ctrl+o (or enter)", severity="warning")
            return
        path = Path(raw).expanduser()
        try:
            text = path.read_text()
        except OSError as exc:
            self.notify(f"cannot read {path}: {exc.strerror}", severity="error")
            return
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError:
            raw = None
        if not isinstance(raw, dict):
            self.write_yaml(text)           # shown with the parser's message in the verdict
            self.notify(f"{path} is not a plan (see the message under the YAML)", severity="error")
            return
        self.fill_form(raw)
        self.write_yaml(text)
        extra = sorted(set(raw) - FORM_KEYS)
        if extra:
            self.notify(f"loaded {path}; the form does not edit {', '.join(extra)}: editing the form rewrites the "
                        f"YAML without them (edit the YAML instead)", severity="warning", timeout=10)
        else:
            self.notify(f"loaded {path}")

    def fill_form(self, raw: dict) -> None:
        """Put a loaded plan's values into the form, so that touching a field keeps the plan. No
        change events while filling: the YAML shown is the file's text until the form is edited."""
        def as_list(v) -> list:
            return [] if v is None else [str(x) for x in (v if isinstance(v, list) else [v])]

        q = self.query_one
        with self.prevent(Input.Changed, Select.Changed, SelectionList.SelectedChanged):
            for picker_id, key in (("#tasks", "tasks"), ("#agents", "agents"), ("#models", "models")):
                picker = q(picker_id, SelectionList)
                wanted = as_list(raw.get(key))
                known = {picker.get_option_at_index(i).value for i in range(picker.option_count)}
                for value in wanted:
                    if value not in known:          # kept (the verdict says it is not in the catalog)
                        picker.add_option((value, value))
                picker.deselect_all()
                for value in wanted:
                    picker.select(value)
            q("#name", Input).value = str(raw.get("name") or "")
            q("#seeds", Input).value = ",".join(as_list(raw.get("seeds"))) or "0"
            q("#budget", Input).value = str(raw.get("budget", "10m"))
            executor = str(raw.get("executor", DEFAULT_EXECUTOR))
            if executor in form_executors():
                q("#executor", Select).value = executor
            q("#gpus", Input).value = str(raw.get("gpus_per_run", 0))
            q("#priority", Input).value = str(raw.get("priority", 0))

    def action_enqueue(self) -> None:
        if not self.validate():
            self.notify("fix the plan first (see the red message)", severity="error")
            return
        text = self.query_one("#yaml", TextArea).text
        where = self.query_one("#path", Input).value.strip() or "<console>"

        async def go():
            try:
                run_ids = await self.app.client.enqueue_plan(text, where)
            except UsageError as exc:
                self.query_one("#verdict", Static).update(f"[red]✗ {exc}[/red]")
                self.notify(str(exc), title="plan refused", severity="error", timeout=10)
                return
            self.notify(f"queued {len(run_ids)} run(s)", title="plan enqueued")
            await self.app.resync()
            self.app.pop_screen()
        self.run_worker(go(), exclusive=True, group="enqueue")

    def action_back(self) -> None:
        self.app.pop_screen()
