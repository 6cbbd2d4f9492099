// What an Xid number means and what NVIDIA says to do about it, for the Xids a GPU node's
// on-call engineer meets. Taken from NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors,
// "Analyzing the Xid Catalog": its columns "Immediate Action" and "Investigatory Action"), read
// 2026; which Xids concern a link (PCIe, NVLink, the C2C link to a Grace CPU) is from the
// catalog's trigger descriptions, not from DCGM's health labels, several of which name other
// errors than the catalog does for the same number (38, 39, 42, 73, ...).
#pragma once

#include <string>

namespace commtool::health {

// What an Xid says about the GPU's communication, as doctor weighs it.
enum class XidLink {
  kNone,    // the GPU itself, its memory, its firmware, or the application
  kPcie,    // the GPU's PCIe connection to the host
  kNvLink,  // an NVLink to another GPU or an NVSwitch
  kC2c,     // the NVLink-C2C connection to a Grace CPU
};

enum class XidWeight {
  kApplication,  // usually the program's own fault (13, 31, 43): the GPU stays healthy
  kWarn,         // the GPU needs attention when convenient (a reset at the next window)
  kFail,         // the GPU (or node) must be reset or taken out before it is trusted again
  kInfo,         // a consequence or a summary of another Xid (45, 63, 154)
};

struct XidInfo {
  int xid = 0;
  bool known = false;   // in commtool's table; else the other fields are generic
  const char* name;     // the catalog's mnemonic: "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
  const char* meaning;  // "GPU has fallen off the bus"
  const char* action;   // the catalog's immediate action in words: "reboot the node (bare metal)"
  XidLink link = XidLink::kNone;
  XidWeight weight = XidWeight::kWarn;
};

// The catalog entry of `xid`; an Xid commtool's table lacks comes back with known = false, a
// generic meaning and action (look it up in NVIDIA's catalog) and weight kWarn.
XidInfo describe_xid(int xid);

const char* to_string(XidLink link);  // "none", "PCIe", "NVLink", "C2C"

}  // namespace commtool::health
