// recording_to_json and recording_to_chrome (record_report.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "reports/format/summary_format.hpp"
#include "reports/format/verdict_json.hpp"
#include "reports/record/record_report.hpp"
#include "reports/record/record_split.hpp"
#include "reports/trace/chrome_trace.hpp"
#include "tracing/record/record_text.hpp"

namespace commtool::reports {

using nlohmann::json;

namespace {

json or_null(const auto& value) {
  return value ? json(*value) : json(nullptr);
}

std::string comm_hex(uint64_t comm) {
  return fmt::format("{:016x}", comm);
}

json op_json(const record::OpRef& op) {
  return {{"index", op.index},
          {"kind", op.kind == nccl_profiler::OpKind::kP2p ? "p2p" : "coll"},
          {"seq", or_null(op.seq)},
          {"func", op.func},
          {"count", op.count},
          {"datatype", op.datatype},
          {"peer", op.kind == nccl_profiler::OpKind::kP2p ? json(op.peer) : json(nullptr)}};
}

json standing_json(const record::Standing& s) {
  json comms = json::array(), processes = json::array();
  for (const record::CommStanding& c : s.comms) {
    json ranks = json::array();
    for (const record::RankStanding& r : c.ranks) {
      json in_flight = json::array();
      for (const record::InFlightOp& op : r.in_flight)
        in_flight.push_back({{"op", op_json(op.op)}, {"since_wall_ns", op.since_wall_ns}});
      ranks.push_back(
          {{"rank", r.rank},
           {"process", r.process},
           {"started", r.started},
           {"completed", r.completed},
           {"unverified", r.unverified},
           {"forgotten", r.forgotten},
           {"last_ended", r.last_ended ? op_json(*r.last_ended) : json(nullptr)},
           {"last_ended_complete", r.last_ended ? json(r.last_ended_complete) : json(nullptr)},
           {"last_ended_wall_ns", r.last_ended ? json(r.last_ended_wall_ns) : json(nullptr)},
           {"in_flight", std::move(in_flight)},
           {"finalized", r.finalized}});
    }
    comms.push_back({{"comm", comm_hex(c.comm)},
                     {"name", c.name},
                     {"nranks", c.nranks > 0 ? json(c.nranks) : json(nullptr)},
                     {"in_flight", c.in_flight},
                     {"ranks", std::move(ranks)},
                     {"unseen", c.unseen}});
  }
  for (const record::ProcessStanding& p : s.processes) {
    processes.push_back({{"file", p.file},
                         {"host", p.host.empty() ? json(nullptr) : json(p.host)},
                         {"pid", p.host.empty() ? json(nullptr) : json(p.pid)},
                         {"state", record::to_string(p.state)},
                         {"last_alive_wall_ns", or_null(p.last_alive_wall_ns)},
                         {"quiet_s", p.quiet_s},
                         {"in_flight", p.in_flight},
                         {"dropped_lines", p.dropped_lines}});
  }
  return {{"now_wall_ns", s.now_wall_ns},
          {"in_flight", s.in_flight},
          {"completed", s.completed},
          {"unverified", s.unverified},
          {"comms", std::move(comms)},
          {"processes", std::move(processes)},
          {"verdict", verdict_json(s.job, s.verdict)}};
}

json nccl_json(const tracing::NcclChoice& c) {
  json ways = json::array();
  for (const tracing::NcclWay& w : c.ways) {
    ways.push_back({{"algo", w.algo.empty() ? json(nullptr) : json(w.algo)},
                    {"proto", w.proto.empty() ? json(nullptr) : json(w.proto)},
                    {"channels", w.channels},
                    {"operations", w.operations}});
  }
  return ways;
}

}  // namespace

json recording_to_json(const RecordingReport& r) {
  json ops = json::array(), ranks = json::array(), stragglers = json::array(),
       clocks = json::array();
  for (const OpRow& row : r.ops) {
    ops.push_back(
        {{"comm", comm_hex(row.comm)},
         {"nranks", row.nranks > 0 ? json(row.nranks) : json(nullptr)},
         {"func", row.func},
         {"count", row.count},
         {"datatype", row.datatype},
         {"bytes", or_null(row.bytes)},
         {"operations", row.operations},
         {"rank_operations", row.rank_operations},
         {"unverified", row.unverified},
         {"api_us", summary_json(row.api_us)},
         {"enqueue_us", summary_json(row.enqueue_us)},
         {"gpu_us", summary_json(row.gpu_us)},
         {"busbw_gbps", or_null(row.busbw_gbps)},
         {"nccl", nccl_json(row.nccl)},
         {"cupti_split", row.split_operations == 0
                             ? json(nullptr)
                             : json{{"rank_operations", row.split_operations},
                                    {"input_wait_us", summary_json(row.input_wait_us)},
                                    {"kernel_us", summary_json(row.kernel_us)},
                                    {"exposed_wait_us", summary_json(row.exposed_wait_us)}}}});
  }
  json cupti = json::array();
  for (const CuptiStatus& c : r.cupti) {
    cupti.push_back(
        {{"process", c.process},
         {"state", c.state},
         {"why", c.why},
         {"yielded_at",
          c.yielded_wall_ns ? json(record::utc_date_time(*c.yielded_wall_ns)) : json(nullptr)},
         {"dropped_records", c.dropped}});
  }
  for (const RankRow& row : r.ranks) {
    ranks.push_back({{"comm", comm_hex(row.comm)},
                     {"rank", row.rank},
                     {"process", row.process},
                     {"operations", row.operations},
                     {"gpu_us", summary_json(row.gpu_us)},
                     {"start_lag_us", summary_json(row.start_lag_us)},
                     {"last_to_start", row.last_to_start}});
  }
  for (const Straggler& s : r.stragglers) {
    stragglers.push_back({{"comm", comm_hex(s.comm)},
                          {"rank", s.rank},
                          {"process", s.process},
                          {"last", s.last},
                          {"compared", s.compared},
                          {"median_lag_us", s.median_lag_us},
                          {"max_lag_us", s.max_lag_us},
                          {"threshold_us", s.threshold_us},
                          {"advice", s.advice}});
  }
  for (const ClockFit& c : r.clocks) {
    clocks.push_back({{"process", c.process},
                      {"pairs", c.pairs},
                      {"windows", c.windows},
                      {"median_excess_us", or_null(c.median_excess_us)},
                      {"cupti_matched", c.cupti_matched},
                      {"cupti_kernel_start_minus_mapped_us", or_null(c.cupti_lead_us)}});
  }
  return {{"schema_version", 2},
          {"command", "report"},
          {"kind", "recording"},
          {"dir", r.dir},
          {"record", r.meta ? record::to_json(*r.meta) : json(nullptr)},
          {"verdict", to_string(r.verdict)},
          {"advice", r.advice},
          {"standing", standing_json(r.standing)},
          {"operations", std::move(ops)},
          {"ranks", std::move(ranks)},
          {"stragglers", std::move(stragglers)},
          {"clocks", std::move(clocks)},
          {"cupti", std::move(cupti)},
          {"end_lines", r.end_lines},
          {"warnings", r.warnings}};
}

json recording_to_chrome(const record::Recording& rec) {
  // Every time on wall-clock ns, so that processes (and hosts) line up.
  struct Span {
    int pid;
    uint64_t tid;
    std::string name;
    const char* cat;
    int64_t start, end;
  };
  std::vector<Span> spans;
  std::vector<std::pair<int, std::string>> process_names;
  std::vector<std::tuple<int, uint64_t, std::string>> track_names;
  for (size_t i = 0; i < rec.processes.size(); ++i) {
    const record::ProcessRecord& p = rec.processes[i];
    const int pid = static_cast<int>(i);
    const GpuClockMap clock(p);
    process_names.emplace_back(
        pid, p.proc ? fmt::format("{} pid {}", p.proc->host, p.proc->pid) : p.file);
    for (size_t k = 0; k < p.ranks.size(); ++k) {
      const record::RankRecord& r = p.ranks[k];
      const uint64_t host_track = 2 * k, gpu_track = 2 * k + 1;
      const std::string who = fmt::format("comm {:016x} rank {}", r.comm, r.rank);
      track_names.emplace_back(pid, host_track, who + " host");
      track_names.emplace_back(pid, gpu_track, who + " GPU");
      for (const nccl_profiler::EndLine& e : r.ops) {
        const std::string name = record::op_label(record::op_ref(e.op));
        if (e.api) {
          spans.push_back(
              {pid, host_track, name, "api", p.wall_ns(e.api->start_ns), p.wall_ns(e.api->end_ns)});
        }
        spans.push_back({pid, host_track, "enqueue " + name, "enqueue",
                         p.wall_ns(e.enqueue.start_ns), p.wall_ns(e.enqueue.end_ns)});
        if (!e.gpu) continue;
        const auto start = clock.host_ns(e.gpu->start_ns);
        if (!start) continue;
        spans.push_back({pid, gpu_track, name, "gpu", p.wall_ns(*start),
                         p.wall_ns(*start + (e.gpu->end_ns - e.gpu->start_ns))});
      }
    }
    // record --cupti: CUPTI's NCCL kernels, and each stream's waits that held it up, on tracks
    // after the ranks' (CUPTI's times are already on the host clock).
    const uint64_t cupti_track = 2 * p.ranks.size();
    bool any = false;
    for (const nccl_profiler::WorkLine& w : p.cupti.work) {
      if (!w.nccl) continue;
      any = true;
      spans.push_back({pid, cupti_track, "NCCL kernel", "cupti", p.wall_ns(w.gpu.start_ns),
                       p.wall_ns(w.gpu.end_ns)});
    }
    for (const WaitOutcome& o : resolve_waits(p.cupti)) {
      if (o.waited_ns <= 0 || !o.producer) continue;
      any = true;
      // It ended when the event completed, or earlier if the stream's next work started first.
      const int64_t released = o.after ? std::min(o.producer->gpu.end_ns, o.after->gpu.start_ns)
                                       : o.producer->gpu.end_ns;
      spans.push_back({pid, cupti_track + 1, fmt::format("stream {} waited", o.wait.stream.stream),
                       "cupti wait", p.wall_ns(released - o.waited_ns), p.wall_ns(released)});
    }
    if (any) {
      track_names.emplace_back(pid, cupti_track, "CUPTI: NCCL kernels");
      track_names.emplace_back(pid, cupti_track + 1, "CUPTI: stream waits");
    }
  }
  int64_t origin = INT64_MAX;
  for (const Span& s : spans)
    origin = std::min(origin, s.start);
  TraceEvents events(spans.empty() ? 0 : static_cast<uint64_t>(std::max<int64_t>(origin, 0)));
  for (const auto& [pid, name] : process_names)
    events.meta(pid, 0, "process_name", name);
  for (const auto& [pid, tid, name] : track_names)
    events.meta(pid, tid, "thread_name", name);
  for (const Span& s : spans) {
    events.span(s.pid, s.tid, s.name, s.cat, static_cast<uint64_t>(std::max<int64_t>(s.start, 0)),
                static_cast<uint64_t>(std::max<int64_t>(s.end, 0)));
  }
  return events.finish();
}

}  // namespace commtool::reports
