qperf
