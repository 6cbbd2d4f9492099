// The parser's errors in commtool's words: "commtool trace: --minbyte: not an option of trace;
// did you mean --minbytes?" rather than "The following arguments were not expected: 8
// --minbyte". CLI11 decides what is wrong; this says it, naming the subcommand, the word and
// what was probably meant.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace commtool::cli {

// The candidate `word` was most probably meant as: one a typo away (an edit, a swap of two
// neighbours; two for words of six characters or more, leading dashes not counted), or the one
// it starts (at least three characters). Nothing when none is that close, or two are equally.
std::optional<std::string> did_you_mean(const std::string& word,
                                        const std::vector<std::string>& candidates);

// The message for a parse error of `root`'s command line, after CLI11 gave up (ends in '\n').
std::string parse_error_text(const CLI::App& root, const CLI::Error& e);

}  // namespace commtool::cli
