#!/usr/bin/env python3
"""A Tick that leaves a daemon behind: before serving, it double-forks a
grandchild that leaves its process group and session (setsid) and sleeps
for five minutes; the grandchild's pid goes to the file named by argv[1].
Then this process becomes the Appendix A counter (counter.py)."""
import os
import sys
import time

pidfile = sys.argv[1]
first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        # The daemon: off the Tick's pipes and terminal, out of its group.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        time.sleep(300)
    os._exit(0)
os.waitpid(first, 0)
for _ in range(500):
    if os.path.exists(pidfile):
        break
    time.sleep(0.01)
here = os.path.dirname(os.path.abspath(__file__))
os.execv(sys.executable, [sys.executable, os.path.join(here, "counter.py")])
