"""The real Docker Engine for the container tests: one fixture, skipped loudly when none answers."""

import sys

import pytest


@pytest.fixture(scope="module")
def docker_client():
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:
        msg = (f"DOCKER TESTS SKIPPED: no Docker Engine reachable ({exc}). "
               "Start one with scripts/system-deps.sh (CI does this in .ci/run).")
        print("\n" + "!" * 20 + " " + msg, file=sys.stderr)
        pytest.skip(msg)
    return client
