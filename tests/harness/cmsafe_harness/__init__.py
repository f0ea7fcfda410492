"""The guest harnesses: the checks run on the real stack, inside a scripts/rxe-vm guest.

One package, Python's standard library only (Python 3.9, Debian 11's, and newer), so that
every stack root runs it as it is. bash keeps the guest plumbing (scripts/rxe-vm,
scripts/rxe-pair, scripts/rxe-common.sh); the scripts the Makefile names
(scripts/preload-misuse-tests, ...) are one line each that run a harness here.

The layers, each importing only those above it:

  guest      what the guest says of itself: device, transport, time scale
  proc       running programs: one to its end or its hang, servers in the background
  tally      the verdicts: ok / FAIL / skip lines and the counts a harness ends with
  reports    a JSON report's whole lines: a last line cut short (a full disk, a process
             killed mid-write) skipped, and said
  audit      the preload's output: finding lines and summaries on stderr, the JSON report
  budgets    bench/budgets.tsv, the instruction budgets per architecture
  callgrind  valgrind's count of a run, and the preload's share of a profile
  figures    medians and numbers as the timed benchmarks print them
  <harness>  one module per harness (its cases as data beside it), run by __main__

The benchmarks and counts (syscalls, insns, cmtime, event_cpu, cm_setup; copy_insns, the one
run on the host) print markdown tables that bench/results/ keeps, and hold the counts to their
budgets: a count is the same on a busy machine as on a quiet one, a time is printed, never held.

The checks on logs take lines and return problems, with no process and no guest, so that
tests/harness/test_*.py hold them to recorded logs on the host (make harness-check).
"""
