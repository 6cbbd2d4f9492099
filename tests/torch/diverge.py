#!/usr/bin/env python3
"""A PyTorch job whose ranks disagree on purpose, for the cross-rank verdicts of `commtool record`
and `commtool report`, and to capture what such a job leaves without commtool: PyTorch's Flight
Recorder dumps (pickle and JSON), NCCL's RAS answers while it hangs, NCCL's logs.

Every rank runs --ops all_reduce calls of --bytes each (float32, SUM) on the default process
group, and one of them (--rank) departs from the others at operation --at (0-based), as --case
says:
  clean      nobody departs
  func       broadcast (root 0) instead of all_reduce
  gather     all_gather instead of all_reduce
  size       twice as many elements
  dtype      bfloat16 instead of float32 (the same number of elements)
  redop      MAX instead of SUM
  root       every rank broadcasts at --at, the departing rank with another root
  skip       skips its all_reduce at --at (the others wait in it)
  extra      calls one all_reduce more at --at
  exit       exits (code 7) at --at without a word
  stop       stops itself with SIGSTOP at --at (a debugger, a frozen process)
  sleep      sleeps --sleep seconds at --at, then goes on (a slow data loader)

The ranks come from its own launcher (--nproc N: N copies of itself, each with its own
NCCL_HOSTID so that NCCL accepts several ranks on one GPU), or from torchrun. The process group's
timeout is --pg-timeout seconds, so PyTorch's watchdog fires and, with --fr DIR, the Flight
Recorder dumps there (TORCH_FR_DUMP_TEMP_FILE); a rank that ends also writes its own dump in both
forms (DIR/rank-R.pickle, DIR/rank-R.json). With --ras DIR, the launcher asks NCCL's RAS service
for its status once --ras-after seconds have passed since the departure (the ranks write when
they reach it) and saves the text and JSON answers there.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

from collectives import free_port  # beside this file

CASES = ("clean", "func", "gather", "size", "dtype", "redop", "root", "skip", "extra", "exit",
         "stop", "sleep")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--case", choices=CASES, default="clean")
    p.add_argument("--nproc", type=int, default=0, help="start N ranks here (else torchrun's)")
    p.add_argument("--rank", type=int, default=1, help="the rank that departs")
    p.add_argument("--at", type=int, default=5, help="the operation it departs at (0-based)")
    p.add_argument("--ops", type=int, default=12)
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--sleep", type=float, default=20.0)
    p.add_argument("--pg-timeout", type=float, default=20.0)
    p.add_argument("--fr", default="", help="Flight Recorder dump directory")
    p.add_argument("--ras", default="", help="directory for NCCL RAS answers (launcher)")
    p.add_argument("--ras-after", type=float, default=4.0)
    p.add_argument("--port", type=int, default=0)
    return p.parse_args(argv)


def ras_query(json_format, timeout=10.0):
    """NCCL's RAS client protocol: one line per command, the answer until the server closes."""
    addr = os.environ.get("NCCL_RAS_ADDR", "localhost:28028")
    host, _, port = addr.rpartition(":")
    out = b""
    try:
        with socket.create_connection((host or "localhost", int(port)), timeout=timeout) as s:
            s.settimeout(timeout)

            def say(line):
                s.sendall(line.encode() + b"\n")

            def hear():
                data = s.recv(65536)
                return data

            say("CLIENT PROTOCOL 2")
            out += b"<<CLIENT PROTOCOL 2>>\n" + hear()
            say(f"TIMEOUT {int(timeout)}")
            out += b"<<TIMEOUT>>\n" + hear()
            if json_format:
                say("SET FORMAT json")
                out += b"<<SET FORMAT json>>\n" + hear()
            say("VERBOSE STATUS")
            out += b"<<VERBOSE STATUS>>\n"
            while True:
                data = s.recv(1 << 20)
                if not data:
                    break
                out += data
    except Exception as e:  # what happened is part of the capture
        out += f"\n<<error: {type(e).__name__}: {e}>>\n".encode()
    return out


def launch(args):
    port = args.port or free_port()
    argv = list(sys.argv[1:])
    i = argv.index("--nproc")
    del argv[i:i + 2]
    marker_dir = args.ras or args.fr or "/tmp"
    os.makedirs(marker_dir, exist_ok=True)
    marker = os.path.join(marker_dir, f".departed-{os.getpid()}")
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.nproc),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), DIVERGE_MARKER=marker)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env))
    asked = False
    try:
        while True:
            if args.ras and not asked and os.path.exists(marker):
                time.sleep(args.ras_after)
                os.makedirs(args.ras, exist_ok=True)
                for fmt, name in ((False, "ras.txt"), (True, "ras.json")):
                    with open(os.path.join(args.ras, name), "wb") as f:
                        f.write(ras_query(fmt))
                asked = True
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                for p in procs:
                    if p.poll() is None:
                        p.terminate()
                for p in procs:
                    try:
                        p.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
                return failed[0] if failed[0] > 0 else 128 - failed[0]
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.05)
    finally:
        for p in procs:  # a stopped rank ignores TERM until it is continued
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
        if os.path.exists(marker):
            os.unlink(marker)


def dump_fr(args, rank):
    if not args.fr:
        return
    try:
        import torch
        c10d = torch._C._distributed_c10d
        with open(os.path.join(args.fr, f"rank-{rank}.pickle"), "wb") as f:
            f.write(c10d._dump_nccl_trace())
        with open(os.path.join(args.fr, f"rank-{rank}.json"), "w") as f:
            f.write(c10d._dump_nccl_trace_json())
    except Exception as e:
        print(f"rank {rank}: Flight Recorder dump failed: {type(e).__name__}: {e}",
              file=sys.stderr, flush=True)


def main(argv):
    args = parse_args(argv)
    if args.nproc > 0:
        return launch(args)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    os.environ["NCCL_HOSTID"] = f"diverge-{rank}"
    if args.fr:
        os.makedirs(args.fr, exist_ok=True)
        prefix = os.path.join(args.fr, "nccl_trace_rank_")
        for name in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
            os.environ.setdefault(name, prefix)
        for name in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
            os.environ.setdefault(name, "2000")
        os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=timedelta(seconds=args.pg_timeout),
                            device_id=torch.device("cuda", 0))
    n = max(1, args.bytes // 4)
    departs = rank == args.rank
    marker = os.environ.get("DIVERGE_MARKER", "")

    def mark():
        if departs and marker:
            with open(marker, "w") as f:
                f.write(f"{rank} {args.case} {args.at}\n")

    for k in range(args.ops):
        x = torch.full((n,), float(rank + 1), device="cuda")
        here = departs and k == args.at
        if here:
            mark()
            print(f"rank {rank}: departs at op {k}: {args.case}", file=sys.stderr, flush=True)
        if here and args.case == "func":
            dist.broadcast(x, src=0)
        elif here and args.case == "gather":
            y = torch.empty(n * world, device="cuda")
            dist.all_gather_into_tensor(y, x)
        elif here and args.case == "size":
            dist.all_reduce(torch.full((2 * n,), float(rank + 1), device="cuda"))
        elif here and args.case == "dtype":
            dist.all_reduce(x.to(torch.bfloat16))
        elif here and args.case == "redop":
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
        elif k == args.at and args.case == "root":
            dist.broadcast(x, src=(1 if departs else 0) if world > 1 else 0)
        elif here and args.case == "skip":
            pass
        elif here and args.case == "extra":
            dist.all_reduce(x)
            dist.all_reduce(x)
        elif here and args.case == "exit":
            os._exit(7)
        elif here and args.case == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
            dist.all_reduce(x)
        elif here and args.case == "sleep":
            time.sleep(args.sleep)
            dist.all_reduce(x)
        else:
            dist.all_reduce(x)
        torch.cuda.synchronize()
    dump_fr(args, rank)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
