"""What tests of asap_logger, and of what reads its bags (training's ingest), need: synthetic episodes."""
