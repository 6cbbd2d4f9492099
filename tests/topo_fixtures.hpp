// Three machines as sysfs trees, each built to show one kind of topology:
//   vm_one_gpu        the GPU machine: one H200 directly on a VM's root bus, NUMA -1, virtio NIC
//   two_socket_8gpu   8 GPUs behind 4 PCIe switches on 2 sockets, one IB NIC per switch
//   degraded_link     a GPU trained to x8 in a Gen4 slot, its NIC on the other socket
#pragma once

#include "tests/sysfs_builder.hpp"

namespace commtool::fixtures {

void build_vm_one_gpu(SysfsBuilder& fs);
void build_two_socket_8gpu(SysfsBuilder& fs);
void build_degraded_link(SysfsBuilder& fs);

}  // namespace commtool::fixtures
