#!/usr/bin/env bash
# Installs what the kernel tests need (tests/kernel/): Debian's kernel headers, its kernel image
# (only vmlinuz and config, unpacked: the package's postinst would rebuild initramfs twice), qemu,
# busybox-static, cpio, kmod and a static libc.  Idempotent: a second run only checks.
# Prints how long it took.  shared/docs/kernel-testing.md has the facts this follows.
set -euo pipefail
start=$(date +%s%N)
dest=${RMTRACE_KERNEL_DIR:-/var/cache/rmtrace-kernel}
export DEBIAN_FRONTEND=noninteractive
need=()
for tool in qemu-system-x86_64 busybox cpio depmod; do command -v "$tool" >/dev/null || need+=("$tool"); done
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc.a)
kver_of() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{sub("linux-image-","",$2); print $2; exit}'; }
kver=$(cat "$dest/kver" 2>/dev/null || true)
if [ -z "$kver" ] || [ ! -e "$dest/vmlinuz-$kver" ] || [ ! -e "$dest/modules/virtio_console.ko" ] || [ ! -d "/usr/src/linux-headers-$kver" ] || [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq
	kver=$(kver_of)
	[ -n "$kver" ] || { echo "setup.sh: no linux-image-amd64 in the package lists" >&2; exit 1; }
	apt-get install -y -qq --no-install-recommends "linux-headers-$kver" qemu-system-x86 busybox-static \
		cpio kmod libc6-dev gcc make >/dev/null
	mkdir -p "$dest"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -qq "linux-image-$kver" 2>/dev/null)
	# the guest's virtio-serial ports (the replay and trace transports) need these, in this load order
	mods="virtio/virtio_ring virtio/virtio virtio/virtio_pci_legacy_dev virtio/virtio_pci_modern_dev virtio/virtio_pci"
	paths=("./boot/vmlinuz-$kver" "./boot/config-$kver" "./lib/modules/$kver/kernel/drivers/char/virtio_console.ko")
	for m in $mods; do paths+=("./lib/modules/$kver/kernel/drivers/$m.ko"); done
	dpkg-deb --fsys-tarfile "$tmp"/linux-image-"$kver"_*.deb | tar -x -C "$tmp" "${paths[@]}"
	mkdir -p "$dest/modules"
	mv "$tmp/boot/vmlinuz-$kver" "$tmp/boot/config-$kver" "$dest/"
	mv "$tmp"/lib/modules/"$kver"/kernel/drivers/virtio/*.ko "$tmp/lib/modules/$kver/kernel/drivers/char/virtio_console.ko" \
		"$dest/modules/"
	echo "virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console" >"$dest/modules/order"
	rm -rf "$tmp"
	echo "$kver" >"$dest/kver"
fi
awk -v k="$kver" -v t="$(( $(date +%s%N) - start ))" 'BEGIN { printf "kernel test tools ready (kernel %s) in %.1fs\n", k, t / 1e9 }'
