"""Scrapers: mine torch.distributed code from GitHub and local checkouts."""
