stdbuf -oL mckey -m 239.1.1.1 -b 192.0.2.1
