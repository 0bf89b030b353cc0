"""Isolation of agents and graders: the bubblewrap sandbox (sandbox_bwrap.py), its network
namespace (sandbox_net.py), the seccomp filter, the stdlib entry program of containers
and sandboxes (container_init.py). docs/security.md."""
