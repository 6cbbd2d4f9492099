#include "probes/bandwidth/measurement.hpp"

#include <nlohmann/json.hpp>

namespace commtool::probe {

std::string to_string(Engine e) {
  return e == Engine::kCopyEngine ? "CE" : "SM";
}

Measurement make_measurement(std::string probe, std::string what, Engine engine, int src, int dst,
                             bool bidirectional, uint64_t bytes, int iters, std::string unit,
                             std::vector<double> samples) {
  Measurement m;
  m.probe = std::move(probe);
  m.what = std::move(what);
  m.engine = engine;
  m.src = src;
  m.dst = dst;
  m.bidirectional = bidirectional;
  m.bytes = bytes;
  m.iters = iters;
  m.unit = std::move(unit);
  m.samples = std::move(samples);
  m.summary = measure::summarize(m.samples);
  m.verified = true;
  return m;
}

void to_json(nlohmann::json& j, const Measurement& m) {
  const auto& s = m.summary;
  j = {{"probe", m.probe},
       {"what", m.what},
       {"engine", to_string(m.engine)},
       {"src", m.src == kHost ? nlohmann::json("host") : nlohmann::json(m.src)},
       {"dst", m.dst == kHost ? nlohmann::json("host") : nlohmann::json(m.dst)},
       {"bidirectional", m.bidirectional},
       {"bytes", m.bytes},
       {"iters", m.iters},
       {"unit", m.unit},
       {"samples", m.samples},
       {"stats",
        {{"n", s.n},
         {"median", s.median},
         {"min", s.min},
         {"max", s.max},
         {"mean", s.mean},
         {"stddev", s.stddev},
         {"cv", s.cv},
         {"p99", s.p99}}},
       {"expected", m.expected > 0 ? nlohmann::json(m.expected) : nlohmann::json(nullptr)},
       {"expected_basis", m.expected_basis},
       {"verified", m.verified}};
  if (m.src_rank >= 0) {
    j["src_rank"] = m.src_rank;
    j["dst_rank"] = m.dst_rank;
  }
}

void from_json(const nlohmann::json& j, Measurement& m) {
  auto endpoint = [](const nlohmann::json& v) { return v.is_string() ? kHost : v.get<int>(); };
  m.probe = j.at("probe").get<std::string>();
  m.what = j.at("what").get<std::string>();
  m.engine = j.at("engine") == "SM" ? Engine::kSm : Engine::kCopyEngine;
  m.src = endpoint(j.at("src"));
  m.dst = endpoint(j.at("dst"));
  m.bidirectional = j.at("bidirectional").get<bool>();
  m.bytes = j.at("bytes").get<uint64_t>();
  m.iters = j.at("iters").get<int>();
  m.unit = j.at("unit").get<std::string>();
  m.samples = j.at("samples").get<std::vector<double>>();
  m.summary = measure::summarize(m.samples);
  m.expected = j.at("expected").is_null() ? 0 : j.at("expected").get<double>();
  m.expected_basis = j.at("expected_basis").get<std::string>();
  m.verified = j.at("verified").get<bool>();
  m.src_rank = j.value("src_rank", -1);
  m.dst_rank = j.value("dst_rank", -1);
}

Verdict judge(const Measurement& m) {
  Verdict v;
  if (m.expected <= 0 || m.unit != "GB/s") return v;
  v.percent = 100.0 * m.summary.median / m.expected;
  v.judged = !(m.bidirectional && m.engine == Engine::kSm);
  v.low = v.judged && m.summary.median < kLowShare * m.expected;
  v.above = m.summary.median > kAboveShare * m.expected;
  return v;
}

}  // namespace commtool::probe
