#include "probes/health/xid_catalog.hpp"

#include <algorithm>
#include <iterator>

namespace commtool::health {

namespace {

using enum XidLink;
using enum XidWeight;

// Sorted by number. The weights follow the catalog's immediate action: RESTART_APP for a fault
// of the program is kApplication; RESET_GPU, RESTART_BM and the workflows that end in a reset
// are kFail; IGNORE with CONTACT_SUPPORT, and the corrected C2C errors, are kWarn.
constexpr XidInfo kCatalog[] = {
    {8, true, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing",
     "restart the application; if it recurs, contact support", kNone, kWarn},
    {13, true, "ROBUST_CHANNEL_GR_EXCEPTION",
     "graphics engine exception (often the program's "
     "out-of-range access)",
     "restart the application; check it with compute-sanitizer", kNone, kApplication},
    {31, true, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
     "GPU memory page fault (often the "
     "program's illegal address)",
     "restart the application; check it with compute-sanitizer; "
     "repeated on one GPU only: run dcgmi diag -r 3",
     kNone, kApplication},
    {32, true, "ROBUST_CHANNEL_PBDMA_ERROR",
     "invalid or corrupted push buffer stream (the DMA "
     "stream from the driver over PCIe: mostly PCIe signal quality)",
     "restart the application; "
     "if it recurs, check the GPU's PCIe link and seating",
     kPcie, kWarn},
    {38, true, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "driver firmware error",
     "no action; if it recurs, contact support", kNone, kWarn},
    {43, true, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
     "GPU stopped processing (the program "
     "was ended; the GPU stays healthy)",
     "no action", kNone, kApplication},
    {45, true, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup after earlier errors",
     "follow the Xid it came with; alone: restart the fabric manager", kNone, kInfo},
    {48, true, "ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit ECC error",
     "reset the GPU (with Xid 63 "
     "or 64: drain the node and reset)",
     kNone, kFail},
    {54, true, "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
     "auxiliary power is not connected to the "
     "GPU board",
     "check the power cables and seating", kNone, kFail},
    {61, true, "PMU_BREAKPOINT", "internal micro-controller breakpoint", "contact support", kNone,
     kWarn},
    {62, true, "PMU_HALT_ERROR", "internal micro-controller halt", "reset the GPU", kNone, kFail},
    {63, true, "INFOROM_DRAM_RETIREMENT_EVENT",
     "GPU memory page retirement or row remapping "
     "recorded",
     "no action (the counters say whether it is pending)", kNone, kInfo},
    {64, true, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure",
     "reset the GPU; "
     "contact support",
     kNone, kFail},
    {68, true, "ROBUST_CHANNEL_NVDEC0_ERROR", "video decoder exception", "restart the application",
     kNone, kApplication},
    {69, true, "ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error",
     "restart the "
     "application; check the program and the CUDA version",
     kNone, kApplication},
    {74, true, "NVLINK_ERROR",
     "NVLink error (a link to another GPU or an NVSwitch; the far end "
     "may be the faulty one)",
     "reset the GPU or reboot the node; decode the register bits by "
     "NVIDIA's Xid 74 guide",
     kNvLink, kFail},
    {79, true, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
     "GPU has fallen off the bus (not "
     "reachable over PCIe)",
     "reboot the node (bare metal); if it recurs, check the PCIe link, "
     "seating and power, then contact support",
     kPcie, kFail},
    {92, true, "EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate",
     "no action; if it "
     "recurs, contact support",
     kNone, kWarn},
    {94, true, "ROBUST_CHANNEL_CONTAINED_ERROR",
     "contained memory error (one application "
     "affected)",
     "restart the application; reset the GPU when convenient", kNone, kWarn},
    {95, true, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained memory error", "reset the GPU",
     kNone, kFail},
    {109, true, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", "reset the GPU",
     kNone, kFail},
    {110, true, "SEC_FAULT_ERROR", "security fault", "reset the GPU; investigate the software",
     kNone, kFail},
    {119, true, "GSP_RPC_TIMEOUT", "timeout waiting for the GPU's GSP firmware",
     "reset the GPU; "
     "if it persists, power-cycle the node",
     kNone, kFail},
    {120, true, "GSP_ERROR", "GSP firmware error",
     "reset the GPU; if it persists, power-cycle "
     "the node",
     kNone, kFail},
    {121, true, "C2C_ERROR", "corrected errors on the NVLink-C2C link to the Grace CPU",
     "no immediate action; reset the GPU at a service window to retrain the link", kC2c, kWarn},
    {136, true, "ALI_TRAINING_FAIL", "NVLink training failed",
     "reset the GPU; check the link's "
     "signal integrity",
     kNvLink, kFail},
    {140, true, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecovered ECC error",
     "reset the GPU; if it "
     "persists, contact the hardware vendor",
     kNone, kFail},
    {143, true, "GPU_INIT_ERROR", "GPU initialisation error", "reset the GPU; contact support",
     kNone, kFail},
    {144, true, "NVLINK_SAW_ERROR", "NVLink SAW error",
     "decode by NVIDIA's Xid 144-150 sheet: "
     "fatal ones need a GPU reset",
     kNvLink, kFail},
    {145, true, "NVLINK_RLW_ERROR", "NVLink RLW error",
     "decode by NVIDIA's Xid 144-150 sheet: "
     "fatal ones need a GPU reset; follow an Xid 154 when there is one",
     kNvLink, kFail},
    {146, true, "NVLINK_TLW_ERROR", "NVLink TLW error",
     "decode by NVIDIA's Xid 144-150 sheet: "
     "fatal ones need a GPU reset",
     kNvLink, kFail},
    {147, true, "NVLINK_TREX_ERROR", "NVLink TREX error", "no action", kNvLink, kWarn},
    {148, true, "NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW_CTRL error", "no action", kNvLink, kWarn},
    {149, true, "NVLINK_NETIR_ERROR",
     "NVLink NETIR error (a link went down or its error rate "
     "rose)",
     "reset the GPU; check the peer device, the link and its cables", kNvLink, kFail},
    {150, true, "NVLINK_MSE_ERROR", "NVLink MSE error", "reset the GPU", kNvLink, kFail},
    {154, true, "GPU_RECOVERY_ACTION_CHANGED",
     "the driver's recovery action for the GPU "
     "changed (it says which: reset, node reboot, drain)",
     "do what the line says", kNone, kInfo},
    {155, true, "NVLINK_SW_DEFINED_ERROR", "NVLink taken down on purpose (software)",
     "reset the "
     "GPU; check what took the link down",
     kNvLink, kFail},
};

}  // namespace

XidInfo describe_xid(int xid) {
  const XidInfo* end = std::end(kCatalog);
  const XidInfo* it = std::lower_bound(std::begin(kCatalog), end, xid,
                                       [](const XidInfo& e, int x) { return e.xid < x; });
  if (it != end && it->xid == xid) return *it;
  return {xid,
          false,
          "",
          "an Xid commtool's table does not describe",
          "look it up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors)",
          kNone,
          kWarn};
}

const char* to_string(XidLink link) {
  switch (link) {
    case kNone:
      return "none";
    case kPcie:
      return "PCIe";
    case kNvLink:
      return "NVLink";
    case kC2c:
      return "C2C";
  }
  return "?";
}

}  // namespace commtool::health
