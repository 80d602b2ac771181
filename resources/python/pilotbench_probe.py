"""pilotbench_probe: step events from a training job for ``pilotbench-cli watch``.

One file, Python's standard library only; torch, transformers and lightning are used only when the
job itself has them (torch is never imported by this module: it is looked up in ``sys.modules``).

Enable it in one line
---------------------
Hugging Face Trainer (also TRL's SFTTrainer and anything built on Trainer)::

    import pilotbench_probe
    trainer = Trainer(..., callbacks=[pilotbench_probe.HFCallback()])

PyTorch Lightning (``lightning.pytorch`` or ``pytorch_lightning``, whichever the job imported)::

    trainer = L.Trainer(..., callbacks=[pilotbench_probe.LightningCallback()])

A custom loop::

    for batch in loader:                                  # or: with pilotbench_probe.phase("data"):
        with pilotbench_probe.step(tokens=batch.numel()) as s:
            with s.phase("forward"):
                loss = model(batch)
            with s.phase("backward"):
                loss.backward()
            with s.phase("optimizer"):
                opt.step(); opt.zero_grad()
            s.loss = loss          # a float or a 0-d tensor (read after the step's synchronisation)
            s.lr = sched.get_last_lr()[0]
            s.grad_norm = gn       # any other public attribute becomes a field of the event
    pilotbench_probe.log(note="anything", value=1)
    with pilotbench_probe.timed_validation() as v:       # or pilotbench_probe.validation(step, loss, ms)
        v.loss = evaluate(model)
    with pilotbench_probe.timed_checkpoint(path="ckpt.pt"):  # or pilotbench_probe.checkpoint(step, ms, ...)
        torch.save(model.state_dict(), "ckpt.pt")

Where the events go
-------------------
``watch`` hands the job the write end of a pipe: PILOTBENCH_PROBE_FD names the descriptor and
PILOTBENCH_PROBE_FD_INODE the pipe's inode. A process where that descriptor is open and is that
pipe (the job, its forks) writes there; one where it is not (torchrun's workers and other children
started with close_fds, where the number may even be another file) falls back to the file path in
PILOTBENCH_PROBE (appended with O_APPEND). Either way each line is one ``os.write`` shorter than
4096 bytes (PIPE_BUF), so the ranks of a job can share the channel without tearing lines.
PILOTBENCH_PROBE may also be ``fd:N`` (write to the inherited descriptor N, unchecked). Without
both variables (or with them empty) every function here returns at once and nothing is written,
opened or imported.

Every line is a JSON object with "event", "t" (time.time()), "rank" (int(RANK), default 0) and
"pid". Events:

* "hello", once per process, before its first other event: world_size, local_rank, torch_version,
  cuda_version, hip_version, cudnn, nccl_version ("2.21.5"), driver (NVIDIA: NVML's
  nvmlSystemGetDriverVersion through ctypes; AMD: /sys/module/amdgpu/version; else null),
  device_names (torch.cuda.get_device_name(i) once CUDA is initialised; before that, NVML's names
  so that the probe never initialises CUDA itself; ["cpu"] without a GPU), device_count, python,
  hostname, probe_version (1). The torch fields are null when the job has not imported torch by
  its first event (the probe does not import it).
* "step": step (1-based count of completed optimizer steps in this process, or what the job passed),
  tokens (tokens this process consumed in the step; null when unknown), loss, lr, step_time_ms;
  when known: forward_ms, backward_ms, optimizer_ms, data_wait_ms (other phase names give
  "<name>_ms"), grad_norm; on a GPU: peak_allocated_bytes and peak_reserved_bytes so far
  (torch.cuda.max_memory_allocated()/max_memory_reserved(); the ROCm build answers the same calls;
  peak_scope "run", or "step" with PILOTBENCH_PROBE_STEP_PEAKS=1, which resets them each step),
  allocated_bytes (memory_allocated() at the step's end), device; plus any field the job adds.
* "validation": step, loss, duration_ms (batches when known).
* "checkpoint": step, duration_ms, path (optional), bytes (optional).
* "log": the fields given to log(**fields) (and the Trainer's non-step logs, source "hf").
* "error": an exception left the main program (type, message, oom, step = completed steps,
  in_step, peak_allocated_bytes on a GPU). Written from sys.excepthook; readers that do not know it
  ignore it.
* "end": the interpreter shuts down without an uncaught exception (atexit): steps. sys.exit(n)
  ends that way too, whatever n (torch.multiprocessing's spawn exits a failed rank with
  sys.exit(1)): the exit status is watch's to read. A kill (SIGTERM, SIGKILL) writes nothing.

A float that is not finite (a NaN loss) is written as null and its key listed in "nonfinite".
The probe never raises into the job: an error inside the probe is reported once on stderr and the
probe then stays silent for the rest of the process.

Timing: a step is timed with time.perf_counter() from entering to leaving ``step()``; when CUDA is
initialised the probe calls torch.cuda.synchronize() at both ends (the GPU is idle at the start in
a steady loop, so that costs microseconds), so the time is the device's, not the launch queue's.
A phase synchronises at both of its ends too: use phases only when you want the split.
"""

import atexit
import json
import math
import os
import sys
import threading
import time

__all__ = [
    "PROBE_VERSION", "enabled", "step", "phase", "data_wait", "log", "validation", "checkpoint",
    "timed_validation", "timed_checkpoint", "HFCallback", "LightningCallback", "lightning_callback",
]

PROBE_VERSION = 1
ENV_VARIABLE = "PILOTBENCH_PROBE"
FD_VARIABLE = "PILOTBENCH_PROBE_FD"
FD_INODE_VARIABLE = "PILOTBENCH_PROBE_FD_INODE"
MAX_LINE = 4096          # bytes, newline included: every line written is shorter than this

_TARGET = os.environ.get(ENV_VARIABLE, "")
_FD_TARGET = os.environ.get(FD_VARIABLE, "")
_ENABLED = bool(_TARGET or _FD_TARGET)
_perf = time.perf_counter


def enabled():
    """True when PILOTBENCH_PROBE or PILOTBENCH_PROBE_FD was set when this module was imported."""
    return _ENABLED


# --------------------------------------------------------------------------------------------
# Process state, failure handling, writing
# --------------------------------------------------------------------------------------------

class _State(object):
    def __init__(self):
        self.lock = threading.RLock()
        self.pid = None            # the process the state below belongs to (fork resets it)
        self.fd = None
        self.hello_sent = False
        self.steps = 0             # completed optimizer steps
        self.current = None        # the step being timed, if any
        self.pending = {}          # phase times (ms) measured outside a step, for the next one
        self.mem_devices = None    # CUDA devices this process allocates on (found at its first step)
        self.uncaught = False
        self.step_failed = False   # the last step's block ended with an exception
        self.hooks_installed = False


_S = _State()
_broken = False
_warned = False


def _fail(exc):
    """Swallow an error inside the probe: one line on stderr, then the probe stays silent."""
    global _broken, _warned
    _broken = True
    if not _warned:
        _warned = True
        try:
            sys.stderr.write("pilotbench_probe: disabled after an internal error (the job goes on): %s: %s\n"
                             % (type(exc).__name__, exc))
            sys.stderr.flush()
        except Exception:
            pass


def _active():
    return _ENABLED and not _broken


def _rank():
    try:
        return int(os.environ.get("RANK", "0") or 0)
    except ValueError:
        return 0


def _env_int(name, default):
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


def _torch():
    """torch when the job has imported it; never imports it."""
    return sys.modules.get("torch")


def _cuda_ready(torch):
    try:
        return torch is not None and torch.cuda.is_initialized()
    except Exception:
        return False


def _sync(torch=None):
    torch = torch if torch is not None else _torch()
    if _cuda_ready(torch):
        torch.cuda.synchronize()


def _now_synced(sync=True):
    if sync:
        _sync()
    return _perf()


def _watch_pipe():
    """The descriptor PILOTBENCH_PROBE_FD names when it is open here and is watch's pipe, else None."""
    try:
        fd = int(_FD_TARGET)
        inode = int(os.environ.get(FD_INODE_VARIABLE, "") or -1)
        st = os.fstat(fd)
    except (ValueError, OSError):
        return None
    import stat
    if not stat.S_ISFIFO(st.st_mode) or st.st_ino != inode:
        return None            # closed by a launcher and reused for another file: not ours
    return fd


def _ensure_process():
    """Per-process set-up (again in a forked child): descriptor, hooks, hello. Caller holds the lock."""
    pid = os.getpid()
    if _S.pid != pid:
        forked = _S.pid is not None
        inherited_fd = _S.fd if forked else None
        _S.pid = pid
        _S.hello_sent = False
        _S.uncaught = False
        if forked:               # a child of fork() starts its own count; the first call keeps what
            _S.steps = 0         # was noted before it (a data phase timed before the first step)
            _S.current = None
            _S.pending = {}
            _S.mem_devices = None
        pipe = _watch_pipe() if _FD_TARGET and inherited_fd is None else None
        if pipe is not None:
            _S.fd = pipe
        elif _TARGET.startswith("fd:"):
            _S.fd = int(_TARGET[3:])
        elif inherited_fd is not None:
            _S.fd = inherited_fd          # the pipe or an O_APPEND descriptor shared with the parent: still right
        elif not _TARGET:
            raise RuntimeError("PILOTBENCH_PROBE_FD is not watch's pipe here and PILOTBENCH_PROBE names no file")
        else:
            _S.fd = os.open(_TARGET, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        if not _S.hooks_installed:
            _S.hooks_installed = True
            atexit.register(_at_exit)
            previous = sys.excepthook

            def _excepthook(etype, value, tb):
                _on_uncaught(etype, value)
                previous(etype, value, tb)

            sys.excepthook = _excepthook
    if not _S.hello_sent:
        _S.hello_sent = True
        _write(_compose("hello", _hello_fields()))


def _emit(event, fields):
    if not _active():
        return
    try:
        with _S.lock:
            _ensure_process()
            _write(_compose(event, fields))
    except Exception as exc:
        _fail(exc)


def _write(line):
    data = line.encode("ascii")
    os.write(_S.fd, data)


_CORE = ("event", "t", "rank", "pid", "step")


def _compose(event, fields):
    nonfinite = []
    record = {"event": event, "t": time.time(), "rank": _rank(), "pid": os.getpid()}
    for key, value in fields.items():
        record[str(key)] = _clean(value, str(key), nonfinite, 0)
    if nonfinite:
        record["nonfinite"] = nonfinite
    line = json.dumps(record, separators=(",", ":"), allow_nan=False, default=str)
    if len(line) + 1 < MAX_LINE:
        return line + "\n"
    # Too long for one atomic append: shorten strings, then drop the job's own fields.
    for key, value in list(record.items()):
        if isinstance(value, str) and len(value) > 200:
            record[key] = value[:200] + "..."
        elif isinstance(value, (dict, list)) and key not in _CORE:
            text = json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)
            if len(text) > 200:
                record[key] = text[:200] + "..."
    record["truncated"] = True
    line = json.dumps(record, separators=(",", ":"), allow_nan=False, default=str)
    if len(line) + 1 >= MAX_LINE:
        keep = {k: record[k] for k in _CORE if k in record}
        keep["truncated"] = True
        line = json.dumps(keep, separators=(",", ":"), allow_nan=False, default=str)
    return line + "\n"


def _clean(value, key, nonfinite, depth):
    """A JSON-safe copy: tensors and numpy scalars become numbers, non-finite floats null."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        nonfinite.append(key)
        return None
    if depth < 3:
        if isinstance(value, dict):
            return {str(k): _clean(v, "%s.%s" % (key, k), nonfinite, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_clean(v, key, nonfinite, depth + 1) for v in value[:64]]
    number = _number(value)
    if number is not None:
        return _clean(number, key, nonfinite, depth)
    text = str(value)
    return text if len(text) <= 500 else text[:500] + "..."


def _number(value):
    """float/int from a 0-d tensor, numpy scalar or anything with item(); None otherwise."""
    item = getattr(value, "item", None)
    if item is None:
        return None
    try:
        numel = getattr(value, "numel", None)
        if numel is not None and numel() != 1:
            return None
        out = item()
        return out if isinstance(out, (int, float)) and not isinstance(out, bool) else None
    except Exception:
        return None


def _as_float(value):
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    number = _number(value)
    if number is not None:
        return float(number)
    try:
        return float(value)
    except Exception:
        return None


def _as_int(value):
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = _number(value)
    if number is None:
        try:
            number = float(value)
        except Exception:
            return None
    try:
        return int(number)
    except Exception:
        return None


# --------------------------------------------------------------------------------------------
# hello
# --------------------------------------------------------------------------------------------

def _hello_fields():
    import platform
    import socket
    torch = _torch()
    f = {
        "probe_version": PROBE_VERSION,
        "world_size": _env_int("WORLD_SIZE", 1),
        "local_rank": _env_int("LOCAL_RANK", 0),
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "torch_version": None, "cuda_version": None, "hip_version": None, "cudnn": None,
        "nccl_version": None, "driver": None, "device_names": ["cpu"], "device_count": 0,
    }
    if torch is None:
        return f
    f["torch_version"] = str(getattr(torch, "__version__", None))
    version = getattr(torch, "version", None)
    f["cuda_version"] = getattr(version, "cuda", None)
    f["hip_version"] = getattr(version, "hip", None)
    try:
        available = torch.cuda.is_available()
    except Exception:
        available = False
    if not available:
        return f
    try:
        f["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        pass
    f["nccl_version"] = _nccl_version(torch)
    nvidia = f["cuda_version"] is not None and f["hip_version"] is None
    f["driver"] = _nvml_driver() if nvidia else _amd_driver()
    names = None
    if _cuda_ready(torch) or not nvidia:
        try:
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        except Exception:
            names = None
    if names is None:
        # CUDA is not initialised yet: NVML's names, so that the probe never initialises CUDA (a
        # context on device 0 in every rank, or a fork after initialisation, would hurt the job).
        names = _nvml_names()
        if names is not None:
            f["device_names_source"] = "nvml"
    if names:
        f["device_names"] = names
        f["device_count"] = len(names)
    return f


def _nccl_version(torch):
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return None
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v)
    if isinstance(v, int):
        if v >= 10000:     # NCCL >= 2.9: major*10000 + minor*100 + patch
            return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
        return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)
    return str(v)


def _nvml():
    import ctypes
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
    if init() != 0:
        raise OSError("nvmlInit failed")
    return lib


def _nvml_driver():
    try:
        import ctypes
        lib = _nvml()
        try:
            buf = ctypes.create_string_buffer(96)
            if lib.nvmlSystemGetDriverVersion(buf, 96) == 0:
                return buf.value.decode("ascii", "replace")
        finally:
            lib.nvmlShutdown()
    except Exception:
        pass
    return None


def _nvml_names():
    try:
        import ctypes
        lib = _nvml()
        try:
            count = ctypes.c_uint(0)
            get_count = getattr(lib, "nvmlDeviceGetCount_v2", None) or lib.nvmlDeviceGetCount
            if get_count(ctypes.byref(count)) != 0:
                return None
            get_handle = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or lib.nvmlDeviceGetHandleByIndex
            names = []
            for i in range(count.value):
                handle = ctypes.c_void_p()
                buf = ctypes.create_string_buffer(96)
                if get_handle(ctypes.c_uint(i), ctypes.byref(handle)) != 0 or lib.nvmlDeviceGetName(handle, buf, 96) != 0:
                    return None
                names.append(buf.value.decode("utf-8", "replace"))
        finally:
            lib.nvmlShutdown()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            try:
                names = [names[int(x)] for x in visible.split(",") if x.strip() != ""]
            except (ValueError, IndexError):
                pass           # UUIDs or MIG names: all of NVML's devices
        return names
    except Exception:
        return None


def _amd_driver():
    try:
        with open("/sys/module/amdgpu/version") as fh:
            return fh.read().strip() or None
    except Exception:
        return None


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------

# Resetting the allocator's peak counters each step would change what the job itself reads from
# torch.cuda.max_memory_allocated() (measured on the H200: a Trainer job saw 13.9 GiB instead of its
# 71.5 GiB peak), so by default the probe leaves them alone and reports the peak so far
# ("peak_scope": "run"); PILOTBENCH_PROBE_STEP_PEAKS=1 asks for per-step peaks ("step").
_STEP_PEAKS = os.environ.get("PILOTBENCH_PROBE_STEP_PEAKS", "") == "1"


def _read_peaks(record, reset=None):
    """Adds the peak memory to record (GPU only); resets the peaks only when asked for."""
    if reset is None:
        reset = _STEP_PEAKS
    torch = _torch()
    if not _cuda_ready(torch):
        return
    cuda = torch.cuda
    if _S.mem_devices is None:
        try:
            used = [d for d in range(cuda.device_count()) if cuda.memory_allocated(d) > 0]
        except Exception:
            used = []
        _S.mem_devices = used or [cuda.current_device()]
    peaks = []
    for d in _S.mem_devices:
        # One memory_stats() (it builds a dict of ~100 entries) rather than three calls that each
        # build it: the same figures as max_memory_allocated(), max_memory_reserved() and
        # memory_allocated().
        stats = cuda.memory_stats(d)
        peaks.append((stats.get("allocated_bytes.all.peak", 0), stats.get("reserved_bytes.all.peak", 0),
                      stats.get("allocated_bytes.all.current", 0), d))
        if reset:
            cuda.reset_peak_memory_stats(d)
    best = max(peaks)
    record["peak_scope"] = "step" if reset else "run"
    record["peak_allocated_bytes"] = int(best[0])
    record["peak_reserved_bytes"] = int(max(p[1] for p in peaks))
    record["allocated_bytes"] = int(best[2])
    record["device"] = best[3]
    if len(peaks) > 1:
        record["peak_allocated_bytes_by_device"] = {str(p[3]): int(p[0]) for p in peaks}


# --------------------------------------------------------------------------------------------
# Steps and phases
# --------------------------------------------------------------------------------------------

_PHASE_FIELDS = {"forward": "forward_ms", "fwd": "forward_ms", "backward": "backward_ms", "bwd": "backward_ms",
                 "optimizer": "optimizer_ms", "optim": "optimizer_ms", "opt": "optimizer_ms",
                 "data": "data_wait_ms", "data_wait": "data_wait_ms", "dataloader": "data_wait_ms"}


def _phase_field(name):
    name = str(name)
    return _PHASE_FIELDS.get(name, name if name.endswith("_ms") else name + "_ms")


class _NullContext(object):
    """What every API returns while the probe is off: accepts attributes, does nothing."""
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __setattr__(self, name, value):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _null_call

    def __call__(self, *args, **kwargs):
        return self


def _null_call(*args, **kwargs):
    return _NULL


_NULL = _NullContext()


class _Phase(object):
    __slots__ = ("_owner", "_field", "_sync", "_t0")

    def __init__(self, owner, name, sync):
        self._owner = owner       # a _Step, or None: the probe's pending phases (for the next step)
        self._field = _phase_field(name)
        self._sync = sync
        self._t0 = None

    def __enter__(self):
        try:
            self._t0 = _now_synced(self._sync)
        except Exception as exc:
            _fail(exc)
        return self

    def __exit__(self, etype, value, tb):
        try:
            if self._t0 is not None and _active():
                ms = (_now_synced(self._sync) - self._t0) * 1000.0
                _add_phase(self._owner, self._field, ms)
        except Exception as exc:
            _fail(exc)
        return False


def _add_phase(owner, field, ms):
    with _S.lock:
        if owner is None:
            owner = _S.current if _S.current is not None and _S.pid == os.getpid() else None
        target = owner._phases if owner is not None else _S.pending
        target[field] = target.get(field, 0.0) + ms


class _Step(object):
    """One optimizer step: ``with pilotbench_probe.step(tokens=n) as s:``. Set s.loss, s.lr and any
    other public attribute inside; s.phase(name) times a part of the step; s.data_wait(ms)."""

    def __init__(self, tokens=None, step=None, sync=True, **fields):
        self.tokens = tokens
        self.loss = None
        self.lr = None
        self._step = step
        self._sync = sync
        self._fields = fields
        self._phases = {}
        self._t0 = None

    def phase(self, name, sync=None):
        return _Phase(self, name, self._sync if sync is None else sync)

    def data_wait(self, ms):
        try:
            _add_phase(self, "data_wait_ms", float(ms))
        except Exception as exc:
            _fail(exc)

    def log(self, **fields):
        self._fields.update(fields)

    def __enter__(self):
        try:
            with _S.lock:
                _ensure_process()
                _S.current = self
                _S.step_failed = False
                pending, _S.pending = _S.pending, {}
            self._phases.update(pending)
            self._t0 = _now_synced(self._sync)
        except Exception as exc:
            _fail(exc)
        return self

    def __exit__(self, etype, value, tb):
        if etype is not None:
            with _S.lock:
                if _S.current is self:
                    _S.current = None
                _S.step_failed = True
            return False                      # the step did not complete; the job's exception goes on
        try:
            self._finish()
        except Exception as exc:
            _fail(exc)
        return False

    def _finish(self):
        if self._t0 is None or not _active():
            return
        torch = _torch()
        if self._sync:
            _sync(torch)
        elapsed_ms = (_perf() - self._t0) * 1000.0
        with _S.lock:
            if _S.current is self:
                _S.current = None
            _S.steps = int(self._step) if self._step is not None else _S.steps + 1
            number = _S.steps
        record = {"step": number, "tokens": _as_int(self.tokens), "loss": _as_float(self.loss),
                  "lr": _as_float(self.lr), "step_time_ms": elapsed_ms}
        record.update(self._phases)
        _read_peaks(record)
        for key, value in self.__dict__.items():
            if not key.startswith("_") and key not in ("tokens", "loss", "lr"):
                record[key] = value
        record.update(self._fields)
        _emit("step", record)


def step(tokens=None, step=None, sync=True, **fields):
    """Times one optimizer step: ``with pilotbench_probe.step(tokens=n) as s: ...``.

    tokens: tokens this process consumes in the step. step: the step's number when the job knows
    it (a resumed run); otherwise the probe counts completed steps from 1. sync=False skips the
    torch.cuda.synchronize() calls (then the time is the launch queue's). Extra keyword arguments
    become fields of the event. An exception inside the block passes through and emits no step."""
    if not _active():
        return _NULL
    return _Step(tokens=tokens, step=step, sync=sync, **fields)


def phase(name, sync=True):
    """``with pilotbench_probe.phase("forward"):`` times a part of the current step; outside a step
    (e.g. ``phase("data")`` around fetching the batch) the time goes to the next step."""
    if not _active():
        return _NULL
    return _Phase(None, name, sync)


def data_wait(ms):
    """Adds ms of waiting for data to the current step, or to the next one outside a step."""
    if not _active():
        return
    try:
        _add_phase(None, "data_wait_ms", float(ms))
    except Exception as exc:
        _fail(exc)


def _completed_steps():
    with _S.lock:
        return _S.steps if _S.pid == os.getpid() else 0


# --------------------------------------------------------------------------------------------
# log, validation, checkpoint
# --------------------------------------------------------------------------------------------

def log(**fields):
    """Writes a "log" event with these fields (and "step", the completed steps, unless given)."""
    if not _active():
        return
    try:
        if "step" not in fields:
            fields["step"] = _completed_steps()
        _emit("log", fields)
    except Exception as exc:
        _fail(exc)


def validation(step=None, loss=None, duration_ms=None, **fields):
    """Writes a "validation" event; step defaults to the completed steps."""
    if not _active():
        return
    try:
        record = {"step": _as_int(step) if step is not None else _completed_steps(),
                  "loss": _as_float(loss), "duration_ms": _as_float(duration_ms)}
        record.update(fields)
        _emit("validation", record)
    except Exception as exc:
        _fail(exc)


def checkpoint(step=None, duration_ms=None, path=None, bytes=None, **fields):  # noqa: A002 (protocol name)
    """Writes a "checkpoint" event; step defaults to the completed steps; bytes, when not given,
    is the size of path (a file, or a folder's files) when it exists."""
    if not _active():
        return
    try:
        record = {"step": _as_int(step) if step is not None else _completed_steps(),
                  "duration_ms": _as_float(duration_ms)}
        if path is not None:
            record["path"] = str(path)
            if bytes is None:
                bytes = _size_of(str(path))
        if bytes is not None:
            record["bytes"] = _as_int(bytes)
        record.update(fields)
        _emit("checkpoint", record)
    except Exception as exc:
        _fail(exc)


def _size_of(path):
    try:
        if os.path.isfile(path):
            return os.path.getsize(path)
        if os.path.isdir(path):
            total = 0
            for root, _dirs, files in os.walk(path):
                for name in files:
                    try:
                        total += os.path.getsize(os.path.join(root, name))
                    except OSError:
                        pass
            return total
    except Exception:
        pass
    return None


class _Timed(object):
    """``with timed_validation(step) as v: v.loss = ...`` / ``with timed_checkpoint(step, path=p) as c:``"""

    def __init__(self, kind, step, sync, fields):
        self._kind = kind
        self._step = step
        self._sync = sync
        self._t0 = None
        self._fields = fields

    def __enter__(self):
        try:
            self._t0 = _now_synced(self._sync)
        except Exception as exc:
            _fail(exc)
        return self

    def __exit__(self, etype, value, tb):
        if etype is not None or self._t0 is None:
            return False
        try:
            ms = (_now_synced(self._sync) - self._t0) * 1000.0
            fields = dict(self._fields)
            fields.update({k: v for k, v in self.__dict__.items() if not k.startswith("_")})
            if self._kind == "validation":
                loss = fields.pop("loss", None)
                validation(self._step, loss, ms, **fields)
            else:
                path = fields.pop("path", None)
                size = fields.pop("bytes", None)
                checkpoint(self._step, ms, path=path, bytes=size, **fields)
        except Exception as exc:
            _fail(exc)
        return False


def timed_validation(step=None, sync=True, **fields):
    """Times a validation pass; set ``v.loss`` (and ``v.batches``) inside the block."""
    if not _active():
        return _NULL
    return _Timed("validation", step, sync, fields)


def timed_checkpoint(step=None, path=None, sync=True, **fields):
    """Times a checkpoint save; ``path`` (or ``c.path`` set inside) gives the event its path and bytes."""
    if not _active():
        return _NULL
    if path is not None:
        fields["path"] = path
    return _Timed("checkpoint", step, sync, fields)


# --------------------------------------------------------------------------------------------
# Process end and uncaught exceptions
# --------------------------------------------------------------------------------------------

def _on_uncaught(etype, value):
    try:
        if not _active() or _S.pid != os.getpid():
            return
        _S.uncaught = True
        # The name as Python's traceback prints it: module.qualname, bare for builtins and __main__.
        module = getattr(etype, "__module__", None)
        name = getattr(etype, "__qualname__", None) or getattr(etype, "__name__", "?")
        if module and module not in ("builtins", "__main__"):
            name = module + "." + name
        message = str(value)
        oom = "OutOfMemory" in name or "out of memory" in message.lower()
        with _S.lock:
            in_step = _S.current is not None or _S.step_failed
        record = {"type": name, "message": message[:1500], "oom": oom, "step": _completed_steps(), "in_step": in_step}
        try:
            _read_peaks(record, reset=False)
        except Exception:
            pass
        _emit("error", record)
    except Exception as exc:
        _fail(exc)


def _at_exit():
    try:
        if _active() and _S.pid == os.getpid() and not _S.uncaught:
            _emit("end", {"steps": _completed_steps()})
    except Exception as exc:
        _fail(exc)


def _hello_now():
    """Writes hello (first use) without another event."""
    if not _active():
        return
    try:
        with _S.lock:
            _ensure_process()
    except Exception as exc:
        _fail(exc)


# --------------------------------------------------------------------------------------------
# Hugging Face Trainer
# --------------------------------------------------------------------------------------------

def _guarded(method):
    """Wraps a callback method: the probe's errors never reach the training loop; returns None."""
    def wrapper(self, *args, **kwargs):
        if not _active():
            return None
        try:
            method(self, *args, **kwargs)
        except Exception as exc:
            _fail(exc)
        return None
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


_HF_CLASS = None


class HFCallback(object):
    """A transformers.TrainerCallback (a subclass of it whenever transformers imports; else a plain
    class with every on_* event) that writes the probe's events. Pass it to Trainer(callbacks=[...]);
    the class itself works too (the Trainer instantiates classes).

    Per optimizer step (on_step_begin .. on_step_end, both CUDA-synchronised): step_time_ms;
    data_wait_ms = the gap from the end of the previous step's work (its step end, log, evaluation
    or save) to on_step_begin (the Trainer fetches the step's batches just before on_step_begin);
    with split=True, forward_backward_ms = on_step_begin .. on_pre_optimizer_step and optimizer_ms =
    on_pre_optimizer_step .. on_optimizer_step (two more synchronisations a step; transformers
    >= 4.41 has these events); micro_batches (on_substep_end + 1); peaks; epoch.

    tokens, per process: the growth of state.num_input_tokens_seen over the step, divided by the
    world size because the Trainer gathers it over all ranks (TrainingArguments(
    include_num_input_tokens_seen=True) turns it on; tokens_source "num_input_tokens_seen", and
    tokens_global the undivided figure). Without it the fallback is batch size x micro-batches x
    sequence length when a sequence length is known: seq_len given here, else args.max_seq_length
    or args.max_length (TRL's configs); padded batches make that an upper bound (tokens_source
    "batch_x_seq_len"). Else tokens is null.

    The step event waits for the Trainer's on_log of the same step (it comes right after
    on_step_end) so that it carries loss (the Trainer's mean over the logging window; loss_steps
    says how many steps), lr (logs["learning_rate"]) and grad_norm; it is written there, or at the
    next event of the loop. Evaluation: a "validation" event at on_evaluate with the eval loss
    (metrics "<prefix>_loss"), its duration timed from the previous event of the loop (else
    metrics "<prefix>_runtime") and the prediction steps as batches. Save: a "checkpoint" event at
    on_save, timed from the previous event (the Trainer saves right before on_save), with
    args.output_dir/checkpoint-<step> as path and its size. Other logs (the final train_runtime
    etc.) become "log" events with source "hf".
    """

    def __new__(cls, *args, **kwargs):
        if cls is HFCallback:
            cls = _hf_class()
        return object.__new__(cls)

    def __init__(self, seq_len=None, sync=True, split=True):
        self.seq_len = seq_len
        self.sync = sync
        self.split = split
        self._t_begin = None
        self._t_pre = None
        self._optimizer_ms = None
        self._micro = 1
        self._mark = None
        self._seen = None
        self._pending = None
        self._last_logged_step = 0
        self._eval_batches = 0

    def __getattr__(self, name):
        # Events added by a later transformers (when it is not importable, or not subclassed).
        if name.startswith("on_"):
            return _hf_noop
        raise AttributeError(name)

    # -- helpers --
    def _now(self):
        return _now_synced(self.sync)

    def _flush(self):
        if self._pending is not None:
            record, self._pending = self._pending, None
            _emit("step", record)

    def _tokens(self, args, state, record):
        seen = getattr(state, "num_input_tokens_seen", None)
        if isinstance(seen, (int, float)) and self._seen is not None and seen > self._seen:
            world = max(1, int(getattr(args, "world_size", 0) or _env_int("WORLD_SIZE", 1)))
            record["tokens_global"] = int(seen - self._seen)
            record["tokens"] = int(round((seen - self._seen) / float(world)))
            record["tokens_source"] = "num_input_tokens_seen"
            self._seen = seen
            return
        if isinstance(seen, (int, float)):
            self._seen = seen
        seq = self.seq_len or getattr(args, "max_seq_length", None) or getattr(args, "max_length", None)
        batch = getattr(state, "train_batch_size", None) or getattr(args, "per_device_train_batch_size", None)
        if isinstance(seq, int) and isinstance(batch, int) and seq > 0 and batch > 0:
            record["tokens"] = batch * self._micro * seq
            record["tokens_source"] = "batch_x_seq_len"
        else:
            record["tokens"] = None

    # -- events --
    @_guarded
    def on_init_end(self, args, state, control, **kwargs):
        _hello_now()

    @_guarded
    def on_train_begin(self, args, state, control, **kwargs):
        _hello_now()
        seen = getattr(state, "num_input_tokens_seen", None)
        self._seen = seen if isinstance(seen, (int, float)) else None
        self._last_logged_step = int(getattr(state, "global_step", 0) or 0)
        with _S.lock:
            if _S.pid == os.getpid():
                _S.steps = self._last_logged_step
        self._mark = self._now()

    @_guarded
    def on_train_end(self, args, state, control, **kwargs):
        self._flush()
        self._mark = None

    @_guarded
    def on_epoch_begin(self, args, state, control, **kwargs):
        self._flush()

    @_guarded
    def on_epoch_end(self, args, state, control, **kwargs):
        self._flush()
        self._mark = _perf()

    @_guarded
    def on_step_begin(self, args, state, control, **kwargs):
        self._flush()
        now = self._now()
        self._data_wait_ms = (now - self._mark) * 1000.0 if self._mark is not None else None
        self._t_begin = now
        self._t_pre = None
        self._optimizer_ms = None
        self._micro = 1

    @_guarded
    def on_substep_end(self, args, state, control, **kwargs):
        self._micro += 1

    @_guarded
    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.split and self._t_begin is not None:
            self._t_pre = self._now()

    @_guarded
    def on_optimizer_step(self, args, state, control, **kwargs):
        if self.split and self._t_pre is not None:
            self._optimizer_ms = (self._now() - self._t_pre) * 1000.0

    @_guarded
    def on_step_end(self, args, state, control, **kwargs):
        if self._t_begin is None:
            return
        now = self._now()
        step_number = int(getattr(state, "global_step", 0) or 0)
        with _S.lock:
            if _S.pid == os.getpid() or _S.pid is None:
                _S.steps = step_number
        record = {"step": step_number, "tokens": None, "loss": None, "lr": None,
                  "step_time_ms": (now - self._t_begin) * 1000.0}
        self._tokens(args, state, record)
        if getattr(self, "_data_wait_ms", None) is not None:
            record["data_wait_ms"] = self._data_wait_ms
        if self._t_pre is not None:
            record["forward_backward_ms"] = (self._t_pre - self._t_begin) * 1000.0
        if self._optimizer_ms is not None:
            record["optimizer_ms"] = self._optimizer_ms
        record["micro_batches"] = self._micro
        epoch = getattr(state, "epoch", None)
        if epoch is not None:
            record["epoch"] = epoch
        _read_peaks(record)
        self._pending = record
        self._t_begin = None
        self._mark = _perf()

    @_guarded
    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = dict(logs or {})
        step_number = int(getattr(state, "global_step", 0) or 0)
        if "loss" in logs and self._pending is not None and self._pending.get("step") == step_number:
            self._pending["loss"] = _as_float(logs.pop("loss"))
            if "learning_rate" in logs:
                self._pending["lr"] = _as_float(logs.pop("learning_rate"))
            if "grad_norm" in logs:
                self._pending["grad_norm"] = _as_float(logs.pop("grad_norm"))
            self._pending["loss_steps"] = max(1, step_number - self._last_logged_step)
            self._last_logged_step = step_number
            # Other per-step figures (TRL's mean_token_accuracy, ...) join the step; the run's
            # running totals (epoch, num_input_tokens_seen, train_runtime, train_tokens_per_second)
            # do not.
            for key, value in logs.items():
                if key != "epoch" and key != "num_input_tokens_seen" and not str(key).startswith("train_"):
                    self._pending.setdefault(key, value)
            self._flush()
        else:
            self._flush()
            if not any(str(k).startswith("eval_") for k in logs):   # evaluation: on_evaluate says it
                if "loss" in logs:
                    self._last_logged_step = step_number
                logs.pop("total_flos", None)
                logs["source"] = "hf"
                logs.setdefault("step", step_number)
                _emit("log", logs)
        # Only the training log moves the mark: evaluate() logs its metrics just before on_evaluate,
        # and the evaluation's duration is measured from the mark.
        if self._mark is not None and not any(str(k).startswith("eval_") for k in (logs or {})):
            self._mark = _perf()

    @_guarded
    def on_prediction_step(self, args, state, control, **kwargs):
        self._eval_batches += 1

    @_guarded
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self._flush()
        metrics = metrics or {}
        now = self._now()
        loss = metrics.get("eval_loss")
        runtime = metrics.get("eval_runtime")
        for key, value in metrics.items():
            if loss is None and str(key).endswith("_loss"):
                loss = value
            if runtime is None and str(key).endswith("_runtime"):
                runtime = value
        if self._mark is not None:
            duration = (now - self._mark) * 1000.0
        else:
            duration = _as_float(runtime) * 1000.0 if _as_float(runtime) is not None else None
        extra = {"batches": self._eval_batches} if self._eval_batches else {}
        if runtime is not None:
            extra["runtime_ms"] = _as_float(runtime) * 1000.0 if _as_float(runtime) is not None else None
        validation(int(getattr(state, "global_step", 0) or 0), loss, duration, **extra)
        self._eval_batches = 0
        if self._mark is not None:
            self._mark = _perf()

    @_guarded
    def on_save(self, args, state, control, **kwargs):
        self._flush()
        now = self._now()
        duration = (now - self._mark) * 1000.0 if self._mark is not None else None
        step_number = int(getattr(state, "global_step", 0) or 0)
        path = None
        output_dir = getattr(args, "output_dir", None)
        if output_dir:
            candidate = os.path.join(str(output_dir), "checkpoint-%d" % step_number)
            if os.path.isdir(candidate):
                path = candidate
        checkpoint(step_number, duration, path=path)
        if self._mark is not None:
            self._mark = _perf()

    @_guarded
    def on_predict(self, args, state, control, **kwargs):
        self._flush()


def _hf_noop(*args, **kwargs):
    return None


def _hf_class():
    """HFCallback's class: a subclass of transformers.TrainerCallback when that imports."""
    global _HF_CLASS
    if _HF_CLASS is None:
        base = None
        try:
            mod = sys.modules.get("transformers.trainer_callback")
            if mod is None:
                import transformers.trainer_callback as mod  # the job uses the Trainer: already paid for
            base = getattr(mod, "TrainerCallback", None)
        except Exception:
            base = None
        if base is not None:
            _HF_CLASS = type("HFCallback", (HFCallback, base), {"__module__": __name__, "__doc__": HFCallback.__doc__})
        else:
            _HF_CLASS = type("HFCallback", (HFCallback,), {"__module__": __name__, "__doc__": HFCallback.__doc__})
    return _HF_CLASS


# --------------------------------------------------------------------------------------------
# PyTorch Lightning
# --------------------------------------------------------------------------------------------

_LIGHTNING_CLASSES = {}
_VAL_LOSS_KEYS = ("val_loss", "val/loss", "validation_loss", "valid_loss", "loss/val", "val_loss_epoch")


def _lightning_base(package=None):
    """lightning.pytorch.Callback or pytorch_lightning.Callback: the one the job imported first."""
    names = [package] if package else []
    names += [n for n in ("lightning.pytorch", "pytorch_lightning") if n in sys.modules]
    names += ["lightning.pytorch", "pytorch_lightning"]
    for name in names:
        try:
            __import__(name)
            return name, getattr(sys.modules[name], "Callback")
        except Exception:
            continue
    return None, None


def _count_tokens(batch):
    """Token count of a batch: input_ids of a dict, else the first integer tensor of >= 2 dims."""
    if isinstance(batch, dict):
        if "input_ids" in batch:
            return _count_tokens(batch["input_ids"])
        return None
    if isinstance(batch, (list, tuple)):
        return _count_tokens(batch[0]) if batch else None
    dtype = getattr(batch, "dtype", None)
    if dtype is not None and getattr(batch, "dim", None) is not None:
        try:
            if not batch.is_floating_point() and not batch.is_complex() and batch.dim() >= 2:
                return int(batch.numel())
        except Exception:
            return None
    return None


class LightningCallback(object):
    """A Lightning Callback (subclass of lightning.pytorch.Callback or pytorch_lightning.Callback,
    whichever the job imported) writing the probe's events.

    A step runs from the on_train_batch_start that follows the previous optimizer step to the
    on_train_batch_end at which trainer.global_step grows (so accumulate_grad_batches is one step);
    forward_backward_ms / optimizer_ms split at on_before_optimizer_step (split=True); loss = the sum
    of the step's outputs["loss"] (Lightning divides them by the accumulation), lr from the first
    optimizer; tokens = tokens_per_batch (an int or a function of the batch) x batches, else input_ids
    of a dict batch or the first integer tensor of >= 2 dims. Validation: on_validation_epoch_start to
    on_validation_epoch_end (not the sanity check), written at on_validation_end with the loss from
    trainer.callback_metrics (val_loss, val/loss, validation_loss, ...; loss_key= to name it).
    Checkpoints: setup() wraps trainer.save_checkpoint (what ModelCheckpoint calls) to time the
    write and read the file's size; on_save_checkpoint only happens before the write.
    """

    def __new__(cls, *args, **kwargs):
        if cls is LightningCallback:
            cls = _lightning_class(kwargs.get("package"))
        return object.__new__(cls)

    def __init__(self, tokens_per_batch=None, sync=True, split=True, loss_key=None, package=None):
        self.tokens_per_batch = tokens_per_batch
        self.sync = sync
        self.split = split
        self.loss_key = loss_key
        self._t0 = None
        self._t_pre = None
        self._mark = None
        self._tokens = 0
        self._tokens_known = True
        self._loss = None
        self._batches = 0
        self._last_step = None
        self._val_t0 = None
        self._val_ms = None
        self._val_batches = 0
        self._wrapped = False

    def _now(self):
        return _now_synced(self.sync)

    @_guarded
    def setup(self, trainer, pl_module, stage=None, *args, **kwargs):
        _hello_now()
        if self._wrapped or not hasattr(trainer, "save_checkpoint"):
            return
        original = trainer.save_checkpoint
        callback = self

        def save_checkpoint(filepath, *a, **kw):
            t0 = None
            try:
                t0 = callback._now() if _active() else None
            except Exception as exc:
                _fail(exc)
            result = original(filepath, *a, **kw)
            if t0 is not None and _active():
                try:
                    ms = (callback._now() - t0) * 1000.0
                    checkpoint(int(getattr(trainer, "global_step", 0) or 0), ms, path=str(filepath))
                    callback._mark = _perf()
                except Exception as exc:
                    _fail(exc)
            return result

        trainer.save_checkpoint = save_checkpoint
        self._wrapped = True

    @_guarded
    def on_train_start(self, trainer, pl_module, *args, **kwargs):
        _hello_now()
        self._last_step = int(getattr(trainer, "global_step", 0) or 0)
        with _S.lock:
            if _S.pid == os.getpid():
                _S.steps = self._last_step
        self._mark = self._now()

    @_guarded
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args, **kwargs):
        if self._t0 is None:
            now = self._now()
            self._data_wait_ms = (now - self._mark) * 1000.0 if self._mark is not None else None
            self._t0 = now
            self._t_pre = None
            self._tokens = 0
            self._tokens_known = True
            self._loss = None
            self._batches = 0
            if self._last_step is None:
                self._last_step = int(getattr(trainer, "global_step", 0) or 0)
        self._batches += 1
        n = None
        if callable(self.tokens_per_batch):
            n = self.tokens_per_batch(batch)
        elif self.tokens_per_batch is not None:
            n = self.tokens_per_batch
        else:
            n = _count_tokens(batch)
        if n is None:
            self._tokens_known = False
        else:
            self._tokens += int(n)

    @_guarded
    def on_before_optimizer_step(self, trainer, pl_module, optimizer=None, *args, **kwargs):
        if self.split and self._t0 is not None and self._t_pre is None:
            self._t_pre = self._now()

    @_guarded
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args, **kwargs):
        if self._t0 is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        value = _as_float(loss) if loss is not None else None
        if value is not None:
            self._loss = value if self._loss is None else self._loss + value
        global_step = int(getattr(trainer, "global_step", 0) or 0)
        if self._last_step is not None and global_step == self._last_step:
            return                      # accumulating: the optimizer has not stepped yet
        now = self._now()
        record = {"step": global_step, "tokens": self._tokens if self._tokens_known else None,
                  "loss": self._loss, "lr": None, "step_time_ms": (now - self._t0) * 1000.0,
                  "micro_batches": self._batches}
        try:
            record["lr"] = float(trainer.optimizers[0].param_groups[0]["lr"])
        except Exception:
            pass
        if getattr(self, "_data_wait_ms", None) is not None:
            record["data_wait_ms"] = self._data_wait_ms
        if self._t_pre is not None:
            record["forward_backward_ms"] = (self._t_pre - self._t0) * 1000.0
            record["optimizer_ms"] = (now - self._t_pre) * 1000.0
        epoch = getattr(trainer, "current_epoch", None)
        if epoch is not None:
            record["epoch"] = epoch
        _read_peaks(record)
        with _S.lock:
            if _S.pid == os.getpid() or _S.pid is None:
                _S.steps = global_step
        _emit("step", record)
        self._last_step = global_step
        self._t0 = None
        self._mark = _perf()

    @_guarded
    def on_validation_epoch_start(self, trainer, pl_module, *args, **kwargs):
        if getattr(trainer, "sanity_checking", False):
            return
        self._val_t0 = self._now()
        self._val_ms = None
        self._val_batches = 0

    @_guarded
    def on_validation_batch_end(self, trainer, pl_module, *args, **kwargs):
        if self._val_t0 is not None:
            self._val_batches += 1

    @_guarded
    def on_validation_epoch_end(self, trainer, pl_module, *args, **kwargs):
        if self._val_t0 is not None:
            self._val_ms = (self._now() - self._val_t0) * 1000.0

    @_guarded
    def on_validation_end(self, trainer, pl_module, *args, **kwargs):
        if self._val_t0 is None:
            return
        if self._val_ms is None:
            self._val_ms = (self._now() - self._val_t0) * 1000.0
        metrics = getattr(trainer, "callback_metrics", None) or {}
        loss = None
        keys = (self.loss_key,) if self.loss_key else _VAL_LOSS_KEYS
        for key in keys:
            if key in metrics:
                loss = metrics[key]
                break
        validation(int(getattr(trainer, "global_step", 0) or 0), loss, self._val_ms, batches=self._val_batches)
        self._val_t0 = None
        if self._mark is not None:
            self._mark = _perf()


def _lightning_class(package=None):
    name, base = _lightning_base(package)
    key = name or ""
    if key not in _LIGHTNING_CLASSES:
        bases = (LightningCallback, base) if base is not None else (LightningCallback,)
        _LIGHTNING_CLASSES[key] = type("LightningCallback", bases,
                                       {"__module__": __name__, "__doc__": LightningCallback.__doc__})
    return _LIGHTNING_CLASSES[key]


def lightning_callback(**kwargs):
    """An instance of LightningCallback (the same as LightningCallback(**kwargs))."""
    return LightningCallback(**kwargs)
