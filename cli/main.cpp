#include <cstdlib>

#include "cli/app.hpp"

int main(int argc, char** argv) {
  // GPU indices everywhere in commtool are PCI bus order, as nvidia-smi numbers them; make
  // CUDA's ordinals agree unless the user chose otherwise.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/0);
  return commtool::cli::run(argc, argv);
}
