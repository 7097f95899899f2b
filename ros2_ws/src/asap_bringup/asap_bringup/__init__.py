"""asap_bringup: bringup profiles, launch files and the asap-up runner."""
