env UCX_TLS=rc_verbs,self UCX_NET_DEVICES=rxe0:1 UCX_SOCKADDR_TLS_PRIORITY=rdmacm io_demo -p 20000 -c 3 -q -i 200 -o read,write -d 1024:65536 -w 8 192.0.2.1
