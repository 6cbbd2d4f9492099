#include "reports/format/verdict_json.hpp"

namespace commtool::reports {

using nlohmann::json;

namespace {

json or_null(const auto& value) {
  return value ? json(*value) : json(nullptr);
}

json call_json(const crossrank::Job& job, uint32_t id) {
  const crossrank::Call& c = job.call(id);
  return {{"func", c.func},
          {"p2p", c.p2p},
          {"count", or_null(c.count)},
          {"datatype", c.datatype.empty() ? json(nullptr) : json(c.datatype)},
          {"redop", c.redop.empty() ? json(nullptr) : json(c.redop)},
          {"root", or_null(c.root)},
          {"peer", or_null(c.peer)}};
}

// The cross-rank findings, the verdict first; positions as the group writes them.
}  // namespace

json verdict_json(const crossrank::Job& job, const crossrank::Verdict& v) {
  json findings = json::array();
  for (const crossrank::Finding& f : v.findings) {
    const crossrank::Group& g = job.groups[f.group];
    json sides = json::array(), last = json::array(), lives = json::array();
    for (const crossrank::Side& side : f.sides) {
      sides.push_back(
          {{"ranks", side.ranks},
           {"call", call_json(job, side.call)},
           {"site", side.site == crossrank::kNoSite ? json(nullptr) : json(job.site(side.site))}});
    }
    for (const crossrank::LastDone& d : f.last) {
      last.push_back({{"ranks", d.ranks},
                      {"position", or_null(d.seq)},
                      {"call", d.call ? call_json(job, *d.call) : json(nullptr)}});
    }
    for (const crossrank::LifeGroup& l : f.lives) {
      lives.push_back({{"ranks", l.ranks},
                       {"state", crossrank::to_string(l.life.state)},
                       {"detail", l.life.detail}});
    }
    findings.push_back(
        {{"rule", crossrank::to_string(f.rule)},
         {"group", g.id},
         {"group_name", g.name},
         {"nranks", g.nranks > 0 ? json(g.nranks) : json(nullptr)},
         {"position", f.seq},
         {"call", f.call ? call_json(job, *f.call) : json(nullptr)},
         {"ranks", f.ranks},
         {"waiting", f.waiting},
         {"past", f.past},
         {"waiting_since_wall_ns",
          f.waiting_since_wall_ns > 0 ? json(f.waiting_since_wall_ns) : json(nullptr)},
         {"sides", std::move(sides)},
         {"field", f.field.empty() ? json(nullptr) : json(f.field)},
         {"later_disagreements", f.later},
         {"last_completed", std::move(last)},
         {"processes", std::move(lives)},
         {"no_records", f.no_records},
         {"text", crossrank::finding_text(job, f)},
         {"advice", crossrank::finding_advice(job, f)}});
  }
  return {{"hang", v.hang}, {"findings", std::move(findings)}};
}

}  // namespace commtool::reports
