# stack-common.sh: what scripts/stack-root and scripts/rxe-common.sh (rxe-vm --stack) share about
# a stack: a Debian suite's root, its package lists, its kernel and the built outputs of cmsafe
# for it. Sourced, never run; the caller sets stack_me (its name in messages) first.
#
# stack_init NAME [REPO]: checks NAME and sets
#   stack_name    NAME (bullseye, bookworm, trixie or sid)
#   stack_suite   the Debian suite
#   stack_mirror  $CMSAFE_STACK_MIRROR, default http://deb.debian.org/debian
#   stack_cache   $CMSAFE_STACKS_DIR/NAME (default REPO/target/stacks/NAME): the cache that may be
#                 shared between clones: root/ (the suite's root), apt/ (its package lists)
#   stack_root    stack_cache/root
#   stack_target  REPO/target/stacks/NAME/target: this clone's target/ for the stack (cargo's
#                 outputs, the C tests, the logs); inside the root and its guest it is REPO/target
stack_names=(bullseye bookworm trixie sid)

# Everything the root holds besides debootstrap's minimal base: the build (gcc, make, clang;
# libclang-dev was for rdma-sys's bindgen, which cmsafe no longer uses), the suite's rdma-core and
# its tools, the other real programs the preload's tests run (qperf, libfabric's fi_pingpong),
# what the guest scripts call, and what building cmsafe's Debian packages in the suite takes
# (dpkg-buildpackage and debhelper: scripts/deb; lintian runs on the host).
stack_packages=(gcc g++ make pkg-config libc6-dev clang libclang-dev
                librdmacm-dev libibverbs-dev rdma-core rdmacm-utils ibverbs-providers ibverbs-utils
                perftest qperf libfabric-bin iproute2 procps python3 file
                build-essential dpkg-dev debhelper)

stack_die() { echo "$stack_me: $*" >&2; exit 125; }

stack_init() {
  local name=$1 repo=${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
  case "$name" in
    bullseye | bookworm | trixie | sid) ;;
    *) stack_die "unknown stack \"$name\" (one of: ${stack_names[*]})" ;;
  esac
  stack_name=$name
  stack_suite=$name
  stack_mirror=${CMSAFE_STACK_MIRROR:-http://deb.debian.org/debian}
  stack_cache=${CMSAFE_STACKS_DIR:-$repo/target/stacks}/$name
  case "$stack_cache" in /*) ;; *) stack_cache=$PWD/$stack_cache ;; esac
  stack_root=$stack_cache/root
  stack_target=$repo/target/stacks/$name/target
}

# stack_apt COMMAND [ARGS...]: apt-get or apt-cache on the suite's own package lists (under
# stack_cache/apt), never the machine's. Valid-Until is not checked: the archive may be served
# as a snapshot older than a suite's Release file's week (the signatures are still checked).
stack_apt() {
  local a=$stack_cache/apt cmd=$1
  shift
  "$cmd" -o Dir::Etc::sourcelist="$a/sources.list" -o Dir::Etc::sourceparts=- \
    -o Dir::State::Lists="$a/lists" -o Dir::Cache="$a/cache" -o Dir::State::status="$a/status" \
    -o APT::Architectures=amd64 -o Acquire::Check-Valid-Until=false "$@"
}

# stack_apt_update: the suite's package lists, fetched once a day at most.
stack_apt_update() {
  local a=$stack_cache/apt
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial"
  [ -e "$a/status" ] || : >"$a/status"
  echo "deb $stack_mirror $stack_suite main" >"$a/sources.list"
  if [ -z "$(find "$a/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null)" ]; then
    stack_apt apt-get update -qq >/dev/null 2>"$a/update.err" ||
      stack_die "apt-get update for $stack_suite failed: $(tail -n 3 "$a/update.err")"
  fi
}

# stack_chroot [--overlay] ROOT [SRC:DST...] -- COMMAND [ARGS...]: COMMAND chrooted into ROOT in
# a private mount namespace (nothing stays mounted after it), with /proc and the machine's /dev,
# and each SRC bound at DST (a path inside the root; a directory is made for it when SRC is one),
# in the order given, so that a later bind may sit inside an earlier one. --overlay: into an
# overlay of ROOT whose writes go to a tmpfs and are gone with the namespace (ROOT may be /):
# what is written to stay must go through a bind.
stack_chroot() {
  local overlay=0 mp=
  if [ "$1" = --overlay ]; then overlay=1; shift; fi
  local root=$1 binds=()
  shift
  if [ $overlay -eq 1 ]; then
    mp=$(mktemp -d "${TMPDIR:-/tmp}/stack-overlay.XXXXXX")
  fi
  while [ $# -gt 0 ] && [ "$1" != -- ]; do binds+=("$1"); shift; done
  [ "${1-}" = -- ] || stack_die "stack_chroot: no -- before the command"
  shift
  local rc=0
  unshare -m --propagation private -- bash -euc '
    root=$1 mp=$2 n=$3
    shift 3
    if [ -n "$mp" ]; then
      mount -t tmpfs overlay-rw "$mp"
      mkdir "$mp/up" "$mp/work" "$mp/root"
      mount -t overlay overlay -o "lowerdir=$root,upperdir=$mp/up,workdir=$mp/work" "$mp/root"
      root=$mp/root
    fi
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    for ((i = 0; i < n; i++)); do
      src=${1%%:*} dst=${1#*:}
      shift
      if [ -d "$src" ]; then mkdir -p "$root$dst"; fi
      mount --bind "$src" "$root$dst"
    done
    exec chroot "$root" "$@"
  ' stack-chroot "$root" "$mp" "${#binds[@]}" "${binds[@]}" "$@" || rc=$?
  [ -z "$mp" ] || rmdir "$mp"
  return $rc
}

# stack_tree_hash REPO: the git tree hash of REPO's working tree as it is now (tracked and
# untracked files, not ignored ones), without touching its index.
stack_tree_hash() {
  local repo=$1 idx
  idx=$(mktemp)
  cp "$(git -C "$repo" rev-parse --path-format=absolute --git-path index)" "$idx"
  GIT_INDEX_FILE=$idx git -C "$repo" add -A . >/dev/null 2>&1 &&
    GIT_INDEX_FILE=$idx git -C "$repo" write-tree
  rm -f "$idx"
}
