#include "tracing/doctor/isolate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "probes/base/int_runs.hpp"

namespace commtool::doctor {

namespace {

class Search {
 public:
  Search(const SubsetRun& run, int max_runs) : run_(run), max_runs_(max_runs) {}

  // Which of two sets is bad: one that fails is; of two that ran, the one slower than
  // kSlowShare of the other is. A set of one GPU has no collective to run: never bad.
  std::pair<bool, bool> compare(const std::vector<int>& x, const std::vector<int>& y) {
    const RunOutcome a = outcome(x), b = outcome(y);
    bool bad_x = x.size() > 1 && !a.ok, bad_y = y.size() > 1 && !b.ok;
    if (x.size() > 1 && y.size() > 1 && a.ok && b.ok) {
      bad_x = a.busbw < kSlowShare * b.busbw;
      bad_y = b.busbw < kSlowShare * a.busbw;
    }
    return {bad_x, bad_y};
  }

  void search(const std::vector<int>& s) {
    if (s.size() == 2) return resolve_pair(s[0], s[1]);
    if (s.size() <= 1 || exhausted()) {
      if (!s.empty()) add(s, false, "the search stopped here");
      return;
    }
    const auto mid = s.begin() + static_cast<std::ptrdiff_t>(s.size() / 2);
    const std::vector<int> a(s.begin(), mid), b(mid, s.end());
    const auto [bad_a, bad_b] = compare(a, b);
    if (bad_a && !bad_b) remember_good(b);
    if (bad_b && !bad_a) remember_good(a);
    if (bad_a) search(a);
    if (bad_b) search(b);
    if (bad_a || bad_b) return;
    remember_good(a);
    remember_good(b);
    // Neither half alone: a link between them. Narrow B beside the whole of A, then A.
    const std::vector<int> b_side = narrow(b, a);
    const std::vector<int> a_side = narrow(a, b_side);
    if (a_side.size() == 1 && b_side.size() == 1) return resolve_pair(a_side[0], b_side[0]);
    std::vector<int> ends = a_side;
    ends.insert(ends.end(), b_side.begin(), b_side.end());
    add(ends, true,
        fmt::format("GPUs {} and {} are fine apart and bad together", int_runs(a), int_runs(b)));
  }

  // Two GPUs bad together: beside a GPU known good, one of them bad alone is the GPU at fault;
  // neither is: the link between them.
  void resolve_pair(int x, int y) {
    int good = -1;
    for (int g : good_)
      if (g != x && g != y) good = g;
    if (good >= 0 && !exhausted()) {
      std::vector<int> with_x{x, good}, with_y{y, good};
      std::sort(with_x.begin(), with_x.end());
      std::sort(with_y.begin(), with_y.end());
      const auto [bad_x, bad_y] = compare(with_x, with_y);
      if (bad_x != bad_y) {
        return add({bad_x ? x : y}, false,
                   fmt::format("bad beside GPU {} where GPU {} is not", good, bad_x ? y : x));
      }
      if (!bad_x) {
        return add({x, y}, true,
                   fmt::format("each is fine beside GPU {}; together they are bad", good));
      }
    }
    add({x, y}, true, "bad together; no GPU known good to tell the GPU from the link");
  }

  void remember_good(const std::vector<int>& gpus) {
    if (gpus.size() > 1) good_.insert(good_.end(), gpus.begin(), gpus.end());
  }

  Isolation result() {
    out_.runs = runs_;
    return std::move(out_);
  }

 private:
  // The smallest part of `side` that is still bad with all of `other` beside it.
  std::vector<int> narrow(std::vector<int> side, const std::vector<int>& other) {
    while (side.size() > 1 && !exhausted()) {
      const auto mid = side.begin() + static_cast<std::ptrdiff_t>(side.size() / 2);
      std::vector<int> first(side.begin(), mid), second(mid, side.end());
      std::vector<int> with_first = other, with_second = other;
      with_first.insert(with_first.end(), first.begin(), first.end());
      with_second.insert(with_second.end(), second.begin(), second.end());
      std::sort(with_first.begin(), with_first.end());
      std::sort(with_second.begin(), with_second.end());
      const auto [bad_first, bad_second] = compare(with_first, with_second);
      if (bad_first == bad_second) break;  // both or neither: it needs GPUs of both parts
      side = bad_first ? first : second;
    }
    return side;
  }

  RunOutcome outcome(const std::vector<int>& gpus) {
    if (gpus.size() < 2) return {true, 0, ""};
    const RunOutcome o = run_(gpus);
    ++runs_;
    out_.log.push_back(o.ok ? fmt::format("GPUs {}: {:.1f} GB/s", int_runs(gpus), o.busbw)
                            : fmt::format("GPUs {}: failed: {}", int_runs(gpus), o.error));
    return o;
  }

  bool exhausted() const { return runs_ + 2 > max_runs_; }

  void add(std::vector<int> gpus, bool between, std::string why) {
    std::sort(gpus.begin(), gpus.end());
    out_.suspects.push_back({std::move(gpus), between, std::move(why)});
  }

  const SubsetRun& run_;
  int max_runs_;
  int runs_ = 0;
  std::vector<int> good_;  // GPUs of a set that ran well beside a bad one
  Isolation out_;
};

}  // namespace

Isolation isolate(const std::vector<int>& gpus, const SubsetRun& run, int max_runs) {
  Search s(run, max_runs);
  s.search(gpus);
  return s.result();
}

}  // namespace commtool::doctor
