#include "tracing/trace/fault.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "probes/base/error.hpp"
#include "probes/base/parse_number.hpp"

namespace commtool::tracing {

namespace {

struct Form {
  FaultKind kind;
  const char* name;
  bool has_seq;
};

constexpr Form kForms[] = {{FaultKind::kDie, "die", true},
                           {FaultKind::kNoJoin, "no-join", false},
                           {FaultKind::kStall, "stall", true},
                           {FaultKind::kMismatch, "mismatch", true}};

const Form& form_of(FaultKind k) {
  for (const Form& f : kForms) {
    if (f.kind == k) return f;
  }
  return kForms[0];
}

}  // namespace

Fault parse_fault(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return bad_value("fault", text,
                     why +
                         "; accepted: die:RANK:SEQ, no-join:RANK, stall:RANK:SEQ, "
                         "mismatch:RANK:SEQ");
  };
  if (text.empty()) throw bad("it is empty");
  // Split on every ':', keeping empty fields (a trailing colon is a field too many).
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string::npos ? colon : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  for (const Form& form : kForms) {
    if (parts[0] != form.name) continue;
    const size_t want = form.has_seq ? 3 : 2;
    if (parts.size() != want) {
      throw bad(fmt::format("{} takes {}", form.name, form.has_seq ? "RANK:SEQ" : "RANK only"));
    }
    Fault f;
    f.kind = form.kind;
    const std::optional<int> rank = parse_number<int>(parts[1]);
    if (!rank || *rank < 0) throw bad(fmt::format("'{}' is not a rank", excerpt(parts[1])));
    f.rank = *rank;
    if (form.has_seq) {
      const std::optional<uint64_t> seq = parse_number<uint64_t>(parts[2]);
      if (!seq) throw bad(fmt::format("'{}' is not an operation number", excerpt(parts[2])));
      f.seq = *seq;
    }
    return f;
  }
  throw bad(fmt::format("'{}' is not a fault", excerpt(parts[0])));
}

std::string to_string(const Fault& f) {
  const Form& form = form_of(f.kind);
  return form.has_seq ? fmt::format("{}:{}:{}", form.name, f.rank, f.seq)
                      : fmt::format("{}:{}", form.name, f.rank);
}

nlohmann::json to_json(const std::optional<Fault>& f) {
  return f ? nlohmann::json(to_string(*f)) : nlohmann::json(nullptr);
}

std::optional<Fault> fault_from_json(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  return parse_fault(j.get<std::string>());
}

}  // namespace commtool::tracing
