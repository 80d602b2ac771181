#!/usr/bin/python3
"""A hostile job for the probe channel's robustness rows (tests/e2e/tst_watch_probe.cpp).

Usage: probe_corpus.py MODE [EVENTS_FILE]

Writes raw lines, not through pilotbench_probe, to the probe channel: the descriptor named by
PILOTBENCH_PROBE_FD when it is set and open, else the file PILOTBENCH_PROBE names (O_APPEND).
CORPUS_CHANNEL=file uses the file even with the descriptor there (as torchrun's workers must).

MODE
  events         write EVENTS_FILE's bytes as they are (one os.write per line, so an over-long line
                 arrives as it was written), then exit 0.
  link-dev-zero  replace the probe file with a symbolic link to /dev/zero, then write EVENTS_FILE.
  fifo           replace the probe file with a FIFO nobody writes to, then write EVENTS_FILE.
  flood          write 64 MiB without a newline, then a newline, then EVENTS_FILE.
Lines from EVENTS_FILE go to the descriptor when there is one; without it (and after the file has
been replaced) they go nowhere, as for a job whose channel is gone. Prints "done" last.
"""
import os
import stat
import sys


def channel():
    fd = os.environ.get("PILOTBENCH_PROBE_FD", "")
    if fd and os.environ.get("CORPUS_CHANNEL") != "file":
        try:
            n = int(fd)
            if stat.S_ISFIFO(os.fstat(n).st_mode):
                return n, False
        except (ValueError, OSError):
            pass
    path = os.environ.get("PILOTBENCH_PROBE", "")
    if not path:
        sys.exit("no probe channel in the environment")
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), True


def replace_path(how):
    path = os.environ["PILOTBENCH_PROBE"]
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    if how == "link":
        os.symlink("/dev/zero", path)
    else:
        os.mkfifo(path)


def main():
    mode = sys.argv[1]
    events = b""
    if len(sys.argv) > 2:
        with open(sys.argv[2], "rb") as f:
            events = f.read()
    fd, is_path = channel()
    if mode in ("link-dev-zero", "fifo"):
        replace_path("link" if mode == "link-dev-zero" else "fifo")
        if is_path:
            os.close(fd)
            fd = None      # the job's only channel was the path it replaced
    elif mode == "flood":
        chunk = b"x" * (1 << 20)
        for _ in range(64):
            os.write(fd, chunk)
        os.write(fd, b"\n")
    elif mode != "events":
        sys.exit("unknown mode " + mode)
    if fd is not None:
        for line in events.splitlines(keepends=True):
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
    print("done", flush=True)


if __name__ == "__main__":
    main()
