scripts/iser-target iqn.2026-01.org.cmsafe:disk1 iqn.2026-01.org.cmsafe:initiator 64
