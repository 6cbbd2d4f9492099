// doctor's page: the verdict first, then each problem with its evidence and next step, then
// what passed (one line per GPU), what could not be read and what was skipped. And the same as
// one JSON document (schema_version 1) with the raw counters beside the checks, to set against
// `nvidia-smi -q`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "reports/doctor/doctor_checks.hpp"

namespace commtool::reports::doctor {

inline constexpr int kDoctorSchemaVersion = 1;

std::string render_doctor_text(const commtool::doctor::Evidence& e, const Verdict& v);
nlohmann::json doctor_to_json(const commtool::doctor::Evidence& e, const Verdict& v);

}  // namespace commtool::reports::doctor
