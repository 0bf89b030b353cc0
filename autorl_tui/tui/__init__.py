"""The Textual console. Talks to the engine only through `daemon.client.EngineClient`."""
