// One command-line vocabulary (cli/vocabulary.hpp): every option of every subcommand is walked
// on the parser itself, so a subcommand that strays (a new name for an old idea, another
// default, a short form of its own) fails here. And the parser's errors in commtool's words,
// and --help wrapped, with the global options in each subcommand's.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/help_format.hpp"
#include "cli/parse_errors.hpp"
#include "cli/vocabulary.hpp"
#include "probes/base/error.hpp"

namespace {

using commtool::cli::CommandLine;
using commtool::cli::make_command_line;

void collect(const CLI::App* app, std::vector<const CLI::App*>& out) {
  out.push_back(app);
  for (const CLI::App* s : app->get_subcommands([](const CLI::App*) { return true; }))
    collect(s, out);
}

std::vector<const CLI::App*> every_app(const CLI::App& root) {
  std::vector<const CLI::App*> apps;
  collect(&root, apps);
  return apps;
}

std::string path_of(const CLI::App* app) {
  std::string path;
  for (; app != nullptr; app = app->get_parent())
    path = app->get_name() + (path.empty() ? "" : " ") + path;
  return path;
}

// Every option a user can give (the help flag aside), hidden ones included.
std::vector<const CLI::Option*> options_of(const CLI::App* app) {
  return app->get_options([app](const CLI::Option* o) { return o != app->get_help_ptr(); });
}

std::string long_name(const CLI::Option* o) {
  return o->get_positional() ? o->get_name() : "--" + o->get_lnames().front();
}

const commtool::cli::Term* term(const std::string& name) {
  for (const commtool::cli::Term& t : commtool::cli::vocabulary())
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

TEST(Vocabulary, EveryOptionIsInItWithItsShortForm) {
  const auto cl = make_command_line();
  for (const CLI::App* app : every_app(cl->app)) {
    for (const CLI::Option* o : options_of(app)) {
      const std::string name = long_name(o);
      const commtool::cli::Term* t = term(name);
      ASSERT_NE(t, nullptr) << path_of(app) << " " << name
                            << ": not in cli/vocabulary.cpp; name it there (or reuse a name)";
      const std::vector<std::string> shorts = o->get_snames();
      if (t->short_name.empty()) {
        EXPECT_TRUE(shorts.empty()) << path_of(app) << " " << name << " has -" << shorts.front()
                                    << ", which the vocabulary does not give it";
      } else {
        ASSERT_EQ(shorts.size(), 1u) << path_of(app) << " " << name << " lacks " << t->short_name;
        EXPECT_EQ("-" + shorts.front(), t->short_name) << path_of(app) << " " << name;
      }
    }
  }
}

TEST(Vocabulary, OneNameHasOneDefaultAndOneValueName) {
  const auto cl = make_command_line();
  struct Seen {
    std::string where, default_str, type;
  };
  std::map<std::string, Seen> seen;
  for (const CLI::App* app : every_app(cl->app)) {
    for (const CLI::Option* o : options_of(app)) {
      if (o->get_positional()) continue;
      std::string type = o->get_type_name();
      type = type.substr(0, type.find(':'));
      const Seen now{path_of(app), o->get_default_str(), type};
      auto [it, fresh] = seen.emplace(long_name(o), now);
      if (fresh) continue;
      // The element type's default is the workload's: float for a collective (nccl-tests'),
      // bfloat16 for a MoE dispatch (as DeepEP sends it).
      if (long_name(o) != "--dtype") {
        EXPECT_EQ(it->second.default_str, now.default_str)
            << long_name(o) << ": default in " << it->second.where << " and in " << now.where;
      }
      EXPECT_EQ(it->second.type, now.type)
          << long_name(o) << ": value name in " << it->second.where << " and in " << now.where;
    }
  }
  EXPECT_EQ(seen.at("--iters").default_str, "20");
  EXPECT_EQ(seen.at("--warmup").default_str, "5");
}

// A directory commtool writes is --save; the one other directory option is an input.
TEST(Vocabulary, SaveIsTheOnlyOutputDirectory) {
  const auto cl = make_command_line();
  const std::set<std::string> input_dirs = {"--sysfs-root"};
  int saves = 0;
  for (const CLI::App* app : every_app(cl->app)) {
    for (const CLI::Option* o : options_of(app)) {
      if (o->get_type_name().rfind("DIR", 0) != 0) continue;
      const std::string name = long_name(o);
      saves += name == "--save";
      EXPECT_TRUE(name == "--save" || input_dirs.count(name) == 1)
          << path_of(app) << " " << name << " DIR: an output directory is --save";
    }
  }
  EXPECT_EQ(saves, 2);  // trace and record
}

TEST(Vocabulary, ElementTypeIsDashDWithItsNamesListed) {
  const auto cl = make_command_line();
  int dtypes = 0;
  for (const CLI::App* app : every_app(cl->app)) {
    for (const CLI::Option* o : options_of(app)) {
      const std::string d = o->get_description();
      if (d.find("lement type") == std::string::npos && long_name(o) != "--dtype") continue;
      ++dtypes;
      EXPECT_EQ(long_name(o), "--dtype") << path_of(app);
      EXPECT_NE(d.find("nccl-tests' names"), std::string::npos) << path_of(app) << ": " << d;
      EXPECT_NE(d.find("bfloat16 (bf16)"), std::string::npos) << path_of(app) << ": " << d;
    }
  }
  EXPECT_EQ(dtypes, 3);  // trace, diagnose allreduce, diagnose ep
}

TEST(Vocabulary, ElementTypesTakeNcclTestsNamesAndAliases) {
  using commtool::cli::element_type;
  constexpr std::string_view ep[] = {"bfloat16", "f8e4m3", "f8e5m2"};
  constexpr std::string_view all[] = {"half", "float", "double", "bfloat16"};
  EXPECT_EQ(element_type("bf16", ep), "bfloat16");
  EXPECT_EQ(element_type("FP8", ep), "f8e4m3");
  EXPECT_EQ(element_type("e5m2", ep), "f8e5m2");
  EXPECT_EQ(element_type("fp32", all), "float");
  EXPECT_EQ(element_type("f16", all), "half");
  EXPECT_EQ(element_type("float64", all), "double");
  try {
    element_type("fp32", ep);
    FAIL() << "fp32 is not an element type of diagnose ep";
  } catch (const commtool::Error& e) {
    EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
    EXPECT_STREQ(e.what(),
                 "--dtype fp32: not an element type this command runs; accepted: bfloat16, "
                 "f8e4m3, f8e5m2");
  }
}

TEST(Help, EverySubcommandShowsTheGlobalOptions) {
  const auto cl = make_command_line();
  for (const CLI::App* app : every_app(cl->app)) {
    if (app->get_parent() == nullptr) continue;
    const std::string help = app->help();
    for (const char* global : {"--json", "--output FILE", "--devices", "-q,--quiet", "--timeout"})
      EXPECT_NE(help.find(global), std::string::npos) << path_of(app) << " --help lacks " << global;
    EXPECT_NE(help.find("Global options"), std::string::npos) << path_of(app);
  }
}

// Not a terminal: 80 columns, a longer line only where one word is longer.
TEST(Help, WrappedToEightyColumns) {
  const auto cl = make_command_line();
  for (const CLI::App* app : every_app(cl->app)) {
    std::istringstream lines(app->help());
    std::string line;
    while (std::getline(lines, line)) {
      if (line.size() <= 80) continue;
      const size_t last_space = line.find_last_of(' ');
      EXPECT_TRUE(last_space == std::string::npos || line.find_first_not_of(' ') >= last_space)
          << path_of(app) << ": " << line.size() << " columns: " << line;
    }
  }
}

TEST(Help, ValueNamesWithoutTheParsersNotes) {
  const auto cl = make_command_line();
  for (const CLI::App* app : every_app(cl->app)) {
    const std::string help = app->help();
    EXPECT_EQ(help.find("INT:"), std::string::npos) << path_of(app) << "\n" << help;
    EXPECT_EQ(help.find(" in ["), std::string::npos) << path_of(app) << "\n" << help;
  }
}

TEST(Help, WrapKeepsWordsAndBreaks) {
  using commtool::cli::wrap;
  EXPECT_EQ(wrap("aa bb cc", 5), "aa bb\ncc");
  EXPECT_EQ(wrap("a\nb c", 80), "a\nb c");
  EXPECT_EQ(wrap("averyveryverylongword x", 5), "averyveryverylongword\nx");
}

TEST(ParseErrors, DidYouMeanTheClosest) {
  using commtool::cli::did_you_mean;
  const std::vector<std::string> subs = {"topo", "probe", "trace", "report", "diagnose", "record"};
  EXPECT_EQ(did_you_mean("tpo", subs), "topo");
  EXPECT_EQ(did_you_mean("recrod", subs), "record");
  EXPECT_EQ(did_you_mean("diag", subs), "diagnose");  // a prefix of it
  EXPECT_EQ(did_you_mean("teleport", subs), std::nullopt);
  EXPECT_EQ(did_you_mean("--minbyte", {"--minbytes", "--maxbytes", "-b"}), "--minbytes");
  EXPECT_EQ(did_you_mean("rec", {"record", "recent"}), std::nullopt);  // two equally close
}

namespace {

// The message commtool prints for a command line the parser refuses.
std::string refusal(std::vector<const char*> args) {
  const auto cl = make_command_line();
  args.insert(args.begin(), "commtool");
  try {
    cl->app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return commtool::cli::parse_error_text(cl->app, e);
  }
  return "(accepted)";
}

}  // namespace

TEST(ParseErrors, InCommtoolsWordsWithWhatWasMeant) {
  EXPECT_EQ(refusal({"tpo"}),
            "commtool: tpo: no such subcommand; did you mean topo? (accepted: topo, probe, "
            "trace, report, diagnose, record, doctor)\nSee commtool --help.\n");
  EXPECT_EQ(refusal({"trace", "allreduce", "--minbyte", "8"}),
            "commtool trace: --minbyte: no such option; did you mean --minbytes?\n"
            "See commtool trace --help.\n");
  EXPECT_EQ(refusal({"topo", "--jsn"}),
            "commtool topo: --jsn: no such option; did you mean --json?\n"
            "See commtool topo --help.\n");
  EXPECT_EQ(refusal({"diagnose"}),
            "commtool diagnose: name what to run: allreduce, ep\nSee commtool diagnose --help.\n");
  const std::string trace = refusal({"trace"});
  EXPECT_EQ(trace.rfind("commtool trace: the collective is missing: allreduce, allgather", 0), 0u)
      << trace;
  EXPECT_EQ(refusal({"trace", "allreduce", "-n", "0"}),
            "commtool trace: --iters 0: out of range; accepted: 1 to 100000\n"
            "See commtool trace --help.\n");
  EXPECT_EQ(refusal({"topo", "--nccl-xml"}),
            "commtool topo: --nccl-xml: its value (FILE) is missing\nSee commtool topo --help.\n");
  EXPECT_EQ(refusal({"trace", "allreduce", "extra"}),
            "commtool trace: extra: an argument too many\nSee commtool trace --help.\n");
}
