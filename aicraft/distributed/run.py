"""python -m aicraft.distributed.run -n 2 script.py [args ...] - start a data-parallel job.

A thin wrapper over the MPI runtime's own mpiexec, as torchrun is over PyTorch's
agents. It runs

    mpiexec -n N [--hostfile FILE] --bind-to core PYTHON -m mpi4py script.py args ...

with the mpiexec installed next to this Python (the mpich wheel's, in a venv),
else the first on PATH. mpi4py's runner aborts the whole job when any rank
raises, even before init_process_group, so no rank is left waiting; mpiexec
ends the job when a rank dies of a signal. --bind-to core pins each rank to a
core, and aicraft's thread pool sizes itself from that affinity: one thread
per rank, no oversubscription (--bind-to none leaves the ranks free).

On several machines, list them in a host file (MPICH: `host:slots` per line)
and pass --hostfile; the same Python, aicraft and script must be at the same
path on each.

A job that ends badly (MPI_Abort, a rank killed) leaves MPICH's shared-memory
file in /dev/shm behind; when mpiexec exits non-zero the launcher removes the
ones no process maps any more.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import List, Optional


def find_mpiexec() -> Optional[str]:
    """The mpiexec beside this Python (a venv's, from the mpich wheel), else PATH's."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


def parse(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m aicraft.distributed.run",
                                     description="Run a script on N ranks through mpiexec.")
    parser.add_argument("-n", "--nproc", type=int, default=1, help="number of ranks (default 1)")
    parser.add_argument("--hostfile", help="the machines to run on (the runtime's host file format)")
    parser.add_argument("--bind-to", choices=("core", "none"), default="core",
                        help="pin each rank to a core (default) or not")
    parser.add_argument("script", help="the Python script each rank runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    args = parser.parse_args(argv)
    if args.nproc < 1:
        parser.error("-n must be at least 1, got %d" % args.nproc)
    return args


def command(args: argparse.Namespace, mpiexec: str) -> List[str]:
    cmd = [mpiexec, "-n", str(args.nproc)]
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    cmd += ["--bind-to", args.bind_to, sys.executable, "-m", "mpi4py", args.script]
    return cmd + args.args


def remove_leftover_segments(wait: float = 0.0) -> List[str]:
    """Remove MPICH's files in /dev/shm that this user owns and no process maps (what
    an aborted job leaves); returns their paths. wait: seconds to keep looking while a
    process still maps one (an aborted job's ranks can outlive mpiexec by a moment)."""
    folder = "/dev/shm"
    deadline = time.monotonic() + wait
    removed: List[str] = []
    while True:
        try:
            paths = [os.path.join(folder, name) for name in os.listdir(folder) if name.startswith("mpich_shm_")]
            paths = [path for path in paths if os.stat(path).st_uid == os.getuid()]
        except OSError:
            return removed
        mapped = set()
        for pid in filter(str.isdigit, os.listdir("/proc")) if paths else ():
            try:
                with open("/proc/%s/maps" % pid) as f:
                    mapped.update(line.split()[-1] for line in f if "/dev/shm/mpich_shm_" in line)
            except OSError:     # gone, or not ours (then it cannot map our 0600 files)
                continue
        for path in paths:
            if path not in mapped:
                try:
                    os.unlink(path)
                    removed.append(path)
                except OSError:
                    pass
        if not mapped.intersection(paths) or time.monotonic() >= deadline:
            return removed
        time.sleep(0.05)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    mpiexec = find_mpiexec()
    if mpiexec is None:
        sys.exit("aicraft.distributed.run: no mpiexec found; pip install 'aicraft[mpi]' (mpi4py, mpich) "
                 "or put your MPI's mpiexec on PATH")
    job = subprocess.Popen(command(args, mpiexec))
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):   # mpiexec ends the ranks
        signal.signal(signum, lambda signum, frame: job.send_signal(signum))
    code = job.wait()
    if code != 0:
        remove_leftover_segments(wait=2.0)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
