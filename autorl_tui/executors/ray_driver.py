"""The engine's Ray driver: a child process of the engine (`ray_client.DriverProcess`) that alone
calls `ray.init` and holds actor handles, so that Ray ending it when the cluster's head stays away
never ends the engine (docs/cluster.md, "The engine outlives the cluster").

Run as `python -m autorl_tui.executors.ray_driver FD`: FD is its end of a socket pair.
Each line read is a call `{"id", "op", "args"}`, served concurrently; each answer is a line
`{"id", "result"}` or `{"id", "error": {"kind", "message"}}` (kinds: `error_kind`). It exits when
the engine closes the socket (the engine ended) or asks it to (`close`). Its output (Ray's own
logging included) goes to the file the engine names, never to the operator's terminal."""

from __future__ import annotations

import asyncio
import importlib
import json
import socket
import sys
from typing import Any

from autorl_tui.executors.base import ExecutorError
from autorl_tui.executors.ray import NAMESPACE, RayExecutor, alive_nodes, connect
from autorl_tui.executors.ray_client import ClusterUnreachable
from autorl_tui.exitcodes import UsageError


def error_kind(exc: BaseException) -> str:
    """The kind an answer carries (ray_client maps it back to an exception)."""
    import ray

    if isinstance(exc, ClusterUnreachable):
        return "unreachable"
    if isinstance(exc, UsageError):
        return "usage"
    if isinstance(exc, ray.exceptions.ActorDiedError):
        return "actor_died"
    if isinstance(exc, ray.exceptions.RayActorError):
        return "actor_error"
    if isinstance(exc, (asyncio.TimeoutError, ray.exceptions.GetTimeoutError)):
        return "timeout"
    if isinstance(exc, LookupError):
        return "gone"
    if isinstance(exc, ExecutorError):
        return "executor"
    return "error"


class Driver:
    """The calls the engine makes (each `op_NAME`); Ray's blocking calls run in threads."""

    def __init__(self) -> None:
        self.ray: Any = None
        self._actors: dict[str, Any] = {}
        self.tasks: dict[int, asyncio.Task] = {}
        self.releases: set[asyncio.Future] = set()      # groups being removed: `close` lets them finish

    async def _connect(self, address: str | None):
        if self.ray is None:
            self.ray = await asyncio.to_thread(connect, address)
        return self.ray

    async def _actor(self, address: str | None, name: str):
        ray = await self._connect(address)
        actor = self._actors.get(name)
        if actor is None:
            try:
                actor = await asyncio.to_thread(ray.get_actor, name, NAMESPACE)
            except ValueError:
                raise LookupError(f"no Ray actor {name}") from None
            self._actors[name] = actor
        return actor

    async def op_connect(self, address: str | None) -> None:
        await self._connect(address)

    async def op_nodes(self, address: str | None) -> list[dict]:
        ray = await self._connect(address)
        return json.loads(json.dumps(await asyncio.to_thread(ray.nodes), default=str))

    async def op_alive_nodes(self, address: str | None) -> list[str]:
        ray = await self._connect(address)
        return list(await asyncio.to_thread(alive_nodes, ray))

    async def op_on_each_node(self, address: str | None, fn_ref: str, node_ids: list[str], args: list,
                              what: str) -> list[dict]:
        """`fn(*args)` as a tiny task pinned to each node; their answers (UsageError when Ray fails)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = await self._connect(address)
        module, _, name = fn_ref.partition(":")
        task = ray.remote(num_cpus=0, max_retries=0)(getattr(importlib.import_module(module), name))
        refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False)).remote(*args)
                for nid in node_ids]
        try:
            return await asyncio.to_thread(ray.get, refs, timeout=120)
        except Exception as exc:
            raise UsageError(f"could not check {what}: {exc}") from None

    async def op_start_actor(self, address: str | None, name: str, options: dict, launch: dict, marker: str,
                             timeout_s: float) -> dict:
        """Reserve the attempt's placement group (ray_groups: named as the actor, detached, one
        bundle of the run's request, softly on the node admission packed it on), place the run's
        detached actor in it and start its agent; where it runs (RunNode.start). The run's other
        attempts' groups go first (a lost or killed one's); on failure this one goes too."""
        from autorl_tui.executors import ray_groups
        from autorl_tui.executors.ray_node import RunNode

        ray = await self._connect(address)
        node, bundle_list = options.pop("node", None), options.pop("bundles")
        deadline = asyncio.get_running_loop().time() + timeout_s
        await asyncio.to_thread(ray_groups.release, ray, options.pop("prefix"))
        group = await asyncio.to_thread(ray_groups.reserve, ray, bundle_list, name=name, node=node, detached=True)
        actor = None
        try:
            await asyncio.wait_for(asyncio.wrap_future(group.ready().future()), timeout_s)
            actor = ray.remote(RunNode).options(name=name, namespace=NAMESPACE, lifetime="detached", max_restarts=0,
                                                max_task_retries=0, scheduling_strategy=ray_groups.in_bundle(group),
                                                **options).remote()
            left = max(1.0, deadline - asyncio.get_running_loop().time())
            where = await asyncio.wait_for(asyncio.wrap_future(actor.start.remote(launch, marker).future()), left)
        except BaseException as exc:
            if actor is not None:
                await asyncio.to_thread(ray.kill, actor, no_restart=True)
            await asyncio.to_thread(ray_groups.remove, ray, group)
            if isinstance(exc, ray.exceptions.RayError):
                cause = getattr(exc, "cause", None) or exc
                raise ExecutorError(str(cause).splitlines()[-1][:500]) from None
            raise
        self._actors[name] = actor
        return where

    async def op_remove_group(self, address: str | None, name: str) -> bool:
        """Remove the placement group of that name (a lost attempt's); whether there was one."""
        from autorl_tui.executors import ray_groups

        ray = await self._connect(address)
        group = await asyncio.to_thread(ray_groups.find, ray, name)
        if group is not None:
            await asyncio.to_thread(ray_groups.remove, ray, group)
        return group is not None

    async def op_release_groups(self, address: str | None, prefix: str) -> list[str]:
        """Remove the placement groups whose names start with `prefix` (a run's attempts'); their names."""
        from autorl_tui.executors import ray_groups

        ray = await self._connect(address)
        done = asyncio.ensure_future(asyncio.to_thread(ray_groups.release, ray, prefix))
        self.releases.add(done)
        done.add_done_callback(self.releases.discard)
        return await asyncio.shield(done)

    async def op_actor_exists(self, address: str | None, name: str) -> bool:
        self._actors.pop(name, None)         # looked up afresh (after a head restart, say)
        try:
            await self._actor(address, name)
        except LookupError:
            return False
        return True

    async def op_ping(self, address: str | None, name: str, timeout_s: float) -> dict:
        actor = await self._actor(address, name)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(actor.ping.remote().future()), timeout_s)
        except Exception:
            self._actors.pop(name, None)
            raise

    async def op_signal(self, address: str | None, name: str, sig: int) -> None:
        actor = await self._actor(address, name)
        actor.signal.remote(int(sig))

    async def op_kill(self, address: str | None, name: str) -> None:
        actor = await self._actor(address, name)
        await asyncio.to_thread(self.ray.kill, actor, no_restart=True)
        self._actors.pop(name, None)

    async def op_grade(self, address: str | None, *args) -> dict:
        """One grading on the cluster (the engine's ray_grading module, loaded by name as the
        executor loads it: it sits above the executors)."""
        ray = await self._connect(address)
        grading = importlib.import_module(RayExecutor.GRADING_MODULE)
        return await grading.grade_in_driver(ray, *args)

    async def op_cancel(self, call_id: int) -> None:
        task = self.tasks.get(int(call_id))
        if task is not None:
            task.cancel()

    async def op_close(self) -> None:
        if self.releases:        # a run that just ended: its group goes before the driver does
            await asyncio.wait(set(self.releases), timeout=20)
        if self.ray is not None:
            grading = importlib.import_module(RayExecutor.GRADING_MODULE)
            await asyncio.to_thread(grading.close_all)


async def serve(sock: socket.socket) -> None:
    driver = Driver()
    reader, writer = await asyncio.open_connection(sock=sock)
    closing = asyncio.Event()

    def answer(call_id: int, body: dict) -> None:
        writer.write(json.dumps({"id": call_id, **body}, default=str).encode() + b"\n")

    async def run(call: dict) -> None:
        call_id = call["id"]
        try:
            result = await getattr(driver, f"op_{call['op']}")(*call.get("args", []))
            answer(call_id, {"result": result})
        except asyncio.CancelledError:
            answer(call_id, {"error": {"kind": "cancelled", "message": "cancelled"}})
        except Exception as exc:
            answer(call_id, {"error": {"kind": error_kind(exc), "message": str(exc) or type(exc).__name__}})
        finally:
            driver.tasks.pop(call_id, None)
            if call["op"] == "close":
                closing.set()
        await writer.drain()

    async def read() -> None:
        while line := await reader.readline():
            call = json.loads(line)
            driver.tasks[call["id"]] = asyncio.ensure_future(run(call))
        closing.set()      # the engine closed its end (it ended)

    reading = asyncio.ensure_future(read())
    await closing.wait()
    reading.cancel()
    await writer.drain()


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[1]))
    asyncio.run(serve(sock))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
