// Where a report goes: standard output, or a file written whole or not at all (a temp file in
// the same directory, then rename), so an interrupted run never leaves half a JSON document.
#pragma once

#include <string>

namespace commtool::reports {

// Fails early, before anything is measured, when the file cannot be created there: the
// directory is missing or not writable, or the path is a directory. Throws usage_error naming
// `option`, the option that gave the path ("--trace").
void check_writable(const std::string& path, const std::string& option = "--output");

// Writes content to path atomically (temp + fsync + rename). Throws usage_error naming `option`
// on failure and leaves no temp file behind.
void write_atomically(const std::string& path, const std::string& content,
                      const std::string& option = "--output");

}  // namespace commtool::reports
