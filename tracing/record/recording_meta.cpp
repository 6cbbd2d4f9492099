#include "tracing/record/recording_meta.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"

namespace commtool::record {

using nlohmann::json;

namespace {

// Whether the integer `value` holds is one of T's.
template <class T>
bool fits(const json& value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  const auto v = value.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    return v >= 0 && static_cast<uint64_t>(v) <= std::numeric_limits<T>::max();
  } else {
    return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
  }
}

template <class T>
T get(const json& j, const char* key) {
  const json& value = files::json_member(j, key);
  // nlohmann converts between numbers and from bool to numbers; a launcher that wrote "4" or
  // true for a number wrote something else than it meant.
  const bool ok = [&] {
    if constexpr (std::is_same_v<T, bool>) return value.is_boolean();
    if constexpr (std::is_same_v<T, std::string>) return value.is_string();
    if constexpr (std::is_floating_point_v<T>) return value.is_number();
    if constexpr (std::is_integral_v<T>) return value.is_number_integer();
    return true;
  }();
  // nlohmann stores an integer above int64's range unsigned and would wrap it when read signed
  // (18446744073709551615 read as -1), and narrows without a word: a value T cannot hold is
  // named as what it is.
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (ok && !fits<T>(value)) {
      throw usage_error(fmt::format("\"{}\": {} is out of range ({} to {})", key,
                                    excerpt(value.dump()), std::numeric_limits<T>::min(),
                                    std::numeric_limits<T>::max()));
    }
  }
  if (ok) {
    try {
      return value.get<T>();
    } catch (const json::exception&) {
    }
  }
  throw usage_error(fmt::format("\"{}\": {} has the wrong type", key, excerpt(value.dump())));
}

template <class T>
std::optional<T> get_or_null(const json& j, const char* key) {
  if (files::json_member(j, key).is_null()) return std::nullopt;
  return get<T>(j, key);
}

int64_t non_negative(const json& j, const char* key) {
  const auto v = get<int64_t>(j, key);
  if (v < 0) throw usage_error(fmt::format("\"{}\": {} is negative", key, v));
  return v;
}

double non_negative_seconds(const json& j, const char* key) {
  const auto v = get<double>(j, key);
  if (!std::isfinite(v) || v < 0) {
    throw usage_error(fmt::format("\"{}\": {} is not a number of seconds from 0", key, v));
  }
  return v;
}

// Errors inside a nested object name it: "ended": "wall_s": ...
template <class T, class Read>
std::optional<T> nested(const json& j, const char* key, Read read) {
  const json& value = files::json_member(j, key);
  if (value.is_null()) return std::nullopt;
  try {
    return read(value);
  } catch (const Error& e) {
    throw usage_error(fmt::format("\"{}\": {}", key, e.what()));
  }
}

RecordingEnd end_from_json(const json& j) {
  RecordingEnd e;
  e.at = get<std::string>(j, "at");
  e.wall_s = non_negative_seconds(j, "wall_s");
  e.exit_code = get_or_null<int>(j, "exit_code");
  e.signal = get_or_null<int>(j, "signal");
  e.killed_by_commtool = get<bool>(j, "killed_by_commtool");
  return e;
}

RecordingHang hang_from_json(const json& j) {
  RecordingHang h;
  h.detected_at = get<std::string>(j, "detected_at");
  h.monotonic_ns = non_negative(j, "monotonic_ns");
  h.quiet_s = non_negative_seconds(j, "quiet_s");
  return h;
}

json optional_json(const auto& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

int64_t launcher_wall_ns(const RecordingMeta& meta, int64_t monotonic_ns) {
  return meta.started_realtime_ns + (monotonic_ns - meta.started_monotonic_ns);
}

json to_json(const RecordingMeta& m) {
  json ended = nullptr, hang = nullptr;
  if (m.ended) {
    ended = {{"at", m.ended->at},
             {"wall_s", m.ended->wall_s},
             {"exit_code", optional_json(m.ended->exit_code)},
             {"signal", optional_json(m.ended->signal)},
             {"killed_by_commtool", m.ended->killed_by_commtool}};
  }
  if (m.hang) {
    hang = {{"detected_at", m.hang->detected_at},
            {"monotonic_ns", m.hang->monotonic_ns},
            {"quiet_s", m.hang->quiet_s}};
  }
  return {{"schema_version", kRecordingSchemaVersion},
          {"kind", kRecordingKind},
          {"commtool_version", m.commtool_version},
          {"host", m.host},
          {"command", m.command},
          {"started_at", m.started_at},
          {"started_realtime_ns", m.started_realtime_ns},
          {"started_monotonic_ns", m.started_monotonic_ns},
          {"hang_timeout_s", optional_json(m.hang_timeout_s)},
          {"kill_on_hang", m.kill_on_hang},
          {"cupti", m.cupti},
          {"plugin", m.plugin},
          {"ended", std::move(ended)},
          {"hang", std::move(hang)}};
}

RecordingMeta recording_meta_from_json(const json& j) {
  const auto kind = get<std::string>(j, "kind");
  if (kind != kRecordingKind) {
    throw usage_error(fmt::format("\"kind\": \"{}\" is not \"{}\"", excerpt(kind), kRecordingKind));
  }
  const auto version = get<int64_t>(j, "schema_version");
  if (version != kRecordingSchemaVersion) {
    throw usage_error(fmt::format("\"schema_version\": {} is not supported; this build reads {}",
                                  version, kRecordingSchemaVersion));
  }
  RecordingMeta m;
  m.commtool_version = get<std::string>(j, "commtool_version");
  m.host = get<std::string>(j, "host");
  const json& command = files::json_member(j, "command");
  if (!command.is_array()) throw usage_error("\"command\": expected an array of strings");
  for (size_t i = 0; i < command.size(); ++i) {
    if (!command[i].is_string()) {
      throw usage_error(fmt::format("\"command\"[{}]: expected a string", i));
    }
    m.command.push_back(command[i].get<std::string>());
  }
  m.started_at = get<std::string>(j, "started_at");
  m.started_realtime_ns = non_negative(j, "started_realtime_ns");
  m.started_monotonic_ns = non_negative(j, "started_monotonic_ns");
  if (!files::json_member(j, "hang_timeout_s").is_null()) {
    m.hang_timeout_s = non_negative_seconds(j, "hang_timeout_s");
  }
  m.kill_on_hang = get<bool>(j, "kill_on_hang");
  m.cupti = get<bool>(j, "cupti");
  m.plugin = get<std::string>(j, "plugin");
  m.ended = nested<RecordingEnd>(j, "ended", end_from_json);
  m.hang = nested<RecordingHang>(j, "hang", hang_from_json);
  return m;
}

RecordingMeta read_recording_meta(const std::filesystem::path& dir) {
  const std::string path = (dir / kRecordingMetaFile).string();
  try {
    return recording_meta_from_json(files::parse_json_bounded(files::read_input_file(path), path));
  } catch (const json::exception& e) {  // malformed JSON
    throw usage_error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  } catch (const Error& e) {
    // read_input_file and parse_json_bounded name the path already.
    const std::string what = e.what();
    if (what.starts_with(path)) throw;
    throw usage_error(fmt::format("{}: {}", path, what));
  }
}

}  // namespace commtool::record
