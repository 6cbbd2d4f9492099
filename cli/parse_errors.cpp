#include "cli/parse_errors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "probes/base/error.hpp"

namespace commtool::cli {

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbours, each 1.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string undashed(const std::string& s) {
  return s.substr(std::min(s.find_first_not_of('-'), s.size()));
}

// The subcommand the command line reached: the deepest one parsed.
const CLI::App& reached(const CLI::App& root) {
  const CLI::App* app = &root;
  for (;;) {
    const std::vector<CLI::App*> parsed = app->get_subcommands();
    if (parsed.empty()) return *app;
    app = parsed.front();
  }
}

// "commtool trace", "commtool diagnose ep".
std::string path_of(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent())
    path = a->get_name() + (path.empty() ? "" : " ") + path;
  return path;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(s->get_name());
  return names;
}

// Every spelling of every option `app` takes: its own and its ancestors' (the globals).
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options([](const CLI::Option* o) {
           return !o->get_positional() && !o->get_group().empty();
         })) {
      for (const std::string& l : o->get_lnames())
        names.push_back("--" + l);
      for (const std::string& s : o->get_snames())
        names.push_back("-" + s);
    }
  }
  return names;
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const std::optional<std::string> meant = did_you_mean(word, candidates);
  return meant ? fmt::format("; did you mean {}?", *meant) : "";
}

std::string unknown_word(const CLI::App& at, const std::string& word) {
  const std::string w = excerpt(word);
  if (word.size() > 1 && word[0] == '-') {
    const std::string name = word.substr(0, word.find('='));
    return fmt::format("{}: no such option{}", excerpt(name), suggestion(name, option_names(at)));
  }
  const std::vector<std::string> subs = subcommand_names(at);
  if (!subs.empty()) {
    return fmt::format("{}: no such subcommand{} (accepted: {})", w, suggestion(word, subs),
                       fmt::join(subs, ", "));
  }
  return fmt::format("{}: an argument too many", w);
}

// CLI11's wording of what it checked, in ours.
std::string reword(const std::string& what) {
  static const std::regex range(R"(^(\S+): Value (.*) not in range (\S+) to (\S+)$)");
  static const std::regex missing(R"(^(\S+): (\d+) required (\S+) missing$)");
  std::smatch m;
  if (std::regex_match(what, m, range)) {
    return fmt::format("{} {}: out of range; accepted: {} to {}", m[1].str(), excerpt(m[2].str()),
                       m[3].str(), m[4].str());
  }
  if (std::regex_match(what, m, missing)) {
    return fmt::format("{}: its value ({}) is missing", m[1].str(), m[3].str());
  }
  return what;
}

}  // namespace

std::optional<std::string> did_you_mean(const std::string& word,
                                        const std::vector<std::string>& candidates) {
  const std::string w = undashed(word);
  if (w.empty()) return std::nullopt;
  const size_t allowed = w.size() >= 6 ? 2 : 1;
  std::optional<std::string> best;
  size_t best_distance = allowed + 1;
  bool tie = false;
  for (const std::string& c : candidates) {
    const std::string u = undashed(c);
    size_t d = edit_distance(w, u);
    if (d > allowed && w.size() >= 3 && u.starts_with(w)) d = allowed;  // a prefix of it
    if (d < best_distance) {
      best = c;
      best_distance = d;
      tie = false;
    } else if (d == best_distance && best && *best != c) {
      tie = true;
    }
  }
  if (!best || best_distance > allowed || tie) return std::nullopt;
  return best;
}

std::string parse_error_text(const CLI::App& root, const CLI::Error& e) {
  const CLI::App& at = reached(root);
  // By type: CLI11 names some errors after the subcommand that raised them.
  const bool is_extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  const bool is_required = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
  std::string what;
  if (is_extras) {
    // A subcommand's leftovers go up to the root (fallthrough), which raises the error.
    std::vector<std::string> extras = at.remaining();
    if (extras.empty()) extras = root.remaining();
    // An unknown option first: the words after it may be its value.
    auto it = std::find_if(extras.begin(), extras.end(),
                           [](const std::string& s) { return s.size() > 1 && s[0] == '-'; });
    if (it == extras.end()) it = extras.begin();
    what = it == extras.end() ? e.what() : unknown_word(at, *it);
  } else if (is_required && !subcommand_names(at).empty() &&
             std::string(e.what()).find("ubcommand") != std::string::npos) {
    what = fmt::format("name what to run: {}", fmt::join(subcommand_names(at), ", "));
  } else if (is_required) {
    what = e.what();
    for (const CLI::Option* o : at.get_options(
             [](const CLI::Option* o) { return o->get_positional() && o->get_required(); })) {
      if (o->count() == 0) {
        what = fmt::format("the {} is missing: {}", o->get_name(), o->get_description());
        break;
      }
    }
  } else {
    what = reword(e.what());
  }
  return fmt::format("{}: {}\nSee {} --help.\n", path_of(at),
                     printable_message(what, /*one_line=*/true), path_of(at));
}

}  // namespace commtool::cli
