// A left-aligned text table: rows of cells, columns as wide as their widest cell. The printers
// build one and never count spaces themselves.
#pragma once

#include <string>
#include <vector>

namespace commtool::reports {

// How every text renderer writes a value it does not know: this in a table cell, the word
// "unknown" in a sentence (JSON has null). tests/test_reports.cpp pins it.
inline constexpr const char* kUnknownCell = "-";

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::string indent = "  ")
      : header_(std::move(header)), indent_(std::move(indent)) {}

  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }

  // Header, then rows; two spaces between columns; no trailing spaces.
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::string indent_;
};

// Width of UTF-8 text in terminal columns, counting each code point as one (box-drawing and
// "×" are single-width).
size_t display_width(const std::string& text);

}  // namespace commtool::reports
