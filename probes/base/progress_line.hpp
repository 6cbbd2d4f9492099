// One updating line on standard error that says what is running, i of n, and the time left:
//   commtool trace: 12/56 allreduce 1 MiB async-wait, about 0:42 left
// Shown only where someone watches: standard error is a terminal, TERM is not "dumb", -q was
// not given; never written into a file, a pipe or the report. It appears once the work has
// run for a second (short work stays silent), is rewritten at most five times a second, and is
// erased when the work ends, so the report and the messages that follow start on a clean line.
// One line at a time: a Line made while another is shown stays silent, and its updates only
// refresh the one shown (a sweep's line, over the worker groups it starts, keeps its time
// current). For the main thread only.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace commtool::progress {

// Set once by the command line: -q, and the words the line starts with ("commtool trace").
void configure(bool quiet, std::string title);

// The line's text, cut to `width` columns: "<title>: <done>/<total> <what>, about M:SS left".
// No time left before the first step is done, nor when total is 0 (unknown).
std::string line_text(std::string_view title, int done, int total, std::string_view what,
                      double elapsed_s, int width);

class Line {
 public:
  Line();  // silent unless the conditions above hold and no other Line is shown
  ~Line();
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;

  // `done` of `total` steps are finished and `what` runs now.
  void update(int done, int total, std::string_view what);

 private:
  using Clock = std::chrono::steady_clock;
  void draw();
  bool owner_ = false;
  bool shown_ = false;
  int done_ = 0;
  int total_ = 0;
  std::string what_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = {};
};

}  // namespace commtool::progress
