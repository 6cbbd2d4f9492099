#!/usr/bin/env python3
"""Checks a recording made by `commtool record` of tests/torch/collectives.py against what the
program itself issued and measured (its --results files), on the GPU machine:

- every process recorded, and per rank the collectives recorded (function, element count) are
  exactly the ones the program issued, in order; point-to-point bytes match;
- every recorded NCCL call lies inside the program's own timing of the torch call (both are
  CLOCK_MONOTONIC: perf_counter_ns on Linux), and every op's GPU interval, mapped onto the host
  clock as `commtool report` maps it, lies between the call's start and the program's
  synchronize after it, and is no longer than its CUDA-event interval;
- the completion split: with async_op=True + work.wait(), wait returns before the GPU is done
  (large sizes); with torch.cuda.synchronize(), after.

Prints one line per check and a table of medians; exit status 1 when a check fails.
  check_recording.py RECORDING_DIR RESULTS_DIR [--ranks N]
"""
import argparse
import glob
import json
import os
import statistics
import sys

NCCL_NAME = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
             "broadcast": "Broadcast"}
SLACK_NS = 2000  # clock reads are not instantaneous: 2 us either side


def load_lines(path):
    lines = []
    with open(path) as f:
        for text in f:
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError:
                pass  # a cut last line
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recording")
    ap.add_argument("results")
    ap.add_argument("--ranks", type=int, default=0)
    a = ap.parse_args()
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    truth = {}
    for f in glob.glob(os.path.join(a.results, "rank-*.json")):
        t = json.load(open(f))
        truth[t["pid"]] = t
    procs = {}
    for f in glob.glob(os.path.join(a.recording, "procs", "*.jsonl")):
        lines = load_lines(f)
        proc = next((l for l in lines if l["k"] == "proc"), None)
        if proc is None:
            continue
        procs[proc["pid"]] = lines
    world = a.ranks or (next(iter(truth.values()))["world"] if truth else 0)
    check(len(truth) == world, f"{len(truth)} results files for {world} ranks")
    recorded = [pid for pid in truth if pid in procs]
    check(len(recorded) == len(truth), f"{len(recorded)} of {len(truth)} ranks' processes recorded")

    table = []
    for pid, t in sorted(truth.items(), key=lambda kv: kv[1]["rank"]):
        lines = procs.get(pid, [])
        rank = t["rank"]
        comms = [l for l in lines if l["k"] == "comm"]
        ends = [l for l in lines if l["k"] == "end"]
        starts = [l for l in lines if l["k"] == "start"]
        # The world communicator: the one with nranks == world holding the most operations.
        world_comms = [c["comm"] for c in comms if c["nranks"] == t["world"]]
        check(bool(world_comms), f"rank {rank}: a communicator of {t['world']} ranks")
        if not world_comms:
            continue
        comm = max(world_comms, key=lambda c: sum(1 for e in ends if e["comm"] == c))
        ends = sorted((e for e in ends if e["comm"] == comm), key=lambda e: e["index"])
        starts = [s for s in starts if s["comm"] == comm]
        check(len(starts) == len(ends), f"rank {rank}: {len(starts)} started, {len(ends)} ended")
        colls = [e for e in ends if e["kind"] == "coll"]
        p2p = [e for e in ends if e["kind"] == "p2p"]
        expect = []
        p2p_expect_elems = 0
        for op in t["ops"]:
            if op["func"] in NCCL_NAME:
                count = op["count"] // t["world"] if op["func"] == "reduce_scatter" else op["count"]
                expect.append((NCCL_NAME[op["func"]], count, op))
            else:
                p2p_expect_elems += 2 * op["count"]  # sent and received
        got = [(e["func"], e["count"]) for e in colls if e["func"] != "AlltoAll"]
        check(got == [(f, c) for f, c, _ in expect],
              f"rank {rank}: collectives recorded = issued ({len(got)} vs {len(expect)})")
        a2a = sum(e["count"] for e in colls if e["func"] == "AlltoAll")
        p2p_elems = sum(e["count"] for e in p2p) + 2 * a2a
        check(p2p_elems == p2p_expect_elems,
              f"rank {rank}: point-to-point elements {p2p_elems} = issued {p2p_expect_elems}")
        incomplete = sum(1 for e in ends if not e["complete"])
        if t["world"] > 1:
            check(incomplete == 0, f"rank {rank}: {incomplete} operations recorded incomplete")
        else:  # one rank: NCCL copies, launches no kernel, so no channel ever reports
            check(incomplete == len(ends),
                  f"rank {rank}: {incomplete}/{len(ends)} ended without a kernel (one rank)")

        # GPU -> host clock: the smallest (seen - gpu) over the process's operations.
        pairs = [(e["seen"][0] - e["gpu"][0]) for e in ends if e["gpu"] and e["seen"]]
        pairs += [(e["seen"][1] - e["gpu"][1]) for e in ends if e["gpu"] and e["seen"]]
        offset = min(pairs) if pairs else None
        inside_call = inside_gpu = shorter = 0
        wait_before = wait_n = sync_after = sync_n = 0
        for (func, count, op), e in zip(expect, colls):
            api = e.get("api")
            if api and op["call_start_ns"] - SLACK_NS <= api[0] <= api[1] <= op["call_end_ns"] + SLACK_NS:
                inside_call += 1
            if e["gpu"] and offset is not None:
                g0, g1 = e["gpu"][0] + offset, e["gpu"][1] + offset
                if op["call_start_ns"] - SLACK_NS <= g0 <= g1 <= op["done_ns"] + SLACK_NS:
                    inside_gpu += 1
                if (e["gpu"][1] - e["gpu"][0]) / 1e3 <= op["stream_us"] * 1.01 + 2:
                    shorter += 1
                if op["mode"] == "wait" and op["bytes"] >= 16 << 20:
                    wait_n += 1
                    wait_before += op["waited_ns"] < g1
                if op["mode"] == "device":
                    sync_n += 1
                    sync_after += op["waited_ns"] >= g1 - SLACK_NS
            table.append((rank, func, op["bytes"], op["mode"],
                          (api[1] - api[0]) / 1e3 if api else None,
                          (op["call_end_ns"] - op["call_start_ns"]) / 1e3,
                          (e["gpu"][1] - e["gpu"][0]) / 1e3 if e["gpu"] else None, op["stream_us"]))
        n = len(expect)
        check(inside_call == n, f"rank {rank}: NCCL call inside torch's call for {inside_call}/{n}")
        has_gpu = sum(1 for e in colls if e["gpu"])
        if t["world"] > 1:
            check(has_gpu == len(colls), f"rank {rank}: GPU times for {has_gpu}/{len(colls)}")
            check(inside_gpu == has_gpu,
                  f"rank {rank}: GPU interval between call and synchronize for {inside_gpu}/{has_gpu}")
            check(shorter == has_gpu,
                  f"rank {rank}: GPU interval within the CUDA-event interval for {shorter}/{has_gpu}")
            if wait_n:
                check(wait_before == wait_n,
                      f"rank {rank}: work.wait() returned before the GPU finished {wait_before}/{wait_n}")
            if sync_n:
                check(sync_after == sync_n,
                      f"rank {rank}: cuda.synchronize() returned after it {sync_after}/{sync_n}")
        else:
            check(has_gpu == 0, f"rank {rank}: no GPU times at one rank (NCCL copies): {has_gpu}")

    # Medians per function, size and mode, over ranks.
    groups = {}
    for rank, func, nbytes, mode, api_us, call_us, gpu_us, stream_us in table:
        groups.setdefault((func, nbytes, mode), []).append((api_us, call_us, gpu_us, stream_us))
    print(f"\n{'function':14} {'bytes':>10} {'mode':6} {'NCCL call us':>12} {'torch call us':>13} "
          f"{'GPU us':>9} {'events us':>9} {'GPU/events':>10}")
    med = lambda xs: statistics.median(xs) if xs else None
    for (func, nbytes, mode), rows in sorted(groups.items()):
        api = med([r[0] for r in rows if r[0] is not None])
        call = med([r[1] for r in rows])
        gpu = med([r[2] for r in rows if r[2] is not None])
        ev = med([r[3] for r in rows])
        fmt = lambda v, w: f"{v:{w}.1f}" if v is not None else f"{'-':>{w}}"
        ratio = f"{gpu / ev:10.3f}" if gpu and ev else f"{'-':>10}"
        print(f"{func:14} {nbytes:10d} {mode:6} {fmt(api, 12)} {fmt(call, 13)} {fmt(gpu, 9)} "
              f"{fmt(ev, 9)} {ratio}")
    # Within 10% of the program's own figures, where the GPU work is long enough for CUDA
    # events to time it (>= 1 MiB): the kernel interval against the events around it.
    for (func, nbytes, mode), rows in sorted(groups.items()):
        gpu = med([r[2] for r in rows if r[2] is not None])
        ev = med([r[3] for r in rows])
        if gpu and ev and nbytes >= 1 << 20:
            check(0.9 <= gpu / ev <= 1.1,
                  f"{func} {nbytes} B {mode}: median GPU {gpu:.1f} us within 10% of events {ev:.1f} us")
    print(f"\n{len(failures)} check(s) failed" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
