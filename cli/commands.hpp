// Each subcommand registers its options on the app and hands a plain options struct to its
// run function; parsing never leaks into measurement.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/app.hpp"
#include "tracing/trace/trace_run.hpp"

namespace commtool::cli {

// A registered subcommand's work, called after parsing when it was chosen. Returns the exit code.
using Runner = std::function<int()>;

Runner register_topo(CLI::App& app, const GlobalOptions& global);
Runner register_probe(CLI::App& app, const GlobalOptions& global);
Runner register_trace(CLI::App& app, const GlobalOptions& global);
Runner register_report(CLI::App& app, const GlobalOptions& global);
Runner register_diagnose(CLI::App& app, const GlobalOptions& global);
Runner register_record(CLI::App& app, const GlobalOptions& global);
Runner register_doctor(CLI::App& app, const GlobalOptions& global);

// The whole command line, built and not yet parsed: the parser, the options it binds, and each
// subcommand's work by name. run() parses into it; tests walk it (every option of every
// subcommand, tests/test_cli_vocabulary.cpp). Not movable: the runners hold `global`.
struct CommandLine {
  CLI::App app{"commtool: why GPU communication on this machine is slow or stuck", "commtool"};
  GlobalOptions global;
  bool version = false;
  std::vector<std::pair<std::string, Runner>> runners;
};
std::unique_ptr<CommandLine> make_command_line();

// Analyses a trace run (measured or loaded), prints it as --json/--output say, and writes the
// Chrome trace to trace_file unless it is empty. Shared by trace and report.
int report_run(const GlobalOptions& global, const tracing::TraceRun& run,
               const std::string& trace_file);

// Prints commtool's version and the versions of the GPU stack found at run time, as text or
// (--json) one JSON document.
void print_version(const GlobalOptions& global);

// For a floating-point option, before its CLI::Range: a range check lets NaN through (every
// comparison with NaN is false), so "nan" and "inf" are refused here, naming the value.
CLI::Validator finite_number();

// For a file or directory option: an empty name is refused, not read as "not given".
CLI::Validator non_empty_path();

// Writes a finished document where --output says (atomically) or to standard output.
void emit(const GlobalOptions& global, const std::string& document);

}  // namespace commtool::cli
