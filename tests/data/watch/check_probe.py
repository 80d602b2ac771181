#!/usr/bin/python3
"""Checks the Python side of `pilotbench-cli watch`: resources/python/pilotbench_probe.py and the
test scripts in this folder. Runs each script with PILOTBENCH_PROBE set to a temporary file and
checks the events (counts, fields, steps increasing, finite losses, lines < 4096 bytes), and that
without the variable nothing is written.

Run it with Debian's interpreter, which has torch:   /usr/bin/python3 tests/data/watch/check_probe.py
The scripts take the probe from PILOTBENCH_PROBE_MODULE_DIR, else ../../../resources/python.
Prints one line per check and exits 1 when one fails. Takes about 20 seconds.
"""
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_DIR = os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.normpath(os.path.join(HERE, "..", "..", "..", "resources", "python"))
PY = sys.executable
TMP = tempfile.mkdtemp(prefix="pilotbench-check-probe-")
RESULTS = []


def check(fn):
    RESULTS.append(fn)
    return fn


def fail(message):
    raise AssertionError(message)


def expect(condition, message):
    if not condition:
        fail(message)


def base_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PILOTBENCH_PROBE", "PILOTBENCH_PROBE_FD", "PILOTBENCH_PROBE_FD_INODE", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PILOTBENCH_PROBE_MODULE_DIR"] = MODULE_DIR
    env["PYTHONDONTWRITEBYTECODE"] = "1"         # no __pycache__ in the source tree
    env.update({k: str(v) for k, v in extra.items()})
    return env


def probe_path(name):
    path = os.path.join(TMP, name + ".jsonl")
    if os.path.exists(path):
        os.remove(path)
    return path


def run(script, *args, env=None, timeout=60, cwd=None, **popen):
    proc = subprocess.run([PY, os.path.join(HERE, script)] + [str(a) for a in args], env=env, cwd=cwd or TMP,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, **popen)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def events(path):
    expect(os.path.exists(path), "no probe file was written")
    with open(path, "rb") as fh:
        data = fh.read()
    expect(data.endswith(b"\n"), "the probe file does not end with a newline")
    out = []
    for raw in data.split(b"\n")[:-1]:
        expect(len(raw) + 1 < 4096, "a line of %d bytes" % (len(raw) + 1))
        e = json.loads(raw.decode("ascii"))
        expect(isinstance(e.get("event"), str), "a line without an event: %r" % raw[:80])
        expect(isinstance(e.get("t"), float) and abs(e["t"] - time.time()) < 3600, "bad t in %r" % raw[:80])
        expect(isinstance(e.get("rank"), int) and isinstance(e.get("pid"), int), "no rank/pid in %r" % raw[:80])
        out.append(e)
    return out


def of(evs, name, rank=None):
    return [e for e in evs if e["event"] == name and (rank is None or e["rank"] == rank)]


def check_steps(evs, count, rank=None, losses=True):
    steps = of(evs, "step", rank)
    expect(len(steps) == count, "%d step events, expected %d" % (len(steps), count))
    by_process = {}
    for e in steps:
        by_process.setdefault(e["pid"], []).append(e)
    for pid, seq in by_process.items():
        numbers = [e["step"] for e in seq]
        expect(numbers == sorted(numbers) and len(set(numbers)) == len(numbers) and numbers[0] >= 1,
               "steps of pid %d not increasing from 1: %s" % (pid, numbers))
    for e in steps:
        expect(isinstance(e["step_time_ms"], float) and e["step_time_ms"] > 0, "step_time_ms %r" % e.get("step_time_ms"))
        expect("tokens" in e and "loss" in e and "lr" in e, "step without tokens/loss/lr keys: %s" % e)
        if losses:
            expect(isinstance(e["loss"], float) and math.isfinite(e["loss"]), "loss %r" % e["loss"])
        expect("peak_allocated_bytes" not in e, "peak memory on a CPU run")
    return steps


def check_hello(evs, world_size=1, processes=1):
    hellos = of(evs, "hello")
    expect(len(hellos) == processes, "%d hello events, expected %d" % (len(hellos), processes))
    expect(len({h["pid"] for h in hellos}) == processes, "two hellos from one process")
    for h in hellos:
        for key in ("world_size", "local_rank", "torch_version", "cuda_version", "hip_version", "cudnn", "nccl_version",
                    "driver", "device_names", "python", "probe_version"):
            expect(key in h, "hello without %s" % key)
        expect(h["probe_version"] == 1 and h["world_size"] == world_size, "hello %s" % h)
        first = [e for e in evs if e["pid"] == h["pid"]][0]
        expect(first is h, "hello is not the first event of pid %d" % h["pid"])
    return hellos


# ------------------------------------------------------------------------------------------------

@check
def train_probe_events():
    path = probe_path("train_probe")
    rc, out, err = run("train_probe.py", 20, env=base_env(PILOTBENCH_PROBE=path))
    expect(rc == 0, "exit %d: %s" % (rc, err[-500:]))
    expect(out.strip().splitlines()[-1] == "done 20", "last line %r" % out[-50:])
    expect(err == "", "stderr: %r" % err[-300:])
    evs = events(path)
    hello = check_hello(evs)[0]
    expect(hello["torch_version"] and hello["device_names"] == ["cpu"], "hello %s" % hello)
    steps = check_steps(evs, 20)
    expect([e["step"] for e in steps] == list(range(1, 21)), "step numbers %s" % [e["step"] for e in steps])
    for e in steps:
        expect(e["tokens"] == 128 and e["lr"] > 0, "tokens/lr %s" % e)
        for key in ("forward_ms", "backward_ms", "optimizer_ms", "grad_norm"):
            expect(isinstance(e.get(key), float) and e[key] >= 0, "%s missing in step %d" % (key, e["step"]))
        parts = e["forward_ms"] + e["backward_ms"] + e["optimizer_ms"]
        expect(parts <= e["step_time_ms"] * 1.05 + 0.05, "phases %.3f > step %.3f" % (parts, e["step_time_ms"]))
        expect(isinstance(e.get("data_wait_ms"), float), "no data_wait_ms in step %d" % e["step"])
    expect(steps[-1]["loss"] < steps[0]["loss"] - 0.2, "loss did not fall: %.3f -> %.3f" % (steps[0]["loss"], steps[-1]["loss"]))
    vals, ckpts, logs, ends = of(evs, "validation"), of(evs, "checkpoint"), of(evs, "log"), of(evs, "end")
    expect(len(vals) == 1 and vals[0]["step"] == 10 and math.isfinite(vals[0]["loss"]) and vals[0]["duration_ms"] > 0,
           "validation %s" % vals)
    expect(len(ckpts) == 1 and ckpts[0]["step"] == 10 and ckpts[0]["bytes"] > 1000 and ckpts[0]["duration_ms"] > 0
           and ckpts[0]["path"].endswith(".pt"), "checkpoint %s" % ckpts)
    expect(len(logs) == 1 and logs[0]["step"] == 20 and logs[0]["parameters"] > 0, "log %s" % logs)
    expect(len(ends) == 1 and ends[0]["steps"] == 20 and evs[-1] is ends[0], "end %s" % ends)
    mean = sum(e["step_time_ms"] for e in steps) / len(steps)
    return "%d events; loss %.3f -> %.3f; mean step %.2f ms" % (len(evs), steps[0]["loss"], steps[-1]["loss"], mean)


@check
def deterministic():
    a, b = probe_path("det_a"), probe_path("det_b")
    run("train_probe.py", 5, env=base_env(PILOTBENCH_PROBE=a))
    run("train_probe.py", 5, env=base_env(PILOTBENCH_PROBE=b))
    la = [e["loss"] for e in of(events(a), "step")]
    lb = [e["loss"] for e in of(events(b), "step")]
    expect(la == lb and len(la) == 5, "losses differ between runs: %s %s" % (la, lb))
    return "same 5 losses twice"


@check
def nothing_without_the_variable():
    folder = tempfile.mkdtemp(dir=TMP)
    for env in (base_env(), base_env(PILOTBENCH_PROBE="")):
        rc, out, err = run("train_probe.py", 3, env=dict(env, TMPDIR=folder), cwd=folder)
        expect(rc == 0 and out.strip() == "done 3" and err == "", "exit %d, out %r, err %r" % (rc, out, err))
    expect(os.listdir(folder) == [], "files left: %s" % os.listdir(folder))
    code = ("import sys; sys.path.insert(0, %r); import time; t = time.perf_counter(); import pilotbench_probe as p; "
            "t = time.perf_counter() - t; assert not p.enabled(); assert 'torch' not in sys.modules; "
            "s = p.step(tokens=1); assert p.step() is s and p.phase('x') is s and p.timed_checkpoint(1) is s; "
            "n = 100000; t0 = time.perf_counter()\n"
            "for i in range(n):\n"
            "    with p.step(tokens=i) as s:\n"
            "        s.loss = 1.0\n"
            "print('%%.1f %%.3f' %% (t * 1e3, (time.perf_counter() - t0) / n * 1e6))" % MODULE_DIR)
    proc = subprocess.run([PY, "-c", code], env=base_env(), cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    expect(proc.returncode == 0, proc.stderr.decode()[-500:])
    import_ms, per_step_us = proc.stdout.decode().split()
    expect(os.listdir(folder) == [], "files left: %s" % os.listdir(folder))
    return "no file, empty stderr, no torch import; import %s ms, a disabled step %s us" % (import_ms, per_step_us)


@check
def cost_when_enabled():
    path = probe_path("cost")
    code = ("import sys, time; sys.path.insert(0, %r); import pilotbench_probe as p\n"
            "n = 20000; t0 = time.perf_counter()\n"
            "for i in range(n):\n"
            "    with p.step(tokens=i) as s:\n"
            "        s.loss = 1.0\n"
            "print('%%.2f' %% ((time.perf_counter() - t0) / n * 1e6))" % MODULE_DIR)
    proc = subprocess.run([PY, "-c", code], env=base_env(PILOTBENCH_PROBE=path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    expect(proc.returncode == 0, proc.stderr.decode()[-500:])
    steps = of(events(path), "step")
    expect(len(steps) == 20000, "%d steps" % len(steps))
    return "%s us a step with the probe writing (no torch, so no synchronisation)" % proc.stdout.decode().strip()


@check
def fd_target():
    path = os.path.join(TMP, "fd.jsonl")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        proc = subprocess.run([PY, os.path.join(HERE, "train_probe.py"), "4"], env=base_env(PILOTBENCH_PROBE="fd:%d" % fd),
                              cwd=TMP, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(fd,), timeout=60)
    finally:
        os.close(fd)
    expect(proc.returncode == 0, proc.stderr.decode()[-300:])
    evs = events(path)
    check_hello(evs)
    check_steps(evs, 4)
    return "%d events through fd:N" % len(evs)


def pipe_run(fd_env, pass_fds, steps=3):
    """train_probe.py with PILOTBENCH_PROBE_FD as watch sets it and a fallback file: (pipe's events, file's)."""
    path = probe_path("pipe_fallback")
    proc = subprocess.run([PY, os.path.join(HERE, "train_probe.py"), str(steps)], env=base_env(PILOTBENCH_PROBE=path, **fd_env),
                          cwd=TMP, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=pass_fds, timeout=60)
    expect(proc.returncode == 0, proc.stderr.decode()[-300:])
    return proc, (events(path) if os.path.exists(path) else [])


@check
def pipe_fd_target():
    # watch's form: the pipe named and identified; nothing goes to the fallback file.
    r, w = os.pipe()
    try:
        proc, in_file = pipe_run({"PILOTBENCH_PROBE_FD": w, "PILOTBENCH_PROBE_FD_INODE": os.fstat(w).st_ino}, (w,))
        os.close(w)
        w = None
        data = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    evs = [json.loads(line) for line in data.decode().splitlines()]
    check_hello(evs)
    check_steps(evs, 3)
    expect(in_file == [], "%d events went to the file although the pipe was there" % len(in_file))
    return "%d events through the pipe, none in the file" % len(evs)


@check
def pipe_fd_not_ours_falls_back_to_the_file():
    # A launcher closed the descriptor and the number is another file now (here: a regular file),
    # or another pipe: the probe writes neither, it uses the file.
    other = os.path.join(TMP, "someone_elses.txt")
    fd = os.open(other, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    r, w = os.pipe()
    try:
        _, in_file = pipe_run({"PILOTBENCH_PROBE_FD": fd, "PILOTBENCH_PROBE_FD_INODE": 12345}, (fd,))
        check_steps(in_file, 3)
        expect(os.path.getsize(other) == 0, "the probe wrote into a file that was not its pipe")
        _, in_file = pipe_run({"PILOTBENCH_PROBE_FD": w, "PILOTBENCH_PROBE_FD_INODE": os.fstat(w).st_ino + 1}, (w,))
        check_steps(in_file, 3)
        _, in_file = pipe_run({"PILOTBENCH_PROBE_FD": 250, "PILOTBENCH_PROBE_FD_INODE": 1}, ())
        check_steps(in_file, 3)
    finally:
        for f in (fd, r, w):
            os.close(f)
    return "a regular file, another pipe and a closed descriptor under the number: the file used each time"


@check
def probe_failure_is_swallowed():
    rc, out, err = run("train_probe.py", 3, env=base_env(PILOTBENCH_PROBE=os.path.join(TMP, "no", "such", "dir", "p.jsonl")))
    expect(rc == 0 and out.strip() == "done 3", "exit %d, out %r, err %r" % (rc, out, err[-300:]))
    lines = err.strip().splitlines()
    expect(len(lines) == 1 and lines[0].startswith("pilotbench_probe: disabled"), "stderr %r" % err)
    return "training went on; one warning: %s" % lines[0][:90]


@check
def api_edges():
    path = probe_path("edges")
    code = r'''
import sys, math
sys.path.insert(0, %r)
import torch, pilotbench_probe as p
with p.step(tokens=torch.tensor(7)) as s:          # a tensor for tokens, NaN loss, odd extras
    s.loss = torch.tensor(float("nan"))
    s.lr = 1e-3
    s.note = object()
    s.many = list(range(10))
try:
    with p.step(tokens=1) as s:                   # the job's exception passes through, no step
        raise KeyError("boom")
except KeyError:
    pass
p.data_wait(5.0)                                  # outside a step: goes to the next one
with p.phase("data"):
    pass
with p.step(tokens=2, step=41, custom=1) as s:    # an explicit step number and an extra field
    with s.phase("forward"):
        pass
    with p.phase("loss_scale"):                  # a module-level phase inside a step
        pass
p.log(big="x" * 10000, other=list(range(2000)))  # too long for one line: shortened
p.validation(41, float("inf"), 12.5)
p.checkpoint(41, 3.0, path=p.__file__)
with p.timed_validation(41) as v:
    v.loss = 2.0
with p.timed_checkpoint(41) as c:
    c.path = "/nonexistent/x.pt"
with p.step() as s:
    pass
print("ok")
''' % MODULE_DIR
    proc = subprocess.run([PY, "-c", code], env=base_env(PILOTBENCH_PROBE=path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    expect(proc.returncode == 0 and proc.stdout.strip() == b"ok" and proc.stderr == b"",
           "exit %d: %s" % (proc.returncode, proc.stderr.decode()[-500:]))
    evs = events(path)
    steps = of(evs, "step")
    expect([e["step"] for e in steps] == [1, 41, 42], "steps %s" % [e["step"] for e in steps])
    a, b, c = steps
    expect(a["tokens"] == 7 and a["loss"] is None and a["nonfinite"] == ["loss"] and isinstance(a["note"], str)
           and a["many"] == list(range(10)), "first step %s" % a)
    expect(b["data_wait_ms"] >= 5.0 and "forward_ms" in b and "loss_scale_ms" in b and b["custom"] == 1, "second step %s" % b)
    expect("data_wait_ms" not in c, "the data wait was counted twice")
    log = of(evs, "log")[0]
    expect(log.get("truncated") is True and len(log["big"]) < 300, "log not shortened: %s" % str(log)[:200])
    vals, ckpts = of(evs, "validation"), of(evs, "checkpoint")
    expect(vals[0]["loss"] is None and vals[0]["nonfinite"] == ["loss"] and vals[1]["loss"] == 2.0, "validations %s" % vals)
    expect(ckpts[0]["bytes"] > 0 and ckpts[1]["path"] == "/nonexistent/x.pt" and "bytes" not in ckpts[1], "checkpoints %s" % ckpts)
    expect(of(evs, "end")[0]["steps"] == 42, "end %s" % of(evs, "end"))
    return "tensors, NaN -> null, long lines shortened, exceptions pass through, explicit step numbers"


@check
def trainer_log_lines():
    import ast
    import re
    path = probe_path("trainer_logs")
    rc, out, err = run("train_trainer_logs.py", 20, env=base_env(PILOTBENCH_PROBE=path))
    expect(rc == 0, "exit %d: %s" % (rc, err[-300:]))
    expect(not os.path.exists(path), "the script without the probe wrote probe events")
    dicts = [ast.literal_eval(line) for line in out.splitlines()]
    steps = [d for d in dicts if "loss" in d]
    expect(len(steps) == 20, "%d step dicts" % len(steps))
    for d in steps:
        expect(list(d) == ["loss", "grad_norm", "learning_rate", "epoch"], "keys %s" % list(d))
        expect(d["loss"] == round(d["loss"], 4) and d["epoch"] == round(d["epoch"], 2), "rounding %s" % d)
    expect(list(dicts[-1])[:3] == ["train_runtime", "train_samples_per_second", "train_steps_per_second"], "summary %s" % dicts[-1])
    bar = re.compile(r"^ *(\d+)%\|(.{10})\| (\d+)/(\d+) \[(\d\d:\d\d)<(\d\d:\d\d|\?), +([\d.]+|\?)(it/s|s/it)\]$")
    updates = [u for u in err.split("\r") if u.strip()]
    matched = [bar.match(u.rstrip(" \n")) for u in updates]
    expect(all(matched), "not tqdm's format: %r" % [u for u, m in zip(updates, matched) if not m][:3])
    expect(matched[0].group(3) == "0" and matched[-1].group(1) == "100" and err.endswith("\n"), "first/last bar %r %r"
           % (updates[0], updates[-1]))
    rates = [m for m in matched if m.group(8) == "it/s" and m.group(7) != "?"]
    expect(len(rates) >= 5, "only %d it/s updates" % len(rates))
    rc, out, err = run("train_trainer_logs.py", 5, env=base_env(HF_LOG_STYLE="v5", STEP_SLEEP_MS=0))
    expect(rc == 0, "v5: exit %d: %s" % (rc, err[-300:]))
    v5 = [ast.literal_eval(line) for line in out.splitlines()]
    expect(len(v5) == 6 and all(isinstance(d["loss"], str) and float(d["loss"]) > 0 for d in v5[:5]), "v5 %s" % v5[:2])
    return "20 Trainer dicts on stdout (v4 style; v5 style %s), %d tqdm updates on stderr, e.g. %r" % (
        out.splitlines()[0], len(updates), updates[len(updates) // 2].strip())


@check
def tqdm_seconds_per_iteration():
    import re
    rc, out, err = run("train_tqdm_slow.py", env=base_env())
    expect(rc == 0 and out.strip() == "done 3", "exit %d: %s" % (rc, err[-300:]))
    slow = [u for u in err.split("\r") if re.search(r"\d+\.\d\ds/it", u)]
    expect(len(slow) >= 3, "no s/it updates: %r" % err[-300:])
    expect(re.match(r"^Epoch 1: 100%\|.{10}\| 3/3 \[00:0\d<00:00,  1\.\d\ds/it, loss=[\d.]+\]$", slow[-1].strip()), "last %r" % slow[-1])
    return "e.g. %r" % slow[-1].strip()


def check_error_run(script, env_extra, steps_before, exception_line):
    path = probe_path(script)
    rc, out, err = run(script, env=base_env(PILOTBENCH_PROBE=path, **env_extra))
    expect(rc == 1, "exit %d" % rc)
    last = err.strip().splitlines()[-1]
    expect(err.startswith("Traceback (most recent call last):") and last.startswith(exception_line), "stderr ends %r" % last[:120])
    evs = events(path)
    check_hello(evs)
    check_steps(evs, steps_before)
    errors = of(evs, "error")
    expect(len(errors) == 1 and errors[0]["step"] == steps_before and not of(evs, "end"), "error/end events %s" % errors)
    return errors[0], last


@check
def out_of_memory():
    shown = []
    for style, line in (("torch1", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "),
                        ("torch2", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has"),
                        ("hip", "torch.OutOfMemoryError: HIP out of memory. Tried to allocate"),
                        ("runtime", "RuntimeError: CUDA out of memory. Tried to allocate")):
        error, last = check_error_run("oom.py", {"OOM_STYLE": style}, 3, line)
        expect(error["oom"] is True and error["in_step"] is True, "error %s" % error)
        shown.append("%s: %s" % (style, error["type"]))
    return "exit 1, 3 steps, an error event with oom=true (" + ", ".join(shown) + ")"


@check
def crash():
    error, last = check_error_run("crash.py", {}, 2, "ValueError: crash.py: a bug")
    expect(error["oom"] is False and error["type"] == "ValueError" and error["in_step"] is False, "error %s" % error)
    return "exit 1, 2 steps, error event %s" % error["type"]


@check
def long_with_child_runs():
    path = probe_path("long")
    rc, out, err = run("long_with_child.py", env=base_env(PILOTBENCH_PROBE=path, DURATION_S=1.0))
    expect(rc == 0 and out.strip().splitlines()[-1] == "done", "exit %d: %s %s" % (rc, out, err[-300:]))
    evs = events(path)
    check_hello(evs, world_size=2, processes=2)
    s0, s1 = of(evs, "step", 0), of(evs, "step", 1)
    expect(len(s0) >= 7 and len(s1) >= 7 and {e["pid"] for e in s0} != {e["pid"] for e in s1}, "%d/%d steps" % (len(s0), len(s1)))
    for e in s0 + s1:
        expect(90 <= e["step_time_ms"] <= 200, "step time %s" % e["step_time_ms"])
    return "rank 0: %d steps, rank 1: %d steps in 1 s" % (len(s0), len(s1))


def start_group(extra):
    path = probe_path("group")
    proc = subprocess.Popen([PY, os.path.join(HERE, "long_with_child.py")], env=base_env(PILOTBENCH_PROBE=path, **extra),
                            cwd=TMP, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    pids = [int(proc.stdout.readline().split()[-1]) for _ in range(2)]
    deadline = time.time() + 10
    while time.time() < deadline and len(step_ranks(path)) < 2:
        time.sleep(0.05)
    return proc, pids


def step_ranks(path):
    """Ranks with a step event so far, in a file still being written (complete lines only)."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")[:-1]
    except OSError:
        return set()
    return {e["rank"] for e in map(json.loads, lines) if e["event"] == "step"}


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@check
def cancel_kills_the_tree():
    proc, pids = start_group({})
    expect(all(alive(p) for p in pids), "not both running")
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)
    deadline = time.time() + 5
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    expect(not any(alive(p) for p in pids), "survivors after SIGTERM to the group: %s" % [p for p in pids if alive(p)])
    proc, pids = start_group({"IGNORE_SIGTERM": "1"})
    os.killpg(proc.pid, signal.SIGTERM)
    time.sleep(0.5)
    expect(all(alive(p) for p in pids), "IGNORE_SIGTERM=1 did not survive SIGTERM")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.time() + 5
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    expect(not any(alive(p) for p in pids), "survivors after SIGKILL")
    return "parent and child in one process group: SIGTERM ends both; with IGNORE_SIGTERM=1 only SIGKILL does"


def check_ddp(evs, steps):
    check_hello(evs, world_size=2, processes=2)
    expect({h["rank"] for h in of(evs, "hello")} == {0, 1}, "ranks %s" % {h["rank"] for h in of(evs, "hello")})
    for rank in (0, 1):
        s = check_steps(evs, steps, rank=rank)
        expect(all(e["tokens"] == 64 for e in s), "tokens")
    expect(len(of(evs, "end")) == 2, "end events %s" % of(evs, "end"))


@check
def ddp_spawn():
    path = probe_path("ddp")
    rc, out, err = run("ddp_two_ranks.py", 6, env=base_env(PILOTBENCH_PROBE=path), timeout=120)
    expect(rc == 0 and "done 6" in out, "exit %d: %s" % (rc, err[-500:]))
    check_ddp(events(path), 6)
    return "2 ranks (torch.multiprocessing), 6 steps each, RANK 0 and 1"


@check
def ddp_torchrun():
    path = probe_path("ddp_run")
    proc = subprocess.run([PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "--redirects", "1",
                           "--tee", "1", os.path.join(HERE, "ddp_two_ranks.py"), "5"], env=base_env(PILOTBENCH_PROBE=path),
                          cwd=TMP, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out = proc.stdout.decode()
    expect(proc.returncode == 0 and "done 5" in out, "exit %d: %s" % (proc.returncode, proc.stderr.decode()[-500:]))
    check_ddp(events(path), 5)
    return "2 ranks under python3 -m torch.distributed.run, 5 steps each"


@check
def hf_callback():
    path = probe_path("hf")
    rc, out, err = run("hf_callback_replay.py", 8, env=base_env(PILOTBENCH_PROBE=path))
    expect(rc == 0 and out.strip() == "done 8" and err == "", "exit %d: %s" % (rc, err[-500:]))
    evs = events(path)
    check_hello(evs)
    steps = check_steps(evs, 8)
    for e in steps:
        expect(e["tokens"] == 128 and e["tokens_source"] == "num_input_tokens_seen" and e["micro_batches"] == 2,
               "tokens %s" % e)
        expect(e["lr"] > 0 and e["grad_norm"] > 0 and e["loss_steps"] == 1, "loss/lr %s" % e)
        expect(e["forward_backward_ms"] + e["optimizer_ms"] <= e["step_time_ms"] + 0.05 and "data_wait_ms" in e, "split %s" % e)
    vals, ckpts, logs = of(evs, "validation"), of(evs, "checkpoint"), of(evs, "log")
    expect([v["step"] for v in vals] == [4, 8] and all(v["batches"] == 3 and v["duration_ms"] > 0.2 for v in vals), "validation %s" % vals)
    expect([c["step"] for c in ckpts] == [4, 8] and all(c["bytes"] > 0 and c["path"].endswith("checkpoint-%d" % c["step"])
                                                      for c in ckpts), "checkpoints %s" % ckpts)
    expect(len(logs) == 1 and "train_runtime" in logs[0] and "total_flos" not in logs[0], "logs %s" % logs)
    order = [e["event"] for e in evs]
    expect(order.index("validation") == order.index("step") + 4, "the step-4 event is not before its validation: %s" % order)
    path = probe_path("hf_old")
    rc, out, err = run("hf_callback_replay.py", 4, env=base_env(PILOTBENCH_PROBE=path, HF_OLD=1))
    expect(rc == 0, "old: exit %d: %s" % (rc, err[-500:]))
    steps = check_steps(events(path), 4)
    expect(all(e["tokens"] == 128 and e["tokens_source"] == "batch_x_seq_len" and "optimizer_ms" not in e for e in steps),
           "old transformers: %s" % steps[0])
    code = ("import sys; sys.path.insert(0, %r); import pilotbench_probe as p\n"
            "c = p.HFCallback(); assert isinstance(c, p.HFCallback)\n"
            "cls = p.HFCallback; made = cls() if isinstance(cls, type) else None; assert isinstance(made, p.HFCallback)\n"
            "names = 'on_init_end on_train_begin on_train_end on_epoch_begin on_epoch_end on_step_begin on_substep_end "
            "on_step_end on_evaluate on_predict on_save on_log on_prediction_step on_optimizer_step on_pre_optimizer_step "
            "on_some_future_event'.split()\n"
            "assert all(getattr(c, n)(None, None, None) is None for n in names)\n"
            "l = p.LightningCallback(); assert isinstance(l, p.LightningCallback) and p.lightning_callback() is not None\n"
            "print('ok')" % MODULE_DIR)
    proc = subprocess.run([PY, "-c", code], env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    expect(proc.returncode == 0 and proc.stdout.strip() == b"ok", proc.stderr.decode()[-500:])
    return "8 steps with loss/lr/grad_norm from on_log, tokens from num_input_tokens_seen, 2 validations, 2 checkpoints; " \
           "older Trainer: tokens from batch x seq_len; every on_* event callable while off"


@check
def lightning_callback():
    path = probe_path("lightning")
    rc, out, err = run("lightning_callback_replay.py", 6, env=base_env(PILOTBENCH_PROBE=path))
    expect(rc == 0 and out.strip() == "done 6" and err == "", "exit %d: %s" % (rc, err[-500:]))
    evs = events(path)
    check_hello(evs)
    steps = check_steps(evs, 6)
    expect(all(e["tokens"] == 128 and e["micro_batches"] == 2 and "optimizer_ms" in e for e in steps), "steps %s" % steps[0])
    vals, ckpts = of(evs, "validation"), of(evs, "checkpoint")
    expect(len(vals) == 1 and vals[0]["step"] == 3 and math.isfinite(vals[0]["loss"]) and vals[0]["batches"] == 3, "val %s" % vals)
    expect(len(ckpts) == 1 and ckpts[0]["bytes"] > 0 and ckpts[0]["path"].endswith(".ckpt"), "ckpt %s" % ckpts)
    return "6 steps (accumulation 2), validation with val_loss, checkpoint timed through trainer.save_checkpoint"


def main():
    failed = 0
    started = time.time()
    print("probe module: %s" % os.path.join(MODULE_DIR, "pilotbench_probe.py"))
    print("python: %s" % PY)
    for fn in RESULTS:
        t0 = time.time()
        try:
            detail = fn()
            print("PASS %-28s %5.1fs  %s" % (fn.__name__, time.time() - t0, detail), flush=True)
        except Exception as exc:       # includes AssertionError and timeouts
            failed += 1
            print("FAIL %-28s %5.1fs  %s: %s" % (fn.__name__, time.time() - t0, type(exc).__name__, exc), flush=True)
    print("%d passed, %d failed in %.1f s" % (len(RESULTS) - failed, failed, time.time() - started))
    if not failed:
        import shutil
        shutil.rmtree(TMP, ignore_errors=True)
    else:
        print("files kept in %s" % TMP)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
