#!/usr/bin/env python3
"""Synthetic PyTorch Flight Recorder dumps of a large job, for `commtool report`'s benchmark
(scripts/bench-fr.sh): --ranks dumps named nccl_trace_rank_<r>, each a pickle (protocol 2, as
torch 2.11's watchdog writes them, dump version "2.10") of --entries entries of one process group
of all the ranks: all_reduce of 262144 float32 with a two-frame stack, the last one started and not
completed (the watchdog fired in it). --diverge R makes rank R call a broadcast at --at instead, so
that the analysis has a disagreement to find; --behind R leaves rank R one operation behind.
The ring buffer of each rank holds the latest --entries (ranks hold windows that start apart by
up to --skew operations, as real buffers that dropped their oldest entries do).
"""
import argparse
import os
import pickle


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out")
    p.add_argument("--ranks", type=int, default=4096)
    p.add_argument("--entries", type=int, default=2000)
    p.add_argument("--diverge", type=int, default=17)
    p.add_argument("--at", type=int, default=1500)
    p.add_argument("--behind", type=int, default=-1)
    p.add_argument("--skew", type=int, default=8)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    ranks = "[" + ", ".join(str(r) for r in range(a.ranks)) + "]"
    frames = [{"filename": "/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py",
               "line": 3068, "name": "all_reduce"},
              {"filename": "/job/train.py", "line": 88, "name": "step"}]
    last = 100000  # the job's operation count when the watchdog fired
    for r in range(a.ranks):
        end = last - (1 if r == a.behind else 0)
        start = end - a.entries + 1 + (r % (a.skew + 1))
        entries = []
        for seq in range(start, end + 1):
            func = "broadcast" if (r == a.diverge and seq == last - a.entries + a.at) else "all_reduce"
            entries.append({
                "frames": frames, "record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"),
                "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
                "profiling_name": "nccl:" + func, "time_created_ns": 1796637083417735864 + seq * 1000,
                "duration_ms": None, "input_sizes": [[262144]], "input_dtypes": ["Float"],
                "output_sizes": [[262144]], "output_dtypes": ["Float"],
                "state": "started" if seq == last else "completed",
                "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
                "retired": False, "timeout_ms": 600000, "is_p2p": False,
                "thread_id": "139827966042432", "thread_name": "python3"})
        doc = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
               "comm_lib_version": "2.28.9", "pg_status": {"0": {}}, "entries": entries}
        with open(os.path.join(a.out, f"nccl_trace_rank_{r}"), "wb") as f:
            pickle.dump(doc, f, protocol=2)


if __name__ == "__main__":
    main()
