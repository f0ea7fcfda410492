rstream -T s -b 192.0.2.1 -S 4096 -C 2000
