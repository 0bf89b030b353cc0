"""The detached engine: its socket server (server.py), the client every front end uses
(client.py), the process (daemon.py) and the console's paged snapshot (run_summaries.py)."""
