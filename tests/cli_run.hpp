// Runs the commtool binary as a user does, for the CLI and GPU tests: a child process, its exit
// status and what it printed.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace cli_test {

struct CliResult {
  int code = -1;    // the exit status; -1 when it did not exit normally
  std::string out;  // standard output, and standard error after it when asked
};

// Runs a shell command line and takes what it prints on standard output.
inline CliResult run_shell(const std::string& cmd) {
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe))
    r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CliResult run_commtool(const std::string& args, bool with_stderr) {
  return run_shell(std::string(COMMTOOL_BINARY) + " " + args + (with_stderr ? " 2>&1" : ""));
}

inline bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// A fresh directory under the system's temporary one, removed with the object.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string p = (std::filesystem::temp_directory_path() / "commtool-cli-XXXXXX").string();
    path = mkdtemp(p.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace cli_test
