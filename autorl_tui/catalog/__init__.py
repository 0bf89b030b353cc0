"""The catalog: task cards, agent specs, models and plans. Pure data loading and validation."""
