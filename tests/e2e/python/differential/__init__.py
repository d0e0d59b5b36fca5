"""The differential harness (issue 11): seeded random operation sequences run
through remold on ruled collections and directly on flat copies; every
difference must be a refusal documented in docs/what-works.md's table "What
works through remold". See tests/e2e/README.md for how to run it.
"""
