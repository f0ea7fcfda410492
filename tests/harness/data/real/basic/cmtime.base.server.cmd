cmtime -b 192.0.2.1 -c 200
