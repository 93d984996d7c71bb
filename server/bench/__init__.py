"""`make bench`: thinwire side by side with what users would pick instead.

    python -m bench            # the whole suite, about 6 minutes
    python -m bench --quick    # fewer streams, for iterating

Every server under test runs in its own process pinned to one core; the load generator
runs here, pinned to the other, and checks every delta of every stream. See
docs/performance.md for what each figure means.
"""
