#!/usr/bin/env bash
# Captures the part of /sys that `commtool topo` reads into a directory (and a tarball), so a
# machine can be examined elsewhere: `commtool topo --sysfs-root DIR`. Reads only; run as root
# to include the PCIe config space (ACS) of bridges.
#   scripts/capture-sysfs.sh OUT_DIR [SYSFS_ROOT]
set -euo pipefail
out=${1:?usage: capture-sysfs.sh OUT_DIR [SYSFS_ROOT]}
sys=${2:-/sys}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Copies named attributes of one device directory, keeping its path below $sys.
copy_attrs() {
  local dir=$1; shift
  local rel=${dir#"$sys"/}
  mkdir -p "$out/$rel"
  for a in "$@"; do
    [[ -r $dir/$a && -f $dir/$a ]] && cat "$dir/$a" > "$out/$rel/$a" 2>/dev/null || true
  done
}

# A symlink inside the capture pointing where the original points, relative as in /sys.
mirror_link() {
  local link=$1
  local target rel_link
  target=$(readlink -f "$link")
  rel_link=${link#"$sys"/}
  mkdir -p "$out/$(dirname "$rel_link")" "$out/${target#"$sys"/}"
  # A file inside, so the directory survives a trip through git (which keeps no empty ones).
  : > "$out/${target#"$sys"/}/.captured"
  ln -sfn "$(realpath -m --relative-to="$out/$(dirname "$rel_link")" "$out/${target#"$sys"/}")" \
    "$out/$rel_link"
}

pci_attrs=(class vendor device subsystem_vendor subsystem_device numa_node local_cpulist
           current_link_speed current_link_width max_link_speed max_link_width)
for dev in "$sys"/bus/pci/devices/*; do
  [[ -e $dev ]] || continue
  real=$(readlink -f "$dev")
  copy_attrs "$real" "${pci_attrs[@]}"
  # Config space: 64 bytes for users, all of it for root. Bridges only (for ACS).
  if [[ $(cat "$real/class" 2>/dev/null) == 0x0604* ]]; then
    head -c 4096 "$real/config" > "$out/${real#"$sys"/}/config" 2>/dev/null || true
  fi
  mirror_link "$dev"
done

for itf in "$sys"/class/net/*; do
  name=$(basename "$itf")
  mkdir -p "$out/class/net/$name"
  for a in speed type; do cat "$itf/$a" > "$out/class/net/$name/$a" 2>/dev/null || true; done
  [[ -e $itf/device ]] && mirror_link "$itf/device"
done

for ib in "$sys"/class/infiniband/*; do
  [[ -e $ib ]] || continue
  name=$(basename "$ib")
  mkdir -p "$out/class/infiniband/$name/ports/1"
  for a in link_layer rate; do
    cat "$ib/ports/1/$a" > "$out/class/infiniband/$name/ports/1/$a" 2>/dev/null || true
  done
  if [[ -e $ib/device ]]; then
    mirror_link "$ib/device"
    real=$(readlink -f "$ib/device")
    for n in "$real"/net/*; do [[ -e $n ]] && mkdir -p "$out/${n#"$sys"/}"; done
  fi
done

for node in "$sys"/devices/system/node/node*; do
  [[ -d $node ]] && copy_attrs "$node" cpulist
done
if [[ -d $sys/kernel/iommu_groups ]]; then
  mkdir -p "$out/kernel/iommu_groups"
  for g in "$sys"/kernel/iommu_groups/*; do
    [[ -e $g ]] && mkdir -p "$out/kernel/iommu_groups/$(basename "$g")"
  done
fi
tar -C "$out" -czf "$out.tar.gz" .
echo "captured $(find "$out" -type f | wc -l) files into $out and $out.tar.gz" >&2
