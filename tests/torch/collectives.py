#!/usr/bin/env python3
"""A small PyTorch job for `commtool record`'s GPU tests: issues known collectives and
point-to-point operations, times each one itself the way users time them, checks every result,
and writes what it issued and measured to --results DIR/rank-R.json, so that the recording can be
compared with the truth.

World size: from torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT), from Open MPI's
mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK) or, with --nproc N, from its own launcher,
which starts N copies of itself as a user's launcher would. Every process
sets NCCL_HOSTID to a value of its own before NCCL starts when ranks share a GPU: NCCL refuses
two ranks of one host on one GPU, and the host id is what it compares (they then talk over
NCCL's socket transport on loopback).

Modes of each operation (--modes):
  sync    async_op=False; host call timed, stream interval from CUDA events around the call
  wait    async_op=True, then work.wait(): returns once the stream is ordered, not done
  device  async_op=True, then torch.cuda.synchronize(): returns when the GPU is done

--profile-at K: PyTorch's own profiler (CPU and CUDA activities) runs from the K-th operation
(0-based, counting every operation) for --profile-ops operations, as a user's training loop
might start it mid-job; what it saw (CUDA kernels among its events) and which CUPTI libraries
the process has loaded go to the results. Under `record --cupti` it must still see its kernels.

--hang-rank R --hang-at K: rank R skips its K-th all_reduce (0-based) and then sleeps for
--hang-sleep seconds (default an hour), as a rank stuck in its data loader would: every other
rank waits in that all_reduce.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

FUNCS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nproc", type=int, default=0, help="start N ranks here (else torchrun's)")
    p.add_argument("--sizes", default="1024,1048576,16777216", help="bytes per rank, comma list")
    p.add_argument("--iters", type=int, default=10, help="operations per function, size and mode")
    p.add_argument("--funcs", default=",".join(FUNCS))
    p.add_argument("--modes", default="sync,wait,device")
    p.add_argument("--results", default="", help="directory for rank-R.json")
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-at", type=int, default=-1)
    p.add_argument("--hang-sleep", type=float, default=3600.0)
    p.add_argument("--port", type=int, default=0, help="rendezvous port for --nproc (0: a free one)")
    p.add_argument("--profile-at", type=int, default=-1)
    p.add_argument("--profile-ops", type=int, default=10)
    return p.parse_args(argv)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    """Our own launcher: N copies of this program, each told its rank through the environment."""
    port = args.port or free_port()
    argv = [a for a in sys.argv[1:]]
    i = argv.index("--nproc")
    del argv[i:i + 2]
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.nproc),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env))
    # As torchrun does: the first rank to fail ends the others (they would wait for it forever).
    while True:
        codes = [p.poll() for p in procs]
        failed = [c for c in codes if c not in (None, 0)]
        if failed:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                p.wait()
            return failed[0] if failed[0] > 0 else 128 - failed[0]
        if all(c == 0 for c in codes):
            return 0
        time.sleep(0.05)


class Runner:
    def __init__(self, args, torch, dist):
        self.args, self.torch, self.dist = args, torch, dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.ops = []
        self.all_reduces = 0
        self.profiler = None
        self.profile = None  # what PyTorch's profiler saw, with --profile-at

    def tensors(self, func, nbytes):
        t = self.torch
        n = max(1, nbytes // 4)
        if func in ("all_reduce", "broadcast", "send_recv"):
            return t.full((n,), float(self.rank + 1), device="cuda"), None
        if func == "all_gather":
            return t.full((n,), float(self.rank + 1), device="cuda"), t.empty(n * self.world, device="cuda")
        if func == "reduce_scatter":
            n -= n % self.world or 0
            n = max(n, self.world)
            return t.full((n,), float(self.rank + 1), device="cuda"), t.empty(n // self.world, device="cuda")
        if func == "all_to_all":
            n = max(self.world, n - n % self.world)
            return t.full((n,), float(self.rank + 1), device="cuda"), t.empty(n, device="cuda")
        raise ValueError(func)

    def issue(self, func, x, y, async_op):
        d = self.dist
        if func == "all_reduce":
            return d.all_reduce(x, async_op=async_op)
        if func == "all_gather":
            return d.all_gather_into_tensor(y, x, async_op=async_op)
        if func == "reduce_scatter":
            return d.reduce_scatter_tensor(y, x, async_op=async_op)
        if func == "broadcast":
            return d.broadcast(x, src=0, async_op=async_op)
        if func == "all_to_all":
            return d.all_to_all_single(y, x, async_op=async_op)
        if func == "send_recv":
            peer_to = (self.rank + 1) % self.world
            peer_from = (self.rank - 1) % self.world
            y = self.torch.empty_like(x)
            ops = [d.P2POp(d.isend, x, peer_to), d.P2POp(d.irecv, y, peer_from)]
            works = d.batch_isend_irecv(ops)
            self._recv = y
            if not async_op:
                for w in works:
                    w.wait()
                return None
            return works
        raise ValueError(func)

    def check(self, func, x, y):
        w, r = self.world, self.rank
        if func == "all_reduce":
            expect = w * (w + 1) / 2
            ok = bool((x == expect).all())
        elif func == "broadcast":
            ok = bool((x == 1.0).all())
        elif func == "all_gather":
            n = x.numel()
            ok = all(bool((y[i * n:(i + 1) * n] == i + 1).all()) for i in range(w))
        elif func == "reduce_scatter":
            ok = bool((y == w * (w + 1) / 2).all())
        elif func == "all_to_all":
            n = y.numel() // w
            ok = all(bool((y[i * n:(i + 1) * n] == i + 1).all()) for i in range(w))
        else:  # send_recv: from the previous rank
            ok = bool((self._recv == ((r - 1) % w) + 1).all())
        if not ok:
            raise SystemExit(f"rank {r}: {func} gave wrong data")

    def profile_step(self):
        """Starts or stops PyTorch's profiler around --profile-ops operations."""
        k, a = len(self.ops), self.args
        if k == a.profile_at:
            from torch.profiler import profile, ProfilerActivity
            self.profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self.profiler.__enter__()
            self.profile = {"started_ns": time.perf_counter_ns()}
        elif self.profiler is not None and k == a.profile_at + a.profile_ops:
            self.stop_profile()

    def stop_profile(self):
        self.torch.cuda.synchronize()
        self.profiler.__exit__(None, None, None)
        events = self.profiler.events()
        cuda = [e for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")]
        self.profile.update({"stopped_ns": time.perf_counter_ns(), "events": len(events),
                             "cuda_events": len(cuda),
                             "cuda_names": sorted({e.name for e in cuda})[:20]})
        with open("/proc/self/maps") as f:
            self.profile["cupti_libraries"] = sorted({l.split()[-1] for l in f if "cupti" in l})
        self.profiler = None

    def one(self, func, nbytes, mode):
        t = self.torch
        if self.args.profile_at >= 0:
            self.profile_step()
        x, y = self.tensors(func, nbytes)
        if func == "all_reduce":
            k = self.all_reduces
            self.all_reduces += 1
            if self.rank == self.args.hang_rank and k == self.args.hang_at:
                print(f"rank {self.rank}: skipping all_reduce #{k} and sleeping "
                      f"{self.args.hang_sleep:.0f} s (--hang-rank)", file=sys.stderr, flush=True)
                time.sleep(self.args.hang_sleep)
                raise SystemExit(3)
        t.cuda.synchronize()
        before, after = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        before.record()
        h0 = time.perf_counter_ns()
        work = self.issue(func, x, y, async_op=mode != "sync")
        h1 = time.perf_counter_ns()
        waited = None
        if mode == "wait":
            for w in (work if isinstance(work, list) else [work]):
                w.wait()
            waited = time.perf_counter_ns()
        elif mode == "device":
            t.cuda.synchronize()
            waited = time.perf_counter_ns()
        after.record()
        t.cuda.synchronize()
        done = time.perf_counter_ns()
        # The events bracket the collective on the current stream when it waits for the work:
        # sync and wait. After a device synchronize, `after` is recorded once the host is back,
        # so that interval holds the host's wake-up too and is no stream interval.
        stream_us = before.elapsed_time(after) * 1e3 if mode != "device" else None
        self.check(func, x, y)
        # perf_counter_ns is CLOCK_MONOTONIC on Linux: the clock of the recording's host times.
        self.ops.append({"func": func, "bytes": x.numel() * 4, "count": x.numel(),
                         "dtype": "float32", "mode": mode, "call_start_ns": h0, "call_end_ns": h1,
                         "waited_ns": waited, "done_ns": done,
                         "stream_us": stream_us})

    def run(self):
        sizes = [int(s) for s in self.args.sizes.split(",") if s]
        funcs = [f for f in self.args.funcs.split(",") if f]
        modes = [m for m in self.args.modes.split(",") if m]
        for f in funcs:
            if f not in FUNCS:
                raise SystemExit(f"--funcs {f}: accepted: {', '.join(FUNCS)}")
        for func in funcs:
            for nbytes in sizes:
                for mode in modes:
                    for _ in range(self.args.iters):
                        self.one(func, nbytes, mode)


def main():
    args = parse_args(sys.argv[1:])
    if args.nproc > 0:
        return launch(args)
    rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
    local = int(os.environ.get("LOCAL_RANK",
                               os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", str(rank))))
    import torch
    import torch.distributed as dist
    gpus = torch.cuda.device_count()
    if gpus == 0:
        raise SystemExit("no GPU")
    if world > gpus:
        # Several ranks on one GPU: each claims a host of its own (see the docstring).
        os.environ["NCCL_HOSTID"] = f"commtool-test-{socket.gethostname()}-{rank}"
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
        os.environ.setdefault("NCCL_IB_DISABLE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    device = torch.device("cuda", local % gpus)
    torch.cuda.set_device(device)
    import datetime
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device,
                            timeout=datetime.timedelta(seconds=max(600, args.hang_sleep + 60)))
    runner = Runner(args, torch, dist)
    t0 = time.perf_counter()
    runner.run()
    if runner.profiler is not None:
        runner.stop_profile()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    if args.results:
        os.makedirs(args.results, exist_ok=True)
        with open(os.path.join(args.results, f"rank-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "world": world, "pid": os.getpid(), "wall_s": wall,
                       "torch_cuda": torch.version.cuda, "profile": runner.profile,
                       "ops": runner.ops}, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
