#include "reports/format/svg_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <sstream>

namespace commtool::reports {

namespace {

// Okabe & Ito, "Color Universal Design" (2008): distinguishable under the common colour-vision
// deficiencies. Black last, so the first lines drawn are the coloured ones.
constexpr std::array<const char*, 8> kSeriesColours = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                                       "#e69f00", "#56b4e9", "#f0e442", "#000000"};
// The first eight series are solid; each further round of the palette gets the next pattern.
constexpr std::array<const char*, 4> kDashes = {"", "6 3", "2 3", "8 3 2 3"};

struct Rgb {
  int r, g, b;
};
// Stops of matplotlib's viridis at 0, 0.25, 0.5, 0.75, 1: perceptually uniform, readable in
// grey and by colour-blind readers.
constexpr std::array<Rgb, 5> kViridis = {{{0x44, 0x01, 0x54},
                                          {0x3b, 0x52, 0x8b},
                                          {0x21, 0x91, 0x8c},
                                          {0x5e, 0xc9, 0x62},
                                          {0xfd, 0xe7, 0x25}}};
constexpr const char* kNoDataFill = "#cccccc";
constexpr const char* kGridColour = "#e0e0e0";
constexpr double kCharWidth = 7;  // estimate at font-size 12; see the header

using Out = std::back_insert_iterator<std::string>;

// Counts and indices turned into pixel arithmetic (exact far beyond any plot's size).
double as_double(size_t n) {
  return static_cast<double>(n);
}

std::string num(double v) {
  return fmt::format("{:.2f}", v);
}

// Characters of UTF-8 text (bytes that do not continue a character), and the byte offset of
// the first `n` of them.
size_t glyphs(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

size_t byte_offset(std::string_view text, size_t n) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == n) return i;
  }
  return text.size();
}

constexpr double kTitleFontSize = 16;
constexpr double kTitleLine = 20;       // baseline to baseline
constexpr double kTitleMargin = 10;     // kept free at each side of a title line
constexpr double kMaxTitleWidth = 760;  // a document widens for its title up to this
constexpr double kTitleBaseline = 28;   // of the first line

// The title in lines that each fit `width` by the estimate: broken at spaces, and a word too
// long for a line of its own (a file path) broken where the line is full.
std::vector<std::string> title_lines(const std::string& title, double width) {
  const auto room = static_cast<size_t>(std::max(
      1.0, std::floor((width - 2 * kTitleMargin) / estimated_text_width("x", kTitleFontSize))));
  std::vector<std::string> lines;
  std::string line;
  auto flush = [&] {
    if (!line.empty()) lines.push_back(std::move(line));
    line.clear();
  };
  std::istringstream words(title);
  for (std::string word; words >> word;) {
    const size_t need = glyphs(line) + (line.empty() ? 0 : 1) + glyphs(word);
    if (need > room) flush();
    while (glyphs(word) > room) {
      const size_t cut = byte_offset(word, room);
      lines.push_back(word.substr(0, cut));
      word.erase(0, cut);
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  flush();
  if (lines.empty()) lines.emplace_back();
  return lines;
}

// A document width that leaves a title of one line room where it can: at least `content`, and
// as wide as the title up to kMaxTitleWidth (a longer one wraps).
double width_for_title(double content, const std::string& title) {
  return std::max(content, std::min(kMaxTitleWidth, estimated_text_width(title, kTitleFontSize) +
                                                        2 * kTitleMargin));
}

// How much lower than with a one-line title the plot must start.
double title_extra(const std::vector<std::string>& lines) {
  return kTitleLine * as_double(lines.size() - 1);
}

void open_document(std::string& svg, double width, double height, const std::string& title,
                   const std::vector<std::string>& lines) {
  fmt::format_to(Out(svg),
                 "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" "
                 "height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" "
                 "font-size=\"12\">\n<title>{2}</title>\n"
                 "<rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n",
                 num(width), num(height), xml_escape(title));
  for (size_t i = 0; i < lines.size(); ++i) {
    fmt::format_to(Out(svg),
                   "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{:g}\">{}</text>\n",
                   num(width / 2), num(kTitleBaseline + kTitleLine * as_double(i)), kTitleFontSize,
                   xml_escape(lines[i]));
  }
}

void text(std::string& svg, double x, double y, const char* anchor, const std::string& content,
          const std::string& extra = "") {
  fmt::format_to(Out(svg), "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}>{}</text>\n", num(x),
                 num(y), anchor, extra, xml_escape(content));
}

void vertical_text(std::string& svg, double x, double y, const std::string& content) {
  text(svg, x, y, "middle", content,
       fmt::format(" transform=\"rotate(-90 {} {})\"", num(x), num(y)));
}

// ---- line plot ----

bool drawable(const PlotPoint& p) {
  return std::isfinite(p.x) && std::isfinite(p.y) && p.x > 0 && p.y > 0;
}

int floor_to(int v, int step) {
  return v >= 0 ? v / step * step : -((-v + step - 1) / step) * step;
}

// A log axis over whole powers of its base, exponents lo..hi, a tick every `step` exponents.
struct LogAxis {
  AxisUnit unit = AxisUnit::Plain;
  int lo = 0, hi = 1, step = 1;

  double exponent(double v) const { return unit == AxisUnit::Bytes ? std::log2(v) : std::log10(v); }
  double fraction(double v) const { return (exponent(v) - lo) / (hi - lo); }
};

// Padded out to whole powers (and to multiples of the tick step, so both ends carry a tick).
// The steps divide 10, so byte ticks always include the KiB/MiB/GiB boundaries in range.
LogAxis make_axis(double min_value, double max_value, AxisUnit unit) {
  LogAxis axis{unit};
  if (!(min_value > 0 && max_value >= min_value)) return axis;  // no data: one decade/octave
  constexpr double kSlack = 1e-9;  // log10(1000) may come out a hair off 3
  const int lo = static_cast<int>(std::floor(axis.exponent(min_value) + kSlack));
  int hi = static_cast<int>(std::ceil(axis.exponent(max_value) - kSlack));
  if (hi <= lo) hi = lo + 1;
  constexpr int kMaxTicks = 12;
  for (int step : {1, 2, 5, 10, 20, 50, 100, 200, 500}) {
    axis.step = step;
    axis.lo = floor_to(lo, step);
    axis.hi = -floor_to(-hi, step);
    if ((axis.hi - axis.lo) / step <= kMaxTicks) break;
  }
  return axis;
}

std::string byte_label(int exponent) {
  constexpr std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (exponent < 0) return fmt::format("{:g} B", std::ldexp(1.0, exponent));
  const int unit = std::min(exponent / 10, static_cast<int>(kUnits.size()) - 1);
  return fmt::format("{:g} {}", std::ldexp(1.0, exponent - 10 * unit), kUnits[unit]);
}

std::string duration_label(double us) {
  if (us < 1) return fmt::format("{:g} ns", us * 1e3);
  if (us < 1e3) return fmt::format("{:g} us", us);
  if (us < 1e6) return fmt::format("{:g} ms", us / 1e3);
  return fmt::format("{:g} s", us / 1e6);
}

std::string tick_label(int exponent, AxisUnit unit) {
  switch (unit) {
    case AxisUnit::Bytes:
      return byte_label(exponent);
    case AxisUnit::Microseconds:
      return duration_label(std::pow(10.0, exponent));
    case AxisUnit::Plain:
      break;
  }
  return fmt::format("{:g}", std::pow(10.0, exponent));
}

struct PlotArea {
  double left, top, width, height;
  double bottom() const { return top + height; }
  double right() const { return left + width; }
};

void draw_axes(std::string& svg, const PlotArea& area, const LogAxis& x, const LogAxis& y) {
  for (int e = x.lo; e <= x.hi; e += x.step) {
    const double px = area.left + area.width * (e - x.lo) / (x.hi - x.lo);
    fmt::format_to(Out(svg), "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>\n",
                   num(px), num(area.top), num(area.bottom()), kGridColour);
    text(svg, px, area.bottom() + 18, "middle", tick_label(e, x.unit), " class=\"tick\"");
  }
  for (int e = y.lo; e <= y.hi; e += y.step) {
    const double py = area.bottom() - area.height * (e - y.lo) / (y.hi - y.lo);
    fmt::format_to(Out(svg), "<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\" stroke=\"{3}\"/>\n",
                   num(py), num(area.left), num(area.right()), kGridColour);
    text(svg, area.left - 6, py + 4, "end", tick_label(e, y.unit), " class=\"tick\"");
  }
  fmt::format_to(Out(svg),
                 "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
                 "stroke=\"#000000\"/>\n",
                 num(area.left), num(area.top), num(area.width), num(area.height));
}

// stroke and, past the eighth series, a dash pattern
std::string series_stroke(size_t index) {
  const char* dash = kDashes[(index / kSeriesColours.size()) % kDashes.size()];
  return fmt::format("stroke=\"{}\" stroke-width=\"2\"{}",
                     kSeriesColours[index % kSeriesColours.size()],
                     *dash ? fmt::format(" stroke-dasharray=\"{}\"", dash) : "");
}

}  // namespace

double estimated_text_width(std::string_view text, double font_size) {
  return kCharWidth * font_size / 12 * as_double(glyphs(text));
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += c;
    }
  }
  return out;
}

std::string sequential_colour(double t) {
  t = std::isnan(t) ? 0.0 : std::clamp(t, 0.0, 1.0);
  const double position = t * (kViridis.size() - 1);
  const size_t i = std::min(static_cast<size_t>(position), kViridis.size() - 2);
  const double f = position - static_cast<double>(i);
  auto mix = [f](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * f)); };
  const Rgb &a = kViridis[i], &b = kViridis[i + 1];
  return fmt::format("#{:02x}{:02x}{:02x}", mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b));
}

std::string render_line_plot_svg(const LinePlot& plot) {
  std::vector<std::vector<PlotPoint>> kept(plot.series.size());
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double x_min = kInf, x_max = 0, y_min = kInf, y_max = 0;
  size_t longest_name = 0;
  for (size_t s = 0; s < plot.series.size(); ++s) {
    for (const PlotPoint& p : plot.series[s].points) {
      if (!drawable(p)) continue;
      kept[s].push_back(p);
      x_min = std::min(x_min, p.x), x_max = std::max(x_max, p.x);
      y_min = std::min(y_min, p.y), y_max = std::max(y_max, p.y);
    }
    longest_name = std::max(longest_name, plot.series[s].name.size() + (kept[s].empty() ? 10 : 0));
  }
  const LogAxis x_axis = make_axis(x_min, x_max, plot.x_unit);
  const LogAxis y_axis = make_axis(y_min, y_max, plot.y_unit);

  constexpr double kLegendRow = 18;
  const double legend_x = 90 + 560 + 30;
  const double width = width_for_title(
      legend_x + std::max(140.0, 40 + kCharWidth * as_double(longest_name)), plot.title);
  const std::vector<std::string> lines = title_lines(plot.title, width);
  const PlotArea area{90, 50 + title_extra(lines), 560, 380};
  const double height =
      std::max(area.bottom() + 60, area.top + kLegendRow * as_double(plot.series.size() + 1));

  std::string svg;
  open_document(svg, width, height, plot.title, lines);
  draw_axes(svg, area, x_axis, y_axis);
  text(svg, area.left + area.width / 2, area.bottom() + 45, "middle", plot.x_label);
  vertical_text(svg, 20, area.top + area.height / 2, plot.y_label);

  for (size_t s = 0; s < kept.size(); ++s) {
    if (kept[s].empty()) continue;
    std::string points;
    std::string markers;
    const char* colour = kSeriesColours[s % kSeriesColours.size()];
    for (const PlotPoint& p : kept[s]) {
      const double px = area.left + area.width * x_axis.fraction(p.x);
      const double py = area.bottom() - area.height * y_axis.fraction(p.y);
      points += fmt::format("{}{},{}", points.empty() ? "" : " ", num(px), num(py));
      markers += fmt::format("<circle class=\"marker\" cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"/>\n",
                             num(px), num(py), colour);
    }
    fmt::format_to(Out(svg), "<polyline class=\"series\" points=\"{}\" fill=\"none\" {}/>\n{}",
                   points, series_stroke(s), markers);
  }

  for (size_t s = 0; s < plot.series.size(); ++s) {
    const double y = area.top + 10 + kLegendRow * as_double(s);
    svg += "<g class=\"legend-entry\">\n";
    if (kept[s].empty()) {
      text(svg, legend_x + 30, y + 4, "start", plot.series[s].name + " (no data)",
           " fill=\"#777777\"");
    } else {
      fmt::format_to(Out(svg),
                     "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" {3}/>\n"
                     "<circle cx=\"{4}\" cy=\"{1}\" r=\"3\" fill=\"{5}\"/>\n",
                     num(legend_x), num(y), num(legend_x + 24), series_stroke(s),
                     num(legend_x + 12), kSeriesColours[s % kSeriesColours.size()]);
      text(svg, legend_x + 30, y + 4, "start", plot.series[s].name);
    }
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

namespace {

// Numbers short enough to fit a cell of 35 px at font-size 10.
std::string cell_value(double v) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 100) return fmt::format("{:.0f}", v);
  if (std::fabs(v) >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string tick_or_index(const std::vector<std::string>& ticks, size_t i) {
  return i < ticks.size() ? ticks[i] : std::to_string(i);
}

size_t longest(const std::vector<std::string>& labels) {
  size_t n = 0;
  for (const std::string& s : labels)
    n = std::max(n, s.size());
  return n;
}

void draw_colour_bar(std::string& svg, double x, double top, double height, double max_value,
                     const std::string& unit) {
  svg += "<defs><linearGradient id=\"heat-scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  for (size_t i = 0; i < kViridis.size(); ++i) {
    const double offset = as_double(i) / as_double(kViridis.size() - 1);
    fmt::format_to(Out(svg), "<stop offset=\"{}\" stop-color=\"{}\"/>\n", num(offset),
                   sequential_colour(offset));
  }
  svg += "</linearGradient></defs>\n";
  fmt::format_to(Out(svg),
                 "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"{}\" fill=\"url(#heat-scale)\" "
                 "stroke=\"#000000\"/>\n",
                 num(x), num(top), num(height));
  const std::string suffix = unit.empty() ? "" : " " + unit;
  text(svg, x + 22, top + 10, "start", fmt::format("{:.2f}{}", max_value, suffix),
       " class=\"scale-max\"");
  text(svg, x + 22, top + height, "start", "0" + suffix, " class=\"scale-min\"");
}

}  // namespace

std::string render_heat_map_svg(const HeatMap& map) {
  const size_t rows = map.values.size();
  size_t cols = 0;
  double max_value = 0;
  for (const auto& row : map.values) {
    cols = std::max(cols, row.size());
    for (double v : row)
      if (std::isfinite(v)) max_value = std::max(max_value, v);
  }
  // 560 px across the larger dimension, cells between 2 and 40 px.
  const double cell =
      rows && cols ? std::clamp(560.0 / as_double(std::max(rows, cols)), 2.0, 40.0) : 0;
  const bool print_values = rows <= 16 && cols <= 16;
  // Label every k-th row and column, so tick labels 12 px high never overlap.
  const size_t label_every = cell > 0 ? static_cast<size_t>(std::ceil(12 / cell)) : 1;

  const double left = 40 + kCharWidth * as_double(std::max<size_t>(longest(map.row_ticks), 2));
  const double grid_w = cell * as_double(cols), grid_h = cell * as_double(rows);
  const double bar_x = left + grid_w + 30, bar_h = std::max(grid_h, 120.0);
  const std::string max_label = fmt::format("{:.2f} {}", max_value, map.value_unit);
  const double width =
      width_for_title(bar_x + 16 + 30 + kCharWidth * as_double(max_label.size()), map.title);
  const std::vector<std::string> lines = title_lines(map.title, width);
  const double top = 50 + title_extra(lines);
  const double height = top + bar_h + 60;

  std::string svg;
  open_document(svg, width, height, map.title, lines);
  if (rows == 0 || cols == 0) text(svg, left + 60, top + 60, "middle", "no data");
  for (size_t r = 0; r < rows; ++r) {
    const double y = top + cell * as_double(r);
    for (size_t c = 0; c < cols; ++c) {
      const double x = left + cell * as_double(c);
      const bool has = c < map.values[r].size() && std::isfinite(map.values[r][c]);
      const double v = has ? map.values[r][c] : 0;
      const double t = max_value > 0 ? v / max_value : 0;  // an all-zero matrix is all t = 0
      const std::string tip = fmt::format(
          "src {} -> dst {}: {}", tick_or_index(map.row_ticks, r), tick_or_index(map.col_ticks, c),
          has ? fmt::format("{:.2f} {}", v, map.value_unit) : "no data");
      fmt::format_to(Out(svg),
                     "<rect class=\"cell\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                     "fill=\"{}\"><title>{}</title></rect>\n",
                     num(x), num(y), num(cell), num(cell), has ? sequential_colour(t) : kNoDataFill,
                     xml_escape(tip));
      if (print_values && has) {
        text(svg, x + cell / 2, y + cell / 2 + 3.5, "middle", cell_value(v),
             fmt::format(" class=\"cell-value\" font-size=\"10\" fill=\"{}\"",
                         t < 0.6 ? "#ffffff" : "#000000"));  // viridis is dark below ~0.6
      }
    }
    if (r % label_every == 0)
      text(svg, left - 6, y + cell / 2 + 4, "end", tick_or_index(map.row_ticks, r));
  }
  for (size_t c = 0; c < cols; c += label_every)
    text(svg, left + cell * as_double(c) + cell / 2, top + grid_h + 16, "middle",
         tick_or_index(map.col_ticks, c));
  text(svg, left + grid_w / 2, top + grid_h + 38, "middle", map.col_label);
  vertical_text(svg, 16, top + grid_h / 2, map.row_label);
  draw_colour_bar(svg, bar_x, top, bar_h, max_value, map.value_unit);
  svg += "</svg>\n";
  return svg;
}

}  // namespace commtool::reports
