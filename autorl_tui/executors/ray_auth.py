"""Whether a Ray cluster authenticates its callers (Ray's token authentication, Ray >= 2.52:
`RAY_AUTH_MODE=token` on every node and on the driver, the token in `RAY_AUTH_TOKEN`,
`RAY_AUTH_TOKEN_PATH` or ~/.ray/auth_token). A cluster without it runs any code anyone who reaches
its GCS port submits, as the user the nodes run as (root, often): the engine refuses it unless the
plan says `cluster: {auth: none}` (then every report marks the run). See docs/cluster.md."""

from __future__ import annotations

from autorl_tui.executors.base import ExecutorError

AUTH_MODES = ("token", "none")
TURN_ON = ("start every node with token authentication: generate a token once (`ray get-auth-token --generate`), "
           "then `RAY_AUTH_MODE=token RAY_AUTH_TOKEN=<token> ray start ...` on each node and the same two variables "
           "in the engine's environment (docs/cluster.md); or, on a cluster no one else can reach, say "
           "`cluster: {auth: none}` in the plan (every report then marks the run)")


def token_auth_enforced(address: str, timeout_s: float = 10.0) -> bool:
    """Ask the cluster's GCS at HOST:PORT for its id without a token: refused as unauthenticated
    means the cluster enforces token authentication."""
    import grpc
    import ray  # noqa: F401  (first: its generated modules import ray; another thread may be importing it)
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    with grpc.insecure_channel(address) as channel:      # a bare channel: Ray's token interceptor is not on it
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                return True
            raise ExecutorError(f"cannot ask the Ray head at {address} whether it authenticates callers: "
                                f"{exc.code().name} {exc.details()}") from None
    return False


def check_cluster_auth(address: str, auth: str = "token") -> None:
    """Refuse a cluster that does not enforce token authentication, unless the plan said `auth: none`."""
    if auth == "none":
        return
    if address.startswith("ray://"):
        raise ExecutorError(f"the Ray address {address!r} is a Ray Client address: the engine does not use the Ray "
                            f"Client; name the head's GCS address HOST:PORT (as `ray start --head` prints it)")
    if address.startswith(("auto", "local")):
        raise ExecutorError(f"the Ray address {address!r} cannot be checked for token authentication: name the "
                            f"head's GCS address HOST:PORT")
    if not token_auth_enforced(address):
        raise ExecutorError(f"the Ray cluster at {address} does not enforce token authentication: any process that "
                            f"reaches it (an agent on one of its nodes included) can run code on every node; {TURN_ON}")
