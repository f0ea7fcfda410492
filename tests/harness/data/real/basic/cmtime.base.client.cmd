cmtime -s 192.0.2.1 -c 200
