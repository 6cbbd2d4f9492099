// commtool's command-line vocabulary: every option any subcommand takes, with its one meaning.
// One idea has one name, one short form and one default wherever it appears (tests/
// test_cli_vocabulary.cpp walks every subcommand and fails on an option missing here, a short
// form not given here, or one name with two defaults). In short:
//   --output FILE   the report (global)        --save DIR    the directory a run or recording
//   --trace FILE    a Chrome/Perfetto trace                   is written to, for `report`
//   -d,--dtype      element type, nccl-tests' names and aliases, listed in each help
//   -n,--iters 20   timed iterations per batch  -w,--warmup 5  untimed ones before timing
//   --batches 5     timed batches (the median and spread are over them)
//   --cupti         also measure under CUPTI (the split into host, stream and kernel time)
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace commtool::cli {

struct Term {
  std::string_view name;        // "--iters", or a positional's name ("collective")
  std::string_view short_name;  // "-n", or empty
  std::string_view meaning;
};

// Every option name a subcommand may use.
std::span<const Term> vocabulary();

// The element types, nccl-tests' names first (-d of all_reduce_perf and friends), then the
// aliases commtool also takes.
struct ElementType {
  std::string_view name;
  std::vector<std::string_view> aliases;
  int bytes;
};
std::span<const ElementType> element_types();

// "-d TYPE" help for a subcommand that takes `accepted` (nccl-tests' names): the names, each
// with its aliases.
std::string element_type_help(std::span<const std::string_view> accepted);

// The nccl-tests name of `text` (a name or an alias, any case), if `accepted` has it; else a
// usage error naming the value and listing what is accepted.
std::string element_type(const std::string& text, std::span<const std::string_view> accepted);

}  // namespace commtool::cli
