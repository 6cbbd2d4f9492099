// How commtool's --help reads: descriptions wrapped to the terminal (80 columns when standard
// output is not one), value names without the parser's validator notes ("N=20", not
// "INT:INT in [1 - 100000]=20"), and in every subcommand's help the global options it also
// takes, so that `commtool topo --help` shows --json and --output.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace commtool::cli {

// Columns of the terminal on standard output; 80 when it is not a terminal. Clamped to 50-200.
int help_width();

// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole);
// the line breaks it already has are kept.
std::string wrap(const std::string& text, int width);

// The formatter the root app and (by inheritance) every subcommand use.
std::shared_ptr<CLI::Formatter> help_formatter(int width);

}  // namespace commtool::cli
