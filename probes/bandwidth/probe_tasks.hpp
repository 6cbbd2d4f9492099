// The probe's two worker tasks and the JSON they exchange with the launcher.
//   "probe-local": one worker owning every selected GPU runs --h2d, --latency and --p2p
//                  (P2P is measured in one process with peer access; IPC needs processes).
//   "probe-ipc":   one worker per GPU (or several on one GPU, for tests) runs --ipc.
#pragma once

namespace commtool::probe {

void register_probe_tasks();

}  // namespace commtool::probe
