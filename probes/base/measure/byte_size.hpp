// Byte counts as users type them: 512MiB, 64K, 1G, 1000000. K/M/G and KiB/MiB/GiB are powers
// of 1024 (as nccl-tests reads -b/-e); KB/MB/GB are powers of 1000.
#pragma once

#include <cstdint>
#include <string>

namespace commtool::measure {

// Throws usage_error naming the option and the value: "--size 12Q: unknown unit 'Q'; ...".
uint64_t parse_byte_size(const std::string& option, const std::string& text);

// 536870912 -> "512 MiB", 4096 -> "4 KiB", 1000 -> "1000 B": exact binary units when they fit.
std::string format_byte_size(uint64_t bytes);

}  // namespace commtool::measure
