"""ac.backends.cpu: the CPU's capability as torch names it."""


def get_cpu_capability():
    """"AVX512", "AVX2" or "DEFAULT": what aicraft's kernels pick on this CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return "DEFAULT"
    words = set(flags.split())
    if "avx512f" in words:
        return "AVX512"
    if "avx2" in words and "fma" in words:
        return "AVX2"
    return "DEFAULT"
