// A dlopen'ed library as a move-only RAII handle. NVML, NCCL and CUPTI are loaded this way
// where a subcommand only needs to ask them something: `topo` must run on a machine that has
// none of them, and a missing library is a fact to report, not a link error.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace commtool {

// Where a library of the CUDA stack may be: the loader's path first, then the toolkit's
// directories ($CUDA_HOME, /usr/local/cuda, CUPTI's extras), which are rarely on that path.
inline std::vector<std::string> cuda_library_candidates(const std::string& soname) {
  std::vector<std::string> out{soname};
  if (const char* home = std::getenv("CUDA_HOME")) {
    out.push_back(std::string(home) + "/lib64/" + soname);
  }
  out.push_back("/usr/local/cuda/lib64/" + soname);
  out.push_back("/usr/local/cuda/extras/CUPTI/lib64/" + soname);
  return out;
}

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  // Tries each name in turn; error() says why the last one failed. extra_flags: e.g.
  // RTLD_NODELETE for a library whose load-time allocations must stay reachable.
  explicit DynamicLibrary(const std::vector<std::string>& names, int extra_flags = 0) {
    for (const auto& name : names) {
      handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | extra_flags);
      if (handle_ != nullptr) {
        name_ = name;
        return;
      }
      const char* why = dlerror();
      error_ = why ? why : ("cannot load " + name);
    }
  }
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  DynamicLibrary(DynamicLibrary&& other) noexcept { *this = std::move(other); }
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept {
    std::swap(handle_, other.handle_);
    std::swap(name_, other.name_);
    std::swap(error_, other.error_);
    return *this;
  }
  ~DynamicLibrary() {
    if (handle_ != nullptr) dlclose(handle_);
  }

  explicit operator bool() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }
  const std::string& error() const { return error_; }

  // The symbol as a function pointer of type Fn, or nullptr when the library lacks it (an older
  // driver may miss a newer entry point).
  template <typename Fn>
  Fn symbol(const char* name) const {
    if (handle_ == nullptr) return nullptr;
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }

  // The file the library was loaded from, for --version.
  std::string path_of(void* any_symbol) const {
    Dl_info info{};
    if (any_symbol != nullptr && dladdr(any_symbol, &info) != 0 && info.dli_fname != nullptr) {
      return info.dli_fname;
    }
    return name_;
  }

 private:
  void* handle_ = nullptr;
  std::string name_;
  std::string error_;
};

}  // namespace commtool
