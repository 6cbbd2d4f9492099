// Where a report goes: standard output, or a file written whole or not at all (a temp file in
// the same directory, then rename), so an interrupted run never leaves half a JSON document.
#pragma once

#include <string>

namespace commtool::files {

// `role` is what the path is to the user, as the caller knows it: the option that gave it
// ("--trace") or what it holds ("saved run file"); every error message starts with it.

// Fails early, before anything is measured, when the file cannot be created there: the
// directory is missing or not writable, or the path is a directory. Throws usage_error.
void check_writable(const std::string& path, const std::string& role);

// Writes content to path atomically (temp + fsync + rename). Throws usage_error on failure and
// leaves no temp file behind.
void write_atomically(const std::string& path, const std::string& content, const std::string& role);

}  // namespace commtool::files
