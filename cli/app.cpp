#include "cli/app.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/device_list.hpp"
#include "cli/help_format.hpp"
#include "cli/mpi_run.hpp"
#include "cli/option_names.hpp"
#include "cli/parse_errors.hpp"
#include "probes/base/error.hpp"
#include "probes/base/output_file.hpp"
#include "probes/base/progress_line.hpp"

namespace commtool::cli {

const char* const kExitCodeHelp =
    "Exit codes:\n"
    "  0  ran (a report of an empty machine counts)\n"
    "  2  bad usage or input: an unknown option, a malformed value or file, a request\n"
    "     needing more memory than commtool's limits (checked before any GPU is used)\n"
    "  3  the machine lacks what was asked: no GPU, no NCCL, no P2P\n"
    "  4  a measurement failed verification: the data was wrong\n"
    "  5  a timeout or a hang was detected; report and record: also ranks that\n"
    "     disagree (another collective, size, type or root) or a rank missing\n"
    "  6  doctor: the worst check is a WARN\n"
    "  7  doctor: a check FAILed\n"
    "\n"
    "See man commtool for every option and what each figure means.";

void emit(const GlobalOptions& global, const std::string& document) {
  if (global.output.empty()) {
    std::cout << document << std::flush;
  } else {
    files::write_atomically(global.output, document, "--output");
  }
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "";  // not a number: the type check says so
        return std::isfinite(v) ? "" : fmt::format("{} is not a finite number", text);
      },
      "");
}

CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "an empty name; give a path" : "";
      },
      "");
}

namespace {

void add_global_options(CLI::App& app, GlobalOptions& global, bool& version) {
  app.add_flag("--version", version,
               "Print commtool's version and the CUDA, driver, NCCL and CUPTI versions found");
  app.add_flag("--json", global.json,
               "Print one JSON document (with schema_version); --version too");
  app.add_option("--output", global.output,
                 "Write the report to FILE (whole or not at all) instead of standard output")
      ->check(non_empty_path())
      ->type_name("FILE");
  app.add_option("--devices", global.devices,
                 "GPUs to use: 'all' or indices such as 0,1 or 0-3. For trace, diagnose and "
                 "probe --ipc each entry is one rank: a GPU listed N times (0,0,0,0) carries N "
                 "ranks, a correctness run whose times are not of any link")
      ->type_name("LIST")
      ->capture_default_str();
  app.add_option("--comm", global.comm,
                 "NCCL communicators for trace and diagnose: blocking (as PyTorch creates "
                 "them: NCCL launches on the calling thread) or nonblocking (NCCL launches each "
                 "group from a thread of its own; a stuck one is aborted in-process)")
      ->type_name("MODE")
      ->capture_default_str();
  app.add_option("--timeout", global.timeout_s,
                 "Seconds any single GPU operation or driver query may take before commtool "
                 "gives up with exit code 5")
      ->type_name("SEC")
      ->check(finite_number())
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  app.add_flag("-v,--verbose", global.verbose, "Say what is being done and how long it took");
  app.add_flag("-q,--quiet", global.quiet,
               "No progress line (one updating line on standard error, shown only when it is a "
               "terminal, for work that can take more than a few seconds)");
  app.add_flag("--mpi", global.mpi,
               "Run as one rank of an MPI job (mpirun or srun start one commtool per rank): topo "
               "gathers every rank's node and rank 0 prints the cluster view; probe measures "
               "each node from its lowest rank and rank 0 sets the nodes side by side; doctor "
               "examines each node from its lowest rank and rank 0 prints the nodes that differ "
               "from the rest; trace and "
               "diagnose run one worker per rank, on the node's GPU of its local rank, and rank "
               "0 prints the report. Implied under mpirun and srun");
}

// `commtool record torchrun --nproc-per-node 8 train.py` must run that command, but CLI11 would
// read --nproc-per-node as an option of ours. So the job's first word, the first argument after
// `record` that is neither one of our options nor an option's value, gets a "--" before it
// (unless the user wrote one). Our options are asked of the parser itself, so a new option is
// known here without a list to keep in step.
std::vector<std::string> separate_record_job(const CLI::App& app, std::vector<std::string> args) {
  const CLI::App* record = app.get_subcommand_ptr("record").get();
  auto option = [&](const std::string& arg) -> const CLI::Option* {
    if (arg.size() < 2 || arg[0] != '-') return nullptr;
    const std::string name = arg.substr(0, arg.find('='));
    if (const CLI::Option* o = record->get_option_no_throw(name)) return o;
    return app.get_option_no_throw(name);
  };
  auto takes_value = [](const CLI::Option* o, const std::string& arg) {
    return o->get_items_expected_max() > 0 && arg.find('=') == std::string::npos;
  };
  size_t i = 1;
  for (; i < args.size() && args[i] != "record"; ++i) {  // global options before the subcommand
    const CLI::Option* o = option(args[i]);
    if (o == nullptr) return args;  // not a record command line
    if (takes_value(o, args[i])) ++i;
  }
  for (++i; i < args.size(); ++i) {
    if (args[i] == "--") return args;
    const CLI::Option* o = option(args[i]);
    if (o == nullptr) {
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), "--");
      return args;
    }
    if (takes_value(o, args[i])) ++i;
  }
  return args;
}

// `commtool diagnose foo` would be answered "A subcommand is required", without naming foo:
// a word after a subcommand that has subcommands of its own, where one of them belongs, is
// named with what is accepted. The subcommand is the first word that is neither a global
// option nor an option's value.
void check_nested_subcommand(const CLI::App& app, const std::vector<std::string>& args) {
  size_t i = 1;
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') break;
    const CLI::Option* o = app.get_option_no_throw(arg.substr(0, arg.find('=')));
    if (o == nullptr) return;  // the parser says what is wrong
    i += o->get_items_expected_max() > 0 && arg.find('=') == std::string::npos ? 2 : 1;
  }
  if (i + 1 >= args.size()) return;
  const auto all = [](const CLI::App*) { return true; };
  const CLI::App* sub = nullptr;
  for (const CLI::App* s : app.get_subcommands(all)) {
    if (s->get_name() == args[i]) sub = s;
  }
  if (sub == nullptr) return;
  const auto nested = sub->get_subcommands(all);
  const std::string& word = args[i + 1];
  if (nested.empty() || word.empty() || word[0] == '-') return;
  std::string accepted;
  for (const CLI::App* n : nested) {
    if (n->get_name() == word) return;
    accepted += (accepted.empty() ? "" : ", ") + n->get_name();
  }
  throw usage_error(fmt::format("{} {}: not one of its subcommands; accepted: {}", args[i],
                                excerpt(word), accepted));
}

// `--json=` sets a flag as if it were `--json`: CLI11 reads an empty flag value as true. The
// user who typed it meant a value and left it out, so it is refused. The words are walked as
// the parser would, with the options of each subcommand reached and the global ones (which may
// follow a subcommand); record's job, from its first word on, is the job's and not looked at.
void refuse_empty_flag_values(const CLI::App& app, const std::vector<std::string>& args) {
  const auto all = [](const CLI::App*) { return true; };
  std::vector<const CLI::App*> scope{&app};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return;
    if (arg.empty() || arg[0] != '-') {
      const CLI::App* sub = nullptr;
      for (const CLI::App* s : scope.back()->get_subcommands(all)) {
        if (s->get_name() == arg) sub = s;
      }
      if (sub == nullptr) {
        if (scope.back()->get_name() == "record") return;  // the job's command line
        continue;
      }
      scope.push_back(sub);
      continue;
    }
    const size_t eq = arg.find('=');
    const CLI::Option* option = nullptr;
    for (auto it = scope.rbegin(); it != scope.rend() && option == nullptr; ++it)
      option = (*it)->get_option_no_throw(arg.substr(0, eq));
    if (option == nullptr) continue;  // the parser says what is wrong
    if (option->get_items_expected_max() == 0) {
      if (eq != std::string::npos && eq + 1 == arg.size()) {
        const std::string name = arg.substr(0, eq);
        throw usage_error(fmt::format(
            "{}: an empty value; {} is a flag: give it alone, or {}=false", arg, name, name));
      }
    } else if (eq == std::string::npos) {
      ++i;  // its value, which may look like a subcommand's name
    }
  }
}

// What CLI11 accepts without a word and commtool must not: an empty value, which CLI11 reads as
// 0 for a number (--seed '' is seed 0), and a whole number past 64 bits, which strtoull clamps
// (--seed 18446744073709551616 is 2^64-1). Added to every option that takes a value, of every
// subcommand, so that an option added later is covered without a list to keep in step. The
// job's own words after `record --` are exempt: '' is a fine argument of a job. A transform,
// not a check: CLI11 passes a check a copy, and the decimal spelling must reach the conversion.
void refuse_silent_values(CLI::App& app) {
  for (CLI::Option* opt : app.get_options([](CLI::Option*) { return true; })) {
    if (opt->get_items_expected_max() == 0 || opt->get_name() == "command") continue;
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.starts_with("UINT");
    const bool is_integer = is_unsigned || type.starts_with("INT");
    opt->transform(CLI::Validator(
        [is_integer, is_unsigned](std::string& text) -> std::string {
          if (text.empty()) return "an empty value; give one";
          if (!is_integer) return "";
          std::string_view digits(text);
          if (digits.starts_with('-') || digits.starts_with('+')) digits.remove_prefix(1);
          if (digits.empty() || digits.find_first_not_of("0123456789") != digits.npos) {
            return printable_message(text) + " is not a whole number";
          }
          // CLI11 reads a leading 0 as octal (--iters 010 would be 8): whole numbers are decimal.
          const size_t sign = text.size() - digits.size();
          const size_t zeros = std::min(digits.find_first_not_of('0'), digits.size() - 1);
          text.erase(sign, zeros);
          if (text[0] == '+') text.erase(0, 1);
          bool fits = false;
          if (is_unsigned) {
            uint64_t v = 0;
            fits = std::from_chars(text.data(), text.data() + text.size(), v).ec == std::errc();
          } else {
            int64_t v = 0;
            fits = std::from_chars(text.data(), text.data() + text.size(), v).ec == std::errc();
          }
          if (fits || (is_unsigned && text[0] == '-')) return "";  // a negative one: its own check
          return fmt::format("{} is out of range ({} to {})", excerpt(text),
                             is_unsigned ? 0 : std::numeric_limits<int64_t>::min(),
                             is_unsigned
                                 ? std::numeric_limits<uint64_t>::max()
                                 : static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_silent_values(*sub);
}

}  // namespace

std::unique_ptr<CommandLine> make_command_line() {
  auto cl = std::make_unique<CommandLine>();
  CLI::App& app = cl->app;
  app.formatter(help_formatter(help_width()));  // before the subcommands, which inherit it
  app.footer(kExitCodeHelp);
  // CLI11's errors in commtool's words, through the same escaping as every message, with the
  // subcommand named and the option or subcommand probably meant.
  app.failure_message(
      [](const CLI::App* root, const CLI::Error& e) { return parse_error_text(*root, e); });
  app.fallthrough();  // global options may follow the subcommand: commtool topo --json
  app.require_subcommand(0, 1);
  add_global_options(app, cl->global, cl->version);

  const GlobalOptions& global = cl->global;
  cl->runners = {
      {"topo", register_topo(app, global)},         {"probe", register_probe(app, global)},
      {"trace", register_trace(app, global)},       {"report", register_report(app, global)},
      {"diagnose", register_diagnose(app, global)}, {"record", register_record(app, global)},
      {"doctor", register_doctor(app, global)}};
  refuse_silent_values(app);
  return cl;
}

int run(int argc, char** argv) {
  std::unique_ptr<CommandLine> cl = make_command_line();
  CLI::App& app = cl->app;
  GlobalOptions& global = cl->global;
  const bool& version = cl->version;

  global.launch = cluster::detect_launcher();
  std::vector<std::string> args =
      separate_record_job(app, std::vector<std::string>(argv, argv + argc));
  std::vector<char*> arg_ptrs;
  for (std::string& a : args)
    arg_ptrs.push_back(a.data());
  try {
    check_nested_subcommand(app, args);
    refuse_empty_flag_values(app, args);
  } catch (const Error& e) {
    if (global.launch.several_ranks() && global.launch.rank > 0) return 0;
    return report_error(global, e.code(), e.what());
  }
  try {
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    // Every rank of an MPI job has the same command line: rank 0 alone says what is wrong, or
    // prints the help; the others end quietly with 0, as for any usage error.
    if (global.launch.several_ranks() && global.launch.rank > 0) return 0;
    int rc = app.exit(e);  // prints help, or the message with a hint
    return rc == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  }

  try {
    if (version) {
      if (!global.launch.several_ranks() || global.launch.rank <= 0) print_version(global);
      return 0;
    }
    if (app.get_subcommands().empty()) {
      std::cerr << app.help() << "\ncommtool: name a subcommand\n";
      return static_cast<int>(ExitCode::kUsage);
    }
    // The progress line names the command ("commtool diagnose ep"); under MPI only rank 0's.
    std::string command = "commtool";
    for (const CLI::App* s = &app; !s->get_subcommands().empty();) {
      s = s->get_subcommands().front();
      command += " " + s->get_name();
    }
    progress::configure(global.quiet || (global.launch.several_ranks() && global.launch.rank > 0),
                        command);
    global.device_indices = parse_device_list(global.devices);
    global.rank_devices = parse_device_list(global.devices, /*allow_repeats=*/true);
    const auto comm = nccl::parse_comm_mode(global.comm);
    if (!comm) {
      throw usage_error(fmt::format(
          "--comm {}: not a communicator mode; accepted: blocking, nonblocking", global.comm));
    }
    global.comm_mode = *comm;
    if (auto code = check_mpi_use(global, app.get_subcommands().front()->get_name())) return *code;
    // Under MPI rank 0 alone writes the report.
    const bool writes = !global.launch.several_ranks() || global.launch.rank <= 0;
    if (!global.output.empty() && writes) files::check_writable(global.output, "--output");
    for (const auto& [name, runner] : cl->runners) {
      if (!app.got_subcommand(name)) continue;
      if ((name == "trace" || name == "diagnose") && under_mpi(global))
        return run_as_mpi_rank(global, name, runner);
      return runner();
    }
    return static_cast<int>(ExitCode::kUsage);
  } catch (const BadValue& e) {
    return report_error(global, e.code(), user_message(e));
  } catch (const Error& e) {
    return report_error(global, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    // Every count read from a file or an option is bounded before anything is allocated
    // (files::kMaxInputBytes, the readers' own bounds, measure::memory_limit): what is left is
    // a machine short of memory for what was asked.
    return report_error(global, ExitCode::kEnvironment,
                        "out of memory: this machine (or its memory limit, ulimit -v, a cgroup) "
                        "does not have what this request needs; ask for less, or free memory");
  } catch (const std::exception& e) {
    report_error(global, ExitCode::kEnvironment, std::string("internal error: ") + e.what());
    return 1;
  }
}

}  // namespace commtool::cli
