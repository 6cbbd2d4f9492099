// libcommtool_mpi.so: commtool's MPI calls, behind the C table of mpi_abi.hpp. The only file of
// commtool that includes mpi.h. Built only when CMake found MPI (COMMTOOL_MPI).
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <ctime>

#include "probes/base/cluster/mpi_abi.hpp"

namespace {

// "MPI_Gather: <MPI's own words>" into error.
int fail(int rc, const char* call, char* error, size_t error_size) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) {
    std::snprintf(text, sizeof text, "MPI error code %d", rc);
  }
  std::snprintf(error, error_size, "%s: %s", call, text);
  return 1;
}

int init(int* rank, int* size, char* error, size_t error_size) {
  int initialized = 0;
  int rc = MPI_Initialized(&initialized);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Initialized", error, error_size);
  if (!initialized) {
    // Only the main thread calls MPI; commtool's watchdog thread never does.
    int provided = 0;
    rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Init_thread", error, error_size);
  }
  // From here an error is returned to commtool, which names the rank and exits, rather than
  // MPI's default of aborting the whole job with its own message.
  rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Comm_set_errhandler", error, error_size);
  rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Comm_rank", error, error_size);
  rc = MPI_Comm_size(MPI_COMM_WORLD, size);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Comm_size", error, error_size);
  return 0;
}

int gather_u64(uint64_t mine, uint64_t* all_at_root, char* error, size_t error_size) {
  const int rc =
      MPI_Gather(&mine, 1, MPI_UINT64_T, all_at_root, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Gather", error, error_size);
}

int gather_bytes(const void* mine, int count, void* all_at_root, const int* counts,
                 const int* offsets, char* error, size_t error_size) {
  // MPI-3 takes a const send buffer; the cast serves MPI-2 headers that do not.
  const int rc = MPI_Gatherv(const_cast<void*>(mine), count, MPI_BYTE, all_at_root, counts, offsets,
                             MPI_BYTE, 0, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Gatherv", error, error_size);
}

int broadcast_bytes(void* data, int count, char* error, size_t error_size) {
  const int rc = MPI_Bcast(data, count, MPI_BYTE, 0, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Bcast", error, error_size);
}

int barrier_sleeping(int sleep_us, char* error, size_t error_size) {
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Ibarrier(MPI_COMM_WORLD, &request);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Ibarrier", error, error_size);
  const timespec pause{sleep_us / 1000000, (sleep_us % 1000000) * 1000L};
  for (;;) {
    int done = 0;
    rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Test", error, error_size);
    if (done) return 0;
    nanosleep(&pause, nullptr);
  }
}

int finalize(char* error, size_t error_size) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return 0;
  const int rc = MPI_Finalize();
  return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Finalize", error, error_size);
}

int library_version(char* out, size_t out_size) {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return 1;
  // Open MPI's text runs over several lines; the first names the library and its version.
  text[std::strcspn(text, "\r\n")] = '\0';
  std::snprintf(out, out_size, "%s", text);
  return 0;
}

constexpr CommtoolMpiApi kApi = {commtool::cluster::kCommtoolMpiAbiVersion,
                                 init,
                                 gather_u64,
                                 gather_bytes,
                                 broadcast_bytes,
                                 barrier_sleeping,
                                 finalize,
                                 library_version};

}  // namespace

extern "C" __attribute__((visibility("default"))) const CommtoolMpiApi* commtool_mpi_api() {
  return &kApi;
}
