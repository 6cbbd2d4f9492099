#include "tracing/profiler/collective_record.hpp"

#include <nlohmann/json.hpp>

namespace commtool::nccl_profiler {

std::string to_json_line(const CollectiveRecord& r) {
  return nlohmann::json{{"comm", r.comm_id},      {"rank", r.rank},   {"nranks", r.nranks},
                        {"seq", r.seq},           {"func", r.func},   {"count", r.count},
                        {"datatype", r.datatype}, {"algo", r.algo},   {"proto", r.proto},
                        {"channels", r.channels}, {"warps", r.warps}, {"start_ns", r.start_ns},
                        {"stop_ns", r.stop_ns}}
      .dump();
}

std::optional<CollectiveRecord> parse_json_line(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  try {
    CollectiveRecord r;
    r.comm_id = j.at("comm").get<uint64_t>();
    r.rank = j.at("rank").get<int>();
    r.nranks = j.at("nranks").get<int>();
    r.seq = j.at("seq").get<uint64_t>();
    r.func = j.at("func").get<std::string>();
    r.count = j.at("count").get<uint64_t>();
    r.datatype = j.at("datatype").get<std::string>();
    r.algo = j.at("algo").get<std::string>();
    r.proto = j.at("proto").get<std::string>();
    r.channels = j.at("channels").get<int>();
    r.warps = j.at("warps").get<int>();
    r.start_ns = j.at("start_ns").get<int64_t>();
    r.stop_ns = j.at("stop_ns").get<int64_t>();
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace commtool::nccl_profiler
