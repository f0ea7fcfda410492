rcopy /tmp/preload-real-programs.rcopy.src 192.0.2.1:/tmp/preload-real-programs.rcopy.dst
