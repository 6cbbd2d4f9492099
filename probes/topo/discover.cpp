#include "probes/topo/discover.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>

#include "probes/base/error.hpp"
#include "probes/topo/cuda_query.hpp"
#include "probes/topo/findings.hpp"
#include "probes/topo/nccl_xml.hpp"
#include "probes/topo/nvml.hpp"
#include "probes/topo/sysfs_reader.hpp"

namespace commtool::topo {

namespace {

// The live machine: sysfs, then NVML while CUDA (if it has anything to add) initialises on a
// thread, since cuInit is the slow part of discovery.
Topology discover_live(const std::function<void(const char*)>& stage, bool ask_cuda) {
  stage("sysfs");
  Topology t = read_sysfs({});
  std::future<CudaFacts> cuda;
  if (ask_cuda && cuda_needed(t, std::getenv("CUDA_VISIBLE_DEVICES"))) {
    cuda = std::async(std::launch::async, query_cuda);
  }
  stage("nvml");
  enrich_with_nvml(t);
  if (ask_cuda && !cuda.valid() && t.gpus.size() == 1 && t.gpus[0].sm == 0) {
    cuda = std::async(std::launch::async, query_cuda);  // NVML could not say what the GPU is
  }
  if (cuda.valid()) {
    stage("cuda");
    merge_cuda(t, cuda.get());
  } else if (t.gpus.size() == 1 && std::getenv("CUDA_VISIBLE_DEVICES") == nullptr) {
    t.gpus[0].cuda_ordinal = 0;  // the only GPU, and nothing hides it from CUDA
  }
  return t;
}

}  // namespace

Topology discover(const DiscoverOptions& options) {
  if (!options.nccl_xml.empty() && !options.sysfs_root.empty()) {
    throw usage_error(
        "an NCCL topology file and a sysfs tree both name a machine to read; give one");
  }
  auto stage = [&](const char* name) {
    if (options.on_stage) options.on_stage(name);
  };
  Topology t;
  if (!options.nccl_xml.empty()) {
    stage("nccl-xml");
    t = read_nccl_xml_file(options.nccl_xml);
  } else if (!options.sysfs_root.empty()) {
    stage("sysfs");
    t = read_sysfs({options.sysfs_root, /*strict=*/true, /*cpuinfo=*/""});
    t.missing.push_back({"NVML and CUDA",
                         "not asked: the sysfs tree read is a capture, not necessarily this "
                         "machine"});
  } else {
    t = discover_live(stage, options.ask_cuda);
  }
  stage("done");
  return t;
}

Topology discover_watched(DiscoverOptions options, Watchdog& watchdog,
                          const std::vector<int>& devices, std::ostream* timings) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point last = Clock::now();
  const char* last_stage = nullptr;
  options.on_stage = [&](const char* stage) {
    const std::string_view s(stage);
    watchdog.stage(stage, s == "nvml" || s == "cuda");
    const Clock::time_point now = Clock::now();
    if (timings && last_stage) {
      *timings << fmt::format("topo: {} took {:.1f} ms\n", last_stage,
                              std::chrono::duration<double, std::milli>(now - last).count());
    }
    last = now;
    last_stage = stage;
  };
  Topology topology = discover(options);
  if (!devices.empty()) select_gpus(topology, devices);
  return topology;
}

Topology discover_for_launcher(const std::vector<int>& devices, const std::string& command) {
  DiscoverOptions options;
  options.ask_cuda = false;
  Topology topology = discover(options);
  // No GPU at all is the machine's lack (exit 3), whatever --devices named.
  if (topology.gpus.empty()) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("no NVIDIA GPU found: {} needs one (see commtool topo)", command));
  }
  if (!devices.empty()) select_gpus(topology, devices);
  if (auto why = unusable_driver(topology)) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("{}: {} needs the nvidia driver on every GPU it uses (see commtool "
                            "topo)",
                            *why, command));
  }
  return topology;
}

void select_gpus(Topology& topo, const std::vector<int>& indices) {
  for (int i : indices) {
    bool present =
        std::any_of(topo.gpus.begin(), topo.gpus.end(), [&](const Gpu& g) { return g.index == i; });
    if (!present) {
      throw bad_value("devices", std::to_string(i),
                      fmt::format("GPU {} does not exist here; {}", i,
                                  topo.gpus.empty() ? std::string("no GPU was found")
                                                    : fmt::format("GPUs are numbered 0 to {}",
                                                                  topo.gpus.size() - 1)));
    }
  }
  auto keep = [&](int i) { return std::find(indices.begin(), indices.end(), i) != indices.end(); };
  std::erase_if(topo.gpus, [&](const Gpu& g) { return !keep(g.index); });
  std::erase_if(topo.p2p, [&](const P2pPair& p) { return !keep(p.gpu_a) || !keep(p.gpu_b); });
  topo.reindex();
}

}  // namespace commtool::topo
