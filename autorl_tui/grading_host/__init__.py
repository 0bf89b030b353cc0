"""The engine side of grading: the grader worker started in a sandbox (grading_client.py),
the warm grading server (grader_service.py), grading slots (grading_queue.py), placement
inputs, gradings on a Ray cluster, submitted folders measured and copied. It knows no
run's state: the engine's run pipeline (engine/run_grading.py) calls it."""
