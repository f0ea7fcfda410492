"""cmsafe-lint and cmsafe-migrate: the event lifecycle of librdmacm and libibverbs checked, and
ported onto cmsafe's API, in C sources (docs/lint.md).

The rules are Coccinelle semantic patches (../rules); this package runs spatch and reads what
the rules print. The layers, each importing only those above it:

  api       the library calls the rules know, and where each takes its event
  ctext     C text: printed expressions, argument lists, a file's places (the event types a
            switch or an if restricts them to, the loops around them)
  spatch    running spatch: its options, time limit and failures
  facts     pass 1: every function's calls, returns, assignments, dereferences, locals
  summary   what each helper does with its arguments, computed from the facts to a fixpoint
  expand    pass 2's rules for one file: the templates with the helpers filled in
  finding   a finding and its compiler-style line
  judge     from the rules' candidates to findings: what paths cannot say
  lint      one run: files, both passes, the judge
  migrate   cmsafe-migrate's rewrite, from the same facts and findings
  cli       the two commands' arguments, output and exit status
"""
