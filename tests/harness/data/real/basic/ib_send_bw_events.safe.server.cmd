ib_send_bw -R -F -e -d rxe0 -n 500
