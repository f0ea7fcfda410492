env MALLOC_PERTURB_=255 scripts/stop-after 3 CTRL-C iscsi-perf -i iqn.2026-01.org.cmsafe:initiator iscsi://192.0.2.1:3260/iqn.2026-01.org.cmsafe:disk1/1?iser
