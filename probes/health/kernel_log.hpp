// The NVIDIA driver's error reports in the kernel log: Xid lines (GPU errors, with the GPU's PCI
// address and a number NVIDIA's catalog explains, xid_catalog.hpp), SXid lines (NVSwitch
// errors), and the "fallen off the bus" message that newer drivers print without an Xid. Read
// from the live log (/dev/kmsg, as dmesg reads it) or from a saved one: dmesg's output with or
// without its [seconds] stamps, `journalctl -k`, or /dev/kmsg records. Lines are matched by
// what the driver writes, wherever the line's prefix ends, so the reader does not depend on
// the tool that saved the log.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace commtool::health {

struct XidEvent {
  bool nvswitch = false;      // an SXid of an NVSwitch, not an Xid of a GPU
  std::string pci;            // as the driver wrote it, lower case: "0000:3b:00" (an Xid's has
                              // no function, an SXid's has one: "0000:06:00.0")
  std::string mig;            // the MIG instance named with it, "GPU-I:05 GPU-CI:01", else ""
  int xid = 0;                // 79 for a "fallen off the bus" message without a number
  bool from_message = false;  // the number was not in the line: the message implies it
  std::optional<int> pid;     // the process the driver named, when it named one
  std::string process;        // its name, "" when none or "<unknown>"
  std::string detail;         // the driver's words after the number, cut to 200 bytes
  std::string when;           // the line's own stamp as written ("1843.308145", "Feb 14 05:03:41")
  size_t line = 0;            // 1-based, in the text scanned (an SXid's first line)
};

struct KernelLogScan {
  std::vector<XidEvent> events;  // in the order of the log
  size_t lines = 0;              // lines scanned
  size_t unparsed = 0;           // lines that name an Xid but could not be read (counted, kept out)
  bool dropped = false;          // more events than kMaxXidEvents: the first are kept
};

// A sick GPU can repeat one Xid thousands of times; what is kept is bounded.
inline constexpr size_t kMaxXidEvents = 10000;

// Every Xid, SXid and fallen-off-the-bus message in `text`, one log line per line (a /dev/kmsg
// record's "prio,seq,usec,flags;" prefix is taken as its stamp). Never throws for content.
KernelLogScan scan_kernel_log(std::string_view text);

// Whether `event` concerns the GPU at `pci_bus_id` ("0000:3b:00.0" as sysfs names it): the
// driver writes domain, bus and device, without the function.
bool same_gpu(const XidEvent& event, std::string_view pci_bus_id);

// The live kernel log since boot, as far as the ring buffer holds it.
struct KernelLogRead {
  bool readable = false;
  std::string why;   // when not readable: what refused and what would let it read
  std::string text;  // one record per line as /dev/kmsg gives it, "prio,seq,usec,flags;message"
};
KernelLogRead read_live_kernel_log();

}  // namespace commtool::health
