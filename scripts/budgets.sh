# shellcheck shell=bash
# Sourced by scripts/insn-count and scripts/cmtime-insns: reads this machine's
# architecture's rows of bench/budgets.tsv for SCRIPT into the associative array `budget`
# (declared by the caller: `declare -A budget`). With no row for this architecture, says so on
# stderr and, when CHECK is 1 (the caller's --check), exits 1: there is nothing to hold the
# counts to; otherwise the caller goes on and prints its counts without budgets.
read_budgets() { # SCRIPT CHECK
  local arch a s row b
  arch=$(uname -m)
  while IFS=$'\t' read -r a s row b; do
    case $a in '#'* | '') continue ;; esac
    [ "$a" = "$arch" ] && [ "$s" = "$1" ] && budget[$row]=$b
  done <bench/budgets.tsv
  [ ${#budget[@]} -gt 0 ] && return 0
  echo "$1: bench/budgets.tsv has no budgets for $arch" >&2
  [ "$2" = 0 ] || exit 1
}
