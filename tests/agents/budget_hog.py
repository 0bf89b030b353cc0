"""Test agent: starts a `setsid` grandchild that records its pid and sleeps forever, then sleeps
far past its deadline itself."""

import os
import subprocess
import sys
import time

logs = os.path.join(os.environ["WORKSPACE"], "logs")
child = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                          f"open({os.path.join(logs, 'grandchild.pid')!r}, 'w').write(str(os.getpid()))\n"
                          "time.sleep(100000)"], start_new_session=True)
with open(os.path.join(logs, "agent.pid"), "w") as fh:
    fh.write(str(os.getpid()))
print(f"started setsid child {child.pid}; now ignoring the budget", flush=True)
while True:
    time.sleep(1)
    print("still here", flush=True)
