"""Harnesses and fakes for the tests, the benchmarks and the fuzzers: test clusters, simulated fabrics, stand-in
cloud and UFM servers, fault-injecting sockets, Kueue's rules as data. Never shipped: no package in the wheel
imports it (pyproject.toml's import contracts), and it imports nothing from tests/ or bench/."""
