# `cpack -G DEB` in the build directory: one Debian package, commtool, with what
# `cmake --install` installs (bin/commtool, lib/commtool/ with the NCCL profiler plugin and,
# when MPI was found, the MPI plugin, share/man/man1/commtool.1), installed under /usr.
# tests/install_test.sh --deb builds it and checks its control fields and contents.
set(COMMTOOL_PACKAGE_MAINTAINER
    "commtool maintainers <maintainers@users.noreply.a-seed-b085c390.example>"
    CACHE STRING "The Maintainer field of the Debian package (cpack -G DEB)")

set(CPACK_PACKAGE_NAME commtool)
set(CPACK_PACKAGE_VENDOR commtool)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "${COMMTOOL_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
# Only DEB is configured; keep `cpack` from also offering the source generators.
set(CPACK_SOURCE_GENERATOR "")

set(CPACK_DEBIAN_PACKAGE_NAME commtool)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # commtool_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${COMMTOOL_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The extended description; CPack puts the summary (project()'s DESCRIPTION) above it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "\
commtool says what is connected to what on a GPU machine and what is wrong
with it (topo), how fast each link really is (probe), how an NCCL collective's
time splits between host, stream wait and GPU (trace), which all-reduce path
is fastest and what skewed MoE routing costs (diagnose), and which rank of a
running job hangs (record, report).")
# Depends comes from dpkg-shlibdeps over the installed ELF files: libc6, and libopenmpi3 for
# the MPI plugin when MPI was found (libstdc++, libgcc and cudart are linked in statically).
# libopenmpi3 is a Depends although commtool loads the plugin only under mpirun or srun:
# dpkg-shlibdeps reads every file of the package, and the installed plugin cannot load without
# it; a package of its own for the plugin (commtool-mpi) would move it there. dpkg-shlibdeps is
# in dpkg-dev and needs `file`: without `file` cpack fails, without dpkg-shlibdeps it writes no
# Depends at all, which tests/install_test.sh --deb refuses.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Not Depends: the CUDA driver (libcuda, libnvidia-ml), NCCL and CUPTI come from NVIDIA's own
# packages, under names that change with the driver and CUDA versions (libnvidia-compute-NNN,
# libnccl2, cuda-cupti-13-0), and commtool loads each with dlopen only where a command needs
# it: topo, report and --help run on a machine with none of them. NCCL (libnccl2, NVIDIA's
# CUDA repository) is what trace and diagnose load beside the driver; the CUDA toolkit's CUPTI
# serves trace and record --cupti; Open MPI's mpirun runs commtool on several nodes (--mpi).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libnccl2")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cuda-toolkit, openmpi-bin")

include(CPack)
