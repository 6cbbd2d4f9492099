#include "cli/help_format.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <vector>

namespace commtool::cli {

int help_width() {
  winsize ws{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return std::clamp(static_cast<int>(ws.ws_col), 50, 200);
  return 80;
}

std::string wrap(const std::string& text, int width) {
  std::string out;
  std::istringstream lines(text);
  std::string line;
  bool first_line = true;
  while (std::getline(lines, line)) {
    if (!first_line) out += '\n';
    first_line = false;
    std::istringstream words(line);
    std::string word;
    size_t column = 0;
    while (words >> word) {
      if (column > 0 && column + 1 + word.size() > static_cast<size_t>(width)) {
        out += '\n';
        column = 0;
      }
      if (column > 0) {
        out += ' ';
        ++column;
      }
      out += word;
      column += word.size();
    }
  }
  return out;
}

namespace {

class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(int width) : width_(width) { column_width(30); }

  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    std::string out = make_description(app) + make_usage(app, name) + make_positionals(app) +
                      make_groups(app, mode) + make_subcommands(app, mode);
    if (app->get_parent() != nullptr) out += global_options(app);
    return out + '\n' + make_footer(app);
  }

  std::string make_description(const CLI::App* app) const override {
    const std::string d = app->get_description();
    return d.empty() ? "" : wrap(d, width_) + "\n";
  }

  std::string make_footer(const CLI::App* app) const override {
    const std::string f = app->get_footer();
    return f.empty() ? "" : f + "\n";
  }

  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(true), describe(sub->get_description()),
                             column_width_);
    return out.str();
  }

  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    if (opt->get_type_size() == 0) return "";
    std::string out;
    std::string type = opt->get_type_name();
    type = type.substr(0, type.find(':'));  // CLI11 appends each validator's note after ':'
    if (type == "INT" || type == "UINT") type = "N";
    if (type == "FLOAT") type = "X";
    if (type == "TEXT") type = "VALUE";
    if (!type.empty()) out += " " + type;
    if (!opt->get_default_str().empty()) out += "=" + opt->get_default_str();
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    return out;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    return describe(opt->get_description());
  }

 private:
  // A description in the right-hand column: wrapped to what is left of the line beside the
  // names (format_help indents each line it starts after a '\n').
  std::string describe(const std::string& d) const {
    return wrap(d, std::max(20, width_ - static_cast<int>(column_width_)));
  }

  // The root's options, which a subcommand takes too (before or after its name).
  std::string global_options(const CLI::App* app) const {
    const CLI::App* root = app;
    while (root->get_parent() != nullptr)
      root = root->get_parent();
    std::vector<const CLI::Option*> options = root->get_options([root](const CLI::Option* o) {
      return o != root->get_help_ptr() && !o->get_group().empty();
    });
    if (options.empty()) return "";
    return make_group("Global options (before or after the subcommand)", false, options);
  }

  int width_;
};

}  // namespace

std::shared_ptr<CLI::Formatter> help_formatter(int width) {
  return std::make_shared<HelpFormatter>(width);
}

}  // namespace commtool::cli
