// The keys of the plugin's record lines as the fast reader (record_line_fast.cpp) knows them:
// every key's name and bit, each kind's key set and the order record_line.cpp's LineWriter
// writes them in, and each key's `"name":` as two 8-byte words for a compare at once. Kept
// apart so that the scanner reads on its own; nothing else includes this.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace commtool::nccl_profiler::fast_reader {

// Every key any kind of line has, except "k". A key outside its kind's set, a second "k", or one
// seen twice (nlohmann keeps the last) makes the scanner give up.
enum class Key : uint8_t {
  kV,
  kPid,
  kHost,
  kRealtime,
  kMono,
  kNccl,
  kComm,
  kRank,
  kNranks,
  kNodes,
  kName,
  kT,
  kIndex,
  kKind,
  kSeq,
  kFunc,
  kCount,
  kDtype,
  kPeer,
  kRoot,
  kAlgo,
  kProto,
  kCh,
  kWarps,
  kApi,
  kEnq,
  kGpu,
  kSeen,
  kKch,
  kComplete,
  kGraph,
  kLines,
  kSince,
  kCtx,
  kS,
  kC,
  kEv,
  kDev,
  kUnknown
};

static_assert(static_cast<unsigned>(Key::kUnknown) < 64, "a key set is a 64-bit mask");

constexpr uint64_t bit(Key key) {
  return uint64_t{1} << static_cast<unsigned>(key);
}

template <class... Keys>
constexpr uint64_t bits(Keys... keys) {
  return (bit(keys) | ...);
}

// `s`, whose size the caller has checked, is `literal`: a compare of a constant size, which the
// compiler turns into a load or two, where string_view's == calls memcmp.
template <size_t N>
constexpr bool is(std::string_view s, const char (&literal)[N]) {
  return std::char_traits<char>::compare(s.data(), literal, N - 1) == 0;
}

constexpr Key key_of(std::string_view s) {
  switch (s.size()) {
    case 1:
      if (is(s, "v")) return Key::kV;
      if (is(s, "t")) return Key::kT;
      if (is(s, "s")) return Key::kS;
      if (is(s, "c")) return Key::kC;
      break;
    case 2:
      if (is(s, "ch")) return Key::kCh;
      if (is(s, "ev")) return Key::kEv;
      break;
    case 3:
      if (is(s, "pid")) return Key::kPid;
      if (is(s, "ctx")) return Key::kCtx;
      if (is(s, "dev")) return Key::kDev;
      if (is(s, "seq")) return Key::kSeq;
      if (is(s, "api")) return Key::kApi;
      if (is(s, "enq")) return Key::kEnq;
      if (is(s, "gpu")) return Key::kGpu;
      if (is(s, "kch")) return Key::kKch;
      break;
    case 4:
      if (is(s, "comm")) return Key::kComm;
      if (is(s, "rank")) return Key::kRank;
      if (is(s, "kind")) return Key::kKind;
      if (is(s, "func")) return Key::kFunc;
      if (is(s, "peer")) return Key::kPeer;
      if (is(s, "root")) return Key::kRoot;
      if (is(s, "algo")) return Key::kAlgo;
      if (is(s, "seen")) return Key::kSeen;
      if (is(s, "host")) return Key::kHost;
      if (is(s, "mono")) return Key::kMono;
      if (is(s, "nccl")) return Key::kNccl;
      if (is(s, "name")) return Key::kName;
      break;
    case 5:
      if (is(s, "index")) return Key::kIndex;
      if (is(s, "count")) return Key::kCount;
      if (is(s, "dtype")) return Key::kDtype;
      if (is(s, "proto")) return Key::kProto;
      if (is(s, "warps")) return Key::kWarps;
      if (is(s, "graph")) return Key::kGraph;
      if (is(s, "nodes")) return Key::kNodes;
      if (is(s, "lines")) return Key::kLines;
      if (is(s, "since")) return Key::kSince;
      break;
    case 6:
      if (is(s, "nranks")) return Key::kNranks;
      break;
    case 8:
      if (is(s, "realtime")) return Key::kRealtime;
      if (is(s, "complete")) return Key::kComplete;
      break;
    default:
      break;
  }
  return Key::kUnknown;
}

// The keys of each kind: record_line.cpp's read_line reads every one of them with Fields::at, so
// each is required, and nothing else may appear (the slow reader ignores unknown keys; this one
// gives up).
inline constexpr uint64_t kProcKeys =
    bits(Key::kV, Key::kPid, Key::kHost, Key::kRealtime, Key::kMono, Key::kNccl);
// A comm line without "dev" (the first recordings) is the slow reader's.
inline constexpr uint64_t kCommKeys = bits(Key::kComm, Key::kRank, Key::kNranks, Key::kNodes,
                                           Key::kName, Key::kT, Key::kDev, Key::kNccl);
inline constexpr uint64_t kStartKeys =
    bits(Key::kComm, Key::kRank, Key::kIndex, Key::kKind, Key::kSeq, Key::kFunc, Key::kCount,
         Key::kDtype, Key::kPeer, Key::kT);
inline constexpr uint64_t kEndKeys =
    kStartKeys | bits(Key::kRoot, Key::kAlgo, Key::kProto, Key::kCh, Key::kWarps, Key::kApi,
                      Key::kEnq, Key::kGpu, Key::kSeen, Key::kKch, Key::kComplete, Key::kGraph);
inline constexpr uint64_t kAliveKeys = bits(Key::kT);
inline constexpr uint64_t kFinKeys = bits(Key::kComm, Key::kRank, Key::kT);
inline constexpr uint64_t kDropKeys = bits(Key::kLines, Key::kSince, Key::kT);
// record --cupti's lines that come by the thousand; its rare `cupti` line is the slow reader's.
inline constexpr uint64_t kWorkKeys = bits(Key::kCtx, Key::kS, Key::kC, Key::kGpu, Key::kNccl);
inline constexpr uint64_t kWaitKeys = bits(Key::kCtx, Key::kS, Key::kEv, Key::kC, Key::kT);
inline constexpr uint64_t kEventKeys = bits(Key::kCtx, Key::kS, Key::kEv, Key::kC);

// Each key's name, by Key.
inline constexpr std::string_view kKeyNames[] = {
    "v",     "pid",   "host",  "realtime", "mono", "nccl", "comm",  "rank",  "nranks", "nodes",
    "name",  "t",     "index", "kind",     "seq",  "func", "count", "dtype", "peer",   "root",
    "algo",  "proto", "ch",    "warps",    "api",  "enq",  "gpu",   "seen",  "kch",    "complete",
    "graph", "lines", "since", "ctx",      "s",    "c",    "ev",    "dev"};
static_assert(std::size(kKeyNames) == static_cast<size_t>(Key::kUnknown));
static_assert([] {
  for (size_t i = 0; i < std::size(kKeyNames); ++i) {
    if (key_of(kKeyNames[i]) != static_cast<Key>(i)) return false;
  }
  return true;
}());

// The keys of each kind in the order record_line.cpp's LineWriter writes them: the next key is
// nearly always the one expected, which Scanner::take_key checks in two 8-byte compares instead of
// reading a string and looking it up.
inline constexpr Key kProcOrder[] = {Key::kV,        Key::kPid,  Key::kHost,
                                     Key::kRealtime, Key::kMono, Key::kNccl};
inline constexpr Key kCommOrder[] = {Key::kComm, Key::kRank, Key::kNranks, Key::kNodes,
                                     Key::kName, Key::kT,    Key::kDev,    Key::kNccl};
inline constexpr Key kStartOrder[] = {Key::kComm, Key::kRank,  Key::kIndex, Key::kKind, Key::kSeq,
                                      Key::kFunc, Key::kCount, Key::kDtype, Key::kPeer, Key::kT};
inline constexpr Key kEndOrder[] = {
    Key::kComm,  Key::kRank,  Key::kIndex,    Key::kKind, Key::kSeq,  Key::kFunc,
    Key::kCount, Key::kDtype, Key::kPeer,     Key::kT,    Key::kRoot, Key::kAlgo,
    Key::kProto, Key::kCh,    Key::kWarps,    Key::kApi,  Key::kEnq,  Key::kGpu,
    Key::kSeen,  Key::kKch,   Key::kComplete, Key::kGraph};
inline constexpr Key kAliveOrder[] = {Key::kT};
inline constexpr Key kFinOrder[] = {Key::kComm, Key::kRank, Key::kT};
inline constexpr Key kDropOrder[] = {Key::kLines, Key::kSince, Key::kT};
inline constexpr Key kWorkOrder[] = {Key::kCtx, Key::kS, Key::kC, Key::kGpu, Key::kNccl};
inline constexpr Key kWaitOrder[] = {Key::kCtx, Key::kS, Key::kEv, Key::kC, Key::kT};
inline constexpr Key kEventOrder[] = {Key::kCtx, Key::kS, Key::kEv, Key::kC};

// `"name":` of a key as two little-endian 8-byte words and the masks of its bytes in them.
struct KeyPattern {
  uint64_t low = 0, high = 0, low_mask = 0, high_mask = 0;
  size_t size = 0;
};

inline constexpr std::array<KeyPattern, std::size(kKeyNames)> kKeyPatterns = [] {
  std::array<KeyPattern, std::size(kKeyNames)> patterns{};
  for (size_t k = 0; k < patterns.size(); ++k) {
    std::array<char, 16> text{};
    size_t n = 0;
    text[n++] = '"';
    for (char c : kKeyNames[k])
      text[n++] = c;
    text[n++] = '"';
    text[n++] = ':';
    KeyPattern& p = patterns[k];
    p.size = n;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t byte = static_cast<unsigned char>(text[i]);
      if (i < 8) {
        p.low |= byte << (8 * i);
        p.low_mask |= uint64_t{0xff} << (8 * i);
      } else {
        p.high |= byte << (8 * (i - 8));
        p.high_mask |= uint64_t{0xff} << (8 * (i - 8));
      }
    }
  }
  return patterns;
}();

}  // namespace commtool::nccl_profiler::fast_reader
