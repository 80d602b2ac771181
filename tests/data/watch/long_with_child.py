#!/usr/bin/python3
"""A job of two processes for cancel tests: the parent starts a child (subprocess.Popen of this
file with --child, in the same process group and session) and both write a probe "step" event
every 100 ms (the parent as RANK 0, the child as RANK 1, WORLD_SIZE 2) for up to DURATION_S
seconds; the parent then waits for the child and prints "done". Cancelling must end both: the
parent prints "parent pid N" and "child pid M" first, so a test can check that neither survives.
No torch (it starts in a fraction of a second). The probe is looked up as in train_probe.py.

Env: DURATION_S      how long both loop (default 60)
     IGNORE_SIGTERM  1: both ignore SIGTERM (to test the SIGKILL after the grace period)
"""
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True      # importing the probe leaves no __pycache__ in the source tree
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.join(_HERE, "..", "..", "..", "resources", "python"))
import pilotbench_probe  # noqa: E402


def loop(duration):
    end = time.monotonic() + duration
    while time.monotonic() < end:
        with pilotbench_probe.step(tokens=1):
            time.sleep(0.1)


def main():
    duration = float(os.environ.get("DURATION_S", "60"))
    if os.environ.get("IGNORE_SIGTERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--child" in sys.argv[1:]:
        loop(duration)
        return
    os.environ["RANK"], os.environ["WORLD_SIZE"] = "0", "2"
    env = dict(os.environ, RANK="1", LOCAL_RANK="1", WORLD_SIZE="2")
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child"], env=env)
    print("parent pid %d" % os.getpid(), flush=True)
    print("child pid %d" % child.pid, flush=True)
    loop(duration)
    child.wait()
    print("done", flush=True)


if __name__ == "__main__":
    main()
