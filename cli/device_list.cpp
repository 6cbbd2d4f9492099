#include "cli/device_list.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "probes/base/error.hpp"

namespace commtool::cli {

namespace {

constexpr int kMaxDeviceIndex = 1023;
// Every entry is a worker process with its own CUDA context.
constexpr size_t kMaxEntries = 1024;

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  throw usage_error(
      fmt::format("--devices '{}': {}; expected 'all' or GPU indices such as "
                  "0,1,3 or 0-3 (a GPU listed twice carries two ranks)",
                  excerpt(text), why));
}

// An entry as a message names it: "it" when it is the whole list, so a long value is not
// quoted twice.
std::string entry(const std::string& text, const std::string& item) {
  return item == text ? "it" : "'" + excerpt(item) + "'";
}

int parse_index(const std::string& text, const std::string& item) {
  if (item.empty()) bad(text, "an entry is empty");
  if (item[0] == '-') bad(text, entry(text, item) + " is negative");
  if (!std::all_of(item.begin(), item.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    bad(text, entry(text, item) + " is not a GPU index");
  }
  if (item.size() > 4 || std::stoi(item) > kMaxDeviceIndex)
    bad(text, entry(text, item) + " is too large");
  return std::stoi(item);
}

}  // namespace

std::vector<int> parse_device_list(const std::string& text, bool allow_repeats) {
  if (text == "all") return {};
  if (text.empty()) bad(text, "the list is empty");
  std::vector<int> out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = item.find('-', 1);
    if (!item.empty() && item[0] != '-' && dash != std::string::npos) {
      int lo = parse_index(text, item.substr(0, dash));
      int hi = parse_index(text, item.substr(dash + 1));
      if (hi < lo) bad(text, "range " + entry(text, item) + " runs backwards");
      for (int i = lo; i <= hi; ++i)
        out.push_back(i);
    } else {
      out.push_back(parse_index(text, item));
    }
    if (out.size() > kMaxEntries) {
      bad(text, fmt::format("it lists more than {} ranks", kMaxEntries));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (allow_repeats) return out;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace commtool::cli
