ib_send_bw -R -F -e -d rxe0 -n 500 192.0.2.1
