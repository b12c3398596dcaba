"""Developer tools: benchmarks and set-up. Run the Python ones from the repository root, e.g.
``python scripts/benchmark.py`` or ``python -m scripts.linear_attention_bench``."""
