// Standalone SVG 1.1 plots, drawn by hand so that commtool needs no plotting library: a log-log
// line plot (`diagnose allreduce --plot`: time against message size, one line per path) and a
// heat map (`diagnose ep`: the rank×rank send matrix). Each returns the whole document as a
// string; the caller writes it with write_atomically.
//
// Sharp edges:
//  - Log axes cannot show zero, negatives, NaN or infinity: such points are dropped without a
//    word. A series left with no point is drawn only in the legend, as "NAME (no data)".
//  - Same input, byte-identical output: every coordinate is printed with fixed precision, fmt
//    ignores the locale, and nothing depends on time or addresses. Golden files and diffs work.
//  - SVG has no text layout, so widths of labels are estimated (~7 px a character at 12 px,
//    estimated_text_width): a very long name can run past the edge of the legend or overlap a
//    neighbouring tick label. The title (16 px) is the exception: the document widens for it
//    up to 760 px, and a longer title wraps at spaces (a word too long for a line, such as a
//    file path, is broken where the line is full), each line fitting by the estimate.
//  - The heat map's colour bar is a gradient with a fixed id ("heat-scale"): two heat maps
//    pasted inline into one HTML page would share it. Standalone files are unaffected.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace commtool::reports {

// Where an axis puts its ticks and how it labels them.
enum class AxisUnit {
  Plain,         // ticks at powers of 10, labelled as numbers: "0.1", "1", "1000", "1e+06"
  Bytes,         // ticks at powers of 2, labelled as binary sizes: "512 B", "1 KiB", "4 MiB"
  Microseconds,  // ticks at powers of 10 of a value in us: "100 ns", "1 us", "10 ms", "1 s"
};

struct PlotPoint {
  double x = 0;
  double y = 0;
};

struct PlotSeries {
  std::string name;
  std::vector<PlotPoint> points;  // joined in the order given; the caller sorts them by x
};

// Both axes logarithmic. Series take the Okabe-Ito colours by their index in `series` (so a path
// keeps its colour when another has no data); past eight, colours repeat with a dash pattern.
struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  AxisUnit x_unit = AxisUnit::Plain;
  AxisUnit y_unit = AxisUnit::Plain;
  std::vector<PlotSeries> series;
};

std::string render_line_plot_svg(const LinePlot& plot);

// A matrix whose rows send to its columns, coloured on a viridis-like scale from 0 (darkest) to
// the largest value (yellow). Every cell has a tooltip "src R -> dst C: VALUE UNIT" (R and C
// from the tick labels); values are also printed in the cells when the matrix is at most 16×16.
// Ragged rows are padded, and padding and non-finite values are drawn grey as "no data";
// negative values take the colour of 0.
struct HeatMap {
  std::string title;
  std::string row_label;                    // "source rank"
  std::string col_label;                    // "destination rank"
  std::vector<std::string> row_ticks;       // one per row; missing ones read as the row index
  std::vector<std::string> col_ticks;       // one per column; likewise
  std::vector<std::vector<double>> values;  // values[row][col]; may be non-square or empty
  std::string value_unit;                   // "MiB"
};

std::string render_heat_map_svg(const HeatMap& map);

// The renderers' estimate of how wide `text` is at `font_size` px: 7 px a character at 12 px,
// scaled with the size (characters, not bytes, of UTF-8).
double estimated_text_width(std::string_view text, double font_size);

// Text made safe for XML character data and attribute values: & < > " ' become entities, and
// the control characters XML 1.0 forbids (all below 0x20 but tab, newline, return) are dropped.
std::string xml_escape(std::string_view text);

// "#rrggbb" at t in [0, 1] of the heat map's scale: interpolated between five viridis stops;
// t outside [0, 1] or NaN is clamped (NaN to 0).
std::string sequential_colour(double t);

}  // namespace commtool::reports
