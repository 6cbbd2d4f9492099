// A reader of the data subset of Python's pickle format, as PyTorch's Flight Recorder writes its
// dumps (protocol 2; dicts, lists, tuples, str, int, float, bool, None, bytes), into JSON
// values. It never imports or calls anything: the opcodes that would (GLOBAL, STACK_GLOBAL,
// REDUCE, BUILD, NEWOBJ, INST, OBJ, EXT*, PERSID) are refused by name, as is every opcode it
// does not know. A pickle is a small program for a stack machine; this one runs it with the
// stack, the nesting, the memo and the values bounded (PickleLimits), and throws
// commtool::Error (exit 2) naming the byte offset and what was wrong, never crashing on a
// truncated or hostile file.
//
// Memo references (BINGET) share the object, as in Python, so a dict filled after it was
// memoised is seen filled; the JSON built at the end copies shared values, and the copies are
// counted against max_values, so a file of a few kB whose references double at every level
// cannot make gigabytes.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>

namespace commtool::pickle {

struct PickleLimits {
  // Values built, and values in the JSON (shared ones again): a dump of 2,000 entries holds
  // about 120,000.
  uint64_t max_values = 5'000'000;
  int max_depth = 64;              // containers inside containers
  uint64_t max_memo = 10'000'000;  // memo entries
};

// The value the pickle's STOP returns. Dict keys that are not strings become their JSON text
// (an int key 3 becomes "3"); tuples become arrays; bytes become strings (invalid UTF-8 is
// replaced when the JSON is printed); ints beyond 64 bits are refused.
nlohmann::json load(std::string_view bytes, const PickleLimits& limits = {});

}  // namespace commtool::pickle
