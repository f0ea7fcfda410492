qperf -cm1 192.0.2.1 rc_lat
