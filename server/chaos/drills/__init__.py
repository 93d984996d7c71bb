"""The drills, a module each: `drill(setup, outcome)` and its quick and full plans."""
