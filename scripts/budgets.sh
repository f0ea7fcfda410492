# shellcheck shell=bash
# Sourced by scripts/insn-count, scripts/cmtime-insns and scripts/copy-insns: reads this machine's
# architecture's rows of bench/budgets.tsv for SCRIPT into the associative array `budget`
# (declared by the caller: `declare -A budget`). Returns 1, with budget empty, when the file has
# no row for this architecture; a --check then has nothing to hold the counts to and says so.
read_budgets() { # SCRIPT
  local arch a s row b
  arch=$(uname -m)
  while IFS=$'\t' read -r a s row b; do
    case $a in '#'* | '') continue ;; esac
    [ "$a" = "$arch" ] && [ "$s" = "$1" ] && budget[$row]=$b
  done <bench/budgets.tsv
  [ ${#budget[@]} -gt 0 ]
}
