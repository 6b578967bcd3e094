"""A model zoo with planted miscompilations: how many each way of testing torch.compile catches.

    python benchmarks/zoo/run.py

See BENCHMARKS.md ("Planted miscompilations: 20 bugs, three ways of testing") for what is
measured and the results.
"""

EXAMPLES = 25  # Hypothesis examples per property test, for baseline B and for our suites alike
