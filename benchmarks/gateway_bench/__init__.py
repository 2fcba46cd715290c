"""The gateway benchmark's parts (benchmarks/gateway.py runs them): its processes, load client and meters."""
