// Where a report goes: standard output, or a file written whole or not at all (a temp file in
// the same directory, then rename), so an interrupted run never leaves half a JSON document.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace commtool::files {

// `role` is what the path is to the user, as the caller knows it: the option that gave it
// ("--trace") or what it holds ("saved run file"); every error message starts with it.

// A path Linux can take: under PATH_MAX bytes, each name at most NAME_MAX (255) bytes. Checked
// before anything is measured, so that a long name is exit 2 up front, not ENAMETOOLONG after
// the run. Throws usage_error naming the over-long name.
void check_name_length(const std::string& path, const std::string& role);

// The kernel's fs.protected_symlinks rule, which commtool applies to the links it follows
// itself (the kernel cannot, since commtool resolves a final link to rename over its target):
// a symlink in a sticky world-writable directory such as /tmp is followed only by its owner,
// or when its owner also owns the directory. True when the follower must refuse it.
bool link_is_protected(mode_t dir_mode, uid_t dir_uid, uid_t link_uid, uid_t follower_uid);

// The same rule for a directory commtool writes into (record --save, trace --save): when the
// path's last name is a symlink, each link at its end is checked as link_is_protected() says,
// and a chain that loops is refused. Throws usage_error naming the link.
void refuse_planted_links(const std::string& path, const std::string& role);

// Fails early, before anything is measured, when the file cannot be created there: the
// directory (of a symlink's target) is missing or takes no new file (tried, since root passes
// every permission bit), the path is a directory, or its links loop. A name that opens a
// device, FIFO or pipe (/dev/null, /dev/stdout) needs only to be writable itself. A name too
// long for Linux, or a final symlink link_is_protected() refuses, is refused too. Throws
// usage_error.
void check_writable(const std::string& path, const std::string& role);

// Two outputs of one command on one file (`--output x --trace x`): one would silently replace
// the other. `outputs` are (role, path) pairs, empty paths skipped; a path names the same file
// as another when both end, links followed, at one name, or at one existing file (a hard link).
// Devices and pipes, written through, may be shared (/dev/null twice). Throws usage_error
// naming both roles.
//
// `inputs`, (role, path) pairs too, are what the command reads: an output may not be one of
// them, nor lie inside one that is a directory (a report written into the recording or saved
// run it reads would replace its data, or be read as part of it next time).
void check_distinct(const std::vector<std::pair<std::string, std::string>>& outputs,
                    const std::vector<std::pair<std::string, std::string>>& inputs = {});

// Writes content to path atomically (temp + fsync + rename). Throws usage_error on failure and
// leaves no temp file behind, nor when SIGINT, SIGTERM, SIGHUP or SIGQUIT ends the process while
// it writes (a handler already installed for them, such as the launcher's, is called instead and
// the write goes on). A symlink is followed to its final target, which is what gets replaced (the
// temp file goes in the target's directory; the link stays), unless link_is_protected() refuses
// one of the links; a replaced file keeps its mode (and its owner, where the caller may set
// it), a new one gets 0666 less the umask. A FIFO or device is written through, not replaced.
void write_atomically(const std::string& path, const std::string& content, const std::string& role);

}  // namespace commtool::files
