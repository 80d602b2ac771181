"""One of core/kernels' .cu files compiled by nvcc into a shared library for ctypes, and its
pb::kernels functions found by name: the card checks (h200_fused_kernels_check.py,
h200_delta_scan_check.py, h200_new_kernels_check.py) call the kernels on tensors' storage without
building PilotBench; and what the FusedKernels.cu checks share: its Dtype and LogitsCap, pointers and
the current stream for ctypes, the relative error, the pass/fail report and a CUDA-event timer."""
import ctypes, os, subprocess

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(source, out_dir, name, root=ROOT):
    """Compiles `root`/`source` (this checkout's by default; another tree's for a before/after
    comparison) to `out_dir`/`name` (sm_90) and returns fn(part): the one exported pb::kernels
    function whose mangled name contains `part` (e.g. "14rmsNormForward")."""
    lib = os.path.join(out_dir, name)
    nvcc = os.environ.get("CUDACXX", "/usr/local/cuda/bin/nvcc")
    # A library newer than every file of its tree's core/kernels is that tree's build (compiled
    # beside a card script's build, e.g. by h200_fused_kernels_check.py --compile-only): kept.
    kernels = os.path.join(root, "core", "kernels")
    newest = max(os.path.getmtime(os.path.join(kernels, f)) for f in os.listdir(kernels))
    if not (os.path.exists(lib) and os.path.getmtime(lib) > newest):
        subprocess.run([nvcc, "-std=c++17", "-O2", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-I", os.path.join(root, "core"),
                        os.path.join(root, source), "-o", lib], check=True)
    symbols = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout.split()
    so = ctypes.CDLL(lib)

    def fn(part):
        mangled = [s for s in symbols if part in s and s.startswith("_ZN2pb7kernels")]
        if len(mangled) != 1:
            raise SystemExit("symbol %s: %s" % (part, mangled))
        return getattr(so, mangled[0])

    return fn


DT = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}  # kernels::Dtype


class Cap(ctypes.Structure):  # kernels::LogitsCap
    _fields_ = [("divisor", ctypes.c_float), ("softcap", ctypes.c_float)]


def stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def ptr(t):
    return ctypes.c_void_p(t.data_ptr())


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


failures = []  # the cases report() found off by more than their tolerance


def report(case, errors, tols, width=46):
    bad = [k for k in errors if errors[k] > tols[k]]
    print("%-*s %s %s" % (width, case, " ".join("%s %.2e" % kv for kv in errors.items()), "FAIL " + ",".join(bad) if bad else "ok"), flush=True)
    if bad:
        failures.append(case)


def timed(f, reps=20):
    """f's mean time over `reps` calls after one warm-up, in microseconds, by CUDA events."""
    f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        f()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / reps  # us
