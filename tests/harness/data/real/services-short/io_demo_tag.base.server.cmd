env UCX_TLS=rc_verbs,self UCX_NET_DEVICES=rxe0:1 UCX_SOCKADDR_TLS_PRIORITY=rdmacm io_demo -p 20000 -q -d 1024:65536
