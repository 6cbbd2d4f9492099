// `commtool report PATH...` over what a job commtool did not launch left: PyTorch Flight Recorder
// dumps and NCCL RAS answers (cli/commands.hpp).
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "reports/format/verdict_json.hpp"
#include "tracing/crossrank/flight_recorder.hpp"
#include "tracing/crossrank/nccl_log.hpp"
#include "tracing/crossrank/ras.hpp"

namespace commtool::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxArtifactFiles = 1'000'000;

// The first bytes of a regular file; empty for anything else. Opened without blocking and
// checked once open, so that a FIFO put in the file's place cannot hold the report.
std::string head_of(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return "";
  std::string head;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    head.resize(8192);
    const ssize_t n = ::read(fd, head.data(), head.size());
    head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return head;
}

// The list of `a` a file with these first bytes belongs in; none for what is none of them.
std::vector<fs::path>* list_for(JobArtifacts& a, const std::string& head) {
  if (crossrank::looks_like_ras(head)) return &a.ras;
  if (crossrank::looks_like_flight_recorder(head)) return &a.dumps;
  if (crossrank::looks_like_nccl_log(head)) return &a.logs;
  return nullptr;
}

}  // namespace

JobArtifacts find_job_artifacts(const std::vector<std::string>& paths) {
  JobArtifacts out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!files::input_exists(p)) {
      throw usage_error(fmt::format("report {}: no such file or directory", p));
    }
    if (!fs::is_directory(p, ec)) {
      // Not a regular file (a FIFO, a device): refused by the reader, naming what it is.
      if (!fs::is_regular_file(p, ec)) files::read_input_file(p);
      std::vector<fs::path>* list = list_for(out, head_of(p));
      if (list == nullptr) {
        throw usage_error(fmt::format(
            "report {}: neither a saved run, a recording, a Flight Recorder dump (a pickle, or "
            "JSON with pg_config and entries), an answer of NCCL's RAS nor NCCL's log",
            p));
      }
      list->emplace_back(p);
      continue;
    }
    JobArtifacts here;  // this directory's, sorted before they join the others
    size_t files_found = 0;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
      if (std::vector<fs::path>* list = list_for(here, head_of(it->path()))) {
        list->push_back(it->path());
        if (++files_found > kMaxArtifactFiles) {
          throw usage_error(
              fmt::format("report {}: more than {} files to read", p, kMaxArtifactFiles));
        }
      }
    }
    if (ec) throw usage_error(fmt::format("report {}: {}", p, ec.message()));
    for (auto [from, to] :
         {std::pair{&here.dumps, &out.dumps}, {&here.ras, &out.ras}, {&here.logs, &out.logs}}) {
      std::sort(from->begin(), from->end());
      to->insert(to->end(), from->begin(), from->end());
    }
    out.found.insert(here.dumps.begin(), here.dumps.end());
  }
  return out;
}

int report_job_artifacts(const GlobalOptions& global, const JobArtifacts& a) {
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
    doc["verdict"] = reports::verdict_json(fr.job, v);
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
  emit(global, global.json ? doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n" : text);
  return fault ? static_cast<int>(ExitCode::kTimeout) : 0;
}

}  // namespace commtool::cli
