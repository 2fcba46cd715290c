"""The upstream side: the HTTP client, the registered upstreams and routing, retries and failover."""
