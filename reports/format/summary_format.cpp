#include "reports/format/summary_format.hpp"

#include <fmt/format.h>

namespace commtool::reports {

namespace {

std::string us(double v) {
  return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
}

}  // namespace

std::string median_spread_us(const measure::Summary& s) {
  if (s.n == 0) return "-";
  return fmt::format("{} [{}-{}]", us(s.median), us(s.min), us(s.max));
}

nlohmann::json summary_json(const measure::Summary& s) {
  if (s.n == 0) return nullptr;
  return {{"n", s.n},     {"median", s.median}, {"min", s.min},
          {"max", s.max}, {"p99", s.p99},       {"cv", s.cv}};
}

}  // namespace commtool::reports
