#include "reports/format/text_table.hpp"

#include <algorithm>

namespace commtool::reports {

size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;  // skip continuation bytes
  }));
}

std::string TextTable::render() const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i >= widths.size()) widths.push_back(0);
      widths[i] = std::max(widths[i], display_width(row[i]));
    }
  };
  measure(header_);
  for (const auto& row : rows_)
    measure(row);

  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line = indent_;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - display_width(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out += line + "\n";
  };
  emit(header_);
  for (const auto& row : rows_)
    emit(row);
  return out;
}

}  // namespace commtool::reports
