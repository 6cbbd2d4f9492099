// One job's verdict from what it left without commtool (tracing/crossrank/job_artifacts.hpp):
// the Flight Recorder dumps' cross-rank verdict, then each RAS answer's findings, then what
// NCCL's logs say (context: no verdict of their own), as text and as one JSON document.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tracing/crossrank/job_artifacts.hpp"

namespace commtool::reports {

struct ArtifactsReport {
  std::string text;
  nlohmann::json doc;  // schema_version 1, command "report"
  bool fault = false;  // a finding of the dumps or of RAS
};

// Reads every file (bounded) and analyses them. Throws Error(kUsage) when the files found hold
// no dump a reader accepts and nothing else.
ArtifactsReport report_job_artifacts(const crossrank::JobArtifacts& artifacts);

}  // namespace commtool::reports
