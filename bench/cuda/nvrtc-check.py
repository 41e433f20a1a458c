#!/usr/bin/env python3
"""Compile cbtop's kernels with NVRTC and assemble them with ptxas for one architecture,
without a GPU: catches compile errors and shows each kernel's registers, spills and shared
memory before device time is spent. Needs libnvrtc and ptxas, e.g. from the PyPI wheels
`nvidia-cuda-nvrtc-cu12` and `nvidia-cuda-nvcc-cu12` unpacked under NV (default /opt/nv).

usage: NV=/opt/nv [KDIR=dir] python3 bench/cuda/nvrtc-check.py [--arch sm_90] [--defines A,B=2] [--kernel REGEX]

KDIR, as cbtop's CBTOP_KERNEL_DIR: a folder whose kernel files replace the repository's, file by file.
"""
import argparse, ctypes, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NV = os.environ.get("NV", "/opt/nv")


def sources():
    """The kernel files in module.rs's SOURCES order (the same translation unit)."""
    text = open(os.path.join(ROOT, "src/engine/cuda/module.rs")).read()
    names = re.findall(r'include_str!\("\.\./\.\./\.\./kernels/([^"]+)"\)', text)
    kdir = os.environ.get("KDIR")
    out = ""
    for n in names:
        path = os.path.join(ROOT, "kernels", n)
        if kdir and os.path.exists(os.path.join(kdir, n)):
            path = os.path.join(kdir, n)
        out += f"// ---- {n}\n" + open(path).read() + "\n"
    return out


def compile_ptx(src, arch):
    lib = ctypes.CDLL(os.path.join(NV, "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"))
    prog = ctypes.c_void_p()
    r = lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"cbtop.cu", 0, None, None)
    assert r == 0, r
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", b"--generate-line-info", b"--fmad=false"]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    r = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if r != 0:
        print(log.value.decode(errors="replace"))
        sys.exit(1)
    lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
    ptx = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetPTX(prog, ptx)
    warn = log.value.decode(errors="replace").strip()
    if warn:
        print(warn)
    return ptx.value.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--defines", default="")
    ap.add_argument("--kernel", default=".")
    ap.add_argument("--ptx", help="also write the PTX here")
    a = ap.parse_args()
    pre = ""
    for item in filter(None, (i.strip() for i in a.defines.split(","))):
        name, _, value = item.partition("=")
        pre += f"#define {name.strip()} {value.strip() or 1}\n"
    ptx = compile_ptx(pre + sources(), a.arch)
    if a.ptx:
        open(a.ptx, "w").write(ptx)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        open(p, "w").write(ptx)
        r = subprocess.run([os.path.join(NV, "nvidia/cuda_nvcc/bin/ptxas"), "-v", f"--gpu-name={a.arch}",
                            p, "-o", os.path.join(d, "k.cubin")], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
        sys.exit(1)
    cur = None
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = m.group(1)
            continue
        if cur and re.search(a.kernel, cur) and ("Used" in line or "spill" in line and not " 0 bytes spill stores, 0 bytes spill loads" in line):
            print(f"{cur:32s} {line.split(':', 1)[-1].strip()}")
    print("ok: compiled and assembled for", a.arch)


main()
