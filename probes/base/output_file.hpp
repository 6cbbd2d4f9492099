// Where a report goes: standard output, or a file written whole or not at all (a temp file in
// the same directory, then rename), so an interrupted run never leaves half a JSON document.
#pragma once

#include <string>

namespace commtool::files {

// `role` is what the path is to the user, as the caller knows it: the option that gave it
// ("--trace") or what it holds ("saved run file"); every error message starts with it.

// Fails early, before anything is measured, when the file cannot be created there: the
// directory (of a symlink's target) is missing or takes no new file (tried, since root passes
// every permission bit), the path is a directory, or its links loop. A name that opens a
// device, FIFO or pipe (/dev/null, /dev/stdout) needs only to be writable itself. Throws
// usage_error.
void check_writable(const std::string& path, const std::string& role);

// Writes content to path atomically (temp + fsync + rename). Throws usage_error on failure and
// leaves no temp file behind, nor when SIGINT, SIGTERM, SIGHUP or SIGQUIT ends the process while
// it writes (a handler already installed for them, such as the launcher's, is called instead and
// the write goes on). A symlink is followed to its final target, which is what gets replaced (the
// temp file goes in the target's directory; the link stays); a replaced file keeps its mode (and
// its owner, where the caller may set it), a new one gets 0666 less the umask. A FIFO or device is
// written through, not replaced.
void write_atomically(const std::string& path, const std::string& content, const std::string& role);

}  // namespace commtool::files
