"""``pinlab.scenarios``: the debate's scenarios as validated TOML files, the runner that turns
a scenario variant into a simulation, and the verdicts that check each camp's claim."""
