// NCCL's profiler plugin interface, version 5 (introduced with NCCL 2.28), declared here from
// NCCL's interface description (src/include/plugin/profiler/profiler_v5.h and
// nccl_profiler.h): NCCL dlopens the library named by NCCL_PROFILER_PLUGIN and looks up the
// symbol `ncclProfiler_v5`, a table of five functions. Only the event kinds commtool reads are
// spelled out; the order and types of every field up to the last one read must match NCCL's,
// since NCCL hands us pointers to its own structs.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace commtool::nccl_profiler {

using Result = int;  // ncclResult_t; 0 = ncclSuccess
inline constexpr Result kSuccess = 0;

// Event type bits (nccl_profiler.h): also the activation mask init() returns.
inline constexpr uint64_t kGroup = 1u << 0;
inline constexpr uint64_t kColl = 1u << 1;
inline constexpr uint64_t kP2p = 1u << 2;
inline constexpr uint64_t kKernelCh = 1u << 6;
inline constexpr uint64_t kGroupApi = 1u << 8;
inline constexpr uint64_t kCollApi = 1u << 9;  // the application's call (ncclAllReduce, ...)
inline constexpr uint64_t kP2pApi = 1u << 10;  // the application's ncclSend / ncclRecv

// ncclProfilerEventState_t values commtool reads.
inline constexpr int kKernelChStop = 22;  // eStateArgs->kernelCh.pTimer: the channel's end

// ncclDebugLogger_t
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);

struct EventDescrV5 {
  uint64_t type;  // one of the bits above
  // The handle the plugin returned for the parent event, kept by NCCL and handed back as is:
  // Coll/P2p -> their CollApi/P2pApi event (NCCL 2.28 stops that event before it starts the
  // Coll one, and graph replays start Coll events under the capture's long-stopped API event);
  // KernelCh -> its Coll/P2p event.
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;  // "AllReduce", ...
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;  // "ncclFloat32", ...
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;   // "RING", "TREE", "NVLS", ...
      const char* proto;  // "LL", "LL128", "SIMPLE"
      void* parentGroup;
    } coll;
    struct {
      const char* func;  // "Send", "Recv"
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // GPU %globaltimer when the channel started the operation
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// ncclProfilerEventStateArgs_v5_t
union EventStateArgsV5 {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // GPU %globaltimer when the kernel's channel finished the operation
  } kernelCh;
};

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, void* eStateArgs);
  Result (*finalize)(void* context);
};

}  // namespace commtool::nccl_profiler
