#include "probes/base/progress_line.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "probes/base/error.hpp"

namespace commtool::progress {

namespace {

bool quiet = false;
std::string title = "commtool";
Line* shown_line = nullptr;  // the one Line that draws

constexpr auto kShowAfter = std::chrono::seconds(1);
constexpr auto kEvery = std::chrono::milliseconds(200);

bool watched() {
  if (quiet || !::isatty(STDERR_FILENO)) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

int terminal_width() {
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

std::string clock_text(double s) {
  const auto total = static_cast<long long>(std::llround(s));
  if (total >= 3600)
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  return fmt::format("{}:{:02}", total / 60, total % 60);
}

}  // namespace

void configure(bool q, std::string t) {
  quiet = q;
  title = std::move(t);
}

std::string line_text(std::string_view t, int done, int total, std::string_view what,
                      double elapsed_s, int width) {
  std::string text = fmt::format("{}: ", t);
  if (total > 0) text += fmt::format("{}/{} ", done, total);
  text += what;
  if (total > 0 && done > 0 && done < total) {
    text += fmt::format(", about {} left", clock_text(elapsed_s / done * (total - done)));
  }
  // Escaped as every message (a label may quote a file's word), then cut to the line: one
  // column fewer than the terminal, so the cursor never wraps.
  text = printable_message(text, /*one_line=*/true);
  const auto room = static_cast<size_t>(std::max(width - 1, 10));
  if (text.size() > room) text.resize(room);
  return text;
}

Line::Line() {
  owner_ = shown_line == nullptr && watched();
  if (owner_) shown_line = this;
}

Line::~Line() {
  if (!owner_) return;
  if (shown_) std::fputs("\r\x1b[K", stderr);
  std::fflush(stderr);
  shown_line = nullptr;
}

void Line::update(int done, int total, std::string_view what) {
  if (!owner_) {
    if (shown_line != nullptr) shown_line->draw();
    return;
  }
  done_ = done;
  total_ = total;
  what_ = what;
  draw();
}

void Line::draw() {
  const Clock::time_point now = Clock::now();
  if (now - start_ < kShowAfter || now - last_ < kEvery) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::string text = line_text(title, done_, total_, what_, elapsed, terminal_width());
  std::fprintf(stderr, "\r%s\x1b[K", text.c_str());
  std::fflush(stderr);
  shown_ = true;
}

}  // namespace commtool::progress
