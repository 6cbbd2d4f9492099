// The progress line's text (probes/base/progress_line.hpp): what runs, i of n, the time left
// from the pace so far, cut to the terminal, escaped as every message.
#include <gtest/gtest.h>

#include "probes/base/progress_line.hpp"

using commtool::progress::line_text;

TEST(ProgressLine, SaysStepsAndTheTimeLeftAtThePaceSoFar) {
  EXPECT_EQ(line_text("commtool trace", 3, 12, "traced allreduce 1 MiB sync", 30.0, 120),
            "commtool trace: 3/12 traced allreduce 1 MiB sync, about 1:30 left");
  EXPECT_EQ(line_text("commtool probe", 1, 2, "GPU 1 latency", 4000.0, 120),
            "commtool probe: 1/2 GPU 1 latency, about 1:06:40 left");
}

TEST(ProgressLine, NoTimeLeftBeforeTheFirstStepOrWithoutACount) {
  EXPECT_EQ(line_text("commtool trace", 0, 12, "untraced allreduce 8 B sync", 5.0, 120),
            "commtool trace: 0/12 untraced allreduce 8 B sync");
  EXPECT_EQ(line_text("commtool trace", 0, 0, "4 workers joining the communicator", 5.0, 120),
            "commtool trace: 4 workers joining the communicator");
}

TEST(ProgressLine, CutToOneColumnLessThanTheTerminalAndEscaped) {
  const std::string t = line_text("commtool trace", 1, 2, std::string(200, 'x'), 1.0, 50);
  EXPECT_EQ(t.size(), 49u);
  EXPECT_EQ(line_text("c", 0, 0, "a\x1b[31m", 0, 80), "c: a\\x1b[31m");
}
