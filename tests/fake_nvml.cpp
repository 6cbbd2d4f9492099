// A stand-in for libnvidia-ml.so.1, for the tests of probes/health/gpu_counters: each answer
// comes from $COMMTOOL_FAKE_NVML, "key=value;key=value", read at every call. A value "e:N"
// makes the call return NVML error N (3 Not Supported, 4 No Permission, 15 GPU is lost); an
// absent key gives a healthy H100's answer as `nvidia-smi -q` showed it on the GPU machine
// (2026-12-07): ECC on, every count 0, retired pages Not Supported, persistence on, MIG off.
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// The value of `key`, or `fallback`.
std::string value(const char* key, const char* fallback) {
  const char* env = std::getenv("COMMTOOL_FAKE_NVML");
  const std::string all = env ? env : "";
  const std::string k = std::string(key) + "=";
  size_t at = 0;
  while (at < all.size()) {
    size_t end = all.find(';', at);
    if (end == std::string::npos) end = all.size();
    if (all.compare(at, k.size(), k) == 0) return all.substr(at + k.size(), end - at - k.size());
    at = end + 1;
  }
  return fallback;
}

// NVML's answer for `key`: its error, or success with `out` set.
template <class T>
int answer(const char* key, const char* fallback, T* out) {
  const std::string v = value(key, fallback);
  if (v.rfind("e:", 0) == 0) return std::atoi(v.c_str() + 2);
  if (out) *out = static_cast<T>(std::strtoull(v.c_str(), nullptr, 10));
  return 0;
}

struct Device {};
Device the_gpu;

}  // namespace

extern "C" {

#define EXPORT __attribute__((visibility("default")))

EXPORT int nvmlInit_v2() {
  return answer<int>("init", "0", nullptr);
}
EXPORT int nvmlShutdown() {
  return 0;
}
EXPORT const char* nvmlErrorString(int r) {
  switch (r) {
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 15:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char*, Device** dev) {
  *dev = &the_gpu;
  return answer<int>("handle", "0", nullptr);
}
EXPORT int nvmlDeviceGetUUID(Device*, char* out, unsigned n) {
  std::strncpy(out, "GPU-187a3ed2-dc3f-e885-c1e4-066b882acd69", n);
  return 0;
}
EXPORT int nvmlDeviceGetEccMode(Device*, int* current, int* pending) {
  *pending = 1;
  return answer("ecc_mode", "1", current);
}
EXPORT int nvmlDeviceGetTotalEccErrors(Device*, int type, int counter, unsigned long long* n) {
  static const char* const keys[2][2] = {{"ecc_vol_cor", "ecc_agg_cor"},
                                         {"ecc_vol_unc", "ecc_agg_unc"}};
  return answer(keys[type & 1][counter & 1], "0", n);
}
EXPORT int nvmlDeviceGetRetiredPages(Device*, int cause, unsigned* count, unsigned long long*) {
  unsigned n = 0;
  const int r = answer(cause == 0 ? "retired_sbe" : "retired_dbe", "e:3", &n);
  if (r != 0) return r;
  const bool fits = n <= *count;
  *count = n;
  return fits ? 0 : 7;  // NVML_ERROR_INSUFFICIENT_SIZE
}
EXPORT int nvmlDeviceGetRetiredPagesPendingStatus(Device*, int* pending) {
  return answer("retired_pending", "e:3", pending);
}
EXPORT int nvmlDeviceGetRemappedRows(Device*, unsigned* corr, unsigned* unc, unsigned* pending,
                                     unsigned* failed) {
  const int r = answer<int>("remap", "0", nullptr);
  if (r != 0) return r;
  answer("remap_corr", "0", corr);
  answer("remap_unc", "0", unc);
  answer("remap_pending", "0", pending);
  answer("remap_failed", "0", failed);
  return 0;
}
EXPORT int nvmlDeviceGetPcieReplayCounter(Device*, unsigned* n) {
  return answer("replay", "0", n);
}
EXPORT int nvmlDeviceGetCurrentClocksEventReasons(Device*, unsigned long long* bits) {
  return answer("clocks", "1", bits);  // idle
}
EXPORT int nvmlDeviceGetPersistenceMode(Device*, int* state) {
  return answer("persistence", "1", state);
}
EXPORT int nvmlDeviceGetMigMode(Device*, unsigned* current, unsigned* pending) {
  *pending = 0;
  return answer("mig", "e:3", current);
}
struct FabricInfo {
  unsigned char cluster_uuid[16];
  int status;
  unsigned clique_id;
  unsigned char state;
};
EXPORT int nvmlDeviceGetGpuFabricInfo(Device*, FabricInfo* info) {
  std::memset(info, 0, sizeof *info);
  answer("fabric_status", "0", &info->status);
  return answer("fabric_state", "e:3", &info->state);
}
EXPORT int nvmlDeviceGetNvLinkState(Device*, unsigned link, int* state) {
  unsigned links = 0;
  answer("nvlinks", "0", &links);
  if (link >= links) return 3;
  unsigned down = 99;
  answer("link_down", "99", &down);
  *state = link == down ? 0 : 1;
  return 0;
}
EXPORT int nvmlDeviceGetNvLinkErrorCounter(Device*, unsigned link, int counter,
                                           unsigned long long* n) {
  static const char* const keys[4] = {"link_replay", "link_recovery", "link_crc_flit",
                                      "link_crc_data"};
  if (counter < 0 || counter > 3) return 2;
  const std::string key = std::string(keys[counter]) + std::to_string(link);
  return answer(key.c_str(), value(keys[counter], "0").c_str(), n);
}
}
