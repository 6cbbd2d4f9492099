#include "reports/record/artifacts_report.hpp"

#include <fmt/format.h>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "reports/format/verdict_json.hpp"
#include "tracing/crossrank/flight_recorder.hpp"
#include "tracing/crossrank/nccl_log.hpp"
#include "tracing/crossrank/ras.hpp"

namespace commtool::reports {

namespace fs = std::filesystem;
using nlohmann::json;

ArtifactsReport report_job_artifacts(const crossrank::JobArtifacts& a) {
  bool fault = false;
  std::string text;
  json doc = {{"schema_version", 1},
              {"command", "report"},
              {"kind", !a.dumps.empty() ? "flight-recorder"
                       : !a.ras.empty() ? "nccl-ras"
                                        : "nccl-logs"}};
  if (!a.dumps.empty()) {
    const crossrank::FlightRecorderJob fr = crossrank::read_flight_recorder(a.dumps, a.found);
    if (fr.dumps.empty() && a.ras.empty() && a.logs.empty()) {
      throw usage_error("report: no Flight Recorder dump among the files found (see the warnings)");
    }
    const crossrank::Verdict v = crossrank::analyse(fr.job);
    fault = fault || v.error();
    json dumps = json::array();
    for (const crossrank::FrDumpInfo& d : fr.dumps) {
      dumps.push_back({{"file", d.file},
                       {"rank", d.rank},
                       {"version", d.version},
                       {"nccl_version", d.nccl_version},
                       {"entries", d.entries},
                       {"left_out", d.left_out}});
    }
    doc["dumps"] = std::move(dumps);
    doc["warnings"] = fr.warnings;
    doc["verdict"] = verdict_json(fr.job, v);
    text += crossrank::render_flight_recorder_text(fr, v);
  }
  json answers = json::array();
  for (const fs::path& p : a.ras) {
    const crossrank::RasStatus s =
        crossrank::read_ras(files::read_input_file(p.string(), 256ull << 20), p.string());
    const std::vector<crossrank::RasFinding> findings = crossrank::analyse_ras(s);
    fault = fault || !findings.empty();
    json texts = json::array(), advice = json::array();
    for (const crossrank::RasFinding& f : findings) {
      texts.push_back(f.text);
      advice.push_back(f.advice);
    }
    answers.push_back({{"file", p.string()},
                       {"form", s.json ? "json" : "text"},
                       {"nccl_version", s.nccl_version},
                       {"repairs", s.repairs},
                       {"findings", std::move(texts)},
                       {"advice", std::move(advice)}});
    if (!text.empty()) text += "\n";
    text += crossrank::render_ras_text(s, findings, p.string());
  }
  if (!a.ras.empty()) doc["ras"] = std::move(answers);
  if (!a.logs.empty()) {
    std::vector<crossrank::NcclLog> logs;
    for (const fs::path& p : a.logs)
      logs.push_back(
          crossrank::read_nccl_log(files::read_input_file(p.string(), 1ull << 30), p.string()));
    const std::vector<crossrank::LogFinding> findings = crossrank::analyse_nccl_logs(logs);
    json jl = json::array();
    for (const crossrank::NcclLog& l : logs) {
      json comms = json::array();
      for (const crossrank::LogComm& c : l.comms) {
        comms.push_back({{"comm_id", c.comm_id},
                         {"rank", c.rank},
                         {"nranks", c.nranks},
                         {"bus_id", c.bus_id},
                         {"init_complete", c.init_complete}});
      }
      jl.push_back({{"file", l.file},
                    {"host", l.host},
                    {"pid", l.pid},
                    {"version", l.version},
                    {"network", l.network},
                    {"warnings", l.warnings.size()},
                    {"comms", std::move(comms)}});
    }
    json log_findings = json::array(), log_advice = json::array();
    for (const crossrank::LogFinding& f : findings) {
      log_findings.push_back(f.text);
      log_advice.push_back(f.advice);
    }
    doc["nccl_logs"] = {{"logs", std::move(jl)},
                        {"findings", std::move(log_findings)},
                        {"advice", std::move(log_advice)}};
    if (!text.empty()) text += "\n";
    text += crossrank::render_nccl_logs_text(logs, findings);
  }
  return {std::move(text), std::move(doc), fault};
}

}  // namespace commtool::reports
