#include "cli/option_names.hpp"

#include <map>

#include "probes/base/error.hpp"

namespace commtool::cli {

std::string option_for_field(const std::string& field) {
  static const std::map<std::string, std::string> kOptions = {
      {"devices", "--devices"},        // probes/topo: select_gpus
      {"sysfs_root", "--sysfs-root"},  // probes/topo: the sysfs reader
      {"size", "--size"},              // probes/bandwidth: buffers that do not fit
      {"sizes", "--minbytes"},         // tracing/trace: a size too small for the collective
      {"max_bytes", "--maxbytes"},     // the largest size: memory it takes
      {"iters", "--iters"},            // measured operations a rank keeps
      {"root", "--root"},
      {"dtype", "--dtype"},
      {"fault", "--inject-fault"},
      {"skew", "--skew"},  // tracing/ep: the routing config
      {"experts", "--experts"},
      {"tokens_per_rank", "--tokens"},
      {"hidden", "--hidden"},
      {"topk", "--topk"},
      {"replicate", "--replicate"},
      {"ranks", "--ranks"},  // the expert-parallel size (--ranks of a dry run, else --devices)
      {"layer", "--layer"},
      {"hang_timeout_s", "--hang-timeout"},  // tracing/record: the job's hang bound
  };
  auto it = kOptions.find(field);
  return it == kOptions.end() ? field : it->second;
}

std::string user_message(const BadValue& e) {
  return option_for_field(e.field()) + " " + excerpt(e.value()) + ": " + e.why();
}

}  // namespace commtool::cli
