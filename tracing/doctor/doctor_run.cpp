#include "tracing/doctor/doctor_run.hpp"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>

#include "probes/base/input_file.hpp"
#include "probes/base/watchdog.hpp"
#include "probes/topo/discover.hpp"
#include "probes/topo/findings.hpp"
#include "tracing/crossrank/nccl_log.hpp"
#include "tracing/trace/trace_plan.hpp"
#include "tracing/trace/trace_run.hpp"

namespace commtool::doctor {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string this_host() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "";
}

// NCCL's log of the runs made while it lives, for the transport NCCL chose: NCCL_DEBUG=INFO of
// its INIT subsystem, into a private directory (mkdtemp) that the destructor removes, the
// variables put back as they were. Not when the user named NCCL_DEBUG_FILE: NCCL writes where
// they asked.
class NcclLogCapture {
 public:
  NcclLogCapture() {
    if (std::getenv("NCCL_DEBUG_FILE") != nullptr) {
      why_ = "NCCL_DEBUG_FILE is set: NCCL's log goes where it says";
      return;
    }
    std::string dir = (std::filesystem::temp_directory_path() / "commtool-doctor-XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) {
      why_ = fmt::format("no private directory for NCCL's log: {}", std::strerror(errno));
      return;
    }
    dir_ = dir;
    for (const char* name : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) {
      const char* v = std::getenv(name);
      saved_.push_back({name, v ? std::optional<std::string>(v) : std::nullopt});
    }
    ::setenv("NCCL_DEBUG", "INFO", 1);
    ::setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    ::setenv("NCCL_DEBUG_FILE", (dir_ / "nccl.%h.%p.log").c_str(), 1);
  }
  ~NcclLogCapture() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  NcclLogCapture(const NcclLogCapture&) = delete;
  NcclLogCapture& operator=(const NcclLogCapture&) = delete;

  // Every process's log read so far, into `e`.
  void read_into(Evidence& e) const {
    e.nccl_log_why = why_;
    if (dir_.empty()) return;
    std::error_code ec;
    size_t files = 0;
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (++files > 4096) break;
      try {
        const crossrank::NcclLog log = crossrank::read_nccl_log(
            files::read_input_file(it->path().string(), 64ull << 20), it->path().string());
        for (const auto& [name, n] : log.transports)
          e.nccl_transports[name] += n;
        for (const crossrank::LogWarning& w : log.warnings)
          if (e.nccl_warnings.size() < 8) e.nccl_warnings.push_back(w.text);
      } catch (const Error&) {
        // a file NCCL did not finish: what the others say stands
      }
    }
    if (files == 0) e.nccl_log_why = "NCCL wrote no log";
  }

 private:
  std::filesystem::path dir_;
  std::string why_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Runs `work` as one step: its error (a commtool error with its exit code, or anything else as
// an internal error) is kept, never thrown.
template <class Work>
Step run_step(Work&& work) {
  Step s;
  s.ran = true;
  const Clock::time_point t0 = Clock::now();
  try {
    work();
    s.ok = true;
  } catch (const Error& e) {
    s.code = e.code();
    s.error = e.what();
  } catch (const std::exception& e) {
    s.code = ExitCode::kVerification;  // not ours to name better; it did not give a result
    s.error = e.what();
  }
  s.seconds = seconds_since(t0);
  return s;
}

std::vector<std::string> bdfs_of(const topo::Topology& t) {
  std::vector<std::string> out;
  for (const topo::Gpu& g : t.gpus)
    out.push_back(g.bdf);
  return out;
}

}  // namespace

const char* to_string(Level level) {
  switch (level) {
    case Level::kQuick:
      return "quick";
    case Level::kStandard:
      return "standard";
    case Level::kLong:
      return "long";
  }
  return "?";
}

std::optional<Level> parse_level(std::string_view text) {
  for (Level l : {Level::kQuick, Level::kStandard, Level::kLong})
    if (text == to_string(l)) return l;
  return std::nullopt;
}

probe::ProbeRequest probe_request_for(const Request& request, int gpus) {
  probe::ProbeRequest q;
  q.h2d = true;
  q.p2p = gpus > 1 && request.level != Level::kQuick;
  q.latency = request.level == Level::kLong;
  switch (request.level) {
    case Level::kQuick:
      q.bytes = 64ull << 20;
      q.iters = 5;
      q.batches = 3;
      q.warmup = 2;
      break;
    case Level::kStandard:
      q.bytes = 256ull << 20;
      q.iters = 10;
      q.batches = 5;
      q.warmup = 3;
      break;
    case Level::kLong:
      break;  // probe's own defaults: 512 MiB, 20 copies x 5 batches
  }
  q.timeout_s = request.timeout_s;
  q.devices = request.devices;
  q.executable = request.executable;
  return q;
}

tracing::TraceRequest allreduce_request_for(const Request& request, const std::vector<int>& gpus) {
  tracing::TraceRequest q;
  q.collective = tracing::Collective::kAllReduce;
  q.dtype = tracing::DataType::kFloat32;
  q.op = tracing::ReduceOp::kSum;
  q.cupti = false;  // the plain loop: doctor asks whether it works and how fast, not the split
  q.untraced_pass = false;
  q.check = true;  // every size's result checked element by element
  q.modes = {{tracing::CompletionMode::kSync, 0}};
  q.timeout_s = request.timeout_s;
  q.executable = request.executable;
  // One GPU: two ranks on it, so that NCCL's communicator and a real collective are exercised;
  // its figures are then not a link's.
  q.devices = gpus.size() == 1 ? std::vector<int>{gpus[0], gpus[0]} : gpus;
  switch (request.level) {
    case Level::kQuick:
      q.sizes = {8, 1ull << 20, 64ull << 20};
      q.iters = 5;
      q.warmup = 2;
      q.batches = 3;
      break;
    case Level::kStandard:
      q.sizes = {8, 64ull << 10, 1ull << 20, 16ull << 20, 256ull << 20};
      q.iters = 10;
      q.warmup = 3;
      q.batches = 5;
      break;
    case Level::kLong:
      q.sizes = {8, 64ull << 10, 1ull << 20, 16ull << 20, 256ull << 20, 1ull << 30};
      q.iters = 20;
      q.warmup = 5;
      q.batches = 5;
      break;
  }
  return q;
}

Evidence gather(const Request& request) {
  const Clock::time_point t0 = Clock::now();
  const auto step = [&](const char* name) {
    if (request.on_step) request.on_step(name);
  };
  Evidence e;
  e.request = request;
  e.started_at = tracing::utc_now_iso8601();
  e.hostname = this_host();
  e.kernel_log_source = request.kernel_log.empty() ? "/dev/kmsg" : request.kernel_log;
  // A saved log that cannot be read is the user's mistake: said before anything runs.
  std::string saved_log;
  if (!request.kernel_log.empty()) saved_log = files::read_input_file(request.kernel_log);

  Clock::time_point counters_at{};
  {
    // The in-process driver queries (sysfs, NVML) cannot be interrupted: a watchdog ends the
    // process, naming the stage, if a sick driver holds one past the bound.
    Watchdog watchdog("doctor", std::chrono::duration<double>(request.timeout_s));
    step("topology");
    topo::DiscoverOptions discover;
    discover.ask_cuda = false;  // the workers do the CUDA work, where a hang can be killed
    e.topology = topo::discover_watched(discover, watchdog, {});
    if (!request.devices.empty() && !e.topology.gpus.empty()) {
      topo::select_gpus(e.topology, request.devices);
    }
    watchdog.stage("analysis");
    e.analysis = topo::analyze(e.topology);
    if (e.topology.gpus.empty()) {
      e.no_gpu = "no NVIDIA GPU found";
    } else if (std::optional<std::string> why = topo::unusable_driver(e.topology)) {
      e.no_gpu = *why;
    }
    watchdog.stage("sysfs");
    std::vector<std::string> rdma;
    for (const topo::Nic& n : e.topology.nics)
      if (topo::is_rdma(n.kind)) rdma.push_back(n.name);
    e.rdma_ports = health::read_rdma_ports(rdma);
    for (const topo::Gpu& g : e.topology.gpus) {
      e.aer.push_back(health::read_aer(g.bdf));
      e.iommu.push_back(health::read_iommu_type(g.bdf));
    }
    for (const topo::Nic& n : e.topology.nics)
      if (!n.bdf.empty()) e.aer.push_back(health::read_aer(n.bdf));
    step("counters");
    watchdog.stage("nvml", true);
    if (!e.topology.gpus.empty()) {
      e.counters_before = health::read_gpu_counters(bdfs_of(e.topology), request.nvml_library);
      counters_at = Clock::now();
    }
  }

  step("kernel log");
  if (!request.kernel_log.empty()) {
    e.kernel_log_read = true;
    e.kernel_log = health::scan_kernel_log(saved_log);
  } else {
    health::KernelLogRead live = health::read_live_kernel_log();
    e.kernel_log_read = live.readable;
    e.kernel_log_why = live.why;
    if (live.readable) e.kernel_log = health::scan_kernel_log(live.text);
  }

  std::vector<int> gpus;
  for (const topo::Gpu& g : e.topology.gpus)
    gpus.push_back(g.index);
  e.probe_request = probe_request_for(request, static_cast<int>(gpus.size()));
  e.probe_request.devices = gpus;
  if (!gpus.empty()) e.allreduce_request = allreduce_request_for(request, gpus);
  e.ranks_share_gpu = gpus.size() == 1;
  if (!e.no_gpu.empty()) {
    e.probe_step.skipped = e.allreduce_step.skipped = e.no_gpu;
  } else {
    step("probe");
    e.probe_step = run_step([&] { e.probe = probe::run_probes(e.probe_request); });
    step("all-reduce");
    const NcclLogCapture nccl_log;
    e.allreduce_step = run_step([&] {
      const tracing::TraceRun run = tracing::run_trace(e.allreduce_request);
      e.allreduce = tracing::analyse(run);
    });
    nccl_log.read_into(e);
  }

  const bool all_reduce_broke = e.allreduce_step.ran && !e.allreduce_step.ok &&
                                (e.allreduce_step.code == ExitCode::kTimeout ||
                                 e.allreduce_step.code == ExitCode::kVerification);
  if (all_reduce_broke && gpus.size() >= 3) {
    if (request.level == Level::kQuick) {
      e.isolation_skipped =
          "the search by halves for the GPU or link at fault runs at --level "
          "standard and long";
    } else {
      step("isolation");
      tracing::TraceRequest one = e.allreduce_request;
      one.sizes = {one.sizes.back()};
      one.iters = 5;
      one.warmup = 2;
      one.batches = 0;
      one.timeout_s = std::min(request.timeout_s, kIsolationRunTimeoutS);
      e.isolation = isolate(gpus, [&](const std::vector<int>& subset) {
        RunOutcome o;
        tracing::TraceRequest q = one;
        q.devices = subset;
        try {
          const tracing::TraceReport r = tracing::analyse(tracing::run_trace(q));
          o.ok = !r.sizes.empty() && r.sizes.back().wrong_elements == 0;
          o.busbw = r.sizes.empty() ? 0 : r.sizes.back().busbw_gbps;
          if (!o.ok) o.error = "wrong data";
        } catch (const std::exception& x) {
          o.error = x.what();
        }
        return o;
      });
    }
  }

  if (!e.topology.gpus.empty() && e.counters_before.unavailable.empty()) {
    Watchdog watchdog("doctor", std::chrono::duration<double>(request.timeout_s));
    step("counters");
    watchdog.stage("nvml", true);
    e.counters_after = health::read_gpu_counters(bdfs_of(e.topology), request.nvml_library);
    e.counter_window_s = std::chrono::duration<double>(Clock::now() - counters_at).count();
  }
  e.seconds = seconds_since(t0);
  return e;
}

}  // namespace commtool::doctor
