"""The Textual console. Talks to the engine only through `engine.client.EngineClient`."""
