"""The benchmarks (see docs/performance.md); bench code, not product code."""
