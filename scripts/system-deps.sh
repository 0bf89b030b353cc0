#!/usr/bin/env bash
# Installs and starts the system parts the tests use for real: Docker Engine, Chromium, tmux, npm,
# curl, jq, bubblewrap.
# Idempotent; needs root (apt-get). Prints what it does.
set -euo pipefail
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
# The agent tests install the real agent CLIs (Claude Code, Codex, Gemini CLI, opencode) with npm.
command -v npm >/dev/null 2>&1 || need+=(npm)
# The AutoRL-Bench-style test agent (tests/data/autorl_bench/agents/probe) talks to the API with curl and jq.
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v jq >/dev/null 2>&1 || need+=(jq)
# Local agents and the grader run in a bubblewrap sandbox, dropping to their uid with setpriv.
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
[ -x /usr/bin/setpriv ] || need+=(util-linux)
# A local agent with `network: bridge` gets egress through slirp4netns; iptables keeps it off the
# host's own addresses; the network tests build a stand-in remote host with iproute2.
command -v slirp4netns >/dev/null 2>&1 || need+=(slirp4netns)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# The code sandbox runs generated code with a system interpreter whose stdlib any uid can read.
[ -x /usr/bin/python3 ] || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "system-deps: need root to install: ${need[*]}" >&2; exit 1; fi
  echo "system-deps: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  echo "system-deps: starting dockerd"
  (nohup dockerd >/tmp/autorl-dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "system-deps: dockerd did not start; see /tmp/autorl-dockerd.log" >&2; exit 1; }
fi
echo "system-deps: docker $(docker version --format '{{.Server.Version}}'), $(chromium --version 2>/dev/null | head -1)"
