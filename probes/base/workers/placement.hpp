// Where the ranks of a worker group run, as far as the worker layer needs to know: how many
// share a GPU, the label and withheld verdicts of such runs, and the environment that lets NCCL
// run several ranks on one GPU. Which GPU each rank gets is probes/topo/rank_placement.hpp.
//
// Several ranks on one GPU exist to run every multi-rank path (NCCL's algorithms, the all-to-all
// between ranks, the cross-rank figures, the abort of a stuck communicator) on a machine with
// fewer GPUs than ranks. NCCL refuses two ranks of one host on one GPU ("Duplicate GPU
// detected": it compares host hash and bus id), so such ranks must look like separate hosts to
// it: each gets its own NCCL_HOSTID and NCCL talks between them through its socket transport
// over loopback (shared_gpu_environment). Their times are of processes time-slicing one GPU
// and a socket, never of a link: reports label such runs and draw no verdict from them.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "probes/base/workers/launcher.hpp"

namespace commtool::workers {

// What a report says about where its ranks ran: derived from the GPU of each rank, so a saved
// run re-analysed elsewhere gets the same label.
struct PlacementSummary {
  int ranks = 0;
  int gpus = 0;  // distinct GPUs
  int most_ranks_on_a_gpu = 0;
  bool shared_gpu() const { return most_ranks_on_a_gpu > 1; }
};

// From the GPU of each rank, named by PCI bus id or by index.
PlacementSummary summarize_placement(const std::vector<std::string>& bus_id_of_rank);
PlacementSummary summarize_placement(const std::vector<int>& device_of_rank);

// {"ranks": 4, "gpus": 1, "shared_gpu": true, "most_ranks_on_a_gpu": 4}: the "rank_placement"
// member of trace's, diagnose's and probe's JSON documents.
nlohmann::json to_json(const PlacementSummary& p);

// The line a text report starts with when ranks share a GPU, and the reason a verdict is
// withheld ("" when every rank has a GPU of its own).
std::string shared_gpu_label(const PlacementSummary& p);
std::string shared_gpu_withheld(const PlacementSummary& p);

// What a worker of a group whose GPU carries other ranks too needs in its environment, as
// NAME=value strings: its own NCCL_HOSTID (unique per rank and per run), NCCL's socket
// transport over loopback (NCCL_SOCKET_IFNAME=lo, NCCL_IB_DISABLE=1). A variable the user's
// environment already sets is left out: the user's settings win. `run_id` tells runs apart.
std::vector<std::string> shared_gpu_environment(int rank, const std::string& run_id,
                                                const std::vector<std::string>& user_env);

}  // namespace commtool::workers
