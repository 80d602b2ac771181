"""One of core/kernels' .cu files compiled by nvcc into a shared library for ctypes, and its
pb::kernels functions found by name: the card checks (h200_fused_kernels_check.py,
h200_delta_scan_check.py) call the kernels on tensors' storage without building PilotBench."""
import ctypes, os, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(source, out_dir, name, root=ROOT):
    """Compiles `root`/`source` (this checkout's by default; another tree's for a before/after
    comparison) to `out_dir`/`name` (sm_90) and returns fn(part): the one exported pb::kernels
    function whose mangled name contains `part` (e.g. "14rmsNormForward")."""
    lib = os.path.join(out_dir, name)
    nvcc = os.environ.get("CUDACXX", "/usr/local/cuda/bin/nvcc")
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
