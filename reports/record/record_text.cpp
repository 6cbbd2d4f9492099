// render_recording_text (record_report.hpp): the verdict first, then the figures behind it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "reports/format/summary_format.hpp"
#include "reports/format/text_table.hpp"
#include "reports/record/record_report.hpp"
#include "tracing/record/record_text.hpp"

namespace commtool::reports {

namespace {

// Free text from record.json as the terminal may show it.
std::string shown(const std::string& s) {
  return s.empty() ? "unknown" : excerpt(s, 200);
}

std::string command_line(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  for (const std::string& w : argv)
    words.push_back(excerpt(w, 200));
  return words.empty() ? "unknown" : fmt::format("{}", fmt::join(words, " "));
}

std::string how_it_ended(const record::RecordingMeta& m) {
  if (!m.ended) return "no end recorded (still running when read, or the launcher was killed)";
  const record::RecordingEnd& e = *m.ended;
  std::string how;
  if (e.exit_code) {
    how = fmt::format("exited with code {}", *e.exit_code);
  } else if (e.signal) {
    how = fmt::format("killed by signal {}", *e.signal);
  } else {
    how = "ended, exit status unknown";
  }
  if (e.killed_by_commtool) how += " (commtool killed it)";
  return fmt::format("ran {}, {}", record::seconds_text(e.wall_s), how);
}

std::string header(const RecordingReport& r) {
  std::string out;
  if (r.meta) {
    const record::RecordingMeta& m = *r.meta;
    out += fmt::format("Recording of: {}\n", command_line(m.command));
    out += fmt::format("  on {}, started {}; {}\n", shown(m.host),
                       record::utc_date_time(m.started_realtime_ns), how_it_ended(m));
    out += fmt::format("  recorded by commtool {}; hang timeout {}\n", shown(m.commtool_version),
                       m.hang_timeout_s ? record::seconds_text(*m.hang_timeout_s) : "off");
  } else {
    out += "Recording (no record.json: command and end unknown)\n";
  }
  out += fmt::format("  {}: {} process(es), {} operations ended\n", excerpt(r.dir, 200),
                     r.standing.processes.size(), r.end_lines);
  return out + "\n";
}

std::string indented(const std::string& text) {
  std::string out;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += end > start ? "  " + text.substr(start, end - start) + "\n" : "\n";
    start = end + 1;
  }
  return out;
}

std::string straggler_sentence(const Straggler& s) {
  return fmt::format(
      "STRAGGLER: rank {} ({}) of communicator {} started last in {} of {} operations, by {} us "
      "median ({} us at most; threshold {:.0f} us)",
      s.rank, s.process, record::comm_label(s.comm, s.comm_name), s.last, s.compared,
      fmt::format("{:.0f}", s.median_lag_us), fmt::format("{:.0f}", s.max_lag_us), s.threshold_us);
}

std::string verdict(const RecordingReport& r) {
  switch (r.verdict) {
    case Verdict::kHang: {
      if (r.meta && r.meta->hang) {
        const record::RecordingHang& h = *r.meta->hang;
        return fmt::format(
                   "HANG: no operation completed for {} (the launcher saw it at {}). Where "
                   "everyone stood then:\n",
                   record::seconds_text(h.quiet_s), shown(h.detected_at)) +
               indented(record::render_standing_text(r.standing));
      }
      return fmt::format(
                 "HANG: the job ended with {} operation(s) in flight that could not finish. "
                 "Where everyone stood then:\n",
                 r.standing.in_flight) +
             indented(record::render_standing_text(r.standing));
    }
    case Verdict::kFault:
      return "FAULT: ranks disagree or are missing, though the job did not hang:\n" +
             indented(record::render_standing_text(r.standing));
    case Verdict::kStraggler: {
      std::string out;
      for (const Straggler& s : r.stragglers)
        out += straggler_sentence(s) + "\n  what to do: " + s.advice + ".\n";
      return out;
    }
    case Verdict::kNoOperations:
      return fmt::format(
          "No NCCL operation was recorded, so there is nothing to judge: {}.\n  what to do: "
          "{}.\n",
          r.standing.processes.empty()
              ? "no process of the job loaded NCCL with commtool's profiler plugin (the job did "
                "not use NCCL, or NCCL did not load the plugin)"
              : fmt::format("{} loaded the profiler plugin, yet none started an NCCL operation",
                            r.standing.processes.size() == 1
                                ? std::string("its one process")
                                : fmt::format("{} processes", r.standing.processes.size())),
          r.advice);
    case Verdict::kNone:
      break;
  }
  return "No hang, no fault and no straggler.\n  what to do: " + r.advice + ".\n";
}

std::string op_table(const RecordingReport& r) {
  TextTable t({"communicator", "func", "count", "type", "size", "ops", "api us", "enqueue us",
               "GPU us", "busbw GB/s", "NCCL ran"});
  for (const OpRow& row : r.ops) {
    std::string ops = fmt::format("{}", row.operations);
    if (row.unverified > 0) {
      ops += fmt::format(" ({}/{} unverified)", row.unverified, row.rank_operations);
    }
    t.add_row({record::comm_label(row.comm, row.comm_name), excerpt(row.func, 40),
               fmt::format("{}", row.count), excerpt(row.datatype, 40),
               row.bytes ? measure::format_byte_size(*row.bytes) : "-", ops,
               median_spread_us(row.api_us), median_spread_us(row.enqueue_us),
               median_spread_us(row.gpu_us),
               row.busbw_gbps ? fmt::format("{:.2f}", *row.busbw_gbps) : "-",
               tracing::to_string(row.nccl)});
  }
  return "Operations per communicator, function and size (median [min-max] in us. api: the "
         "application's NCCL call and enqueue: NCCL planning and launching it, host clock, every "
         "rank's; GPU: first channel start to last stop, GPU clock, each operation at its slowest "
         "rank; busbw from the GPU median with nccl-tests' factor. Unverified: of the ranks' "
         "records "
         "of those operations, the ones that ended without every channel seen to finish or with "
         "GPU stamps that cannot be right, counted but not timed)\n" +
         (t.empty() ? "  no operation ended\n" : t.render());
}

// record --cupti: each operation's GPU-side waits, for the rows that have any.
std::string split_table(const RecordingReport& r) {
  if (r.cupti.empty()) return "";
  TextTable t({"communicator", "func", "size", "ops split", "input wait us", "kernel us",
               "exposed wait us"});
  for (const OpRow& row : r.ops) {
    if (row.split_operations == 0) continue;
    t.add_row({record::comm_label(row.comm, row.comm_name), excerpt(row.func, 40),
               row.bytes ? measure::format_byte_size(*row.bytes) : "-",
               fmt::format("{}/{}", row.split_operations, row.rank_operations),
               median_spread_us(row.input_wait_us), median_spread_us(row.kernel_us),
               median_spread_us(row.exposed_wait_us)});
  }
  return "\nGPU-side split (record --cupti; median [min-max] in us over every rank's operations "
         "matched to CUPTI's NCCL kernel. input wait: NCCL's stream waiting for the operation's "
         "input; kernel: the NCCL kernel as CUPTI timed it; exposed wait: the job's streams "
         "waiting for the operation's end, summed over streams)\n" +
         (t.empty() ? "  no operation was matched to a CUPTI kernel\n" : t.render());
}

std::string rank_table(const RecordingReport& r) {
  TextTable t({"communicator", "rank", "process", "ops", "GPU us", "start lag us", "started last"});
  for (const RankRow& row : r.ranks) {
    t.add_row({fmt::format("{:016x}", row.comm), fmt::format("{}", row.rank), row.process,
               fmt::format("{}", row.operations), median_spread_us(row.gpu_us),
               median_spread_us(row.start_lag_us), fmt::format("{}", row.last_to_start)});
  }
  return fmt::format(
             "\nRanks (start lag: the rank's GPU start behind the first rank's in the same "
             "operation, on the mapped clocks; started last: by more than {:.0f} us on one host, "
             "{:.0f} us across hosts)\n",
             kStragglerLagUs, kCrossHostLagUs) +
         (t.empty() ? "  no rank recorded\n" : t.render());
}

std::string clock_table(const RecordingReport& r) {
  const bool cupti = !r.cupti.empty();
  std::vector<std::string> columns = {"process", "stamps seen", "windows",
                                      "typical delay beyond the smallest us"};
  if (cupti) columns.insert(columns.end(), {"CUPTI matched", "CUPTI kernel start - mapped us"});
  TextTable t(columns);
  for (const ClockFit& c : r.clocks) {
    std::vector<std::string> row = {
        c.process, fmt::format("{}", c.pairs), fmt::format("{}", c.windows),
        c.median_excess_us ? fmt::format("{:.1f}", *c.median_excess_us) : "-"};
    if (cupti) {
      row.push_back(fmt::format("{}", c.cupti_matched));
      row.push_back(c.cupti_lead_us ? fmt::format("{:.1f}", *c.cupti_lead_us) : "-");
    }
    t.add_row(row);
  }
  return "\nClocks (each process's GPU %globaltimer onto its host's CLOCK_MONOTONIC by the "
         "smallest delay of NCCL's proxy reports per 10 s window: a mapped time is late by at "
         "most that delay; hosts onto wall-clock time by each process's clock pair" +
         std::string(cupti ? "; CUPTI's own mapping of the same kernels beside it, median" : "") +
         ")\n" + (t.empty() ? "  no process recorded\n" : t.render());
}

}  // namespace

std::string render_recording_text(const RecordingReport& r) {
  std::string out = header(r);
  for (const std::string& w : r.warnings)
    out += "WARNING: " + w + "\n";
  if (!r.warnings.empty()) out += "\n";
  out += verdict(r);
  // No operation: no table to show, and no all-clear above an empty one.
  if (r.verdict == Verdict::kNoOperations) return out;
  return out + "\n" + op_table(r) + split_table(r) + rank_table(r) + clock_table(r);
}

}  // namespace commtool::reports
