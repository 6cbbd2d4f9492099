#include "probes/topo/link_rate.hpp"

#include <cstdlib>

namespace commtool::topo {

double pcie_lane_gtps(int gen) {
  switch (gen) {
    case 1:
      return 2.5;
    case 2:
      return 5.0;
    case 3:
      return 8.0;
    case 4:
      return 16.0;
    case 5:
      return 32.0;
    case 6:
      return 64.0;
    default:
      return 0.0;
  }
}

namespace {

// Fraction of the signalled bits that carry data.
double line_code_efficiency(int gen) {
  if (gen <= 0) return 0.0;
  if (gen <= 2) return 8.0 / 10.0;     // 8b/10b
  if (gen <= 5) return 128.0 / 130.0;  // 128b/130b
  return 242.0 / 256.0;                // Gen6 FLIT: 242 of 256 bytes are TLP + DLLP bytes
}

}  // namespace

double pcie_raw_gbps(int gen, int width) {
  if (width <= 0) return 0.0;
  return pcie_lane_gtps(gen) * line_code_efficiency(gen) * width / 8.0;
}

double pcie_payload_gbps(int gen, int width, int max_payload_bytes) {
  if (max_payload_bytes <= 0) return 0.0;
  double mps = max_payload_bytes;
  return pcie_raw_gbps(gen, width) * mps / (mps + kTlpOverheadBytes);
}

int pcie_gen_from_speed(const std::string& text) {
  if (text.empty() || text.rfind("Unknown", 0) == 0) return 0;
  char* end = nullptr;
  double gtps = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return -1;
  while (*end == ' ')
    ++end;
  if (std::string(end).rfind("GT/s", 0) != 0) return -1;
  for (int gen = 1; gen <= 6; ++gen) {
    if (std::abs(gtps - pcie_lane_gtps(gen)) < 0.01) return gen;
  }
  return -1;
}

std::string pcie_speed_string(int gen) {
  switch (gen) {
    case 1:
      return "2.5 GT/s";
    case 2:
      return "5.0 GT/s";
    case 3:
      return "8.0 GT/s";
    case 4:
      return "16.0 GT/s";
    case 5:
      return "32.0 GT/s";
    case 6:
      return "64.0 GT/s";
    default:
      return "unknown";
  }
}

double nvlink_link_gbps(int generation) {
  switch (generation) {
    case 1:
      return 20.0;
    case 2:
    case 3:
    case 4:
      return 25.0;
    case 5:
      return 50.0;
    default:
      return 0.0;
  }
}

int nvlink_generation_for_sm(int sm) {
  if (sm >= 100) return 5;  // Blackwell
  if (sm >= 90) return 4;   // Hopper
  if (sm >= 80) return 3;   // Ampere (A100; GA10x bridges are NVLink3 too)
  if (sm >= 70) return 2;   // Volta (Turing's bridge is NVLink2 as well)
  if (sm >= 60) return 1;   // Pascal P100
  return 0;
}

}  // namespace commtool::topo
