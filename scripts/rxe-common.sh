# rxe-common.sh: what scripts/rxe-vm (one guest) and scripts/rxe-pair (two guests joined by a
# network link) share: Debian's kernel unpacked under target/rxe-vm, the initramfs and its /init,
# the script each guest runs, and qemu's common arguments. Sourced, never run; the caller sets
# rxe_me (its name in messages) first, rxe_stack to boot another Debian suite (empty, or
# bookworm, is today's path: the host's kernel package and the host's / as the guest's root), and
# rxe_transport: roce (empty is roce: Soft-RoCE, rdma_rxe, device rxe0) or iwarp (Soft-iWARP,
# siw, device siw0, the module built by rxe_siw since Debian's kernels do not ship it), and
# rxe_arch: x86_64 (empty is x86_64: today's guest) or arm64 (Debian's arm64 kernel under
# qemu-system-aarch64, chrooted into the root scripts/arm64-root builds, with the cross build's
# outputs where the guest's scripts look for them: see rxe_arm64_prepare), and with arm64
# rxe_pages: 4k (empty is 4k: Debian 12's arm64 kernel) or 16k (Debian's arm64-16k kernel).
#
# After rxe_prepare: $repo, $target, $state (target/rxe-vm), $kver, $kroot, $initrd, and
# $rxe_hostroot (the directory the guest chroots into: /, the stack's root or the arm64 root),
# $rxe_share (what the guest sees as the repo's target/: target/, target/stacks/NAME/target
# for a stack, target/arm64 for arm64), $rxe_time_scale (the guest's RXE_TIME_SCALE),
# $rxe_runs (where a run's files go: $rxe_share/rxe-vm), $rxe_dev (rxe0 or siw0),
# $rxe_link_type (rxe or siw: `rdma link add ... type`) and $rxe_busybox (the initramfs's
# busybox, of the guest's architecture).

rxe_die() { echo "$rxe_me: $*" >&2; exit 125; }

rxe_prepare() {
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  target=$repo/target
  state=$target/rxe-vm
  mkdir -p "$state"
  local tool qemu_bin deps=scripts/setup-deps
  case ${rxe_arch:-x86_64} in
    x86_64) rxe_arch=x86_64 qemu_bin=qemu-system-x86_64 ;;
    arm64) qemu_bin=qemu-system-aarch64 deps="scripts/setup-deps --arm64" ;;
    *) rxe_die "unknown architecture \"$rxe_arch\" (x86_64 or arm64)" ;;
  esac
  for tool in "$qemu_bin" busybox depmod modprobe dpkg-deb apt-get; do
    command -v "$tool" >/dev/null || rxe_die "$tool not found: run $deps"
  done
  [ -x /bin/busybox ] || rxe_die "busybox-static is missing: run scripts/setup-deps"
  rxe_hostroot=/
  rxe_share=$target
  rxe_runs=$state
  rxe_busybox=/bin/busybox
  # How many times longer than the x86_64 guest this one may take for the same test: the
  # harnesses stretch their time limits by it (RXE_TIME_SCALE; scripts/rxe-vm --help says why).
  rxe_time_scale=1
  # shellcheck disable=SC2034 # rxe_dev is read by rxe-vm and rxe-pair
  case ${rxe_transport:-roce} in
    roce) rxe_transport=roce rxe_dev=rxe0 rxe_link_type=rxe ;;
    iwarp) rxe_dev=siw0 rxe_link_type=siw ;;
    *) rxe_die "unknown transport \"$rxe_transport\" (roce or iwarp)" ;;
  esac
  if [ "$rxe_arch" = arm64 ]; then
    # One root and one kernel so far: Debian 12's, with Soft-RoCE (siw would be built for the
    # arm64 kernel with a cross compiler: not wired up).
    [ -z "${rxe_stack-}" ] || [ "$rxe_stack" = bookworm ] || rxe_die "--arch arm64 runs on the default stack (bookworm) only"
    [ "$rxe_transport" = roce ] || rxe_die "--arch arm64 runs Soft-RoCE only"
    rxe_stack=
    rxe_arm64_prepare
  elif [ "${rxe_pages:-4k}" != 4k ]; then
    rxe_die "--pages $rxe_pages needs --arch arm64 (x86_64 has 4K pages only)"
  elif [ -n "${rxe_stack-}" ] && [ "$rxe_stack" != bookworm ]; then
    # siw.ko is built from the suite's own kernel source; only bookworm's is wired up so far.
    [ "$rxe_transport" = roce ] || rxe_die "--transport iwarp runs on the default stack (bookworm) only"
    rxe_stack_prepare
  else
    rxe_stack=
    rxe_kernel
  fi
  [ "$rxe_transport" = roce ] || rxe_siw
  rxe_initrd
}

# --- a stack (rxe-vm --stack NAME): the suite's root (scripts/stack-root builds it and cmsafe in
# it), its kernel, and this clone's target/stacks/NAME/target as the guest's target/ ----------
rxe_stack_prepare() {
  stack_me=$rxe_me
  # shellcheck source=scripts/stack-common.sh
  . "$repo/scripts/stack-common.sh"
  stack_init "$rxe_stack" "$repo"
  # A writable root (rxe-vm --overlay) is the suite's root alone, without cmsafe built into it:
  # what the packages are installed on (scripts/deb-test).
  local base=()
  [ "${rxe_overlay:-0}" = 0 ] || base=(--base)
  rxe_hostroot=$("$repo/scripts/stack-root" "${base[@]}" "$rxe_stack") || exit 125
  [ -d "$rxe_hostroot$repo" ] || rxe_die "$rxe_hostroot has no $repo to mount the repository on"
  rxe_share=$stack_target
  rxe_runs=$stack_target/rxe-vm
  mkdir -p "$rxe_runs"
  stack_apt_update
  local kpkg dl p
  kpkg=$(stack_apt apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$kpkg" ] || rxe_die "cannot find the kernel package of $stack_suite (linux-image-amd64's dependency)"
  kver=${kpkg#linux-image-}
  kroot=$state/kernel-$kver
  [ -e "$kroot/.ready" ] && return 0
  echo "$rxe_me: fetching $kpkg ($stack_suite)" >&2
  # From 7.x the image package is empty: the kernel is in linux-binary-VER, the modules in
  # linux-modules-VER (.ko.xz), with linux-base-VER; every package named *-VER it depends on.
  local pkgs=("$kpkg")
  for p in $(stack_apt apt-cache depends "$kpkg" 2>/dev/null | awk '$1 == "Depends:" {print $2}'); do
    case "$p" in *-"$kver") pkgs+=("$p") ;; esac
  done
  dl=$(mktemp -d "$state/dl.XXXXXX")
  rm -rf "$kroot" "$kroot.tmp.$$"
  (cd "$dl" && stack_apt apt-get download "${pkgs[@]}" >/dev/null 2>&1) ||
    rxe_die "apt-get download ${pkgs[*]} ($stack_suite) failed"
  for p in "$dl"/*.deb; do dpkg-deb -x "$p" "$kroot.tmp.$$"; done
  # 7.x's packages are merged-/usr: usr/lib/modules/VER, with the image as its vmlinuz.
  if [ ! -d "$kroot.tmp.$$/lib/modules" ] && [ -d "$kroot.tmp.$$/usr/lib/modules" ]; then
    mv "$kroot.tmp.$$/usr/lib/modules" "$kroot.tmp.$$/lib-modules"
    mkdir -p "$kroot.tmp.$$/lib"
    mv "$kroot.tmp.$$/lib-modules" "$kroot.tmp.$$/lib/modules"
  fi
  if [ ! -e "$kroot.tmp.$$/boot/vmlinuz-$kver" ] && [ -e "$kroot.tmp.$$/lib/modules/$kver/vmlinuz" ]; then
    mkdir -p "$kroot.tmp.$$/boot"
    mv "$kroot.tmp.$$/lib/modules/$kver/vmlinuz" "$kroot.tmp.$$/boot/vmlinuz-$kver"
  fi
  [ -e "$kroot.tmp.$$/boot/vmlinuz-$kver" ] || rxe_die "no boot/vmlinuz-$kver in ${pkgs[*]}"
  depmod -b "$kroot.tmp.$$" "$kver"
  rm -rf "$dl"
  touch "$kroot.tmp.$$/.ready"
  mv -T "$kroot.tmp.$$" "$kroot" 2>/dev/null || rm -rf "$kroot.tmp.$$" # another run won
}

# --- kernel: the version linux-image-amd64 points at, unpacked under target/rxe-vm -------------
# rxe_kernel [arm64|arm64-16k]: with arm64, the arm64 kernel of the same ABI (6.1.0-57-amd64:
# linux-image-6.1.0-57-arm64), so that both guests run the same kernel source and upload; the
# one linux-image-arm64 points at when the archive has no arm64 build of that ABI. With
# arm64-16k, Debian's arm64 kernel built with 16K pages: Debian 12 has none of 6.1, but its
# security suite carries linux 6.12 (6.12.*+deb12, for machines 6.1 does not run on), whose
# flavours include arm64-16k; the newest, as its meta-package linux-image-6.12-arm64-16k points
# at (the one linux-image-arm64-16k points at on a suite that has that meta-package).
rxe_kernel() {
  local kpkg dlpkg meta
  if [ "${1-}" = arm64-16k ]; then
    for meta in linux-image-arm64-16k linux-image-6.12-arm64-16k; do
      # A suite without that meta-package: apt-cache fails, and the next one is tried.
      kpkg=$(apt-cache depends "$meta:arm64" 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}') || true
      [ -z "$kpkg" ] || break
    done
    kpkg=${kpkg%:arm64}
    [ -n "$kpkg" ] || rxe_die "no arm64-16k kernel package in apt's lists (linux-image-6.12-arm64-16k): run scripts/setup-deps --arm64"
    rxe_kernel_fetch "$kpkg" "$kpkg:arm64"
    return
  fi
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [ -z "$kpkg" ]; then
    # An empty package list (fresh machine): refresh it once.
    apt-get update -qq >/dev/null 2>&1 || true
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  fi
  [ -n "$kpkg" ] || rxe_die "cannot find the kernel package that linux-image-amd64 depends on"
  dlpkg=$kpkg
  if [ "${1-}" = arm64 ]; then
    kpkg=${kpkg%-amd64}-arm64
    if [ -z "$(apt-cache show "$kpkg:arm64" 2>/dev/null | head -n1)" ]; then
      kpkg=$(apt-cache depends linux-image-arm64:arm64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
      kpkg=${kpkg%:arm64}
      [ -n "$kpkg" ] || rxe_die "no arm64 kernel package in apt's lists: run scripts/setup-deps --arm64"
    fi
    dlpkg=$kpkg:arm64
  fi
  rxe_kernel_fetch "$kpkg" "$dlpkg"
}

# rxe_kernel_fetch PACKAGE DOWNLOAD: the kernel package PACKAGE (apt-get download's name for it:
# DOWNLOAD) unpacked under target/rxe-vm/kernel-VER, once; sets $kver and $kroot.
rxe_kernel_fetch() {
  local kpkg=$1 dlpkg=$2
  kver=${kpkg#linux-image-}
  kroot=$state/kernel-$kver
  if [ ! -e "$kroot/.ready" ]; then
    echo "$rxe_me: fetching $kpkg" >&2
    local dl
    dl=$(mktemp -d "$state/dl.XXXXXX")
    rm -rf "$kroot"
    (cd "$dl" && apt-get download "$dlpkg" >/dev/null 2>&1) || rxe_die "apt-get download $dlpkg failed"
    dpkg-deb -x "$dl/$kpkg"_*.deb "$kroot.tmp.$$"
    depmod -b "$kroot.tmp.$$" "$kver"
    rm -rf "$dl"
    touch "$kroot.tmp.$$/.ready"
    mv -T "$kroot.tmp.$$" "$kroot" 2>/dev/null || rm -rf "$kroot.tmp.$$" # another run won
  fi
}

# --- arm64 (rxe-vm --arch arm64): Debian's arm64 kernel, the root of scripts/arm64-root, and the
# cross build's outputs as the guest's target/ ---------------------------------------------------
# make cross-arm64 puts the C tests and the preload's test programs in target/arm64/c-tests and
# target/arm64/preload-tests, and cargo the aarch64 libraries in
# target/aarch64-unknown-linux-gnu/release (the C tests' rpath). The guest's target/ is
# target/arm64 (writable: logs and reports come back there, apart from the host's), where the
# scripts find target/c-tests and target/preload-tests; the libraries' directory is shared
# read-only and mounted both as target/release (where the scripts look for
# libcmsafe_preload.so) and at its own path under target/, for the rpath. The repository comes
# on its own share, at its path, as for a stack. With rxe_pages=16k the kernel is Debian's
# arm64-16k one (rxe_kernel says which); the root and the cross build are the same, since
# aarch64 binaries (and cmsafe, crates/core/src/page.rs) take the page size from the kernel at
# run time.
rxe_arm64_libs=aarch64-unknown-linux-gnu
# The C test that starts the most ASan processes (test_logging) takes about 7 times as long there
# as on x86_64, each process's leak check being slow under emulation (scripts/rxe-vm --help).
rxe_arm64_time_scale=8
rxe_arm64_prepare() {
  rxe_hostroot=$("$repo/scripts/arm64-root") || exit 125
  [ -d "$rxe_hostroot$repo" ] || rxe_die "$rxe_hostroot has no $repo to mount the repository on"
  rxe_share=$target/arm64
  rxe_runs=$rxe_share/rxe-vm
  rxe_libdir=$target/$rxe_arm64_libs/release
  # Before the first make cross-arm64: an empty directory, so that the guest still boots.
  mkdir -p "$rxe_runs" "$rxe_libdir"
  rxe_busybox=$rxe_hostroot/bin/busybox
  rxe_time_scale=$rxe_arm64_time_scale
  case ${rxe_pages:-4k} in
    4k) rxe_kernel arm64 ;;
    16k) rxe_kernel arm64-16k ;;
    *) rxe_die "unknown page size \"$rxe_pages\" (4k or 16k)" ;;
  esac
}

# --- Soft-iWARP (--transport iwarp): siw.ko for $kver, from Debian's own kernel source ----------
# Debian's kernels are built without siw (`# CONFIG_RDMA_SIW is not set`), but its source is in
# linux-source-X.Y and builds out of tree against linux-headers-$kver. The packages, of the
# version apt offers for linux-image-$kver (the kernel unpacked under kernel-$kver may be an
# earlier upload of the same ABI, $kver, which Debian bumps whenever the module interface
# changes), are downloaded (apt-get download, never installed) and unpacked
# under target/rxe-vm; only the module is kept, as target/rxe-vm/siw-$kver/siw.ko, so that later
# runs build nothing. A first run costs about 150 MB of downloads, the 140 MB source tarball
# decompressed to find the siw directory in it, and the build: 40 to 50 s (scripts/rxe-vm --help
# has the figures measured).
rxe_siw() {
  siw_ko=$state/siw-$kver/siw.ko
  [ -e "$siw_ko" ] && return 0
  local ver series build hdrs p pkgs src
  ver=$(apt-cache show --no-all-versions "linux-image-$kver" 2>/dev/null | awk '/^Version:/ {print $2; exit}')
  [ -n "$ver" ] || rxe_die "no version for linux-image-$kver in apt's lists"
  series=$(echo "$kver" | cut -d. -f1,2) # 6.1.0-57-amd64: linux-source-6.1
  echo "$rxe_me: building Soft-iWARP (siw.ko) for $kver from linux-source-$series $ver" >&2
  build=$(mktemp -d "$state/siw-build.XXXXXX")
  # A failed build leaves nothing behind (the source package alone is 140 MB).
  siw_fail() { rm -rf "$build"; rxe_die "$@"; }
  # linux-headers-$kver, the -common headers and linux-kbuild-X.Y it depends on (the compiler
  # package it names, linux-compiler-gcc-*, only depends on gcc, which scripts/setup-deps installs).
  pkgs=("linux-source-$series=$ver" "linux-headers-$kver=$ver")
  for p in $(apt-cache depends "linux-headers-$kver=$ver" 2>/dev/null | awk '$1 == "Depends:" {print $2}'); do
    case "$p" in linux-headers-*|linux-kbuild-*) pkgs+=("$p=$ver") ;; esac
  done
  (cd "$build" && apt-get download "${pkgs[@]}" >"$build/download.log" 2>&1) ||
    { cat "$build/download.log" >&2; siw_fail "apt-get download ${pkgs[*]} failed"; }
  mkdir "$build/root"
  for p in "$build"/linux-headers-*.deb "$build"/linux-kbuild-*.deb; do dpkg-deb -x "$p" "$build/root"; done
  hdrs=$build/root/usr/src/linux-headers-$kver
  [ -e "$hdrs/Makefile" ] || siw_fail "no usr/src/linux-headers-$kver/Makefile in ${pkgs[*]}"
  # Its Makefile includes the -common one by its installed path: point it at the unpacked one.
  sed -i "s|^include /usr/src/|include $build/root/usr/src/|" "$hdrs/Makefile"
  src=linux-source-$series/drivers/infiniband/sw/siw
  dpkg-deb --fsys-tarfile "$build"/linux-source-*.deb |
    tar -xO "./usr/src/linux-source-$series.tar.xz" | tar -xJ -C "$build" "$src" ||
    siw_fail "no $src in linux-source-$series $ver"
  if ! make -C "$hdrs" M="$build/$src" CONFIG_RDMA_SIW=m -j"$(nproc)" modules >"$build/make.log" 2>&1; then
    tail -n 40 "$build/make.log" >&2
    siw_fail "the build of siw.ko failed"
  fi
  # Without its debug information the module is 5 MB smaller in every initramfs.
  strip --strip-debug "$build/$src/siw.ko"
  mkdir -p "$state/siw-$kver.tmp.$$"
  mv "$build/$src/siw.ko" "$state/siw-$kver.tmp.$$/siw.ko"
  rm -rf "$build"
  mv -T "$state/siw-$kver.tmp.$$" "$state/siw-$kver" 2>/dev/null || rm -rf "$state/siw-$kver.tmp.$$" # another run won
}

# --- initramfs: busybox, the modules in dependency order, and /init ---------------------------
# What the guests need: Soft-RoCE and the CM stack, crc32 for rxe's ICRC (without crc32_generic
# `rdma link add` fails), the dummy netdev (one guest), virtio-net and netem (two guests joined
# by a link that tc can degrade), and virtio for the 9p shares and the output console.
# A module a kernel does not have (crc32_generic is gone in 7.3: crc32 is in the library there)
# is left out of that kernel's initramfs; compressed modules (.ko.xz, .ko.zst) go in unpacked.
# Soft-iWARP's initramfs (its own file) adds siw's dependencies, crc32c for its CRC (libcrc32c
# finds it through the crypto API: crc32c_generic is the module that provides it), then siw.ko.
rxe_modules=(udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe configfs ib_cm iw_cm rdma_cm
             rdma_ucm crc32_generic dummy virtio_pci virtio_net sch_netem virtio_console
             9pnet_virtio 9p overlay)
rxe_iwarp_modules=(crc32c_generic libcrc32c)

rxe_initrd() {
  local sum build m ko extra=()
  sum=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
  initrd=$state/initrd-$kver-$sum.gz
  if [ "$rxe_transport" = iwarp ]; then
    extra=("${rxe_iwarp_modules[@]}")
    initrd=$state/initrd-$kver-$sum-siw-$(sha256sum "$siw_ko" | cut -c1-8).gz
  fi
  [ -e "$initrd" ] && return 0
  build=$(mktemp -d "$state/initrd-build.XXXXXX")
  mkdir -p "$build"/{bin,proc,sys,dev,host,lib/modules}
  cp "$rxe_busybox" "$build/bin/busybox"
  for m in "${rxe_modules[@]}" "${extra[@]}"; do
    if ! modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2>/dev/null; then
      echo "$rxe_me: kernel $kver has no module $m: left out" >&2
    fi | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' | while read -r ko; do
    case "$ko" in
      *.ko.xz) xz -dc "$ko" >"$build/lib/modules/$(basename "$ko" .xz)"; ko=${ko%.xz} ;;
      *.ko.zst) zstd -qdc "$ko" >"$build/lib/modules/$(basename "$ko" .zst)"; ko=${ko%.zst} ;;
      *) cp "$ko" "$build/lib/modules/" ;;
    esac
    basename "$ko" >>"$build/modules.order"
  done
  if [ "$rxe_transport" = iwarp ]; then
    cp "$siw_ko" "$build/lib/modules/siw.ko"
    echo siw.ko >>"$build/modules.order"
  fi
  cat >"$build/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for ko in $(cat /modules.order); do
  insmod "/lib/modules/$ko" || echo "rxe-vm-init: insmod $ko failed"
done
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^rxevm\.$1=//p"; }
run=$(arg run)
tgt=$(arg target)
name=$(arg host)
repo=${tgt%/*}
# rxe-vm --overlay: the root is writable in the guest, its writes kept in a tmpfs (an overlay on
# the read-only share) and gone with the guest; else the share as it is, read-only.
overlay=$(arg overlay)
if [ "$overlay" = 1 ]; then
  mkdir -p /lower /rw
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower
  mount -t tmpfs rw /rw
  mkdir -p /rw/root.up /rw/root.work
  mount -t overlay root -o lowerdir=/lower,upperdir=/rw/root.up,workdir=/rw/root.work /host ||
    { echo "rxe-vm-init: no overlay of the root"; reboot -f; }
else
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /host
fi
# A stack, or arm64: hostroot is the suite's (or arm64's) root; the repository comes on its own
# share, at its path.
arch=$(arg arch)
if [ -n "$(arg stack)" ] || [ -n "$arch" ]; then
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 repo "/host$repo"
fi
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/pts /host/dev/shm
mount -t devpts devpts /host/dev/pts
mount -t tmpfs tmp /host/dev/shm
# A writable /tmp and /run that still show the host's files (a CI clone, a program or an install
# prefix under /tmp): an overlay of a tmpfs on the read-only share. An overlay shows the files of
# the directory under it, not what is mounted there: a stack's or arm64's guest, whose root is not
# the host's, has the repository on its own share (above), so a repository under /tmp or /run is
# bound back on top, as it is on a plain tmpfs where there is no overlayfs. (An overlay root has
# them writable already, with the repository's share mounted on it.)
if [ "$overlay" != 1 ]; then
  mkdir -p /keep /rw
  mount -o bind "/host$repo" /keep
  mount -t tmpfs rw /rw
  for d in /tmp /run; do
    n=${d#/}
    mkdir -p "/rw/$n.up" "/rw/$n.work"
    own_share=0
    if [ -n "$(arg stack)" ] || [ -n "$arch" ]; then own_share=1; fi
    if ! mount -t overlay "$n" -o "lowerdir=/host$d,upperdir=/rw/$n.up,workdir=/rw/$n.work" "/host$d"; then
      mount -t tmpfs tmp "/host$d"
      own_share=1
    fi
    if [ "$own_share" = 1 ]; then
      case "$repo/" in "$d"/*) mkdir -p "/host$repo"; mount -o bind /keep "/host$repo" ;; esac
    fi
  done
fi
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 target "/host$tgt"
# A stack: its target/ is target/stacks/NAME/target on the host; bound there too, so that a path
# the host names (rxe-pair's RXE_PAIR_DIR) is the same in the guest.
if [ -n "$(arg stack)" ]; then
  st="/host$tgt/stacks/$(arg stack)/target"
  mkdir -p "$st" && mount -o bind "/host$tgt" "$st"
fi
# arm64: target/ is target/arm64; the cross build's libraries are its target/release, and are
# at their own path under target/ too (the C tests' rpath).
if [ -n "$arch" ]; then
  libs=/host$tgt/$(arg libs)/release
  mkdir -p "/host$tgt/release" "$libs"
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 libs "/host$tgt/release"
  mount -o bind "/host$tgt/release" "$libs"
fi
hostname "${name:-rxe-vm}"
# Command output goes over virtio-console; keep it open and raw so "\n" stays "\n".
exec 9<>/dev/hvc0
stty raw -echo <&9
chroot /host /bin/bash "$tgt/rxe-vm/$run/guest.sh" >&9 2>&9 </dev/null
echo "$?" >"/host$tgt/rxe-vm/$run/status"
dmesg >"/host$tgt/rxe-vm/$run/dmesg"
sync
reboot -f
INIT
  chmod +x "$build/init"
  (cd "$build" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$initrd.tmp.$$"
  mv "$initrd.tmp.$$" "$initrd"
  rm -rf "$build"
}

# --- the script a guest runs: the caller's environment, network setup, then COMMAND ------------
# rxe_guest_script FILE SETUP -- COMMAND [ARGS...]: SETUP is shell text run after the
# environment is exported; it must leave $RXE_NETDEV up carrying $RXE_ADDR, and export RXE_DEV
# ($rxe_dev). The script adds $RXE_DEV on it, of type $rxe_link_type, and exports RXE_TRANSPORT.
rxe_guest_script() {
  local file=$1 setup=$2
  shift 3
  {
    echo 'set -u'
    # The current environment, minus what belongs to this shell or this host's terminal.
    export -p | grep -Ev '^declare -x (BASH[A-Z_]*|SHLVL|PWD|OLDPWD|_|HOSTNAME|TERM|TMPDIR)(=|$)' || true
    printf 'export RXE_TRANSPORT=%s\n' "$rxe_transport"
    # The caller's own value wins (it is among the exports above).
    # shellcheck disable=SC2016 # expanded in the guest
    printf 'export RXE_TIME_SCALE=${RXE_TIME_SCALE:-%s}\n' "$rxe_time_scale"
    printf '%s\n' "$setup"
    printf 'rxe_link_type=%s\n' "$rxe_link_type"
    cat <<'SETUP'
ip link set lo up
# An RDMA host lets its programs lock memory (memlock unlimited in limits.conf, as RDMA install
# guides say). rxe pins registrations through ib_umem_get, which lets a root process past
# RLIMIT_MEMLOCK (CAP_IPC_LOCK), but siw's siw_umem_get (siw_mem.c) counts every process against
# it, root or not: with the default 8 MB, fi_pingpong's fi_mr_reg failed with ENOMEM on siw0.
ulimit -l unlimited
if ! rdma link add "$RXE_DEV" type "$rxe_link_type" netdev "$RXE_NETDEV"; then
  echo "rxe-vm: rdma link add failed" >&2; exit 125
fi
# Ready when the port is ACTIVE and, on RoCE, the IPv4-mapped GID of the address is in the table
# (iWARP has no such GID: its connections are TCP ones, to the address itself).
for _ in $(seq 1 200); do
  if grep -q ACTIVE "/sys/class/infiniband/$RXE_DEV/ports/1/state" 2>/dev/null &&
     { [ "$RXE_TRANSPORT" = iwarp ] ||
       grep -qv '^0000:0000:0000:0000:0000:0000:0000:0000$' "/sys/class/infiniband/$RXE_DEV/ports/1/gids/1" 2>/dev/null; }; then
    break
  fi
  sleep 0.05
done
unset rxe_link_type
SETUP
    [ -z "${rxe_before_cmd-}" ] || printf '%s\n' "$rxe_before_cmd"
    printf 'cd %q || exit 125\n' "$PWD"
    printf 'exec'
    printf ' %q' "$@"
    printf '\n'
  } >"$file"
}

# --- qemu: the arguments every guest has (the caller adds its console and network) -------------
# rxe_qemu_base RUN HOSTNAME CONSOLE_LOG: sets the array rxe_qemu.
rxe_qemu_base() {
  local run=$1 name=$2 console=$3 stack_args=() stack_cmdline=
  if [ -n "${rxe_stack-}" ]; then
    stack_args=(-virtfs "local,path=$repo,mount_tag=repo,readonly=on,security_model=none,multidevs=remap")
    stack_cmdline=" rxevm.stack=$rxe_stack"
  fi
  [ "${rxe_overlay:-0}" = 0 ] || stack_cmdline+=" rxevm.overlay=1"
  if [ "${rxe_arch:-x86_64}" = arm64 ]; then
    # -M virt with its PL011 UART as the console. The kernel signs and checks return addresses
    # (pointer authentication) in every function: qemu's default algorithm for it (QARMA) costs
    # many host instructions per check, its implementation-defined one (pauth-impdef) few,
    # with the same behaviour for the guest. The clock is the architected timer: no
    # clocksource to choose.
    # shellcheck disable=SC2054 # qemu's option lists
    rxe_qemu=(qemu-system-aarch64 -M virt -accel tcg -cpu max,pauth-impdef=on
              -smp "${RXE_VM_SMP:-2}" -m "${RXE_VM_MEM:-2G}"
              -no-reboot -display none -monitor none -nodefaults
              -kernel "$kroot/boot/vmlinuz-$kver" -initrd "$initrd"
              -append "console=ttyAMA0 panic=-1 rxevm.run=$run rxevm.target=$target rxevm.host=$name rxevm.arch=arm64 rxevm.libs=$rxe_arm64_libs$stack_cmdline"
              -serial "file:$console"
              -virtfs "local,path=$rxe_hostroot,mount_tag=hostroot,readonly=on,security_model=none,multidevs=remap"
              -virtfs "local,path=$rxe_share,mount_tag=target,security_model=none,multidevs=remap"
              -virtfs "local,path=$repo,mount_tag=repo,readonly=on,security_model=none,multidevs=remap"
              -virtfs "local,path=$rxe_libdir,mount_tag=libs,readonly=on,security_model=none,multidevs=remap"
              -device virtio-serial-pci)
    return
  fi
  rxe_qemu=(qemu-system-x86_64 -accel tcg -cpu max -smp "${RXE_VM_SMP:-2}" -m "${RXE_VM_MEM:-2G}"
            -no-reboot -display none -monitor none -nodefaults
            -kernel "$kroot/boot/vmlinuz-$kver" -initrd "$initrd"
            -append "console=ttyS0 panic=-1 clocksource=tsc tsc=reliable no_timer_check rxevm.run=$run rxevm.target=$target rxevm.host=$name$stack_cmdline"
            -serial "file:$console"
            -virtfs "local,path=$rxe_hostroot,mount_tag=hostroot,readonly=on,security_model=none,multidevs=remap"
            -virtfs "local,path=$rxe_share,mount_tag=target,security_model=none,multidevs=remap"
            "${stack_args[@]}" -device virtio-serial-pci)
}

# rxe_report RUNDIR CONSOLE_LOG QEMU_STATUS WHAT ELAPSED: the guest's outcome on stderr, the
# command's exit status in rxe_status (125 when the guest never finished it).
rxe_report() {
  local rundir=$1 console=$2 qrc=$3 what=$4 elapsed=$5
  if [ ! -s "$rundir/status" ]; then
    echo "$rxe_me: the guest never finished $what (qemu exit $qrc); guest console:" >&2
    tail -n 80 "$console" >&2 || true
    rxe_status=125
    return
  fi
  rxe_status=$(cat "$rundir/status")
  if [ "$rxe_status" != 0 ]; then
    echo "$rxe_me: $what exited with $rxe_status after ${elapsed}s; last guest kernel messages:" >&2
    tail -n 40 "$rundir/dmesg" >&2 || true
  fi
}
