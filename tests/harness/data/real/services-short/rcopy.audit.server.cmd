rcopy
