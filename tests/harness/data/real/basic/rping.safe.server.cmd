rping -s -a 192.0.2.1 -C 3 -v
