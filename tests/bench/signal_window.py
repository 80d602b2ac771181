#!/usr/bin/env python3
"""When a pilot first catches SIGTERM after exec, for each pilotbench-cli named: the median of 5 starts
of `pilot --config preset:tiny`, polling /proc/PID/status (SigCgt) every millisecond. Issue 35.

    /usr/bin/python3 tests/bench/signal_window.py OLD_CLI NEW_CLI
"""
import subprocess, sys, time
def window(cli):
    t0 = time.monotonic()
    p = subprocess.Popen([cli, '--log-level', 'warn', 'pilot', '--config', 'preset:tiny', '--steps', '200', '--db', '/tmp/pb-signal-window.db'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    caught = None
    while p.poll() is None and time.monotonic() - t0 < 30:
        try:
            for line in open(f'/proc/{p.pid}/status'):
                if line.startswith('SigCgt:') and (int(line.split()[1], 16) >> 14) & 1:
                    caught = time.monotonic() - t0
        except OSError:
            pass
        if caught: break
        time.sleep(0.001)
    p.kill(); p.wait()
    return caught
for cli in sys.argv[1:]:
    w = sorted(window(cli) for _ in range(5))
    print(cli, 'SIGTERM caught from %.0f ms (median of 5; min %.0f, max %.0f)' % (w[2]*1000, w[0]*1000, w[4]*1000))
