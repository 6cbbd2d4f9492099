#include "tracing/record/live_recording.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include "probes/base/error.hpp"
#include "probes/base/output_file.hpp"
#include "tracing/crossrank/ras.hpp"
#include "tracing/profiler/plugin_support.hpp"
#include "tracing/record/ras_client.hpp"
#include "tracing/record/standing.hpp"

namespace commtool::record {

void LiveRecording::attach(const std::filesystem::path& dir) {
  reader_ = RecordingReader(dir, Retention::kStanding);
  attached_ = true;
}

void LiveRecording::poll() {
  if (!attached_ || !broken_.empty()) return;
  try {
    reader_.poll();
  } catch (const Error& e) {
    broken_ = e.what();
    std::cerr << "commtool record: the recording cannot be read as it grows ("
              << printable_message(broken_)
              << "); hangs are no longer watched for, the job runs on\n";
  }
}

uint64_t LiveRecording::ended() const {
  uint64_t n = 0;
  for (const ProcessRecord& p : reader_.recording().processes) {
    for (const RankRecord& r : p.ranks)
      n += r.completed + r.unverified;
  }
  return n;
}

uint64_t LiveRecording::in_flight() const {
  uint64_t n = 0;
  for (const ProcessRecord& p : reader_.recording().processes) {
    for (const RankRecord& r : p.ranks)
      n += r.in_flight.size();
  }
  return n;
}

namespace {

std::string this_host() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "";
}

// The processes of this host as /proc shows them, by (host, pid).
StandingOptions options_now(const Recording& rec, bool stuck, bool ended) {
  StandingOptions o{.now_wall_ns = nccl_profiler::clock_ns(CLOCK_REALTIME),
                    .job_ended = ended,
                    .stuck = stuck,
                    .lives = {}};
  const std::string host = this_host();
  std::vector<int64_t> pids;
  for (const ProcessRecord& p : rec.processes) {
    if (p.proc && p.proc->host == host && !host.empty()) pids.push_back(p.proc->pid);
  }
  const std::vector<proc::ProcessLook> looks = proc::look_steadily(pids);
  for (size_t i = 0; i < pids.size(); ++i)
    o.lives[{host, pids[i]}] = crossrank::life_of(looks[i]);
  return o;
}

}  // namespace

std::string LiveRecording::standing(bool stuck) {
  const StandingOptions options = options_now(reader_.recording(), stuck, false);
  const Standing s = where_everyone_stands(reader_.recording(), options);
  std::string text = render_standing_text(s);
  const bool job_there = std::any_of(options.lives.begin(), options.lives.end(), [](const auto& l) {
    return l.second.state != crossrank::Liveness::kGone;
  });
  const char* ras_enable = std::getenv("NCCL_RAS_ENABLE");
  if (stuck && job_there && !(ras_enable != nullptr && std::string(ras_enable) == "0")) {
    text += ras_evidence();
  }
  if (!broken_.empty()) {
    text += fmt::format("(the recording stopped being readable: {})\n", broken_);
  }
  return text;
}

std::string LiveRecording::ras_evidence() {
  const std::string address = ras_address();
  const RasAnswer a = query_ras(address, kRasTimeout, /*json=*/true);
  if (!a.ok) {
    return fmt::format("NCCL's RAS ({}) gave no answer: {}\n", printable_message(address, true),
                       printable_message(a.why, true));
  }
  const std::string file =
      (reader_.recording().dir / fmt::format("ras-{}.json", ++ras_answers_)).string();
  std::string saved = fmt::format(" (saved in {})", file);
  try {
    files::write_atomically(file, a.text, "RAS answer");
  } catch (const Error& e) {
    saved = fmt::format(" (not saved: {})", e.what());
  }
  try {
    const crossrank::RasStatus status = crossrank::read_ras(a.text, file);
    const std::vector<crossrank::RasFinding> findings = crossrank::analyse_ras(status);
    std::string out = fmt::format("NCCL's RAS ({}){}:\n", printable_message(address, true),
                                  printable_message(saved, true));
    for (const std::string& r : status.repairs)
      out += "  WARNING: " + excerpt(r, 300) + "\n";
    if (findings.empty()) out += "  no rank missing, behind or in error\n";
    for (const crossrank::RasFinding& f : findings)
      out += "  " + f.text + "\n";
    return out;
  } catch (const Error& e) {
    return fmt::format("NCCL's RAS ({}) answered what commtool cannot read{}: {}\n",
                       printable_message(address, true), printable_message(saved, true),
                       printable_message(e.what(), true));
  }
}

std::optional<std::string> LiveRecording::fault_at_end() const {
  if (!attached_ || !broken_.empty()) return std::nullopt;
  const Standing s =
      where_everyone_stands(reader_.recording(), options_now(reader_.recording(), true, true));
  if (!s.verdict.error()) return std::nullopt;
  return crossrank::render_text(s.job, s.verdict);
}

std::string LiveRecording::summary() const {
  const Recording& rec = reader_.recording();
  size_t ranks = 0;
  for (const ProcessRecord& p : rec.processes)
    ranks += p.ranks.size();
  if (rec.processes.empty()) {
    return "No process of the job loaded NCCL with the plugin: nothing was recorded.";
  }
  return fmt::format("{} process(es) recorded {} communicator rank(s) and {} operation(s){}.",
                     rec.processes.size(), ranks, ended(),
                     in_flight() > 0 ? fmt::format(", {} never ended", in_flight()) : "");
}

RecordHooks LiveRecording::hooks() {
  return {[this](const std::string& dir) { attach(dir); },
          [this] { poll(); },
          [this] { return ended(); },
          [this] { return in_flight(); },
          [this](bool stuck) { return standing(stuck); },
          [this] { return summary(); }};
}

}  // namespace commtool::record
