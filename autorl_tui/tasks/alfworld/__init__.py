"""ALFWorld (Level 3): games generated for the real text engine, the episode runner, the data
provider. Modules: games (generator), env (engine wrapper), prompts (ReAct prompt + matching),
api (batched episode runner), experts (planner walkthroughs as SFT data), provider (materialize)."""

